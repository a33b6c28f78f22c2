/**
 * `hub`: administer the hub's database from a shell (README: Command line):
 * issue, list and revoke credentials, register casinos, credit balances.
 *
 * The result is the last line of stdout (a credential, an id, a balance, or
 * the listing) and nothing else is written there, so `KEY=$(hub api-key create)`
 * works; messages and logs go to stderr, each error on one line. Exit codes:
 * 0 done, 1 failed at run time, 2 the command line was wrong.
 */
import "./prelude.js";
import fsp from "node:fs/promises";
import os from "node:os";
import { parseArgs } from "node:util";
import pg from "pg";
import { readConfig, redactUrl, type LogLevel } from "./config.js";
import { createApiKey, createSession, digest, ensurePlayer, DEFAULT_EXPERIENCE, PLAYGROUND_CASINO } from "./credentials.js";
import { endPool, openDatabase, type OpenedDatabase } from "./db/database.js";
import { migrate } from "./db/migrate.js";
import { withPgPoolTransaction } from "./db/pools.js";
import { validatePublicKey } from "./casino-token.js";
import type { DbApiKey, DbBalance, DbCasino, DbExperience, DbUser } from "./db/types.js";
import { describeValue, HubError } from "./errors.js";
import { createLogger, type Logger } from "./logger.js";

const USAGE = `Usage: hub <command> [options]

Commands:
  api-key create              Create an operator API key.
                              Send it as "Authorization: apikey:<key>".
  api-key list [--json]       List API keys: id, created_at, last_used_at,
                              revoked_at (never the keys themselves).
  api-key revoke --id UUID    Revoke an API key; requests with it are refused
                              within 1 s.
  session create --uname NAME [--casino NAME] [--experience NAME]
                              Create a player session, creating the casino
                              (default "${PLAYGROUND_CASINO}"), the user and the experience
                              (default "${DEFAULT_EXPERIENCE}") when they do not exist.
                              Send it as "Authorization: session:<token>".
  session revoke --id UUID | --token TOKEN
                              Revoke a session, known by its id or its token.
  casino add --name NAME [--base-url URL] [--jwt-public-key-file PATH | --jwks-url URL]
             [--jwt-issuer TEXT] [--jwt-audience TEXT]
                              Register a casino, with the public key (PEM or
                              JWK file) or JWKS URL that verifies its user
                              tokens for hubAuthenticate.
  balance credit --uname NAME --currency KEY --amount N
                 [--casino NAME] [--experience NAME] [--reason TEXT]
                              Add N whole base units of the currency (1 to
                              2^53-1) to the player's balance (created when
                              missing), recorded in the ledger. The casino
                              (default "${PLAYGROUND_CASINO}"), the player, the experience
                              (default "${DEFAULT_EXPERIENCE}") and the currency must exist.

Options:
  --json                      (api-key list) Print JSON instead of a table.
  -h, --help                  Show this help.

The last line of standard output is the result: the credential (printed
once; the database keeps only its SHA-256 digest), the id of what was
revoked or added, or the new balance. Messages and logs go to standard error.
Exit status: 0 done, 1 failed, 2 wrong command line.

Database: DATABASE_URL and SUPERUSER_DATABASE_URL when set; otherwise the
embedded Postgres in HUB_DATA_DIR (default ./.hub), used alongside a running
hub or started for the duration of the command.
`;

type Command =
  | { name: "help" }
  | { name: "none" }
  | { name: "api-key create" }
  | { name: "api-key list"; json: boolean }
  | { name: "api-key revoke"; id: string }
  | { name: "session create"; uname: string; casino: string | undefined; experience: string | undefined }
  | { name: "session revoke"; id: string | undefined; token: string | undefined }
  | {
      name: "casino add";
      casinoName: string;
      baseUrl: string | undefined;
      publicKeyFile: string | undefined;
      jwksUrl: string | undefined;
      issuer: string | undefined;
      audience: string | undefined;
    }
  | {
      name: "balance credit";
      uname: string;
      currency: string;
      amount: number;
      casino: string | undefined;
      experience: string | undefined;
      reason: string | undefined;
    };

type CommandName = Exclude<Command["name"], "help" | "none">;

