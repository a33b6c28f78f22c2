import pg from "pg";
import { HubError } from "../errors.js";
import type { Logger } from "../logger.js";
import { connectFailed } from "./connection-errors.js";
import { DEFAULT_POOL_SIZES } from "./connection-budget.js";
import { codePoolSaturation, CommitInDoubtError, lostInFlight } from "./error-class.js";
import { newPool } from "./database.js";

export interface HubPools {
  /** Connects as the authenticator; every GraphQL request switches to app_postgraphile. */
  graphql: pg.Pool;
  /** Migrations, superuserPool for plugins and routes. */
  superuser: pg.Pool;
  /**
   * Credential lookups and API key usage stamps only: a few short queries that
   * must never wait behind plugin work holding every superuser connection.
   */
  credentials: pg.Pool;
}

/** Size of the credentials pool: lookups are single indexed reads, and concurrent lookups of one credential share a query. */
const CREDENTIAL_POOL_SIZE = DEFAULT_POOL_SIZES.credentials;

// Saturation is recognised in src/db/error-class.ts; the export stays here, where callers have always found it.
export { isPoolSaturated } from "./error-class.js";

/**
 * Send a query given a name (a prepared statement: the hub's own, @dataplan/pg's
 * cache, a plugin's) unnamed instead. Behind a transaction pooler each
 * transaction may run on another server connection, where a statement
 * prepared on the first does not exist.
 */
export function sendQueriesUnnamed(client: pg.ClientBase): void {
  const query = client.query as (...args: unknown[]) => unknown;
  (client as { query: unknown }).query = function (this: pg.ClientBase, config: unknown, ...rest: unknown[]) {
    const named = typeof config === "object" && config !== null && typeof (config as { submit?: unknown }).submit !== "function" && (config as { name?: unknown }).name;
    return query.call(this, named ? { ...(config as object), name: undefined } : config, ...rest);
  };
}

function makePool(connectionString: string, name: string, max: number, log: Logger, pipeline = false, unnamed = false): pg.Pool {
  const pool = codePoolSaturation(newPool({ connectionString, max, application_name: `hub:${name}`, connectionTimeoutMillis: 10_000, pipeline }), name);
  if (unnamed) pool.on("connect", sendQueriesUnnamed);
  // A client losing its connection (Postgres stopped or restarted, its backend
  // terminated, a network blip) emits "error". pg-pool listens only while the
  // client is idle and re-emits it on the pool; a client that is checked out
  // between two statements (a transaction, PostGraphile's per-request
  // set_config) has no listener at all, and an unhandled "error" event would
  // crash the process. So every client gets its own listener for its whole
  // life, which also does the logging (once per connection); the client is
  // then unusable, its pending and later queries fail, and the pool discards it
  // on release and opens a fresh connection when one is next needed.
  pool.on("connect", (client) => {
    client.on("error", (error) => log.error({ err: error, pool: name }, "database connection lost; it will be replaced"));
  });
  pool.on("error", () => {
    // Logged by the client's own listener above; handled here so the pool's re-emit cannot crash the process.
  });
  return pool;
}

/**
 * The GraphQL pool's connections are in node-postgres's pipeline mode, for the
 * pipelined transaction prologue (src/db/pipelined-adaptor.ts; whoever makes the
 * preset passes the same choice to it as `pipelinedPg`). `graphqlPipeline: false`
 * gives the stock behaviour (the bench's baseline).
 */
export async function openPools(
  urls: { databaseUrl: string; superuserDatabaseUrl: string },
  log: Logger,
  options: {
    graphqlPipeline?: boolean;
    /** How the user named the GraphQL connection (DATABASE_URL or POSTGRAPHILE_DATABASE_URL). */ databaseUrlVariable?: string;
    /** Each pool's most connections (src/db/connection-budget.ts); default today's 20, 10, 3. */
    sizes?: { graphql: number; superuser: number; credentials: number };
    /** Behind a transaction pooler: no named prepared statements on any pool. */
    unnamedStatements?: boolean;
  } = {},
): Promise<HubPools> {
  const sizes = options.sizes ?? { graphql: DEFAULT_POOL_SIZES.graphql, superuser: DEFAULT_POOL_SIZES.superuser, credentials: CREDENTIAL_POOL_SIZE };
  const unnamed = options.unnamedStatements ?? false;
  const superuser = makePool(urls.superuserDatabaseUrl, "superuser", sizes.superuser, log, false, unnamed);
  const graphql = makePool(urls.databaseUrl, "graphql", sizes.graphql, log, options.graphqlPipeline ?? true, unnamed);
  const credentials = makePool(urls.superuserDatabaseUrl, "credentials", sizes.credentials, log, false, unnamed);
  for (const [pool, variable, url] of [
    [superuser, "SUPERUSER_DATABASE_URL", urls.superuserDatabaseUrl],
    [graphql, options.databaseUrlVariable ?? "DATABASE_URL", urls.databaseUrl],
  ] as const) {
    try {
      await pool.query("select 1");
    } catch (error) {
      await Promise.all([superuser.end(), graphql.end(), credentials.end()]).catch(() => undefined);
      throw connectFailed(variable, url, error);
    }
  }
  return { graphql, superuser, credentials };
}

