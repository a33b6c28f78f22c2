/**
 * `hub`: issue credentials against the hub's database (README: Credentials).
 *
 * The credential is the last line of stdout and nothing else is written there,
 * so `KEY=$(hub api-key create)` works; logs and messages go to stderr. Exit
 * codes: 0 done, 1 failed at run time, 2 the command line was wrong.
 */
import "./prelude.js";
import { parseArgs } from "node:util";
import pg from "pg";
import { readConfig, redactUrl, type LogLevel } from "./config.js";
import { createApiKey, createSession, ensurePlayer, DEFAULT_EXPERIENCE, PLAYGROUND_CASINO } from "./credentials.js";
import { endPool, openDatabase, type OpenedDatabase } from "./db/database.js";
import { migrate } from "./db/migrate.js";
import { describeValue, HubError } from "./errors.js";
import { createLogger, type Logger } from "./logger.js";

const USAGE = `Usage: hub <command> [options]

Commands:
  api-key create              Create an operator API key.
                              Send it as "Authorization: apikey:<key>".
  session create --uname NAME [--casino NAME] [--experience NAME]
                              Create a player session, creating the casino
                              (default "${PLAYGROUND_CASINO}"), the user and the experience
                              (default "${DEFAULT_EXPERIENCE}") when they do not exist.
                              Send it as "Authorization: session:<token>".

Options:
  -h, --help                  Show this help.

The credential is printed once, alone on the last line of standard output;
the database keeps only its SHA-256 digest. Logs go to standard error.

Database: DATABASE_URL and SUPERUSER_DATABASE_URL when set; otherwise the
embedded Postgres in HUB_DATA_DIR (default ./.hub), used alongside a running
hub or started for the duration of the command.
`;

type Command =
  | { name: "help" }
  | { name: "none" }
  | { name: "api-key create" }
  | { name: "session create"; uname: string; casino: string | undefined; experience: string | undefined };

const COMMANDS: readonly string[] = ["api-key create", "session create"] satisfies Command["name"][];

const usage = (message: string) => new HubError("HUB_CLI_USAGE", message);

/** One line, whatever the source of the message. */
const oneLine = (text: string) => text.replace(/\s*\n\s*/g, " ").trim();

function nameOption(option: string, values: string[] | undefined): string | undefined {
  if (values === undefined) return undefined;
  if (values.length > 1) {
    throw usage(`--${option} was given ${values.length} times (${values.map((v) => describeValue(v)).join(", ")}); expected it once.`);
  }
  const value = values[0]!;
  // The database accepts 1 to 200 characters; control characters would only cause trouble later.
  if (value.length < 1 || value.length > 200 || /[\u0000-\u001f\u007f]/.test(value)) {
    throw usage(`--${option} ${describeValue(value)} (${value.length} characters) is invalid: expected 1 to 200 characters, without control characters.`);
  }
  return value;
}

function parseCommand(argv: string[]): Command {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        help: { type: "boolean", short: "h" },
        uname: { type: "string", multiple: true },
        casino: { type: "string", multiple: true },
        experience: { type: "string", multiple: true },
      },
    });
  } catch (error) {
    const { code, message } = error as { code?: string; message: string };
    const option = /'(-[^' ]*)/.exec(message)?.[1];
    if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" && option) {
      throw usage(`unknown option ${describeValue(option)}: expected --uname, --casino, --experience or --help (hub --help).`);
    }
    if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE" && option) {
      throw usage(`${option} needs a value, as in ${option}=NAME; received none.`);
    }
    throw usage(`${oneLine(message)} (hub --help).`);
  }
  const { values, positionals } = parsed;
  if (values.help) return { name: "help" };
  if (positionals.length === 0) return { name: "none" };

  const name = positionals.slice(0, 2).join(" ");
  if (!COMMANDS.includes(name)) {
    throw usage(`unknown command ${describeValue(name)}: expected ${COMMANDS.map((c) => `"${c}"`).join(" or ")} (hub --help).`);
  }
  if (positionals.length > 2) {
    throw usage(`unexpected argument ${describeValue(positionals[2])} after "${name}": it takes no further arguments${name === "session create" ? " (names go in --uname, --casino, --experience)" : ""}.`);
  }
  if (name === "api-key create") {
    const stray = (["uname", "casino", "experience"] as const).find((o) => values[o] !== undefined);
    if (stray) throw usage(`--${stray} is not an option of "api-key create"; it takes none.`);
    return { name: "api-key create" };
  }
  const uname = nameOption("uname", values.uname);
  if (uname === undefined) {
    throw usage(`"session create" needs --uname NAME (the player's user name); received no --uname.`);
  }
  return { name: "session create", uname, casino: nameOption("casino", values.casino), experience: nameOption("experience", values.experience) };
}

/** The credential must be the only thing on stdout, so logs go to stderr. */
function cliLogger(level: LogLevel): Logger {
  return createLogger({ level, pretty: false, fd: 2 });
}

function errorLine(error: unknown): string {
  if (error instanceof HubError) return `hub: ${error.message} [${error.code}]`;
  const e = error as { message?: string; code?: string } | undefined;
  const sqlstate = typeof e?.code === "string" && /^[0-9A-Z]{5}$/.test(e.code) ? ` [SQLSTATE ${e.code}]` : "";
  return `hub: ${e?.message ?? String(error)}${sqlstate}`;
}

async function connect(url: string, log: Logger): Promise<pg.Pool> {
  const pool = new pg.Pool({ connectionString: url, max: 2, application_name: "hub:cli", connectionTimeoutMillis: 10_000 });
  pool.on("error", (error) => log.warn({ err: error }, "idle database connection lost"));
  try {
    await pool.query("select 1");
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw new HubError("HUB_DB_CONNECT", `Cannot connect to the database (${redactUrl(url)}): ${(error as Error).message}`, { cause: error });
  }
  return pool;
}

async function run(command: Exclude<Command, { name: "help" | "none" }>, pool: pg.Pool): Promise<void> {
  if (command.name === "api-key create") {
    const { key, id } = await createApiKey(pool);
    process.stderr.write(`hub: created API key ${id}. It is shown once, on the next line; send it as "Authorization: apikey:<key>".\n`);
    process.stdout.write(`${key}\n`);
    return;
  }
  const { casino, user, experience } = await ensurePlayer(pool, {
    uname: command.uname,
    casinoName: command.casino,
    experienceName: command.experience,
  });
  const { token, sessionId, expiredAt } = await createSession(pool, { userId: user.id, casinoId: casino.id, experienceId: experience.id });
  process.stderr.write(
    `hub: created session ${sessionId} for user ${JSON.stringify(user.uname)} (${user.id}) in casino ${JSON.stringify(casino.name)}, ` +
      `experience ${JSON.stringify(experience.name)}, expiring ${expiredAt.toISOString()}. ` +
      `It is shown once, on the next line; send it as "Authorization: session:<token>".\n`,
  );
  process.stdout.write(`${token}\n`);
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
    process.stderr.write(`hub: no command given: expected ${COMMANDS.map((c) => `"${c}"`).join(" or ")}.\n`);
    return 2;
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
    opening = openDatabase(config, log);
    const db = await opening;
    if (interrupted) return 1;
    pool = await connect(db.superuserUrl, log);
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
