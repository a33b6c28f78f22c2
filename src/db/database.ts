import pg from "pg";
import { HubError } from "../errors.js";
import type { HubConfig } from "../config.js";
import type { Logger } from "../logger.js";
import { startEmbeddedPostgres, type EmbeddedDatabase } from "./embedded.js";
import { connectionLoss } from "./error-class.js";

/** Where the hub's database is, however it was configured. */
export interface OpenedDatabase {
  /** Migrations, superuserPool, identity lookups. */
  superuserUrl: string;
  /** GraphQL requests (switch to app_postgraphile per request). */
  databaseUrl: string;
  /** Set when no URL was configured and the embedded Postgres is used. */
  embedded: EmbeddedDatabase | undefined;
  /** Stop the embedded Postgres if this process started it; otherwise nothing. End your pools first. */
  close(): Promise<void>;
}

/**
 * DATABASE_URL and SUPERUSER_DATABASE_URL when set (readConfig guarantees
 * both or neither); otherwise the embedded Postgres in config.dataDir, started
 * here or attached to when another process (a running hub, a CLI) has it up.
 */
export async function openDatabase(
  config: Pick<HubConfig, "databaseUrl" | "superuserDatabaseUrl" | "dataDir" | "nodeEnv">,
  log: Logger,
  onSpawned?: () => void,
): Promise<OpenedDatabase> {
  if (config.databaseUrl && config.superuserDatabaseUrl) {
    return {
      superuserUrl: config.superuserDatabaseUrl,
      databaseUrl: config.databaseUrl,
      embedded: undefined,
      close: async () => undefined,
    };
  }
  const embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, log, fastInit: config.nodeEnv === "test", ...(onSpawned ? { onSpawned } : {}) });
  return {
    superuserUrl: embedded.superuserUrl,
    databaseUrl: embedded.authenticatorUrl,
    embedded,
    close: () => embedded.stop(),
  };
}

/** The connections of each pool made by newPool that are open: connected and not yet closed. */
const openConnections = new WeakMap<pg.Pool, { open: number }>();

/**
 * A pg.Pool whose open connections endPool can wait for. pg-pool emits
 * "connect" for each connection that succeeds and "remove" once that
 * connection is closed; one that fails while connecting emits neither.
 */
export function newPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config);
  const connections = { open: 0 };
  openConnections.set(pool, connections);
  pool.on("connect", () => connections.open++);
  pool.on("remove", () => connections.open--);
  return pool;
}

/**
 * pool.end() and wait until every connection is really closed. pg-pool's end()
 * resolves once it has *asked* its clients to close; stopping Postgres right
 * after would terminate backends still connected, whose clients then emit
 * "terminating connection due to administrator command" errors. It counts the
 * connections that opened, not pool.totalCount: one still being made that then
 * fails is never removed, and waiting for it would leave the process nothing
 * but this (unref'd) timer, so a failing start-up awaiting it would end as an
 * unsettled top-level await (exit 13) instead of with its message. A pool not
 * made by newPool is ended without waiting.
 */
export async function endPool(pool: pg.Pool, timeoutMs = 5000): Promise<void> {
  const connections = openConnections.get(pool);
  const closed = new Promise<void>((resolve) => {
    if (!connections || connections.open <= 0) return resolve();
    // Listeners run in order: newPool's count has already gone down.
    const onRemove = () => {
      if (connections.open > 0) return;
      pool.off("remove", onRemove);
      resolve();
    };
    pool.on("remove", onRemove);
    setTimeout(resolve, timeoutMs).unref();
  });
  await pool.end();
  await closed;
}

type DatabaseConfig = Pick<HubConfig, "databaseUrl" | "superuserDatabaseUrl" | "dataDir" | "nodeEnv">;

/** An embedded Postgres started ahead of the server that will use it (prewarmDatabase). */
export interface PrewarmedDatabase {
  /** Resolves once Postgres (or initdb) runs as its own process. */
  spawned: Promise<void>;
  /** The database, for a server whose configuration asks for this data dir; undefined otherwise. Once only. */
  adopt(config: DatabaseConfig): Promise<OpenedDatabase> | undefined;
  /** Stop it unless it was adopted (e.g. the options chose another data dir, or the start failed first). */
  discard(): Promise<void>;
}

/**
 * Start the embedded Postgres now, before the heavy modules (graphql,
 * PostGraphile, Fastify, Express: a large part of the start-up) are imported: Postgres
 * boots in its own process meanwhile, and the server given the handle adopts
 * it. `node dist/server.js` calls this first thing. Undefined when the
 * configuration names a database by URL.
 *
 * Await `spawned` before the heavy imports. The steps up to the spawn are
 * asynchronous and the imports block the event loop, so otherwise Postgres
 * would be spawned only after them and the two waits would add up instead of
 * overlapping (bench/README.md has the timings).
 */
export function prewarmDatabase(config: DatabaseConfig, log: Logger): PrewarmedDatabase | undefined {
  if (config.databaseUrl) return undefined;
  let spawnedNow!: () => void;
  const spawned = new Promise<void>((resolve) => (spawnedNow = resolve));
  let pending: Promise<OpenedDatabase> | undefined = openDatabase(config, log, spawnedNow);
  pending.then(spawnedNow, spawnedNow); // an error is reported when adopted
  const dataDir = config.dataDir;
  return {
    spawned,
    adopt(wanted) {
      if (!pending || wanted.databaseUrl || wanted.dataDir !== dataDir) return undefined;
      const adopted = pending;
      pending = undefined;
      return adopted;
    },
    async discard() {
      const left = pending;
      pending = undefined;
      await left?.then((db) => db.close(), () => undefined);
    },
  };
}

/**
 * What a failed start-up reports: a HubError as it is; the database going
 * away mid-start (a shared embedded Postgres stopped by its owner, a server
 * restarted) as one line with a code, instead of a driver error and its stack.
 */
export function startupError(error: unknown, db: OpenedDatabase | undefined): unknown {
  // A pool that cannot connect names its environment variable: not what an embedded database needs.
  if (error instanceof HubError && !(db?.embedded && error.code === "HUB_DB_CONNECT")) return error;
  const lost = connectionLoss(error);
  if (!lost) return error;
  const where = db?.embedded ? `the embedded Postgres (127.0.0.1:${db.embedded.port})` : "the database";
  const hint = db?.embedded
    ? "; another process using the same data dir probably stopped it. Start the server again"
    : "; check that it is up and start the server again";
  return new HubError("HUB_DB_CONNECT", `Lost ${where} during start-up (${lost.message.split("\n")[0]})${hint}.`, { cause: error });
}

/**
 * Run a start-up step again while the embedded Postgres is being started
 * again under us (the process that shared it with us stopped it; this one
 * takes it over within about a second). Other errors, and any error with a
 * database given by URL, are thrown at once.
 */
export async function retryWhileEmbeddedRestarts<T>(db: OpenedDatabase, step: () => Promise<T>, withinMs = 5000): Promise<T> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    try {
      return await step();
    } catch (error) {
      if (!db.embedded || Date.now() > deadline || !connectionLoss(error)) throw error;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}