/** The options each command accepts, and the placeholder of each option's value in messages. */
const COMMAND_OPTIONS: Record<CommandName, readonly string[]> = {
  "api-key create": [],
  "api-key list": ["json"],
  "api-key revoke": ["id"],
  "session create": ["uname", "casino", "experience"],
  "session revoke": ["id", "token"],
  "casino add": ["name", "base-url", "jwt-public-key-file", "jwks-url", "jwt-issuer", "jwt-audience"],
  "balance credit": ["uname", "currency", "amount", "casino", "experience", "reason"],
};
const COMMANDS = Object.keys(COMMAND_OPTIONS) as CommandName[];

const PLACEHOLDER: Record<string, string> = {
  uname: "NAME",
  casino: "NAME",
  experience: "NAME",
  name: "NAME",
  id: "UUID",
  token: "TOKEN",
  "base-url": "URL",
  "jwt-public-key-file": "PATH",
  "jwks-url": "URL",
  "jwt-issuer": "TEXT",
  "jwt-audience": "TEXT",
  currency: "KEY",
  amount: "N",
  reason: "TEXT",
};
const STRING_OPTIONS = Object.keys(PLACEHOLDER);

const usage = (message: string) => new HubError("HUB_CLI_USAGE", message);

/** One line, whatever the source of the message. */
const oneLine = (text: string) => text.replace(/\s*\n\s*/g, " ").trim();

/** "a", "a or b", "a, b or c" */
function either(items: string[]): string {
  return items.length <= 1 ? items.join("") : `${items.slice(0, -1).join(", ")} or ${items[items.length - 1]}`;
}

const commandList = () => either(COMMANDS.map((c) => `"${c}"`));

function optionList(command: CommandName | undefined): string {
  const options = command ? COMMAND_OPTIONS[command] : [...STRING_OPTIONS, "json"];
  return either([...options.map((o) => `--${o}`), "--help"]);
}

/** The value of an option given at most once, or undefined. */
function single(option: string, values: string[] | undefined): string | undefined {
  if (values === undefined) return undefined;
  if (values.length > 1) {
    throw usage(`--${option} was given ${values.length} times (${values.map((v) => describeValue(v)).join(", ")}); expected it once.`);
  }
  return values[0]!;
}

const CONTROL = /[\u0000-\u001f\u007f]/;

function nameOption(option: string, values: string[] | undefined): string | undefined {
  const value = single(option, values);
  if (value === undefined) return undefined;
  // The database accepts 1 to 200 characters; control characters would only cause trouble later.
  if (value.length < 1 || value.length > 200 || CONTROL.test(value)) {
    throw usage(`--${option} ${describeValue(value)} (${value.length} characters) is invalid: expected 1 to 200 characters, without control characters.`);
  }
  return value;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function uuidOption(option: string, values: string[] | undefined): string | undefined {
  const value = single(option, values);
  if (value === undefined) return undefined;
  if (!UUID.test(value)) {
    throw usage(`--${option} ${describeValue(value)} is invalid: expected a UUID such as 0190f3a0-6b1c-7cde-8f00-1234567890ab.`);
  }
  return value.toLowerCase();
}

function tokenOption(values: string[] | undefined): string | undefined {
  let value = single("token", values);
  if (value === undefined) return undefined;
  // The header form is accepted too: what was copied from a request works.
  if (value.startsWith("session:")) value = value.slice("session:".length);
  if (!/^[\x21-\x7e]{1,512}$/.test(value)) {
    throw usage(`--token is invalid (${value.length} characters): expected the session token, 1 to 512 visible ASCII characters.`);
  }
  return value;
}

function urlOption(option: string, values: string[] | undefined): string | undefined {
  const value = single(option, values);
  if (value === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:") || value.length > 2000 || CONTROL.test(value)) {
    throw usage(`--${option} ${describeValue(value)} is invalid: expected an http:// or https:// URL such as https://casino.example.`);
  }
  return value;
}

function currencyOption(values: string[] | undefined): string | undefined {
  const value = single("currency", values);
  if (value === undefined) return undefined;
  if (!/^[A-Za-z0-9_]{1,32}$/.test(value)) {
    throw usage(`--currency ${describeValue(value)} is invalid: expected a currency key of 1 to 32 letters, digits or underscores, such as HOUSE.`);
  }
  return value;
}

function amountOption(values: string[] | undefined): number | undefined {
  const value = single("amount", values);
  if (value === undefined) return undefined;
  // Whole base units only (display_unit_scale of them make one display unit).
  const number = /^\+?[0-9]{1,16}$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(number) || number < 1) {
    throw usage(
      `--amount ${describeValue(value)} is invalid: expected a whole number of base units from 1 to ${Number.MAX_SAFE_INTEGER}, such as 100 (amounts are whole base units of the currency).`,
    );
  }
  return number;
}

