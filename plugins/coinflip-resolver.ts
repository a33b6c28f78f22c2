/**
 * CoinflipResolverPlugin: `makeCoinflip` in resolver style. A
 * resolver can only return data shaped like types the plugin declares, so it
 * returns its own `CoinflipOut`; plugins/coinflip-plan.ts is the plan-style
 * twin that returns the generated `Coinflip`. The two declare the same field,
 * so a server uses one or the other.
 *
 * By the reference's own rules, this is a reference for the plugin mechanics only:
 * it checks no balance and moves no money (plugins/coinflip-bet.ts does).
 */
import { randomInt } from "node:crypto";
import { makeExtendSchemaPlugin, gql } from "@hubpkg/hub/graphile";
import { clientError, ErrorCode } from "@hubpkg/hub/graphql";
import { dbClaimIdempotencyKey, dbRecordIdempotentResult, withPgPoolTransaction } from "@hubpkg/hub/db";
import type { PluginContext } from "@hubpkg/hub";

const MIN_WAGER = 1;
/** What a win pays per unit wagered; the missing 1% is the house edge. */
const WIN_MULTIPLIER = 0.99;

interface MakeCoinflipInput {
  currency: string;
  wager: number;
  idempotencyKey?: string | null;
}

interface CoinflipOut {
  id: string;
  net: number;
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

export const CoinflipResolverPlugin = makeExtendSchemaPlugin(
  () => ({
    typeDefs: gql`
      input MakeCoinflipInput {
        "Key of a currency of the session's casino (hub.currency)."
        currency: String!
        "At least 1."
        wager: Float!
        "Optional, 1 to 255 characters: a retry with the same key and input answers the first flip and flips nothing (kept 24 hours)."
        idempotencyKey: String
      }
      "The coin flip just made: net is wager * 0.99 on a win and -wager on a loss."
      type CoinflipOut {
        id: UUID!
        net: Float!
      }
      extend type Mutation {
        "Flip a fair coin for the player of the session; null without a player session."
        makeCoinflip(input: MakeCoinflipInput!): CoinflipOut
      }
    `,
    resolvers: {
      Mutation: {
        async makeCoinflip(_parent: unknown, args: { input: MakeCoinflipInput }, context: PluginContext): Promise<CoinflipOut | null> {
          const { identity } = context;
          if (identity?.kind !== "user") return null;
          const { currency, wager, idempotencyKey } = args.input;
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
               returning id, net`,
              [wager, net, currency, user_id, casino_id, experience_id],
            ];
            // One statement is a transaction of its own: no begin and commit
            // around it, so one round trip to Postgres instead of three.
            if (idempotencyKey == null) return (await context.superuserPool.query<CoinflipOut>(...insert)).rows[0]!;
            // With a key: claimed first, the flip stored with it, so a retry answers the first flip.
            return await withPgPoolTransaction(context.superuserPool, async (pgClient) => {
              const claim = { userId: user_id, idempotencyKey, operation: "makeCoinflip", request: { currency, wager } };
              const replay = await dbClaimIdempotencyKey(pgClient, claim);
              if (replay) return replay.result as CoinflipOut;
              const flip = (await pgClient.query<CoinflipOut>(...insert)).rows[0]!;
              await dbRecordIdempotentResult(pgClient, { ...claim, resultId: flip.id, result: flip });
              return flip;
            });
          } catch (error) {
            if (isUnknownCurrency(error)) {
              throw clientError(ErrorCode.UNKNOWN_CURRENCY, `makeCoinflip: unknown currency ${JSON.stringify(currency)}; the casino of this session has no such currency.`);
            }
            throw error;
          }
        },
      },
    },
  }),
  "CoinflipResolverPlugin",
);
