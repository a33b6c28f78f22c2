import type pg from "pg";

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
    `with changed as (
       insert into hub.jwk_set as s (casino_id, jwks) values ($1, $2::jsonb)
       on conflict (casino_id) do update set jwks = excluded.jwks, updated_at = now()
        where s.jwks is distinct from excluded.jwks
       returning casino_id)
     insert into hub.jwk_set_snapshot (casino_id, jwks)
     select $1, $2::jsonb from changed
      where not exists (select 1 from hub.jwk_set_snapshot p where p.casino_id = $1 and p.jwks = $2::jsonb)`,
    [casinoId, text],
  );
  lastRecorded?.set(casinoId, text);
}
