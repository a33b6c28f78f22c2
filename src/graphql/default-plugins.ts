import { context, inhibitOnNull, lambda } from "grafast";
import { extendSchema, gql } from "graphile-utils";
import type { Identity } from "../auth/identity.js";
import { BetInterfacePlugin } from "./bet-interface.js";
import { HubSessionPlugin } from "./sessions.js";
import { HubOperatorPlugin } from "./operator.js";

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

/** The hub's own plugins; keep them with `plugins: [...defaultPlugins, MyPlugin]`. */
export const defaultPlugins: GraphileConfig.Plugin[] = [HubCurrentIdentityPlugin, BetInterfacePlugin, HubSessionPlugin, HubOperatorPlugin];
