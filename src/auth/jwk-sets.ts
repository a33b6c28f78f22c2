import type pg from "pg";
import { queryFile } from "../db/query-files.js";

const RECORD_JWK_SET = queryFile("record-jwk-set");

/**
 * The token keys a casino's JWKS URL served, kept for operators: hub.jwk_set
 * holds the latest set, hub.jwk_set_snapshot one row per distinct set that
 * verified a token. Each server writes only when the set differs from the
 * one it last recorded for the casino (`lastRecorded`, its own: CasinoKeys in
 * src/auth/casino-token.ts), so a verification costs no extra round trip
 * while the casino's keys stay the same. Without `lastRecorded` it always
 * writes, which changes nothing when the set is already there.
 */
export async function recordJwkSet(
  pool: Pick<pg.Pool, "query">,
  casinoId: string,
  jwks: unknown,
  lastRecorded?: { get(casinoId: string): string | undefined; set(casinoId: string, text: string): unknown },
): Promise<void> {
  if (!jwks || typeof jwks !== "object") return;
  const text = JSON.stringify(jwks);
  if (lastRecorded?.get(casinoId) === text) return;
  await pool.query(
    RECORD_JWK_SET,
    [casinoId, text],
  );
  lastRecorded?.set(casinoId, text);
}
