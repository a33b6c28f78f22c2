/**
 * Idempotency keys of money mutations (the convention of Stripe's API and the
 * IETF Idempotency-Key draft): the key is stored with a fingerprint of the
 * client's request and the effect's answer, in the transaction of the effect
 * (hub_hidden.idempotency_key, core baseline). A retry with the same key and request answers the
 * stored result and moves nothing; the same key with another request is
 * refused (IDEMPOTENCY_KEY_REUSED). Keys are the player's (or the API key's),
 * kept 24 hours.
 */
import { createHash } from "node:crypto";
import type pg from "pg";
import { describeValue, ErrorCode } from "../errors.js";
import { clientError } from "../graphql/client-error.js";
import { onCommit } from "../db/pools.js";
import { noteCommitted } from "./committed.js";

/** The longest idempotency key, in characters. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;
/** How long a key answers replays (and is kept). */
export const IDEMPOTENCY_KEY_RETENTION_HOURS = 24;

type Queryable = Pick<pg.ClientBase, "query">;

/** An idempotency key as the client sent it: undefined when none; refused when not 1 to 255 characters of text without NUL. */
export function checkIdempotencyKey(value: unknown, field: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  const length = typeof value === "string" ? [...value].length : 0;
  if (typeof value !== "string" || length < 1 || length > MAX_IDEMPOTENCY_KEY_LENGTH || value.includes("\u0000")) {
    throw clientError(
      ErrorCode.BAD_USER_INPUT,
      `${field}: idempotencyKey must be a string of 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} characters without NUL (a UUID the client makes per request is the usual choice); received ${typeof value === "string" ? `${length} characters` : describeValue(value)}.`,
    );
  }
  return value;
}

/**
 * JSON with object keys sorted and null fields left out (GraphQL reads an
 * omitted optional field and an explicit null alike), so the same request
 * always has the same fingerprint.
 */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== null && v !== undefined);
    return Object.fromEntries(entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => [k, canonical(v)]));
  }
  return value;
}

/** The SHA-256 of the request's canonical JSON: what a replay must match. */
export function requestFingerprint(request: unknown): string {
  return createHash("sha256").update(JSON.stringify(canonical(request ?? null)) ?? "null").digest("hex");
}

/** Whose keys: a player's (user id) or an operator's API key. */
export const playerKeyScope = (userId: string): string => `user:${userId}`;
export const apiKeyScope = (apiKeyId: string): string => `apikey:${apiKeyId}`;

/** The refusal of a key already used for another operation or input. */
export function idempotencyKeyReused(field: string, key: string, operation: string, storedOperation: string | null): Error {
  const what = storedOperation && storedOperation !== operation ? `another operation (${storedOperation})` : `the same operation with other input`;
  return clientError(
    ErrorCode.IDEMPOTENCY_KEY_REUSED,
    `${field}: the idempotency key ${JSON.stringify(key)} was already used for ${what} within the last ${IDEMPOTENCY_KEY_RETENTION_HOURS} hours; nothing was done. Send a new key for a new request.`,
    { idempotencyKey: key },
  );
}

/** What a replayed request answers: the first request's result id and stored answer. */
export interface IdempotentReplay {
  resultId: string | null;
  result: unknown;
}

export interface IdempotencyClaim {
  /** The player whose key it is (`identity.session.user_id`). */
  userId: string;
  /** Whose key it is, when not a player's (the hub's operator mutations: apiKeyScope). Default: the player's. */
  scope?: string;
  /** The client's key; undefined or null: no key, nothing claimed. */
  idempotencyKey: string | null | undefined;
  /** The operation (the GraphQL field, "rollDice"): a key used for another is refused. */
  operation: string;
  /** What the client asked for (the field's input without the key): a replay must send the same. */
  request: unknown;
}

type ClaimRow = { status: "claimed" | "own" | "replay" | "reused"; operation: string; result_id: string | null; result: unknown };

