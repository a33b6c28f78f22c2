/**
 * `hub`: administer the hub's database from a shell (README: Command line):
 * issue, list and revoke credentials, register casinos, credit balances.
 *
 * The result is the last line of stdout (a credential, an id, a balance, or
 * the listing) and nothing else is written there, so `KEY=$(hub api-key create)`
 * works; messages and logs go to stderr, each error on one line. Exit codes:
 * 0 done, 1 failed at run time, 2 the command line was wrong. The grammar is
 * in ./cli/grammar.ts, what each command does in ./cli/commands.ts; this is
 * the process around them: configuration, database, signals, exit code.
 */
import "./graphile-env.js";
import "../prelude.js";
import pg from "pg";
import { readConfig, redactUrl, type LogLevel } from "../config.js";
import { endPool, newPool, openDatabase, type OpenedDatabase } from "../db/database.js";
import { migrate } from "../db/migrate.js";
import { HubError } from "../errors.js";
import { createLogger, type Logger } from "../logger.js";
import { CliFailure, run, runInit } from "./cli/commands.js";
import { confirmReset, resetEmbeddedDatabase } from "./cli/db-reset.js";
import { commandList, parseCommand, USAGE, type Command } from "./cli/grammar.js";

/** One line, whatever the source of the message. */
const oneLine = (text: string) => text.replace(/\s*\n\s*/g, " ").trim();

/** The credential must be the only thing on stdout, so logs go to stderr. */
function cliLogger(level: LogLevel): Logger {
  return createLogger({ level, pretty: false, fd: 2 });
}

function errorLine(error: unknown): string {
  // A CliFailure is a HubError whose message says everything: printed without its code.
  if (error instanceof CliFailure) return `hub: ${oneLine(error.message)}`;
  if (error instanceof HubError) return `hub: ${oneLine(error.message)} [${error.code}]`;
  const e = error as { message?: string; code?: string } | undefined;
  const sqlstate = typeof e?.code === "string" && /^[0-9A-Z]{5}$/.test(e.code) ? ` [SQLSTATE ${e.code}]` : "";
  return `hub: ${oneLine(e?.message ?? String(error))}${sqlstate}`;
}

async function connect(url: string, log: Logger): Promise<pg.Pool> {
  const pool = newPool({ connectionString: url, max: 2, application_name: "hub:cli", connectionTimeoutMillis: 10_000 });
  pool.on("error", (error) => log.warn({ err: error }, "idle database connection lost"));
  try {
    await pool.query("select 1");
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw new HubError("HUB_DB_CONNECT", `Cannot connect to the database (${redactUrl(url)}): ${(error as Error).message}`, { cause: error });
  }
  return pool;
}

async function main(argv: string[]): Promise<number> {
  let command: Command;
  try {
    command = parseCommand(argv);
  } catch (error) {
    process.stderr.write(`${errorLine(error)}\n`);
    return 2;
  }
  if (command.name === "help" || command.name === "none") {
    process.stdout.write(USAGE);
    if (command.name === "help") return 0;
    process.stderr.write(`hub: no command given: expected ${commandList()}.\n`);
    return 2;
  }
  if (command.name === "init") {
    try {
      runInit(command);
      return 0;
    } catch (error) {
      process.stderr.write(`${errorLine(error)}\n`);
      return 1;
    }
  }

  let opening: Promise<OpenedDatabase> | undefined;
  let pool: pg.Pool | undefined;
  let interrupted: NodeJS.Signals | undefined;
  const release = async () => {
    const p = pool;
    pool = undefined;
    if (p) await endPool(p).catch(() => undefined);
    const db = await opening?.catch(() => undefined);
    opening = undefined;
    await db?.close();
  };
  // A Ctrl-C must not leave behind a Postgres this command started: it runs in
  // its own process group, so the terminal's signal does not reach it. Even
  // mid-start, release() waits for it to be up, then stops it.
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) process.exit(1);
    interrupted = signal;
    process.stderr.write(`hub: received ${signal}, stopping\n`);
    void release()
      .catch(() => undefined)
      .finally(() => process.exit(signal === "SIGINT" ? 130 : 143));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);

  try {
    const config = readConfig();
    const log = cliLogger(process.env.LOG_LEVEL ? config.logLevel : "warn");
    const reset = command.name === "db reset";
    if (command.name === "db reset") await confirmReset(command, config);
    // db reset: always the embedded database of the data dir, whatever URL is set.
    opening = openDatabase(reset ? { ...config, databaseUrl: undefined, superuserDatabaseUrl: undefined } : config, log);
    const db = await opening;
    if (interrupted) return 1;
    if (command.name === "db reset") {
      await resetEmbeddedDatabase(db);
      return 0;
    }
    // Straight to Postgres when a pooler is in the way: migrate() holds a session's advisory lock.
    pool = await connect(config.directDatabaseUrl ?? db.superuserUrl, log);
    // The CLI does not know the application's userDatabaseMigrationsPath, so
    // migrate() would warn that every applied user migration has no file; only
    // an explicit LOG_LEVEL shows its messages.
    await migrate(pool, { log: log.child({ step: "migrate" }, { level: process.env.LOG_LEVEL ? config.logLevel : "error" }) });
    if (interrupted) return 1;
    await run(command, pool);
    return 0;
  } catch (error) {
    if (!interrupted) process.stderr.write(`${errorLine(error)}\n`);
    return 1;
  } finally {
    // After a signal, its handler releases everything and exits.
    if (!interrupted) {
      await release().catch((error: unknown) => process.stderr.write(`${errorLine(error)}\n`));
      process.removeListener("SIGINT", onSignal);
      process.removeListener("SIGTERM", onSignal);
    }
  }
}

process.exitCode = await main(process.argv.slice(2));
