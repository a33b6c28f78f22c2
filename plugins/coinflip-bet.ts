/**
 * CoinflipBetPlugin: `makeCoinflipBet`, the controller-template plugin: a bet
 * on a side of a fair coin that moves real money. dbSettleBet moves it (locks,
 * funds, the bankroll's cover, the ledger) in the transaction that stores the
 * bet, so concurrent bets can neither overdraw a balance nor leave the books
 * out of balance: whatever the player gains the house loses, and the reverse.
 *
 * Plan style, so the payload can return the generated `CoinflipBet` entity.
 */
import { randomInt } from "node:crypto";
import { extendSchema, gql } from "@hubpkg/hub/graphile";
import { clientError, ErrorCode } from "@hubpkg/hub/graphql";
import { access, context, sideEffect } from "@hubpkg/hub/grafast";
import { dbSettleBet, MAX_AMOUNT, withPgPoolTransaction } from "@hubpkg/hub/db";

/**
 * Amounts are whole base units of the currency (hub.currency's
 * display_unit_scale says how many make one display unit), so a win pays
 * floor(wager * 99 / 100): balances stay whole, and the rounding is the
 * house's. MAX_AMOUNT (2^53 − 1) is the largest whole number a float8 (and a
 * JavaScript number) holds exactly.
 */
const WIN_PERCENT = 99n;
/** The smallest wager whose win pays something: floor(2 * 0.99) = 1. */
const MIN_WAGER = 2;

/** What a won bet pays, computed exactly (wager * 99 may not fit in a double). */
function winPayout(wager: number): number {
  return Number((BigInt(wager) * WIN_PERCENT) / 100n);
}

type CoinSide = "HEADS" | "TAILS";

interface MakeCoinflipBetInput {
  wager: number;
  currency: string;
  side: CoinSide;
  idempotencyKey?: string | null;
}

interface MakeCoinflipBetResult {
  betId: string;
  outcome: CoinSide;
  balance: number;
}

function badInput(message: string, code: ErrorCode = ErrorCode.BAD_USER_INPUT) {
  return clientError(code, `makeCoinflipBet: ${message}`);
}

/** A wager that is not a whole number of base units a win can pay for. */
function checkWager(wager: number): void {
  // A literal such as 1e999 in the query text reaches us as Infinity.
  if (!Number.isSafeInteger(wager) || wager < 1) {
    throw badInput(
      `the wager must be a whole number of base units from ${MIN_WAGER} to ${MAX_AMOUNT}; received ${wager}. Amounts are whole base units of the currency (display_unit_scale base units make one display unit).`,
      ErrorCode.INVALID_AMOUNT,
    );
  }
  const win = winPayout(wager);
  if (wager + win > MAX_AMOUNT) {
    throw badInput(`a wager of ${wager} would pay ${wager + win} on a win, more than the ${MAX_AMOUNT} base units an amount can hold.`, ErrorCode.INVALID_AMOUNT);
  }
  if (win < 1) {
    throw badInput(`a wager of ${wager} would pay nothing on a win (a win pays floor(wager × 0.99)); the smallest wager is ${MIN_WAGER}.`, ErrorCode.INVALID_AMOUNT);
  }
}

export const CoinflipBetPlugin = extendSchema((build) => {
  const coinflipBet = build.input.pgRegistry.pgResources.coinflip_bet;
  if (!coinflipBet) {
    throw new Error(
      'CoinflipBetPlugin: the table app.coinflip_bet is not in the schema; apply the reference migrations (userDatabaseMigrationsPath) and pass extraPgSchemas: ["app"].',
    );
  }
  return {
    typeDefs: gql`
      input MakeCoinflipBetInput {
        "Whole base units of the currency, at least 2, at most the player's balance, and small enough that a win (wager × 1.99) stays within 9007199254740991."
        wager: Float!
        "Key of a currency of the session's casino (hub.currency)."
        currency: String!
        side: CoinSide!
        "Optional, 1 to 255 characters: a retry with the same key and input answers the first bet and moves nothing (kept 24 hours)."
        idempotencyKey: String
      }
      type MakeCoinflipBetPayload {
        "The stored bet: net is floor(wager * 0.99) when the coin lands on the chosen side, -wager otherwise."
        bet: CoinflipBet!
        "The side the coin landed on."
        outcome: CoinSide!
        "The player's balance in this currency after the bet."
        balance: Float!
      }
      extend type Mutation {
        """
        Bet on a side of a fair coin, paid from and to the player's balance against
        the house bankroll. Needs a player session.
        """
        makeCoinflipBet(input: MakeCoinflipBetInput!): MakeCoinflipBetPayload
      }
    `,
    objects: {
      Mutation: {
        plans: {
          makeCoinflipBet(_parent, fieldArgs) {
            const $input = fieldArgs.getRaw("input");
            const $identity = context().get("identity");
            const $pool = context().get("superuserPool");
            return sideEffect([$input, $identity, $pool], async ([rawInput, identity, pool]): Promise<MakeCoinflipBetResult> => {
              // A player's game: no credential is UNAUTHENTICATED, an operator's key FORBIDDEN.
              if (identity?.kind !== "user") throw clientError(identity ? ErrorCode.FORBIDDEN : ErrorCode.UNAUTHENTICATED, "Unauthorized");
              const { wager, currency, side, idempotencyKey } = rawInput as MakeCoinflipBetInput;
              checkWager(wager);
              const { user_id: userId, casino_id: casinoId, experience_id: experienceId } = identity.session;

              // randomInt draws from the OS's cryptographic generator, without
              // modulo bias: nobody can predict or skew the outcome.
              const outcome: CoinSide = randomInt(2) === 0 ? "HEADS" : "TAILS";
              const win = winPayout(wager);
              return withPgPoolTransaction(pool, async (pgClient) => {
                // Locks, funds, the bankroll's cover of a win and the ledger, in one call.
                const settled = await dbSettleBet(pgClient, {
                  userId, casinoId, experienceId, currencyKey: currency, kind: "coinflip",
                  wager, payout: outcome === side ? wager + win : 0, maxPayout: wager + win,
                  // The house's expected gain on a fair coin: half the wager kept on a loss minus half the win paid.
                  expectedValue: (wager - win) / 2,
                  actor: "plugin:makeCoinflipBet", field: "makeCoinflipBet",
                  // A retry with the key settles nothing: the first bet's id comes back, with replayed: true.
                  idempotencyKey, idempotencyRequest: { side },
                });
                if (settled.replayed) {
                  // This flip is thrown away: the answer is the first bet's, as stored.
                  const first = await pgClient.query<{ outcome: CoinSide }>("select outcome from app.coinflip_bet where id = $1", [settled.betId]);
                  return { betId: settled.betId, outcome: first.rows[0]!.outcome, balance: settled.balance };
                }
                await pgClient.query(
                  `insert into app.coinflip_bet (id, wager, net, currency_key, user_id, casino_id, experience_id, side, outcome, balance_after)
                   values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
                  [settled.betId, wager, settled.net, currency, userId, casinoId, experienceId, side, outcome, settled.balance],
                );
                return { betId: settled.betId, outcome, balance: settled.balance };
              });
            });
          },
        },
      },
      MakeCoinflipBetPayload: {
        plans: {
          // Read back through the generated type, under the player's row-level security.
          bet: ($result) => coinflipBet.get({ id: access($result, "betId") }),
          outcome: ($result) => access($result, "outcome"),
          balance: ($result) => access($result, "balance"),
        },
      },
    },
  };
}, "CoinflipBetPlugin");
