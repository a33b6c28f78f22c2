import type pg from "pg";
import { queryFile } from "../db/query-files.js";
import { KEY_SET_MAX_BYTES } from "./remote-key-set.js";

const RECORD_JWK_SET = queryFile("record-jwk-set");
const PRUNE_JWK_SET_SNAPSHOTS = queryFile("prune-jwk-set-snapshots");

/** Snapshots kept per casino: the newest, so a casino serving a new set at every refresh cannot grow the table. */
export const JWK_SET_SNAPSHOTS_KEPT = 20;

/**
 * The token keys a casino's JWKS URL served, kept for operators: hub.jwk_set
 * holds the latest set, hub.jwk_set_snapshot one row per distinct set that
 * verified a token (the newest JWK_SET_SNAPSHOTS_KEPT of them). Each server
 * writes only when the set differs from the one it last recorded for the
 * casino (`lastRecorded`, its own: CasinoKeys in src/auth/casino-token.ts), so
 * a verification costs no extra round trip while the casino's keys stay the
 * same. Without `lastRecorded` it always writes, which changes nothing when
 * the set is already there. A set larger than KEY_SET_MAX_BYTES as JSON is
 * not stored (the fetch refuses such sets before this).
 */
export async function recordJwkSet(
  pool: Pick<pg.Pool, "query">,
  casinoId: string,
  jwks: unknown,
  lastRecorded?: { get(casinoId: string): string | undefined; set(casinoId: string, text: string): unknown },
): Promise<void> {
  if (!jwks || typeof jwks !== "object") return;
  const text = JSON.stringify(jwks);
  if (Buffer.byteLength(text) > KEY_SET_MAX_BYTES) return;
  if (lastRecorded?.get(casinoId) === text) return;
  const { rowCount } = await pool.query(RECORD_JWK_SET, [casinoId, text]);
  if ((rowCount ?? 0) > 0) await pool.query(PRUNE_JWK_SET_SNAPSHOTS, [casinoId, JWK_SET_SNAPSHOTS_KEPT]);
  lastRecorded?.set(casinoId, text);
}

/** A failed fetch of the casino's key set, for operators: its one row says when and why. */
export async function recordJwkSetFailure(pool: Pick<pg.Pool, "query">, casinoId: string, jwksUrl: string, message: string): Promise<void> {
  await pool.query(
    `insert into hub.jwk_set_failure (casino_id, jwks_url, message) values ($1, $2, $3)
     on conflict (casino_id) do update set jwks_url = excluded.jwks_url, message = excluded.message, failed_at = now()`,
    [casinoId, jwksUrl, message.slice(0, 1000)],
  );
}
