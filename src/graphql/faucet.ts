import { access, context, sideEffect } from "grafast";
import { extendSchema, gql } from "graphile-utils";
import type pg from "pg";
import type { Identity } from "../auth/identity.js";
import { withPgPoolTransaction } from "../db/pools.js";
import { describeValue, ErrorCode } from "../errors.js";
import { clientError } from "./client-error.js";
import { guarded } from "./operator.js";
import { checkIdempotencyKey, dbClaimIdempotencyKey, dbRecordIdempotentResult } from "../money/idempotency.js";
import { noteCommitted } from "../money/committed.js";

/**
 * The faucet: free play money. An operator enables it per casino and currency
 * (an amount and a cooldown); a player claims the amount into the session's
 * experience at most once per cooldown in that currency and experience. The
 * credit is an ordinary ledger entry (hub_hidden.credit_balance, reason
 * "faucet"), and the claim is a hub.faucet_claim row, both in one transaction.
 */
type Input = Record<string, unknown>;

const DEFAULT_COOLDOWN_SECONDS = 86_400;

function unauthorized(identity: Identity | undefined, field: string, needs: string): never {
  throw clientError(identity ? ErrorCode.FORBIDDEN : ErrorCode.UNAUTHENTICATED, `Unauthorized: ${field} needs ${needs}.`);
}

function effect(fn: (input: Input, identity: Identity | undefined, pool: pg.Pool) => Promise<unknown>) {
  return (_parent: unknown, fieldArgs: any) =>
    sideEffect([fieldArgs.getRaw("input"), context().get("identity"), context().get("superuserPool")], ([input, identity, pool]) =>
      guarded(() => fn((input ?? {}) as Input, identity as Identity | undefined, pool as pg.Pool)),
    );
}

function faucetAmount(value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > Number.MAX_SAFE_INTEGER) {
    throw clientError(ErrorCode.INVALID_AMOUNT, `amount must be a whole number of base units from 1 to 9007199254740991, or null to disable the faucet; received ${describeValue(value)}.`);
  }
  return value;
}

function cooldown(value: unknown): number {
  if (value === undefined || value === null) return DEFAULT_COOLDOWN_SECONDS;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > 31_622_400) {
    throw clientError(ErrorCode.BAD_USER_INPUT, `cooldownSeconds must be a whole number from 1 to 31622400 (366 days); received ${describeValue(value)}.`);
  }
  return value;
}

async function setFaucet(input: Input, identity: Identity | undefined, pool: pg.Pool) {
  if (identity?.kind !== "operator") unauthorized(identity, "hubSetFaucet", "an operator API key (Authorization: apikey:<key>)");
  const casinoId = String(input.casinoId);
  const currencyKey = String(input.currencyKey);
  if (input.amount === null || input.amount === undefined) {
    await pool.query("delete from hub.faucet_currency where casino_id = $1 and currency_key = $2", [casinoId, currencyKey]);
    return { casinoId, currencyKey, enabled: false, amount: null, cooldownSeconds: null };
  }
  const amount = faucetAmount(input.amount);
  const seconds = cooldown(input.cooldownSeconds);
  const { rowCount } = await pool.query(
    `insert into hub.faucet_currency (casino_id, currency_key, amount, cooldown_seconds)
     select c.casino_id, c.key, $3, $4 from hub.currency c where c.casino_id = $1 and c.key = $2
     on conflict (casino_id, currency_key) do update set amount = excluded.amount, cooldown_seconds = excluded.cooldown_seconds, updated_at = now()`,
    [casinoId, currencyKey, amount, seconds],
  );
  if (rowCount === 0) throw clientError(ErrorCode.UNKNOWN_CURRENCY, `The casino ${casinoId} has no currency ${describeValue(currencyKey)}.`);
  return { casinoId, currencyKey, enabled: true, amount, cooldownSeconds: seconds };
}