/**
 * Claim the key for this transaction, before drawing or checking anything:
 * null when the request is new (do the effect, then dbRecordIdempotentResult
 * with its answer, in the same transaction), or the first request's answer
 * on a replay (answer it, change nothing). A concurrent request with the
 * same key waits here until the first commits. Refused with
 * IDEMPOTENCY_KEY_REUSED when the key holds another operation or input, with
 * BAD_USER_INPUT when the key is not 1 to 255 characters without NUL.
 */
export async function dbClaimIdempotencyKey(pgClient: Queryable, claim: IdempotencyClaim): Promise<IdempotentReplay | null> {
  const key = checkIdempotencyKey(claim.idempotencyKey, claim.operation);
  if (key === undefined) return null;
  const { rows } = await pgClient.query<ClaimRow>({
    name: "hub-claim-idempotency-key",
    text: "select status, operation, result_id, result from hub_hidden.claim_idempotency_key($1, $2, $3, $4)",
    values: [claim.scope ?? playerKeyScope(claim.userId), key, claim.operation, requestFingerprint(claim.request)],
  });
  const row = rows[0]!;
  if (row.status === "reused") throw idempotencyKeyReused(claim.operation, key, claim.operation, row.operation);
  if (row.status !== "replay") return null;
  noteCommitted({ operation: claim.operation, ids: row.result_id ? { resultId: row.result_id } : {}, idempotencyKey: key });
  return { resultId: row.result_id, result: row.result };
}

/**
 * Store the answer of the request that claimed the key (same transaction as
 * its effect), for its replays; and, key or not, note that the request
 * commits, so a failure after the commit (its payload read back) is answered
 * OUTCOME_COMMITTED rather than as a retryable outage.
 */
export async function dbRecordIdempotentResult(
  pgClient: Queryable,
  record: { userId: string; scope?: string; idempotencyKey: string | null | undefined; resultId: string | null; result: unknown; operation?: string },
): Promise<void> {
  const key = record.idempotencyKey ?? undefined;
  const note = () => noteCommitted({ operation: record.operation ?? "the mutation", ids: record.resultId ? { resultId: record.resultId } : {}, idempotencyKey: key });
  if (!onCommit(pgClient, async () => note())) note();
  if (key === undefined) return;
  await pgClient.query({
    name: "hub-record-idempotency-key",
    text: "select hub_hidden.record_idempotency_key($1, $2, $3, $4)",
    values: [record.scope ?? playerKeyScope(record.userId), key, record.resultId, JSON.stringify(record.result ?? null)],
  });
}

/**
 * The committed answer of a key, read without claiming it (a retry's fast
 * path, before any hash is drawn): null when the key is free or expired.
 */
export async function readIdempotentReplay(
  db: Queryable,
  scope: string,
  key: string,
  operation: string,
  fingerprint: string,
): Promise<IdempotentReplay | null> {
  const { rows } = await db.query<{ operation: string; fingerprint: string; result_id: string | null; result: unknown }>({
    name: "hub-read-idempotency-key",
    text: `select operation, fingerprint, result_id, result from hub_hidden.idempotency_key
            where scope = $1 and key = $2 and created_at >= now() - interval '${IDEMPOTENCY_KEY_RETENTION_HOURS} hours'`,
    values: [scope, key],
  });
  const row = rows[0];
  if (!row) return null;
  if (row.operation !== operation || row.fingerprint !== fingerprint) throw idempotencyKeyReused(operation, key, operation, row.operation);
  return { resultId: row.result_id, result: row.result };
}

/** Delete keys past their retention; the server's bankroll sweep calls it. */
export async function sweepIdempotencyKeys(pool: Pick<pg.Pool, "query">): Promise<number> {
  const { rowCount } = await pool.query(`delete from hub_hidden.idempotency_key where created_at < now() - interval '${IDEMPOTENCY_KEY_RETENTION_HOURS} hours'`);
  return rowCount ?? 0;
}
