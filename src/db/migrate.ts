import pg from "pg";
import { HubError, invalidArgument } from "../errors.js";
import type { Logger } from "../logger.js";
import { isInClientTransaction } from "./pools.js";
import { BASELINE_MIGRATION, PRE_BASELINE_MIGRATIONS, readCoreMigrations } from "./core-migrations.js";
import { readMigrationFolder, type Migration } from "./migration-files.js";
import { queryFile } from "./query-files.js";
import { connectFailed } from "./connection-errors.js";
import { endPool, newPool } from "./database.js";

const MIGRATION_TABLE = queryFile("migration-table");

/** Any constant works; it only has to be the same for every hub on this database. */
const MIGRATION_LOCK_KEY = 7_321_004_117;

/**
 * The user's migrations (userDatabaseMigrationsPath), read like the hub's own;
 * a file whose name does not start with a number (a disabled example such as
 * skip-002-coinflip.sql) is left out, with one line naming it.
 */
export function readUserMigrations(dir: string, log: Logger): Promise<Migration[]> {
  return readMigrationFolder(dir, "user", "userDatabaseMigrationsPath", (file) =>
    log.info({ migration: file }, "skipped a migration file whose name does not start with a number"),
  );
}

function lineOf(sql: string, position: string | undefined): string {
  const pos = Number(position);
  if (!Number.isInteger(pos) || pos <= 0) return "";
  return ` (line ${sql.slice(0, pos).split("\n").length})`;
}

/**
 * A database migrated before the baseline: with all of 0001 to 0029 recorded
 * it has the baseline's schema already, so the baseline is recorded as
 * applied (the old records stay, as its history). With only some, it has a
 * schema no file here completes: refused, naming what is missing.
 */
async function recognisePreBaseline(client: pg.ClientBase, done: Map<string, string>, core: Migration[], log: Logger): Promise<void> {
  const baseline = core.find((m) => m.name === BASELINE_MIGRATION);
  if (!baseline || done.has(`core/${baseline.name}`)) return;
  const recorded = PRE_BASELINE_MIGRATIONS.filter((name) => done.has(`core/${name}`));
  if (recorded.length === 0) return;
  if (recorded.length < PRE_BASELINE_MIGRATIONS.length) {
    const missing = PRE_BASELINE_MIGRATIONS.filter((name) => !done.has(`core/${name}`));
    throw new HubError(
      "HUB_MIGRATION_PRE_BASELINE",
      `This database has ${recorded.length} of the ${PRE_BASELINE_MIGRATIONS.length} core migrations that ${BASELINE_MIGRATION} replaces (missing: ${missing.join(", ")}), ` +
        `so its schema is one this version cannot finish. Start it once with a hub from before the baseline (@hubpkg/hub whose src/db/migrations ends at 0029-instances.sql), ` +
        `which applies the missing ones, then start this version: it recognises a database with all of 0001 to 0029 applied.`,
    );
  }
  await client.query("insert into hub_secret.migration (kind, name, checksum) values ('core', $1, $2)", [baseline.name, baseline.checksum]);
  done.set(`core/${baseline.name}`, baseline.checksum);
  log.info({ migration: baseline.name }, "the database has core migrations 0001 to 0029, whose schema the baseline is: recorded it as applied without running it");
}

/**
 * Bring the database up to date: core migrations, then the user's. One hub at a
 * time holds an advisory lock, so instances starting together apply each
 * migration exactly once. Each migration runs in its own transaction with its
 * record, so a failure leaves nothing of itself behind.
 */
export async function migrate(pool: pg.Pool, options: { userMigrationsPath?: string | undefined; log: Logger }): Promise<{ applied: string[] }> {
  const client = await pool.connect();
  try {
    return await migrateOnClient(client, options);
  } finally {
    client.release();
  }
}

/**
 * `runMigrations` of `@hubpkg/hub` (src/exports/migrate.ts): the same, on a client the caller holds (a
 * reset script drops the schemas, then runs this). The client must not be
 * inside a transaction: each migration commits on its own.
 */
export async function runMigrations(
  options: { pgClient: pg.ClientBase; userDatabaseMigrationsPath?: string | undefined },
  /** Where skipped files are named. */
  log: Logger,
): Promise<{ applied: string[] }> {
  const { pgClient, userDatabaseMigrationsPath } = options ?? {};
  if (!pgClient || typeof (pgClient as { query?: unknown }).query !== "function") {
    throw invalidArgument("runMigrations: pgClient must be a connected pg client (a pg.Client, or pool.connect()'s client).");
  }
  if (isInClientTransaction(pgClient)) {
    throw invalidArgument("runMigrations: pgClient is inside a withPgClientTransaction transaction; each migration commits on its own, so run it outside.");
  }
  return migrateOnClient(pgClient, { userMigrationsPath: userDatabaseMigrationsPath, log });
}