function reasonOption(values: string[] | undefined): string | undefined {
  const value = single("reason", values);
  if (value === undefined) return undefined;
  if (value.length < 1 || value.length > 1000 || CONTROL.test(value)) {
    throw usage(`--reason ${describeValue(value)} (${value.length} characters) is invalid: expected 1 to 1000 characters, without control characters.`);
  }
  return value;
}

/** The command the words at the start of argv name, if any: for messages about options. */
function guessCommand(argv: string[]): CommandName | undefined {
  const words = argv.slice(0, 2);
  const name = words.join(" ");
  return COMMANDS.find((c) => c === name);
}

/**
 * `--token -AbC…` as `--token=-AbC…`: parseArgs refuses a value that starts
 * with "-", but a token is opaque (base64url: 1 in 64 starts with "-") and
 * "-5" is an amount to refuse with a better message than "missing value". A
 * value that looks like an option (-h, --name) is left to parseArgs.
 */
function attachDashValues(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const option = /^--([a-z-]+)$/.exec(arg)?.[1];
    const next = argv[i + 1];
    if (option && STRING_OPTIONS.includes(option) && next?.startsWith("-") && (option === "token" || !/^--?[A-Za-z]/.test(next))) {
      out.push(`${arg}=${next}`);
      i++;
    } else {
      out.push(arg);
    }
  }
  return out;
}

function parseCommand(rawArgv: string[]): Command {
  const argv = attachDashValues(rawArgv);
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        help: { type: "boolean", short: "h" },
        json: { type: "boolean" },
        ...Object.fromEntries(STRING_OPTIONS.map((o) => [o, { type: "string" as const, multiple: true as const }])),
      },
    });
  } catch (error) {
    const { code, message } = error as { code?: string; message: string };
    const option = /'(-[^' ]*)/.exec(message)?.[1];
    const guess = guessCommand(argv);
    if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" && option) {
      const expected = guess && COMMAND_OPTIONS[guess].length === 0 ? `"${guess}" takes no options` : `expected ${optionList(guess)}`;
      throw usage(`unknown option ${describeValue(option)}: ${expected} (hub --help).`);
    }
    if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE" && option) {
      const name = option.replace(/^--/, "");
      const next = argv[argv.indexOf(option) + 1];
      if (/ambiguous/.test(message) && next !== undefined) {
        throw usage(`${option} is followed by ${describeValue(next)}, which looks like an option; to give it as the value, write ${option}=${next}.`);
      }
      throw usage(`${option} needs a value, as in ${option}=${PLACEHOLDER[name] ?? "VALUE"}; received none.`);
    }
    throw usage(`${oneLine(message)} (hub --help).`);
  }
  const { values, positionals } = parsed as { values: Record<string, string[] | boolean | undefined>; positionals: string[] };
  if (values.help) return { name: "help" };
  if (positionals.length === 0) return { name: "none" };

  const name = positionals.slice(0, 2).join(" ");
  const command = COMMANDS.find((c) => c === name);
  if (!command) throw usage(`unknown command ${describeValue(name)}: expected ${commandList()} (hub --help).`);
  if (positionals.length > 2) {
    const allowed = COMMAND_OPTIONS[command];
    throw usage(
      `unexpected argument ${describeValue(positionals[2])} after "${command}": it takes no further arguments` +
        (allowed.length > 0 ? ` (values go in ${either(allowed.map((o) => `--${o}`))})` : "") +
        ".",
    );
  }
  const stray = [...STRING_OPTIONS, "json"].find((o) => values[o] !== undefined && !COMMAND_OPTIONS[command].includes(o));
  if (stray) {
    throw usage(
      COMMAND_OPTIONS[command].length === 0
        ? `--${stray} is not an option of "${command}"; it takes none.`
        : `--${stray} is not an option of "${command}"; expected ${optionList(command)}.`,
    );
  }
  const strings = (o: string) => values[o] as string[] | undefined;
  const required = <T>(option: string, value: T | undefined, what: string): T => {
    if (value === undefined) throw usage(`"${command}" needs --${option} ${PLACEHOLDER[option]} (${what}); received no --${option}.`);
    return value;
  };

  switch (command) {
    case "api-key create":
      return { name: command };
    case "api-key list":
      return { name: command, json: values.json === true };
    case "api-key revoke":
      return { name: command, id: required("id", uuidOption("id", strings("id")), "the id of the key, from hub api-key list") };
    case "session create":
      return {
        name: command,
        uname: required("uname", nameOption("uname", strings("uname")), "the player's user name"),
        casino: nameOption("casino", strings("casino")),
        experience: nameOption("experience", strings("experience")),
      };
    case "session revoke": {
      const id = uuidOption("id", strings("id"));
      const token = tokenOption(strings("token"));
      if ((id === undefined) === (token === undefined)) {
        throw usage(`"session revoke" needs exactly one of --id UUID or --token TOKEN; received ${id === undefined ? "neither" : "both"}.`);
      }
      return { name: command, id, token };
    }
    case "casino add": {
      const publicKeyFile = single("jwt-public-key-file", strings("jwt-public-key-file"));
      const jwksUrl = urlOption("jwks-url", strings("jwks-url"));
      if (publicKeyFile !== undefined && jwksUrl !== undefined) {
        throw usage(`"casino add" takes --jwt-public-key-file or --jwks-url, not both.`);
      }
      return {
        name: command,
        casinoName: required("name", nameOption("name", strings("name")), "the casino's unique name"),
        baseUrl: urlOption("base-url", strings("base-url")),
        publicKeyFile,
        jwksUrl,
        issuer: single("jwt-issuer", strings("jwt-issuer")),
        audience: single("jwt-audience", strings("jwt-audience")),
      };
    }
    case "balance credit":
      return {
        name: command,
        uname: required("uname", nameOption("uname", strings("uname")), "the player's user name"),
        currency: required("currency", currencyOption(strings("currency")), "the currency key, such as HOUSE"),
        amount: required("amount", amountOption(strings("amount")), "how much to add, a whole number of base units of at least 1"),
        casino: nameOption("casino", strings("casino")),
        experience: nameOption("experience", strings("experience")),
        reason: reasonOption(strings("reason")),
      };
  }
}

