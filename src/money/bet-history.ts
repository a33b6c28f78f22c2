/**
 * One bet history over every game: the rows of each table tagged `@hubBet`,
 * newest first (bet ids are UUIDv7), a page at a time. Read by the GraphQL
 * query `hubBets` (as the request's role, under row-level security) and by
 * dbListBets (the reference route GET /bets, on the superuser pool).
 */
import type pg from "pg";
import { queryFile } from "../db/query-files.js";

export interface BetTable {
  /** The table's name, as a bet's `kind` (schema_table when two schemas have a table of that name). */
  kind: string;
  schema: string;
  table: string;
}

export interface BetHistoryFilter {
  /** Only bets older than this bet id. */
  before?: string | null;
  /** At most this many (1 to 1000). */
  limit: number;
  /** Only these kinds (table names); null or undefined: every kind. */
  kinds?: readonly string[] | null;
  currency?: string | null;
  /** Only this player's bets (an operator's filter in hubBets). */
  userId?: string | null;
}

export interface BetHistoryRow {
  kind: string;
  id: string;
  wager: number;
  net: number;
  currencyKey: string;
  userId: string;
  casinoId: string;
  experienceId: string;
  createdAt: Date;
}

/** Kinds: the table name, qualified by its schema only where two schemas share it. */
export function betTables(found: readonly { schema: string; table: string }[]): BetTable[] {
  const count = new Map<string, number>();
  for (const { table } of found) count.set(table, (count.get(table) ?? 0) + 1);
  return found.map(({ schema, table }) => ({ schema, table, kind: count.get(table)! > 1 ? `${schema}_${table}` : table }));
}

const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;

/**
 * Who may be listed: the request's identity as the GraphQL API's row-level
 * security scopes it (an operator: everyone; a player: their own bets in the
 * session's casino and experience), written out so a game table without a
 * policy shows a player nothing more; or one player in one experience.
 */
export type BetScope = "request" | { userId: string; casinoId: string; experienceId: string };

const REQUEST_SCOPE =
  "(hub_hidden.is_operator() or (user_id = hub_hidden.current_user_id() and casino_id = hub_hidden.current_casino_id() and experience_id = hub_hidden.current_experience_id()))";

/** The statement for one page: each table's newest rows after the cursor, then the newest of them all. */
export function betHistoryQuery(tables: readonly BetTable[], scope: BetScope, filter: BetHistoryFilter): { text: string; values: unknown[] } {
  const chosen = filter.kinds ? tables.filter((t) => filter.kinds!.includes(t.kind)) : tables;
  const values: unknown[] = [filter.before ?? null, filter.limit, filter.currency ?? null, filter.userId ?? null];
  if (scope !== "request") values.push(scope.userId, scope.casinoId, scope.experienceId);
  const who = scope === "request" ? REQUEST_SCOPE : "user_id = $5 and casino_id = $6 and experience_id = $7";
  if (chosen.length === 0) return { text: "select null::text as kind where false", values: [] };
  const parts = chosen.map(
    (t, i) =>
      `(select $${values.push(t.kind)}::text as kind, id, wager, net, currency_key, user_id, casino_id, experience_id from ${ident(t.schema)}.${ident(t.table)}
         where ($1::uuid is null or id < $1) and ($3::text is null or currency_key = $3) and ($4::uuid is null or user_id = $4) and ${who}
         order by id desc limit $2)${i < chosen.length - 1 ? " union all" : ""}`,
  );
  const text = `select kind, id, wager, net, currency_key as "currencyKey", user_id as "userId", casino_id as "casinoId",
    experience_id as "experienceId", hub_hidden.uuid_v7_timestamp(id) as "createdAt"
    from (${parts.join("\n")}) bets order by id desc limit $2`;
  return { text, values };
}

const TABLES = queryFile("hub-bet-tables");

/** The tables tagged @hubBet in the database. */
export async function findBetTables(pool: pg.Pool | pg.PoolClient): Promise<BetTable[]> {
  return betTables((await pool.query<{ schema: string; table: string }>(TABLES)).rows);
}

/**
 * One player's bets in one experience, of every game (every table tagged
 * `@hubBet`), newest first: what GET /bets of the reference routes serves.
 * Zero-net bets included.
 */
export async function dbListBets(pool: pg.Pool | pg.PoolClient, scope: Exclude<BetScope, "request">, filter: BetHistoryFilter): Promise<BetHistoryRow[]> {
  const query = betHistoryQuery(await findBetTables(pool), scope, filter);
  return (await pool.query<BetHistoryRow>(query)).rows;
}
