import { context, inhibitOnNull, lambda } from "grafast";
import { extendSchema, gql } from "graphile-utils";
import type { Identity } from "../auth/identity.js";
import { BetInterfacePlugin } from "./bet-interface.js";
import { HubBetsPlugin } from "./bet-history.js";
import { HubSessionPlugin, HubUserClientIdPlugin } from "./sessions.js";
import { HubOperatorPlugin } from "./operator.js";
import { HubOperatorCredentialsPlugin } from "./operator-credentials.js";
import { HubLiveAlertsPlugin } from "./live-alerts.js";
import { HubHashChainPlugin } from "../fair/hash-chain-plugin.js";
import { HubOutcomeInputPlugin } from "../fair/outcome-input.js";
import { HubTransfersPlugin } from "../transfers/graphql.js";
import { HubChatPlugin } from "../chat/plugin.js";
import { originalSurfacePlugins } from "./original-surface.js";
import { HubFaucetPlugin } from "./faucet.js";

type SessionKey = "user_id" | "casino_id" | "experience_id" | "id";

/**
 * The current session's ids as steps. inhibitOnNull: without a user identity
 * the field is null and no SQL is sent at all.
 */
function currentSessionId(key: SessionKey) {
  return inhibitOnNull(
    lambda(context().get("identity"), (identity: Identity | undefined) => (identity?.kind === "user" ? identity.session[key] : null), true),
  );
}

/** hubCurrentUser, hubCurrentSession, hubCurrentCasino, hubCurrentExperience. */
export const HubCurrentIdentityPlugin = extendSchema((build) => {
  const resources = build.input.pgRegistry.pgResources;
  const userResource = resources.hub_user;
  const sessionResource = resources.hub_session;
  const casinoResource = resources.hub_casino;
  const experienceResource = resources.hub_experience;
  if (!userResource || !sessionResource || !casinoResource || !experienceResource) {
    throw new Error("HubCurrentIdentityPlugin: the hub tables are missing from the schema (is the `hub` schema migrated?)");
  }
  return {
    typeDefs: gql`
      extend type Query {
        "The player of the session in the Authorization header; null without a session."
        hubCurrentUser: HubUser
        "The session in the Authorization header; null without one."
        hubCurrentSession: HubSession
        "The casino of the current session; null without a session."
        hubCurrentCasino: HubCasino
        "The experience of the current session; null without a session."
        hubCurrentExperience: HubExperience
      }
    `,
    objects: {
      Query: {
        plans: {
          hubCurrentUser: () => userResource.get({ id: currentSessionId("user_id") }),
          hubCurrentSession: () => sessionResource.get({ id: currentSessionId("id") }),
          hubCurrentCasino: () => casinoResource.get({ id: currentSessionId("casino_id") }),
          hubCurrentExperience: () => experienceResource.get({ id: currentSessionId("experience_id") }),
        },
      },
    },
  };
}, "HubCurrentIdentityPlugin");

/**
 * HubUser.hubBalanceByCurrency(currency), as existing frontends read it: the user's balance in
 * that currency in the experience of the session making the request. The
 * experience comes from the request's identity, so without a player's session
 * (an operator, an anonymous request) the field is null; row-level security
 * still applies to the balance read.
 */
export const HubBalanceByCurrencyPlugin = extendSchema((build) => {
  const balanceResource = build.input.pgRegistry.pgResources.hub_balance;
  if (!balanceResource) {
    throw new Error("HubBalanceByCurrencyPlugin: hub.balance is missing from the schema (is the `hub` schema migrated?)");
  }
  return {
    typeDefs: gql`
      extend type HubUser {
        "This user's balance in the currency (its key) in the current session's experience; null when there is none, or without a player's session."
        hubBalanceByCurrency(currency: String!): HubBalance
      }
    `,
    objects: {
      HubUser: {
        plans: {
          hubBalanceByCurrency: ($user: any, fieldArgs: any) =>
            balanceResource.get({
              user_id: $user.get("id"),
              // Not inhibitOnNull: this select is inlined into the user's, which must not vanish with it.
              experience_id: lambda(context().get("identity"), (identity: Identity | undefined) => (identity?.kind === "user" ? identity.session.experience_id : null), true),
              currency_key: fieldArgs.getRaw("currency"),
            }),
        },
      },
    },
  };
}, "HubBalanceByCurrencyPlugin");

/** The hub's own plugins; keep them with `plugins: [...defaultPlugins, MyPlugin]`. */
export const defaultPlugins: GraphileConfig.Plugin[] = [
  HubCurrentIdentityPlugin, HubBalanceByCurrencyPlugin, HubUserClientIdPlugin, BetInterfacePlugin, HubBetsPlugin, HubSessionPlugin, HubOperatorPlugin,
  HubOperatorCredentialsPlugin, HubLiveAlertsPlugin, HubHashChainPlugin, HubOutcomeInputPlugin, HubTransfersPlugin, HubChatPlugin,
  ...originalSurfacePlugins, HubFaucetPlugin,
];