/**
 * GraphQL requests run as app_postgraphile, so the DATABASE_URL user must be a
 * member of it. Grant it when we hold a superuser connection; otherwise say
 * exactly which statement an administrator has to run.
 */
export async function ensureRoleSwitch(pools: HubPools, log: Logger, databaseUrlVariable = "DATABASE_URL"): Promise<void> {
  const { rows } = await pools.graphql.query<{ who: string; ok: boolean }>(
    "select current_user as who, pg_has_role(current_user, 'app_postgraphile', 'member') as ok",
  );
  const row = rows[0];
  if (!row || row.ok) return;
  const grant = `GRANT app_postgraphile TO ${pg.escapeIdentifier(row.who)};`;
  try {
    await pools.superuser.query(grant);
    log.info({ role: row.who }, `granted app_postgraphile to the ${databaseUrlVariable} user`);
  } catch (error) {
    throw new HubError(
      "HUB_DB_ROLE",
      `The ${databaseUrlVariable} user ${JSON.stringify(row.who)} cannot switch to the role app_postgraphile, and granting it failed (${(error as Error).message}). ` +
        `Run as a database superuser: ${grant}`,
      { cause: error },
    );
  }
}

/** Clients inside a transaction begun by withPgClientTransaction. */
const inTransaction = new WeakSet<pg.ClientBase>();
/** Work to run once the transaction commits, before withPgClientTransaction returns (dbSettleBet's fold). */
const afterCommit = new WeakMap<pg.ClientBase, (() => Promise<void>)[]>();
/** Clients whose rollback failed: their connection cannot be trusted again. */
const rollbackFailed = new WeakSet<pg.ClientBase>();

/**
 * Run fn inside a transaction on a client the caller already holds: begin,
 * commit when fn returns, roll back when it throws, and return what fn
 * returned. Calling it again on the same client before the first call ends is
 * refused: a second `begin` would only warn and its `commit` would end the
 * outer transaction early, so the inner work would not be undone with it.
 */
export async function withPgClientTransaction<T, C extends pg.ClientBase = pg.PoolClient>(pgClient: C, fn: (pgClient: C) => Promise<T>): Promise<T> {
  if (inTransaction.has(pgClient)) {
    throw new HubError(
      "HUB_NESTED_TRANSACTION",
      "withPgClientTransaction was called on a client that is already inside a transaction it began; use that transaction (or a savepoint) instead of nesting.",
    );
  }
  inTransaction.add(pgClient);
  try {
    await pgClient.query("begin");
    const result = await fn(pgClient);
    await pgClient.query("commit").catch((error: unknown) => {
      throw lostInFlight(error) ? new CommitInDoubtError(error) : error;
    });
    const hooks = afterCommit.get(pgClient);
    afterCommit.delete(pgClient);
    for (const hook of hooks ?? []) await hook();
    return result;
  } catch (error) {
    try {
      await pgClient.query("rollback");
    } catch {
      rollbackFailed.add(pgClient);
    }
    throw error;
  } finally {
    inTransaction.delete(pgClient);
    afterCommit.delete(pgClient);
  }
}

/**
 * Have hook run on pgClient right after the transaction withPgClientTransaction
 * has open on it commits (not when it rolls back). False, and nothing kept,
 * when no such transaction is open. The hook must not throw.
 */
export function onCommit(pgClient: object, hook: () => Promise<void>): boolean {
  if (!inTransaction.has(pgClient as pg.ClientBase)) return false;
  const key = pgClient as pg.ClientBase;
  const hooks = afterCommit.get(key);
  if (hooks) hooks.push(hook);
  else afterCommit.set(key, [hook]);
  return true;
}

/**
 * Run fn inside a transaction on a client of pool: commit when it returns,
 * roll back when it throws, and return what fn returned.
 */
export async function withPgPoolTransaction<T>(pool: pg.Pool, fn: (pgClient: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    return await withPgClientTransaction(client, fn);
  } finally {
    // A connection whose rollback failed is unusable: do not return it to the pool.
    client.release(rollbackFailed.has(client) ? new Error("rollback failed") : undefined);
  }
}

/** Whether withPgClientTransaction has a transaction open on this client. */
export const isInClientTransaction = (pgClient: pg.ClientBase): boolean => inTransaction.has(pgClient);
