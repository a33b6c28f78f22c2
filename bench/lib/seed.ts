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
import { dbCreateHubHashChain } from "../../dist/src/exports/hash-chain.js";

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
  /** The players of the outcome bet scenarios (seedFair), when one of them runs. */
  fair?: FairFixtures;
}

export interface Bettor extends Player {
  hashChainId: string;
  /** A currency of this bettor alone, with its own house bankroll. */
  ownCurrency: string;
}

export interface FairFixtures {
  /** One player with a chain of 1,000,000 hashes. */
  bettor: Bettor;
  /** CROWD players, each with a chain and a balance in HOUSE and in its own currency. */
  crowd: Bettor[];
}

/** Players betting at once in the crowd scenarios: one autocannon connection each. */
export const CROWD = 50;
/** Plenty for every player's balance and every bankroll: no run can drain them. */
const FUNDS = 1e12;

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

async function fund(pool: pg.Pool, player: Player, currency: string): Promise<void> {
  await pool.query("select hub_hidden.credit_balance($1, $2, $3, $4, $5, 'bench', 'bench funds')", [player.userId, player.casinoId, player.experienceId, currency, FUNDS]);
}

async function houseFunds(pool: pg.Pool, casinoId: string, currency: string): Promise<void> {
  await pool.query("select hub_hidden.ensure_bankroll($1, $2, 0, 'bench funds', 'bench')", [casinoId, currency]);
  await pool.query("select hub_hidden.adjust_bankroll($1, $2, $3, 'bench', 'bench funds')", [casinoId, currency, FUNDS * 10]);
}

/**
 * The outcome bet scenarios' players: a lone bettor, and CROWD players who
 * bet at once, either all in HOUSE (one house bankroll row for all) or each in
 * a currency of their own (CROWD bankroll rows): the difference is what the
 * one bankroll row costs.
 */
export async function seedFair(pool: pg.Pool): Promise<FairFixtures> {
  const make = async (uname: string, ownCurrency: string, chainLength: number): Promise<Bettor> => {
    const player = await newPlayerSession(pool, uname);
    await pool.query("insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale) values ($1, $2, $1, 1) on conflict do nothing", [ownCurrency, player.casinoId]);
    await houseFunds(pool, player.casinoId, ownCurrency);
    await fund(pool, player, CURRENCY);
    await fund(pool, player, ownCurrency);
    const { hashChain } = await dbCreateHubHashChain(pool, { userId: player.userId, casinoId: player.casinoId, experienceId: player.experienceId, maxIteration: chainLength });
    return { ...player, hashChainId: hashChain.id, ownCurrency };
  };
  const bettor = await make("bench-bettor", "BET_SOLO", 1_000_000);
  await houseFunds(pool, bettor.casinoId, CURRENCY);
  const crowd: Bettor[] = [];
  // 20,000 hashes each: a few thousand bets per player at most in a full run.
  for (let i = 0; i < CROWD; i++) crowd.push(await make(`bench-crowd-${i}`, `BET_${String(i).padStart(2, "0")}`, 20_000));
  return { bettor, crowd };
}
