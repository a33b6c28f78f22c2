/**
 * The example game: `rollDice`. The player picks a target from 2 to 98 and
 * wins when a roll from 0 to 99 falls below it; a win pays
 * floor(wager × 99 / target), wager included (a 1% house edge).
 *
 * The money moves through dbSettleBet (the player's balance and the house
 * bankroll, locked, checked and written to the ledger), and the bet's own row
 * is written in the same transaction, so either both happen or neither.
 * Plan style, so the payload can return the generated `DiceBet` type.
 */
import { randomInt } from "node:crypto";
import { extendSchema, gql } from "@hubpkg/hub/graphile";
import { clientError, ErrorCode } from "@hubpkg/hub/graphql";
import { access, context, sideEffect } from "@hubpkg/hub/grafast";
import { dbSettleBet, withPgPoolTransaction } from "@hubpkg/hub/db";

interface RollDiceInput {
  wager: number;
  currency: string;
  target: number;
}

/** What a win pays for this wager and target, computed exactly. */
export function dicePayout(wager: number, target: number): number {
  return Number((BigInt(wager) * 99n) / BigInt(target));
}

export const DicePlugin = extendSchema((build) => {
  const diceBet = build.input.pgRegistry.pgResources.dice_bet;
  if (!diceBet) throw new Error('DicePlugin: the table app.dice_bet is missing; run migrations/ (userDatabaseMigrationsPath) and pass extraPgSchemas: ["app"].');
  return {
    typeDefs: gql`
      input RollDiceInput {
        "Whole base units of the currency, at least 1."
        wager: Float!
        "Key of a currency of the session's casino."
        currency: String!
        "The player wins when the roll (0 to 99) is below this number, from 2 to 98."
        target: Int!
      }
      type RollDicePayload {
        bet: DiceBet!
        "The player's balance in this currency after the bet."
        balance: Float!
      }
      extend type Mutation {
        "Roll a die of 100 faces against the house bankroll. Needs a player session."
        rollDice(input: RollDiceInput!): RollDicePayload
      }
    `,
    objects: {
      Mutation: {
        plans: {
          rollDice(_parent, fieldArgs) {
            const $input = fieldArgs.getRaw("input");
            const $identity = context().get("identity");
            const $pool = context().get("superuserPool");
            return sideEffect([$input, $identity, $pool], async ([rawInput, identity, pool]) => {
              if (identity?.kind !== "user") throw clientError(identity ? ErrorCode.FORBIDDEN : ErrorCode.UNAUTHENTICATED, "rollDice needs a player session.");
              const { wager, currency, target } = rawInput as RollDiceInput;
              if (!Number.isInteger(target) || target < 2 || target > 98) {
                throw clientError(ErrorCode.BAD_USER_INPUT, `rollDice: the target must be a whole number from 2 to 98; received ${target}.`);
              }
              const { user_id: userId, casino_id: casinoId, experience_id: experienceId } = identity.session;
              // The OS's cryptographic generator, without modulo bias.
              const roll = randomInt(100);
              const winPays = Number.isSafeInteger(wager) && wager >= 1 ? dicePayout(wager, target) : 0;
              return withPgPoolTransaction(pool, async (pgClient) => {
                // dbSettleBet refuses a wager that is not whole units, a short balance or bankroll, an unknown currency.
                const settled = await dbSettleBet(pgClient, {
                  userId, casinoId, experienceId, currencyKey: currency, kind: "dice",
                  wager, payout: roll < target ? winPays : 0, maxPayout: winPays,
                  expectedValue: wager - (winPays * target) / 100,
                });
                await pgClient.query(
                  `insert into app.dice_bet (id, wager, net, currency_key, user_id, casino_id, experience_id, target, roll)
                   values ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
                  [settled.betId, wager, settled.net, currency, userId, casinoId, experienceId, target, roll],
                );
                return { betId: settled.betId, balance: settled.balance };
              });
            });
          },
        },
      },
      RollDicePayload: {
        plans: {
          // Read back through the generated type, under the player's row-level security.
          bet: ($result) => diceBet.get({ id: access($result, "betId") }),
          balance: ($result) => access($result, "balance"),
        },
      },
    },
  };
}, "DicePlugin");
