import type pg from "pg";
import { runMigrations as runMigrationsWithLog } from "../db/migrate.js";
import { logger } from "./logger.js";

/**
 * `runMigrations` of `@hubpkg/hub`: the hub's migrations, then the user's, on
 * a client the caller holds (src/db/migrate.ts); skipped files are named in
 * the `logger` façade's log (the current server's).
 */
export function runMigrations(options: { pgClient: pg.ClientBase; userDatabaseMigrationsPath?: string | undefined }): Promise<{ applied: string[] }> {
  return runMigrationsWithLog(options, logger);
}
