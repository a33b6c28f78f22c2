/**
 * `hub db reset`: drop and recreate the embedded development database of
 * HUB_DATA_DIR, for a developer who wants to start again from empty tables.
 * Only ever the embedded one: a database given by URL is not this command's
 * to drop, so with DATABASE_URL set (the server would use that one) it is
 * refused unless --force says the embedded one is meant anyway.
 */
import { createInterface } from "node:readline/promises";
import pg from "pg";
import type { HubConfig } from "../../config.js";
import type { OpenedDatabase } from "../../db/database.js";
import { CliFailure } from "./commands.js";
import type { Runnable } from "./grammar.js";

type ResetCommand = Extract<Runnable, { name: "db reset" }>;

/** Refuse, or ask, before anything starts; resolves when the reset may go ahead. */
export async function confirmReset(command: ResetCommand, config: HubConfig): Promise<void> {
  if (config.databaseUrl !== undefined && !command.force) {
    throw new CliFailure(
      `${config.databaseUrlVariable} is set, so your server uses that database, not the embedded one; db reset only drops the embedded development database in ${config.dataDir}. Unset ${config.databaseUrlVariable}, or pass --force to reset the embedded one anyway.`,
    );
  }
  if (command.yes) return;
  if (!process.stdin.isTTY) {
    throw new CliFailure(`db reset drops every table of the development database in ${config.dataDir}; there is no terminal to ask on, so pass --yes to confirm.`);
  }
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(`hub: drop every table and row of the development database in ${config.dataDir}? [y/N] `);
    if (!/^y(es)?$/i.test(answer.trim())) throw new CliFailure("db reset: not confirmed; nothing changed.");
  } finally {
    rl.close();
  }
}

/** Drop the database (closing other sessions on it, such as a running dev server's) and create it empty. */
export async function resetEmbeddedDatabase(db: OpenedDatabase): Promise<void> {
  const url = new URL(db.superuserUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = "/postgres";
  const admin = new pg.Client({ connectionString: url.toString(), application_name: "hub:cli" });
  await admin.connect();
  try {
    const quoted = admin.escapeIdentifier(name);
    await admin.query(`drop database if exists ${quoted} with (force)`);
    await admin.query(`create database ${quoted}`);
  } finally {
    await admin.end().catch(() => undefined);
  }
  process.stderr.write(`hub: reset the development database "${name}" in ${db.embedded?.clusterDir ?? "the embedded Postgres"}; migrations run again at the next start.\n`);
}