/** The credential must be the only thing on stdout, so logs go to stderr. */
function cliLogger(level: LogLevel): Logger {
  return createLogger({ level, pretty: false, fd: 2 });
}

function errorLine(error: unknown): string {
  if (error instanceof CliFailure) return `hub: ${oneLine(error.message)}`;
  if (error instanceof HubError) return `hub: ${oneLine(error.message)} [${error.code}]`;
  const e = error as { message?: string; code?: string } | undefined;
  const sqlstate = typeof e?.code === "string" && /^[0-9A-Z]{5}$/.test(e.code) ? ` [SQLSTATE ${e.code}]` : "";
  return `hub: ${oneLine(e?.message ?? String(error))}${sqlstate}`;
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

/** A failure at run time that the message fully explains (exit 1; printed without its code or a SQLSTATE). */
class CliFailure extends HubError {
  constructor(message: string) {
    super("HUB_CLI_FAILED", message);
  }
}

type Runnable = Exclude<Command, { name: "help" | "none" }>;

const say = (line: string) => process.stderr.write(`hub: ${line}\n`);
const result = (line: string) => process.stdout.write(`${line}\n`);
const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** Who the ledger records for changes made from the command line. */
function cliActor(): string {
  try {
    return `cli:${os.userInfo().username}`.slice(0, 200);
  } catch {
    return "cli";
  }
}

/** Columns padded to the widest cell, as `ps` or `docker ps` print them. */
function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [header, ...rows].map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join("  ")).join("\n");
}

async function apiKeyList(pool: pg.Pool, json: boolean): Promise<void> {
  const { rows } = await pool.query<DbApiKey>("select id, created_at, last_used_at, revoked_at from hub.api_key order by id");
  if (json) {
    result(JSON.stringify(rows.map((r) => ({ id: r.id, created_at: iso(r.created_at), last_used_at: iso(r.last_used_at), revoked_at: iso(r.revoked_at) }))));
  } else {
    result(table(["id", "created_at", "last_used_at", "revoked_at"], rows.map((r) => [r.id, iso(r.created_at)!, iso(r.last_used_at) ?? "-", iso(r.revoked_at) ?? "-"])));
  }
  const revoked = rows.filter((r) => r.revoked_at).length;
  say(`${rows.length} API key${rows.length === 1 ? "" : "s"}${revoked ? ` (${revoked} revoked)` : ""}.`);
}

