import { createHash } from "node:crypto";
import fsp from "node:fs/promises";
import path from "node:path";
import { HubError } from "../errors.js";

/**
 * How a folder of migrations is read, for the hub's own (src/db/migrations)
 * and the user's (userDatabaseMigrationsPath) alike: files named
 * `NNN-name.sql`, applied in numeric order of the prefix, each read as UTF-8
 * and run exactly as it is on disk. The SHA-256 of that text is recorded when
 * it is applied, so a file must never change once released, not even its
 * white space. A user's file whose name does not start with a digit
 * (skip-002-coinflip.sql) is not a migration: it is skipped, and said so. One
 * that starts with a digit but does not fit the pattern (1abc.sql) is refused.
 *
 * One exception to "never change": an edit that alters nothing a database
 * does (a comment) can declare the checksum of the text it replaces, on a line
 * of its own, `-- hub:replaces-checksum <sha256 in hex>`. A database that
 * applied that text then records the new one instead of refusing to start;
 * one that applied anything else still refuses.
 */
export interface Migration {
  kind: "core" | "user";
  /** As recorded in hub_secret.migration: the file name for the user's, without `.sql` for the hub's. */
  name: string;
  sql: string;
  checksum: string;
  /** Checksums of earlier texts of this file it declares it replaces (`-- hub:replaces-checksum`). */
  replaces: string[];
  /** Where it came from, for error messages. */
  source: string;
}

export const migrationChecksum = (sql: string) => createHash("sha256").update(sql).digest("hex");

const MIGRATION_FILE = /^(\d+)[-_.].*\.sql$|^(\d+)\.sql$/;

const REPLACES = /^--[ \t]*hub:replaces-checksum\b(.*)$/gm;

/** The checksums a file's `-- hub:replaces-checksum` lines name; a malformed one stops start-up. */
function replacedChecksums(sql: string, source: string): string[] {
  const found: string[] = [];
  for (const [line, rest] of sql.matchAll(REPLACES)) {
    const checksum = rest!.trim();
    if (!/^[0-9a-f]{64}$/.test(checksum)) {
      throw new HubError(
        "HUB_MIGRATION_FAILED",
        `Migration ${source}: ${JSON.stringify(line.trim())} does not name a checksum: expected "-- hub:replaces-checksum " followed by 64 lowercase hex digits (the SHA-256 of the text it replaces, as the database recorded it).`,
      );
    }
    found.push(checksum);
  }
  return found;
}

/**
 * The migrations of one folder, in numeric order of the prefix. Anything
 * ambiguous stops start-up rather than guessing an order.
 * `folder` names the folder in messages (the setting that gave it).
 */
export async function readMigrationFolder(
  dir: string,
  kind: Migration["kind"],
  folder: string,
  /** Given: a file whose name does not start with a digit is passed here and left out (a disabled example). Not given: it stops start-up. */
  onUnnumbered?: (file: string) => void,
): Promise<Migration[]> {
  let entries: string[];
  try {
    entries = await fsp.readdir(dir);
  } catch (error) {
    throw new HubError(
      "HUB_MIGRATION_NAME",
      `${folder} ${JSON.stringify(dir)} cannot be read (${(error as Error).message}); expected a directory of NNN-name.sql files.`,
    );
  }
  const files = entries.filter((f) => f.endsWith(".sql")).sort();
  const byNumber = new Map<number, string>();
  const migrations: (Migration & { order: number })[] = [];
  for (const file of files) {
    if (onUnnumbered && !/^\d/.test(file)) {
      onUnnumbered(file);
      continue;
    }
    const match = MIGRATION_FILE.exec(file);
    if (!match) {
      throw new HubError(
        "HUB_MIGRATION_NAME",
        `Migration file ${JSON.stringify(file)} in ${dir} is not named like 001-create-tables.sql (a numeric prefix, then "-", "_" or "." and a name).`,
      );
    }
    const order = Number(match[1] ?? match[2]);
    const clash = byNumber.get(order);
    if (clash !== undefined) {
      throw new HubError(
        "HUB_MIGRATION_NAME",
        `Migration files ${JSON.stringify(clash)} and ${JSON.stringify(file)} in ${dir} share the numeric prefix ${order}; each number must be used once so the order is unambiguous.`,
      );
    }
    byNumber.set(order, file);
    const bytes = await fsp.readFile(path.join(dir, file));
    let sql: string;
    try {
      sql = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch {
      throw new HubError("HUB_MIGRATION_FAILED", `Migration ${JSON.stringify(file)} in ${dir} is not valid UTF-8; save it as UTF-8.`);
    }
    const name = kind === "core" ? file.slice(0, -".sql".length) : file;
    const source = kind === "core" ? `core migration ${name}` : path.join(dir, file);
    migrations.push({ kind, name, sql, checksum: migrationChecksum(sql), replaces: replacedChecksums(sql, source), source, order });
  }
  return migrations.sort((a, b) => a.order - b.order).map(({ order: _order, ...m }) => m);
}
