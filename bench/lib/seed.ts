/**
 * The data and credentials of the scenarios, written with plain SQL on the
 * superuser connection and the hub's own credential helpers (the database
 * keeps only token digests, so tokens are minted here, not read back).
 *
 *  - an operator API key (sees every row: hub_hidden.is_operator());
 *  - "bench-reader", a playground player with exactly 10 app.coinflip rows;
 *  - "bench-writer", a playground player who makes the makeCoinflip bets, so
 *    the reader's 10 rows stay 10 whatever the mutation scenario inserts.
 */
import type pg from "pg";
// Internal helpers (not a public sub-path), as the tests use them.
import { createApiKey, createSession, ensurePlayer } from "../../dist/src/credentials.js";

export interface Player {
  token: string;
  userId: string;
  casinoId: string;
  experienceId: string;
}

export interface Fixtures {
  operatorKey: string;
  reader: Player;
  writer: Player;
  /** The reader's rows, in id (= creation) order. */
  readerRowIds: string[];
  currency: string;
}

export const CURRENCY = "HOUSE"; // created with the playground casino by a core migration

export async function newPlayerSession(pool: pg.Pool, uname: string): Promise<Player> {
  const { user, casino, experience } = await ensurePlayer(pool, { uname });
  const { token } = await createSession(pool, { userId: user.id, casinoId: casino.id, experienceId: experience.id });
  return { token, userId: user.id, casinoId: casino.id, experienceId: experience.id };
}

export async function seed(pool: pg.Pool): Promise<Fixtures> {
  const { key: operatorKey } = await createApiKey(pool);
  const reader = await newPlayerSession(pool, "bench-reader");
  const writer = await newPlayerSession(pool, "bench-writer");
  const { rows } = await pool.query<{ id: string }>(
    `insert into app.coinflip (wager, net, currency_key, user_id, casino_id, experience_id)
     select g, case when g % 2 = 0 then g * 0.99 else -g end, $1, $2, $3, $4
       from generate_series(1, 10) g
     returning id`,
    [CURRENCY, reader.userId, reader.casinoId, reader.experienceId],
  );
  const readerRowIds = rows.map((r) => r.id).sort();
  // Fresh statistics for the planner, as a long-running database would have.
  await pool.query("analyze app.coinflip");
  return { operatorKey, reader, writer, readerRowIds, currency: CURRENCY };
}
