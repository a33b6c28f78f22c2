/**
 * The data and credentials of the scenarios, written with plain SQL on the
 * superuser connection and the hub's own credential helpers (the database
 * keeps only token digests, so tokens are minted here, not read back).
 *
 *  - an operator API key (sees every row: hub_hidden.is_operator());
 *  - "bench-reader", a playground player with exactly 10 app.coinflip rows;
 *  - "bench-writer-1" … "bench-writer-N", playground players who make the
 *    makeCoinflip bets, so the reader's 10 rows stay 10 whatever the mutation
 *    scenario inserts. As many as the load has connections, each request
 *    taking the next one in turn: one player sending bets on 10 connections
 *    at once is what the hub's per-player bound (3 transactions at a time,
 *    the rest queue) exists to hold back, and the baseline has no such bound;
 *    several players betting at once is the load both are built for.
 */
import type pg from "pg";
// Internal helpers (not a public sub-path), as the tests use them.
import { createApiKey, createSession, ensurePlayer } from "../../dist/src/auth/credentials.js";

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
  /** The makeCoinflip players; writers[0] is writer. */
  writers: Player[];
  /** The reader's rows, in id (= creation) order. */
  readerRowIds: string[];
  currency: string;
}

/** Rows of app.coinflip from other players, as a live database has. */
export const HISTORY_ROWS = 50_000;

export const CURRENCY = "HOUSE"; // created with the playground casino by a core migration

export async function newPlayerSession(pool: pg.Pool, uname: string): Promise<Player> {
  const { user, casino, experience } = await ensurePlayer(pool, { uname });
  const { token } = await createSession(pool, { userId: user.id, casinoId: casino.id, experienceId: experience.id });
  return { token, userId: user.id, casinoId: casino.id, experienceId: experience.id };
}

export async function seed(pool: pg.Pool, writerCount = 10): Promise<Fixtures> {
  const { key: operatorKey } = await createApiKey(pool);
  const reader = await newPlayerSession(pool, "bench-reader");
  const writers: Player[] = [];
  for (let i = 1; i <= writerCount; i++) writers.push(await newPlayerSession(pool, `bench-writer-${i}`));
  const writer = writers[0]!;
  const { rows } = await pool.query<{ id: string }>(
    `insert into app.coinflip (wager, net, currency_key, user_id, casino_id, experience_id)
     select g, case when g % 2 = 0 then g * 0.99 else -g end, $1, $2, $3, $4
       from generate_series(1, 10) g
     returning id`,
    [CURRENCY, reader.userId, reader.casinoId, reader.experienceId],
  );
  const readerRowIds = rows.map((r) => r.id).sort();
  // Other players' history, after the reader's rows (later v7 ids, so the
  // oldest ten are still the reader's): a table of realistic size, whose plans
  // do not change under the load. With only the reader's ten rows analysed,
  // Postgres planned makeCoinflip's read-back by id as a sequential scan and
  // kept that plan while the scenario grew the table by thousands of rows, until
  // an autoanalyze happened to run: the scenario's database cost then depended
  // on when that was, and whichever target ran before it paid (seen as 1.5x
  // the Postgres CPU per request of the other target in the same run).
  const filler = await newPlayerSession(pool, "bench-history");
  await pool.query(
    `insert into app.coinflip (wager, net, currency_key, user_id, casino_id, experience_id)
     select 1 + g % 100, case when g % 2 = 0 then (1 + g % 100) * 0.99 else -(1 + g % 100) end, $1, $2, $3, $4
       from generate_series(1, $5::int) g`,
    [CURRENCY, filler.userId, filler.casinoId, filler.experienceId, HISTORY_ROWS],
  );
  // Fresh statistics for the planner, as a long-running database would have.
  await pool.query("analyze app.coinflip");
  return { operatorKey, reader, writer, writers, readerRowIds, currency: CURRENCY };
}
