import { context, lambda, listen } from "grafast";
import { extendSchema, gql } from "graphile-utils";
import type { Identity } from "../auth/identity.js";
import { ErrorCode } from "../errors.js";
import { clientError } from "./client-error.js";
import { liveTopic } from "../live/notifications.js";

/**
 * The topic of a player's alerts comes from the identity alone, never from an
 * argument, so a player can only ever receive their own events.
 */
function playerTopic(make: (userId: string, casinoId: string, experienceId: string) => string, field: string) {
  return lambda(
    context().get("identity"),
    (identity: Identity | undefined) => {
      if (identity?.kind !== "user") {
        throw clientError(
          identity ? ErrorCode.FORBIDDEN : ErrorCode.UNAUTHENTICATED,
          `Unauthorized: ${field} needs a player's session (connectionParams { authorization: "session:<key>" }); received ${identity ? "an operator API key" : "no valid credential"}.`,
        );
      }
      return make(identity.session.user_id, identity.session.casino_id, identity.session.experience_id);
    },
    true,
  );
}

/**
 * hubBalanceAlert, hubPutAlert (a player's own) and hubBetAlert (operators'),
 * fed by the NOTIFY channels of core migration 0014 through the process's one
 * listening connection (src/live/notifications.ts).
 */
export const HubLiveAlertsPlugin = extendSchema(() => ({
  typeDefs: gql`
    "A change of the player's balance in one currency was committed: refetch it."
    type HubBalanceAlertPayload {
      currencyKey: String!
    }
    "A deposit was credited to the player."
    type HubPutAlertPayload {
      currencyKey: String!
      mpTransferId: String!
    }
    "One committed ledger row of a bet on a player's balance."
    type HubBetAlertPayload {
      betId: UUID!
      userId: UUID!
      casinoId: UUID!
      experienceId: UUID!
      currencyKey: String!
      amountDelta: Float!
      reason: String!
      createdAt: Datetime!
    }
    extend type Subscription {
      "Each committed change of the session player's balance in the session's casino and experience (a player's session only)."
      hubBalanceAlert: HubBalanceAlertPayload
      "Each deposit credited to the session player in the session's casino and experience (a player's session only)."
      hubPutAlert: HubPutAlertPayload
      "Each committed bet row of a player's ledger, optionally of one player only (an operator API key only)."
      hubBetAlert(userId: UUID): HubBetAlertPayload
    }
  `,
  objects: {
    Subscription: {
      plans: {
        hubBalanceAlert: {
          subscribePlan: () => listen(context().get("pgSubscriber"), playerTopic(liveTopic.balance, "hubBalanceAlert")),
          plan: ($event: any) => $event,
        },
        hubPutAlert: {
          subscribePlan: () => listen(context().get("pgSubscriber"), playerTopic(liveTopic.put, "hubPutAlert")),
          plan: ($event: any) => $event,
        },
        hubBetAlert: {
          subscribePlan: (_$root: any, fieldArgs: any) => {
            const $topic = lambda(
              [context().get("identity"), fieldArgs.getRaw("userId")],
              ([identity, userId]: readonly [Identity | undefined, unknown]) => {
                if (identity?.kind !== "operator") {
                  throw clientError(
                    identity ? ErrorCode.FORBIDDEN : ErrorCode.UNAUTHENTICATED,
                    `Unauthorized: hubBetAlert needs an operator API key (connectionParams { authorization: "apikey:<key>" }); received ${identity ? "a player's session" : "no valid credential"}.`,
                  );
                }
                return liveTopic.bet(typeof userId === "string" ? userId : undefined);
              },
              true,
            );
            return listen(context().get("pgSubscriber"), $topic);
          },
          plan: ($event: any) => $event,
        },
      },
    },
  },
}), "HubLiveAlertsPlugin");
