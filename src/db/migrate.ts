import type pg from "pg";
import { HubError } from "../errors.js";
import type { Logger } from "../logger.js";
import { readCoreMigrations } from "./core-migrations.js";
import { readMigrationFolder, type Migration } from "./migration-files.js";

/** Any constant works; it only has to be the same for every hub on this database. */
const MIGRATION_LOCK_KEY = 7_321_004_117;

/** The user's migrations (userDatabaseMigrationsPath), read like the hub's own. */
export function readUserMigrations(dir: string): Promise<Migration[]> {
  return readMigrationFolder(dir, "user", "userDatabaseMigrationsPath");
}

function lineOf(sql: string, position: string | undefined): string {
  const pos = Number(position);
  if (!Number.isInteger(pos) || pos <= 0) return "";
  return ` (line ${sql.slice(0, pos).split("\n").length})`;
}

/**
 * Bring the database up to date: core migrations, then the user's. One hub at a
 * time holds an advisory lock, so instances starting together apply each
 * migration exactly once. Each migration runs in its own transaction with its
 * record, so a failure leaves nothing of itself behind.
 */
export async function migrate(pool: pg.Pool, options: { userMigrationsPath?: string | undefined; log: Logger }): Promise<{ applied: string[] }> {
  const { log } = options;
  const user = options.userMigrationsPath ? await readUserMigrations(options.userMigrationsPath) : [];
  const all: Migration[] = [...(await readCoreMigrations()), ...user];
  const client = await pool.connect();
  const applied: string[] = [];
  try {
    await client.query("select pg_advisory_lock($1)", [MIGRATION_LOCK_KEY]);
    try {
      await client.query(`
        create schema if not exists hub_secret;
        create table if not exists hub_secret.migration (
          kind text not null,
          name text not null,
          checksum text not null,
          applied_at timestamptz not null default now(),
          primary key (kind, name)
        );`);
      const { rows } = await client.query<{ kind: string; name: string; checksum: string }>(
        "select kind, name, checksum from hub_secret.migration",
      );
      const done = new Map(rows.map((r) => [`${r.kind}/${r.name}`, r.checksum]));
      for (const m of all) {
        const previous = done.get(`${m.kind}/${m.name}`);
        if (previous !== undefined) {
          if (m.kind === "user" && previous !== m.checksum) {
            throw new HubError(
              "HUB_MIGRATION_CHANGED",
              `Migration ${JSON.stringify(m.name)} (${m.source}) was edited after it was applied (checksum ${previous.slice(0, 12)}… in the database, ${m.checksum.slice(0, 12)}… on disk). ` +
                `Applied migrations are never re-run: restore the file and put the change in a new migration.`,
            );
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
  } finally {
    client.release();
  }
  return { applied };
}