async function apiKeyRevoke(pool: pg.Pool, id: string): Promise<void> {
  const { rows } = await pool.query<{ revoked_at: Date }>("update hub.api_key set revoked_at = now() where id = $1 and revoked_at is null returning revoked_at", [id]);
  if (rows[0]) {
    say(`revoked API key ${id}; requests sending it are refused within 1 s.`);
  } else {
    const found = await pool.query<{ revoked_at: Date }>("select revoked_at from hub.api_key where id = $1", [id]);
    if (!found.rows[0]) throw new CliFailure(`no API key has the id ${id} (hub api-key list shows them).`);
    say(`API key ${id} was already revoked at ${iso(found.rows[0].revoked_at)}; nothing changed.`);
  }
  result(id);
}

async function sessionRevoke(pool: pg.Pool, by: { id: string | undefined; token: string | undefined }): Promise<void> {
  const [column, value, what] = by.id !== undefined ? ["id", by.id, `id ${by.id}`] : ["token_digest", digest(by.token!), "this token"];
  const { rows } = await pool.query<{ id: string }>(
    `update hub.session set revoked_at = now() where ${column} = $1 and revoked_at is null returning id`,
    [value],
  );
  if (rows[0]) {
    say(`revoked session ${rows[0].id}; requests sending it are refused within 1 s.`);
    result(rows[0].id);
    return;
  }
  const found = await pool.query<{ id: string; revoked_at: Date }>(`select id, revoked_at from hub.session where ${column} = $1`, [value]);
  if (!found.rows[0]) {
    throw new CliFailure(
      by.id !== undefined ? `no session has the id ${by.id}.` : "no session has this token (only digests are stored: check it was copied whole).",
    );
  }
  say(`session ${found.rows[0].id} (${what}) was already revoked at ${iso(found.rows[0].revoked_at)}; nothing changed.`);
  result(found.rows[0].id);
}

async function casinoAdd(pool: pg.Pool, command: Extract<Command, { name: "casino add" }>): Promise<void> {
  const { casinoName: name, baseUrl } = command;
  let publicKey: string | undefined;
  if (command.publicKeyFile !== undefined) {
    try {
      publicKey = await fsp.readFile(command.publicKeyFile, "utf8");
    } catch (error) {
      throw new CliFailure(`cannot read --jwt-public-key-file ${JSON.stringify(command.publicKeyFile)}: ${(error as Error).message}`);
    }
    try {
      await validatePublicKey(publicKey);
    } catch (error) {
      throw new CliFailure(`--jwt-public-key-file ${JSON.stringify(command.publicKeyFile)} is not usable: ${(error as Error).message}.`);
    }
  }
  try {
    const casino = await withPgPoolTransaction(pool, async (client) => {
      const { rows } = await client.query<DbCasino>("insert into hub.casino (name, base_url) values ($1, $2) returning *", [name, baseUrl ?? null]);
      const row = rows[0]!;
      if (publicKey !== undefined || command.jwksUrl !== undefined) {
        await client.query(
          "insert into hub_secret.casino_auth (casino_id, public_key, jwks_url, issuer, audience) values ($1, $2, $3, $4, $5)",
          [row.id, publicKey ?? null, command.jwksUrl ?? null, command.issuer ?? null, command.audience ?? null],
        );
      }
      return row;
    });
    const auth = publicKey !== undefined ? ", verifying user tokens with the given public key" : command.jwksUrl ? `, verifying user tokens with ${command.jwksUrl}` : "";
    say(`added casino ${JSON.stringify(casino.name)} (${casino.id})${casino.base_url ? ` with base URL ${casino.base_url}` : ""}${auth}.`);
    result(casino.id);
  } catch (error) {
    const { code, constraint } = error as { code?: string; constraint?: string };
    if (code !== "23505") throw error;
    if (constraint === "casino_base_url_key") {
      const other = await pool.query<DbCasino>("select * from hub.casino where base_url = $1", [baseUrl]);
      throw new CliFailure(`the base URL ${baseUrl} is already the casino ${JSON.stringify(other.rows[0]?.name)}'s (${other.rows[0]?.id}); each casino has its own.`);
    }
    const other = await pool.query<DbCasino>("select * from hub.casino where name = $1", [name]);
    throw new CliFailure(`a casino named ${JSON.stringify(name)} already exists (${other.rows[0]?.id}).`);
  }
}