/**
 * The session-level advisory lock is taken and released on this one client;
 * Postgres counts a session's locks, so a client that already held it keeps it
 * after the unlock here.
 */
async function migrateOnClient(client: pg.ClientBase, options: { userMigrationsPath?: string | undefined; log: Logger }): Promise<{ applied: string[] }> {
  const { log } = options;
  const user = options.userMigrationsPath ? await readUserMigrations(options.userMigrationsPath, log) : [];
  const core = await readCoreMigrations();
  const all: Migration[] = [...core, ...user];
  const applied: string[] = [];
  await client.query("select pg_advisory_lock($1)", [MIGRATION_LOCK_KEY]);
  try {
    await client.query(MIGRATION_TABLE);
    const { rows } = await client.query<{ kind: string; name: string; checksum: string }>(
      "select kind, name, checksum from hub_secret.migration",
    );
    const done = new Map(rows.map((r) => [`${r.kind}/${r.name}`, r.checksum]));
    await recognisePreBaseline(client, done, core, log);
    for (const m of all) {
      const previous = done.get(`${m.kind}/${m.name}`);
      if (previous !== undefined) {
        if (m.kind === "user" && previous !== m.checksum) {
          if (!m.replaces.includes(previous)) {
            throw new HubError(
              "HUB_MIGRATION_CHANGED",
              `Migration ${JSON.stringify(m.name)} (${m.source}) was edited after it was applied (checksum ${previous.slice(0, 12)}… in the database, ${m.checksum.slice(0, 12)}… on disk). ` +
                `Applied migrations are never re-run: restore the file and put the change in a new migration ` +
                `(an edit that changes nothing the database does, such as a comment, may instead declare the text it replaces: a line "-- hub:replaces-checksum ${previous}").`,
            );
          }
          await client.query("update hub_secret.migration set checksum = $3 where kind = $1 and name = $2", [m.kind, m.name, m.checksum]);
          log.info({ migration: m.name, from: previous, to: m.checksum }, "migration edited without effect, as its hub:replaces-checksum line declares: its new checksum recorded");
        }
        continue;
      }
      try {
        await client.query("begin");
        await client.query(m.sql);
        await client.query("insert into hub_secret.migration (kind, name, checksum) values ($1, $2, $3)", [m.kind, m.name, m.checksum]);
        await client.query("commit");
      } catch (error) {
        await client.query("rollback").catch(() => undefined);
        const pgError = error as { message?: string; position?: string; code?: string };
        throw new HubError(
          "HUB_MIGRATION_FAILED",
          `Migration ${JSON.stringify(m.name)} (${m.source}) failed${lineOf(m.sql, pgError.position)}: ${pgError.message ?? String(error)}` +
            (pgError.code ? ` [SQLSTATE ${pgError.code}]` : "") +
            ". Nothing of it was applied.",
          { cause: error },
        );
      }
      applied.push(m.name);
      log.info({ migration: m.name, kind: m.kind }, "applied migration");
    }
    // Only when we were given the folder: the CLI migrates without knowing it.
    for (const [key] of options.userMigrationsPath ? done : []) {
      if (key.startsWith("user/") && !user.some((m) => `user/${m.name}` === key)) {
        log.warn({ migration: key.slice(5) }, "a migration recorded as applied has no file in userDatabaseMigrationsPath");
      }
    }
  } finally {
    await client.query("select pg_advisory_unlock($1)", [MIGRATION_LOCK_KEY]).catch(() => undefined);
  }
  return { applied };
}

/**
 * migrate() on a connection of its own to `url` (DIRECT_DATABASE_URL), closed
 * once done: the advisory lock is a session's, which a transaction pooler
 * would hand to another client between two statements.
 */
export async function migrateDirect(url: string, options: { userMigrationsPath?: string | undefined; log: Logger }): Promise<{ applied: string[] }> {
  const pool = newPool({ connectionString: url, max: 1, application_name: "hub:migrate", connectionTimeoutMillis: 10_000 });
  pool.on("error", () => undefined); // the query that used a lost connection reports it
  try {
    await pool.query("select 1").catch((error: unknown) => {
      throw connectFailed("DIRECT_DATABASE_URL", url, error);
    });
    return await migrate(pool, options);
  } finally {
    await endPool(pool);
  }
}