async function claimFaucet(input: Input, identity: Identity | undefined, pool: pg.Pool) {
  if (identity?.kind !== "user") unauthorized(identity, "hubClaimFaucet", "a player's session (Authorization: session:<key>)");
  const { user_id: userId, casino_id: casinoId, experience_id: experienceId } = identity.session;
  const currency = String(input.currency);
  const { idempotencyKey, ...request } = input;
  const claim = { userId, idempotencyKey: checkIdempotencyKey(idempotencyKey, "hubClaimFaucet"), operation: "hubClaimFaucet", request };
  const answer = await withPgPoolTransaction(pool, async (client) => {
    // Claimed before the cooldown is checked: a retry answers the first claim rather than FAUCET_TOO_SOON.
    const replay = await dbClaimIdempotencyKey(client, claim);
    if (replay) return replay.result as { faucetClaimId: string; balanceId: string };
    // One claim at a time per player, experience and currency, so two at once cannot both pass the cooldown check.
    await client.query("select pg_advisory_xact_lock(hashtextextended('hub:faucet:' || $1::text || ':' || $2::text || ':' || $3::text, 0))", [userId, experienceId, currency]);
    const config = await client.query<{ amount: number; cooldown_seconds: number }>(
      "select amount, cooldown_seconds from hub.faucet_currency where casino_id = $1 and currency_key = $2",
      [casinoId, currency],
    );
    const faucet = config.rows[0];
    if (!faucet) throw clientError(ErrorCode.FAUCET_NOT_ENABLED, `The faucet is not enabled for the currency ${describeValue(currency)} in this casino.`);
    const last = await client.query<{ wait: number }>(
      `select ceil(extract(epoch from (created_at + make_interval(secs => $4) - now())))::int as wait
         from hub.faucet_claim where user_id = $1 and experience_id = $2 and currency_key = $3
        order by created_at desc limit 1`,
      [userId, experienceId, currency, faucet.cooldown_seconds],
    );
    const wait = last.rows[0]?.wait ?? 0;
    if (wait > 0) {
      throw clientError(ErrorCode.FAUCET_TOO_SOON, `The faucet gives ${currency} once every ${faucet.cooldown_seconds} s; the next claim is possible in ${wait} s.`, {
        retryAfterSeconds: wait,
      });
    }
    const inserted = await client.query<{ id: string }>(
      "insert into hub.faucet_claim (user_id, casino_id, experience_id, currency_key, amount) values ($1, $2, $3, $4, $5) returning id",
      [userId, casinoId, experienceId, currency, faucet.amount],
    );
    const balance = await client.query<{ id: string }>("select id from hub_hidden.credit_balance($1, $2, $3, $4, $5, $6, 'faucet')", [
      userId, casinoId, experienceId, currency, faucet.amount, `user:${userId}`,
    ]);
    const result = { faucetClaimId: inserted.rows[0]!.id, balanceId: balance.rows[0]!.id };
    await dbRecordIdempotentResult(client, { ...claim, resultId: result.faucetClaimId, result });
    return result;
  });
  noteCommitted({ operation: "hubClaimFaucet", ids: { faucetClaimId: answer.faucetClaimId }, idempotencyKey: claim.idempotencyKey });
  return answer;
}

export const HubFaucetPlugin = extendSchema((build) => {
  const { hub_faucet_claim: claimResource, hub_balance: balanceResource } = build.input.pgRegistry.pgResources;
  if (!claimResource || !balanceResource) throw new Error("HubFaucetPlugin: hub.faucet_claim or hub.balance is missing from the schema (is the `hub` schema migrated?)");
  return {
    typeDefs: gql`
      input HubSetFaucetInput {
        casinoId: UUID!
        currencyKey: String!
        "Whole base units a claim gives; null disables the faucet for the currency."
        amount: Float
        "How long a player waits between two claims in the currency and experience (default 86400 s)."
        cooldownSeconds: Int
      }
      type HubSetFaucetPayload {
        casinoId: UUID!
        currencyKey: String!
        enabled: Boolean!
        amount: Float
        cooldownSeconds: Int
      }
      input HubClaimFaucetInput {
        "A currency key the operator enabled the faucet for in the session's casino."
        currency: String!
        "Optional, 1 to 255 characters: a retry with the same key and input answers the first claim and credits nothing (kept 24 hours)."
        idempotencyKey: String
      }
      type HubClaimFaucetPayload {
        faucetClaim: HubFaucetClaim!
        "The player's balance after the claim."
        balance: HubBalance!
      }
      extend type Mutation {
        "Enable, change or disable the faucet of a currency (operators only)."
        hubSetFaucet(input: HubSetFaucetInput!): HubSetFaucetPayload!
        "Claim free play money into the session's experience (players; once per cooldown per currency and experience)."
        hubClaimFaucet(input: HubClaimFaucetInput!): HubClaimFaucetPayload!
      }
    `,
    objects: {
      Mutation: { plans: { hubSetFaucet: effect(setFaucet), hubClaimFaucet: effect(claimFaucet) } },
      HubClaimFaucetPayload: {
        plans: {
          faucetClaim: ($p: any) => claimResource.get({ id: access($p, "faucetClaimId") }),
          balance: ($p: any) => balanceResource.get({ id: access($p, "balanceId") }),
        },
      },
    },
  };
}, "HubFaucetPlugin");