async function balanceCredit(pool: pg.Pool, command: Extract<Command, { name: "balance credit" }>): Promise<void> {
  const casinoName = command.casino ?? PLAYGROUND_CASINO;
  const experienceName = command.experience ?? DEFAULT_EXPERIENCE;
  const client = await pool.connect();
  try {
    await client.query("begin");
    const casino = (await client.query<DbCasino>("select * from hub.casino where name = $1", [casinoName])).rows[0];
    if (!casino) throw new CliFailure(`no casino is named ${JSON.stringify(casinoName)} (hub casino add --name ${JSON.stringify(casinoName)} adds it).`);
    const user = (await client.query<DbUser>("select * from hub.user where casino_id = $1 and uname = $2", [casino.id, command.uname])).rows[0];
    if (!user) {
      throw new CliFailure(
        `casino ${JSON.stringify(casino.name)} has no player ${JSON.stringify(command.uname)}; players are created when they get a session (hub session create --uname ${JSON.stringify(command.uname)}${command.casino ? ` --casino ${JSON.stringify(casinoName)}` : ""}).`,
      );
    }
    const experience = (await client.query<DbExperience>("select * from hub.experience where casino_id = $1 and name = $2", [casino.id, experienceName])).rows[0];
    if (!experience) throw new CliFailure(`casino ${JSON.stringify(casino.name)} has no experience ${JSON.stringify(experienceName)}.`);
    const currencies = (await client.query<{ key: string }>("select key from hub.currency where casino_id = $1 order by key", [casino.id])).rows.map((r) => r.key);
    if (!currencies.includes(command.currency)) {
      throw new CliFailure(
        `casino ${JSON.stringify(casino.name)} has no currency ${JSON.stringify(command.currency)} (it has ${currencies.length ? currencies.map((c) => JSON.stringify(c)).join(", ") : "none"}).`,
      );
    }
    const { rows } = await client.query<DbBalance>("select * from hub_hidden.credit_balance($1, $2, $3, $4, $5, $6, $7)", [
      user.id, casino.id, experience.id, command.currency, command.amount, cliActor(), command.reason ?? "hub balance credit",
    ]);
    const balance = rows[0]!;
    const entry = await client.query<{ id: string }>(
      "select id from hub.ledger where account = 'player' and user_id = $1 and experience_id = $2 and currency_key = $3 order by id desc limit 1",
      [user.id, experience.id, command.currency],
    );
    await client.query("commit");
    say(
      `credited ${command.amount} ${command.currency} to ${JSON.stringify(user.uname)} (${user.id}) in casino ${JSON.stringify(casino.name)}, ` +
        `experience ${JSON.stringify(experience.name)}: the balance is now ${balance.amount} (ledger entry ${entry.rows[0]?.id}).`,
    );
    result(String(balance.amount));
  } catch (error) {
    await client.query("rollback").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

async function run(command: Runnable, pool: pg.Pool): Promise<void> {
  switch (command.name) {
    case "api-key create": {
      const { key, id } = await createApiKey(pool);
      say(`created API key ${id}. It is shown once, on the next line; send it as "Authorization: apikey:<key>".`);
      result(key);
      return;
    }
    case "api-key list":
      return apiKeyList(pool, command.json);
    case "api-key revoke":
      return apiKeyRevoke(pool, command.id);
    case "session create": {
      const { casino, user, experience } = await ensurePlayer(pool, {
        uname: command.uname,
        casinoName: command.casino,
        experienceName: command.experience,
      });
      const { token, sessionId, expiredAt } = await createSession(pool, { userId: user.id, casinoId: casino.id, experienceId: experience.id });
      say(
        `created session ${sessionId} for user ${JSON.stringify(user.uname)} (${user.id}) in casino ${JSON.stringify(casino.name)}, ` +
          `experience ${JSON.stringify(experience.name)}, expiring ${expiredAt.toISOString()}. ` +
          `It is shown once, on the next line; send it as "Authorization: session:<token>".`,
      );
      result(token);
      return;
    }
    case "session revoke":
      return sessionRevoke(pool, command);
    case "casino add":
      return casinoAdd(pool, command);
    case "balance credit":
      return balanceCredit(pool, command);
  }
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
