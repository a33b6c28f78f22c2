/**
 * CoinflipPlanPlugin: `makeCoinflip` in plan style. Same
 * rules as plugins/coinflip-resolver.ts, but a plan can return the generated
 * `Coinflip` entity: the side effect inserts the row and yields its id, and
 * `pgResources.coinflip.get({ id })` lets the client select any Coinflip field
 * (relations included), read under the player's row-level security.
 *
 * By the reference's own rules, this is a reference for the plugin mechanics only:
 * it checks no balance and moves no money (plugins/coinflip-bet.ts does).
 */
import { randomInt } from "node:crypto";
import { extendSchema, gql } from "@hubpkg/hub/graphile";
import { clientError, ErrorCode } from "@hubpkg/hub/graphql";
import { context, inhibitOnNull, sideEffect } from "@hubpkg/hub/grafast";
import { dbClaimIdempotencyKey, dbRecordIdempotentResult, withPgPoolTransaction } from "@hubpkg/hub/db";

const MIN_WAGER = 1;
/** What a win pays per unit wagered; the missing 1% is the house edge. */
const WIN_MULTIPLIER = 0.99;

interface MakeCoinflipInput {
  currency: string;
  wager: number;
  idempotencyKey?: string | null;
}

function validateWager(wager: number): void {
  // GraphQL's Float refuses NaN and Infinity in variables, but a literal such as
  // 1e999 in the query text is parsed to Infinity and reaches us as a number.
  if (!Number.isFinite(wager)) {
    throw clientError(ErrorCode.BAD_USER_INPUT, `makeCoinflip: the wager must be a finite number, received ${wager}.`);
  }
  if (wager < MIN_WAGER) {
    throw clientError(ErrorCode.BAD_USER_INPUT, `makeCoinflip: the wager must be at least ${MIN_WAGER}, received ${wager}.`);
  }
}

/** Postgres's error for a (currency_key, casino_id) missing from hub.currency. */
function isUnknownCurrency(error: unknown): boolean {
  const pgError = error as { code?: string; constraint?: string };
  return pgError.code === "23503" && pgError.constraint === "coinflip_currency_fkey";
}

export const CoinflipPlanPlugin = extendSchema((build) => {
  const coinflip = build.input.pgRegistry.pgResources.coinflip;
  if (!coinflip) {
    throw new Error(
      'CoinflipPlanPlugin: the table app.coinflip is not in the schema; apply the reference migrations (userDatabaseMigrationsPath) and pass extraPgSchemas: ["app"].',
    );
  }
  return {
    typeDefs: gql`
      input MakeCoinflipInput {
        "Key of a currency of the session's casino (hub.currency)."
        currency: String!
        "At least 1."
        wager: Float!
        "Optional, 1 to 255 characters: a retry with the same key and input answers the first flip and flips nothing (kept 24 hours)."
        idempotencyKey: String
      }
      extend type Mutation {
        "Flip a fair coin for the player of the session; null without a player session."
        makeCoinflip(input: MakeCoinflipInput!): Coinflip
      }
    `,
    objects: {
      Mutation: {
        plans: {
          makeCoinflip(_parent, fieldArgs) {
            const $input = fieldArgs.getRaw("input");
            const $identity = context().get("identity");
            const $pool = context().get("superuserPool");
            const $id = sideEffect([$input, $identity, $pool], async ([rawInput, identity, pool]): Promise<string | null> => {
              if (identity?.kind !== "user") return null;
              const { currency, wager, idempotencyKey } = rawInput as MakeCoinflipInput;
              validateWager(wager);
              const { user_id, casino_id, experience_id } = identity.session;
              try {
                // randomInt draws from the OS's cryptographic generator, without
                // modulo bias: nobody can predict or skew the outcome.
                const won = randomInt(2) === 1;
                const net = won ? wager * WIN_MULTIPLIER : -wager;
                const insert: [string, unknown[]] = [
                  `insert into app.coinflip (id, wager, net, currency_key, user_id, casino_id, experience_id)
                   values (hub_hidden.uuid_generate_v7(), $1, $2, $3, $4, $5, $6)
                   returning id`,
                  [wager, net, currency, user_id, casino_id, experience_id],
                ];
                // One statement is a transaction of its own: no begin and commit
                // around it, so one round trip to Postgres instead of three.
                if (idempotencyKey == null) return (await pool.query<{ id: string }>(...insert)).rows[0]!.id;
                // With a key: claimed first, the flip's id stored with it, so a retry answers the first flip.
                return await withPgPoolTransaction(pool, async (pgClient) => {
                  const claim = { userId: user_id, idempotencyKey, operation: "makeCoinflip", request: { currency, wager } };
                  const replay = await dbClaimIdempotencyKey(pgClient, claim);
                  if (replay) return replay.resultId!;
                  const id = (await pgClient.query<{ id: string }>(...insert)).rows[0]!.id;
                  await dbRecordIdempotentResult(pgClient, { ...claim, resultId: id, result: { id } });
                  return id;
                });
              } catch (error) {
                if (isUnknownCurrency(error)) {
                  throw clientError(ErrorCode.UNKNOWN_CURRENCY, `makeCoinflip: unknown currency ${JSON.stringify(currency)}; the casino of this session has no such currency.`);
                }
                throw error;
              }
            });
            // Without a player there is no id: the field is null and no select is sent.
            return coinflip.get({ id: inhibitOnNull($id) });
          },
        },
      },
    },
  };
}, "CoinflipPlanPlugin");
