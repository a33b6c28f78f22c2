import { context, lambda, listen } from "grafast";
import { extendSchema, gql } from "graphile-utils";
import type { Identity } from "../auth/identity.js";
import { ErrorCode } from "../errors.js";
import { clientError } from "./client-error.js";
import { liveTopic, resumeTopic } from "../live/notifications.js";
import { cursorOf, parseCursor } from "../live/alert-log.js";

/** `after` checked here, so a malformed cursor is the client's error before anything is subscribed. */
export function afterArg(after: unknown, field: string): string | undefined {
  const seq = parseCursor(after, field);
  return seq === undefined ? undefined : cursorOf(seq);
}

/**
 * The topic of a player's alerts comes from the identity alone, never from an
 * argument, so a player can only ever receive their own events.
 */
export function playerTopic(make: (userId: string, casinoId: string, experienceId: string) => string, field: string, fieldArgs: any) {
  return lambda(
    [context().get("identity"), fieldArgs.getRaw("after")],
    ([identity, after]: readonly [Identity | undefined, unknown]) => {
      if (identity?.kind !== "user") {
        throw clientError(
          identity ? ErrorCode.FORBIDDEN : ErrorCode.UNAUTHENTICATED,
          `Unauthorized: ${field} needs a player's session (connectionParams { authorization: "session:<key>" }); received ${identity ? "an operator API key" : "no valid credential"}.`,
        );
      }
      return resumeTopic(make(identity.session.user_id, identity.session.casino_id, identity.session.experience_id), afterArg(after, field));
    },
    true,
  );
}

/**
 * hubBalanceAlert, hubPutAlert (a player's own) and hubBetAlert (operators'),
 * fed by the core alerts (src/live/core-alerts.ts) through the process's one
 * listening connection (src/live/notifications.ts).
 */
export const HubLiveAlertsPlugin = extendSchema(() => ({
  typeDefs: gql`
    "A change of the player's balance in one currency was committed: refetch it."
    type HubBalanceAlertPayload {
      currencyKey: String!
      "This alert's place among the subscription's alerts: subscribe again with after: <the last cursor received> to receive what follows it."
      cursor: String!
    }
    "A deposit was credited to the player."
    type HubPutAlertPayload {
      currencyKey: String!
      mpTransferId: String!
      "This alert's place among the subscription's alerts: subscribe again with after: <the last cursor received> to receive what follows it."
      cursor: String!
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
      "This alert's place among the subscription's alerts: subscribe again with after: <the last cursor received> to receive what follows it."
      cursor: String!
    }
    extend type Subscription {
      "Each committed change of the session player's balance in the session's casino and experience (a player's session only). after: the last cursor received; the alerts since are delivered first."
      hubBalanceAlert(after: String): HubBalanceAlertPayload
      "Each deposit credited to the session player in the session's casino and experience (a player's session only). after: the last cursor received; the alerts since are delivered first."
      hubPutAlert(after: String): HubPutAlertPayload
      "Each committed bet row of a player's ledger, optionally of one player only (an operator API key only). after: the last cursor received; the alerts since are delivered first."
      hubBetAlert(userId: UUID, after: String): HubBetAlertPayload
    }
  `,
  objects: {
    Subscription: {
      plans: {
        hubBalanceAlert: {
          subscribePlan: (_$root: any, fieldArgs: any) => listen(context().get("pgSubscriber"), playerTopic(liveTopic.balance, "hubBalanceAlert", fieldArgs)),
          plan: ($event: any) => $event,
        },
        hubPutAlert: {
          subscribePlan: (_$root: any, fieldArgs: any) => listen(context().get("pgSubscriber"), playerTopic(liveTopic.put, "hubPutAlert", fieldArgs)),
          plan: ($event: any) => $event,
        },
        hubBetAlert: {
          subscribePlan: (_$root: any, fieldArgs: any) => {
            const $topic = lambda(
              [context().get("identity"), fieldArgs.getRaw("userId"), fieldArgs.getRaw("after")],
              ([identity, userId, after]: readonly [Identity | undefined, unknown, unknown]) => {
                if (identity?.kind !== "operator") {
                  throw clientError(
                    identity ? ErrorCode.FORBIDDEN : ErrorCode.UNAUTHENTICATED,
                    `Unauthorized: hubBetAlert needs an operator API key (connectionParams { authorization: "apikey:<key>" }); received ${identity ? "a player's session" : "no valid credential"}.`,
                  );
                }
                return resumeTopic(liveTopic.bet(typeof userId === "string" ? userId : undefined), afterArg(after, "hubBetAlert"));
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
