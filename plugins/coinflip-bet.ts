/**
 * CoinflipBetPlugin: `makeCoinflipBet`, the controller-template plugin: a bet on a side of a fair coin that moves real money. The player's
 * balance and the house bankroll are locked, checked and updated in the same
 * transaction that stores the bet, so concurrent bets can neither overdraw a
 * balance nor leave the books out of balance: whatever the player gains the
 * house loses, and the reverse.
 *
 * Plan style, so the payload can return the generated `CoinflipBet` entity.
 */
import { randomInt } from "node:crypto";
import { extendSchema, gql } from "@hubpkg/hub/graphile";
import { clientError, ErrorCode } from "@hubpkg/hub/graphql";
import { access, context, sideEffect } from "@hubpkg/hub/grafast";
import { dbLockPlayerBalanceAndHouseBankroll, withPgPoolTransaction } from "@hubpkg/hub/db";

/**
 * Amounts are whole base units of the currency (hub.currency's
 * display_unit_scale says how many make one display unit), so a win pays
 * floor(wager * 99 / 100): balances stay whole, and the rounding is the
 * house's. The largest amount is the largest whole number a float8 (and a
 * JavaScript number) holds exactly.
 */
const WIN_PERCENT = 99n;
const MAX_AMOUNT = Number.MAX_SAFE_INTEGER;
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
  if (winPayout(wager) < 1) {
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
        "Whole base units of the currency, from 2 to 9007199254740991, and at most the player's balance."
        wager: Float!
        "Key of a currency of the session's casino (hub.currency)."
        currency: String!
        side: CoinSide!
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
              const { wager, currency, side } = rawInput as MakeCoinflipBetInput;
              checkWager(wager);
              const { user_id: userId, casino_id: casinoId, experience_id: experienceId } = identity.session;

              return withPgPoolTransaction(pool, async (pgClient) => {
                const known = await pgClient.query("select 1 from hub.currency where key = $1 and casino_id = $2", [currency, casinoId]);
                if (known.rowCount === 0) {
                  throw badInput(`unknown currency ${JSON.stringify(currency)}; the casino of this session has no such currency.`);
                }
                // Held until commit: every other bet on this balance or this
                // bankroll waits here, so the checks below stay true until we write.
                const locked = await dbLockPlayerBalanceAndHouseBankroll(pgClient, { userId, casinoId, experienceId, currencyKey: currency });
                if (!locked.found) {
                  throw badInput(`there is no balance for this player, or no house bankroll for this casino, in currency ${JSON.stringify(currency)}.`);
                }
                const { dbPlayerBalance, dbHouseBankroll } = locked;
                if (dbPlayerBalance.amount < wager) {
                  throw badInput(`insufficient balance: the wager is ${wager} ${currency} but the balance is ${dbPlayerBalance.amount} ${currency}.`);
                }
                const potentialWin = winPayout(wager);
                if (dbHouseBankroll.amount < potentialWin) {
                  // The bankroll's size is the casino's business: do not tell the player.
                  throw badInput(`the house bankroll cannot cover a win of ${potentialWin} ${currency}; try a smaller wager.`);
                }
                if (dbPlayerBalance.amount + potentialWin > MAX_AMOUNT) {
                  throw badInput(`a win of ${potentialWin} ${currency} would take the balance past ${MAX_AMOUNT} base units.`, ErrorCode.INVALID_AMOUNT);
                }

                // randomInt draws from the OS's cryptographic generator, without
                // modulo bias: nobody can predict or skew the outcome.
                const outcome: CoinSide = randomInt(2) === 0 ? "HEADS" : "TAILS";
                const net = outcome === side ? potentialWin : -wager;

                // The bet's id first, so the ledger rows the two updates write
                // (hub.ledger, by trigger) name the bet, who moved the money and why.
                const idRow = await pgClient.query<{ id: string }>(
                  `select id, set_config('hub.ledger_bet_id', id::text, true),
                          set_config('hub.ledger_actor', 'plugin:makeCoinflipBet', true),
                          set_config('hub.ledger_reason', 'coinflip bet', true)
                     from hub_hidden.uuid_generate_v7() as id`,
                );
                const betId = idRow.rows[0]!.id;

                // Whole numbers below 2^53 add and subtract exactly, and the
                // checks above keep both amounts >= 0.
                const balanceAfter = await pgClient.query<{ amount: number }>(
                  "update hub.balance set amount = amount + $1 where id = $2 returning amount",
                  [net, dbPlayerBalance.id],
                );
                await pgClient.query(
                  `update hub.bankroll
                      set amount = amount - $1, bets = bets + 1, wagered = wagered + $2, expected_value = expected_value + $3
                    where id = $4`,
                  // The house's expected gain on a fair coin: half the wager
                  // kept on a loss minus half the payout lost on a win.
                  [net, wager, (wager - potentialWin) / 2, dbHouseBankroll.id],
                );
                const balance = balanceAfter.rows[0]!.amount;
                const inserted = await pgClient.query<{ id: string }>(
                  `insert into app.coinflip_bet (id, wager, net, currency_key, user_id, casino_id, experience_id, side, outcome, balance_after)
                   values ($10, $1, $2, $3, $4, $5, $6, $7, $8, $9)
                   returning id`,
                  [wager, net, currency, userId, casinoId, experienceId, side, outcome, balance, betId],
                );
                return { betId: inserted.rows[0]!.id, outcome, balance };
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
