/**
 * The command line of `hub`: which commands there are, the options each
 * takes, how a value of each option is checked, and the usage text. It turns
 * argv into a Command or throws a HUB_CLI_USAGE error whose message is one
 * line saying what was received and what was expected; what a command does is
 * in ./commands.ts.
 */
import { parseArgs } from "node:util";
import { DEFAULT_EXPERIENCE, PLAYGROUND_CASINO } from "../../auth/credentials.js";
import { describeValue, HubError } from "../../errors.js";
import * as parse from "../../parse.js";
import type { Parsed } from "../../parse.js";

export const USAGE = `Usage: hub <command> [options]

Commands:
  init DIR [--hub SPEC]       Write a game project into DIR (new or empty):
                              package.json, src/index.ts, an example game,
                              its migration and test. --hub: how the project
                              depends on the hub, a folder, an npm pack
                              tarball or a version (default: what the
                              project running this hub depends on, or
                              this checkout's folder). No database needed.
  db reset [--yes] [--force]  Drop and recreate the embedded development
                              database in HUB_DATA_DIR (default ./.hub):
                              every table and row goes; migrations run again
                              at the next start. Asks first unless --yes.
                              Refused while DATABASE_URL is set (your server
                              uses that database) unless --force.
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
  transfers list [--json]     The transfer worker's items (withdrawals to send,
                              deposits to acknowledge, casinos to poll): every
                              PENDING or FAILED one, then the 100 latest DONE,
                              with attempts, last error and next attempt time.

Options:
  --json                      (api-key list, transfers list) Print JSON instead of a table.
  --yes                       (db reset) Do not ask for confirmation.
  --force                     (db reset) Reset the embedded database even with DATABASE_URL set.
  -h, --help                  Show this help.

The last line of standard output is the result: the credential (printed
once; the database keeps only its SHA-256 digest), the id of what was
revoked or added, or the new balance. Messages and logs go to standard error.
Exit status: 0 done, 1 failed, 2 wrong command line.

Database: DATABASE_URL and SUPERUSER_DATABASE_URL when set; otherwise the
embedded Postgres in HUB_DATA_DIR (default ./.hub), used alongside a running
hub or started for the duration of the command.
`;

export type Command =
  | { name: "help" }
  | { name: "none" }
  | { name: "init"; dir: string; hub: string | undefined }
  | { name: "db reset"; yes: boolean; force: boolean }
  | { name: "api-key create" }
  | { name: "api-key list"; json: boolean }
  | { name: "transfers list"; json: boolean }
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

/** A command that does something (not help, not the missing command). */
export type Runnable = Exclude<Command, { name: "help" | "none" }>;
type CommandName = Runnable["name"];

const usage = (message: string) => new HubError("HUB_CLI_USAGE", message);

interface ValueOption {
  /** The value's name in messages and usage: --uname NAME. */
  placeholder: string;
  /** How a value is checked (and normalised); without it any text is taken. */
  parse?(text: string): Parsed<unknown>;
  /** The message for a value its parser refused; by default `--x "v" is invalid: expected …`. */
  invalid?(option: string, text: string, expected: string): string;
  /** Take a value starting with "-" as is, even one that looks like an option (--token: base64url may start so). */
  dashValues?: true;
}

const withLength = (option: string, text: string, expected: string) =>
  `--${option} ${describeValue(text)} (${text.length} characters) is invalid: expected ${expected}.`;

const nameOption: ValueOption = { placeholder: "NAME", parse: parse.name, invalid: withLength };
const urlOption: ValueOption = { placeholder: "URL", parse: parse.httpUrl };

/** The options that take a value, in the order messages list them. */
const VALUE_OPTIONS = {
  uname: nameOption,
  casino: nameOption,
  experience: nameOption,
  name: nameOption,
  id: { placeholder: "UUID", parse: (text) => parse.uuid(text) },
  token: {
    placeholder: "TOKEN",
    // The header form is accepted too: what was copied from a request works.
    parse: (text) => parse.credential(text.startsWith(parse.SESSION_PREFIX) ? text.slice(parse.SESSION_PREFIX.length) : text),
    // Never echoed: it is a secret.
    invalid: (_option, text, expected) => {
      const length = (text.startsWith(parse.SESSION_PREFIX) ? text.slice(parse.SESSION_PREFIX.length) : text).length;
      return `--token is invalid (${length} characters): expected the session token, ${expected}.`;
    },
    dashValues: true,
  },
  "base-url": urlOption,
  "jwt-public-key-file": { placeholder: "PATH" },
  "jwks-url": urlOption,
  "jwt-issuer": { placeholder: "TEXT" },
  "jwt-audience": { placeholder: "TEXT" },
  currency: { placeholder: "KEY", parse: parse.currencyKey },
  amount: {
    placeholder: "N",
    parse: parse.amountText,
    invalid: (option, text, expected) =>
      `--${option} ${describeValue(text)} is invalid: expected ${expected}, such as 100 (amounts are whole base units of the currency).`,
  },
  reason: { placeholder: "TEXT", parse: parse.text(1000), invalid: withLength },
  hub: { placeholder: "SPEC" },
} satisfies Record<string, ValueOption>;

type ValueOptionName = keyof typeof VALUE_OPTIONS;
/** Options that take no value: present or not. */
const FLAG_OPTIONS = ["json", "yes", "force"] as const;
type FlagOptionName = (typeof FLAG_OPTIONS)[number];
const isFlagOption = (name: string): name is FlagOptionName => (FLAG_OPTIONS as readonly string[]).includes(name);
type OptionName = ValueOptionName | FlagOptionName;
const VALUE_OPTION_NAMES = Object.keys(VALUE_OPTIONS) as ValueOptionName[];
const isValueOption = (name: string): name is ValueOptionName => Object.hasOwn(VALUE_OPTIONS, name);

/** The options' values once checked: parsed values, and true or false for a flag. */
type Values = Partial<Record<OptionName, unknown>>;

interface CommandSpec {
  /** Its options, in the order messages list them. */
  options: readonly OptionName[];
  /** The one argument it takes after its name, as usage names it (init DIR). */
  argument?: { placeholder: string; what: string };
  /** The options it cannot do without, each with what its value is. */
  required?: Partial<Record<ValueOptionName, string>>;
  /** The command from its checked values; rules between options go here. */
  build(values: Values, argument: string | undefined): Runnable;
}

const str = (v: unknown) => v as string;
const optionalStr = (v: unknown) => v as string | undefined;

const COMMAND_SPECS: Record<CommandName, CommandSpec> = {
  init: {
    options: ["hub"],
    argument: { placeholder: "DIR", what: "the folder to write the project into, new or empty" },
    build: (v, dir) => ({ name: "init", dir: str(dir), hub: optionalStr(v.hub) }),
  },
  "db reset": { options: ["yes", "force"], build: (v) => ({ name: "db reset", yes: v.yes === true, force: v.force === true }) },
  "api-key create": { options: [], build: () => ({ name: "api-key create" }) },
  "api-key list": { options: ["json"], build: (v) => ({ name: "api-key list", json: v.json === true }) },
  "api-key revoke": {
    options: ["id"],
    required: { id: "the id of the key, from hub api-key list" },
    build: (v) => ({ name: "api-key revoke", id: str(v.id) }),
  },
  "session create": {
    options: ["uname", "casino", "experience"],
    required: { uname: "the player's user name" },
    build: (v) => ({ name: "session create", uname: str(v.uname), casino: optionalStr(v.casino), experience: optionalStr(v.experience) }),
  },
  "session revoke": {
    options: ["id", "token"],
    build: (v) => {
      const [id, token] = [optionalStr(v.id), optionalStr(v.token)];
      if ((id === undefined) === (token === undefined)) {
        throw usage(`"session revoke" needs exactly one of --id UUID or --token TOKEN; received ${id === undefined ? "neither" : "both"}.`);
      }
      return { name: "session revoke", id, token };
    },
  },
  "casino add": {
    options: ["name", "base-url", "jwt-public-key-file", "jwks-url", "jwt-issuer", "jwt-audience"],
    required: { name: "the casino's unique name" },
    build: (v) => {
      if (v["jwt-public-key-file"] !== undefined && v["jwks-url"] !== undefined) {
        throw usage(`"casino add" takes --jwt-public-key-file or --jwks-url, not both.`);
      }
      return {
        name: "casino add",
        casinoName: str(v.name),
        baseUrl: optionalStr(v["base-url"]),
        publicKeyFile: optionalStr(v["jwt-public-key-file"]),
        jwksUrl: optionalStr(v["jwks-url"]),
        issuer: optionalStr(v["jwt-issuer"]),
        audience: optionalStr(v["jwt-audience"]),
      };
    },
  },
  "balance credit": {
    options: ["uname", "currency", "amount", "casino", "experience", "reason"],
    required: {
      uname: "the player's user name",
      currency: "the currency key, such as HOUSE",
      amount: "how much to add, a whole number of base units of at least 1",
    },
    build: (v) => ({
      name: "balance credit",
      uname: str(v.uname),
      currency: str(v.currency),
      amount: v.amount as number,
      casino: optionalStr(v.casino),
      experience: optionalStr(v.experience),
      reason: optionalStr(v.reason),
    }),
  },
  "transfers list": { options: ["json"], build: (v) => ({ name: "transfers list", json: v.json === true }) },
};
const COMMANDS = Object.keys(COMMAND_SPECS) as CommandName[];

/** "a", "a or b", "a, b or c" */
function either(items: string[]): string {
  return items.length <= 1 ? items.join("") : `${items.slice(0, -1).join(", ")} or ${items[items.length - 1]}`;
}

/** The commands, for messages: "api-key create", … or "balance credit". */
export const commandList = () => either(COMMANDS.map((c) => `"${c}"`));

function optionList(command: CommandName | undefined): string {
  const options = command ? COMMAND_SPECS[command].options : [...VALUE_OPTION_NAMES, ...FLAG_OPTIONS];
  return either([...options.map((o) => `--${o}`), "--help"]);
}

/** The command the first words name (one word or two), if any. */
function commandOf(words: string[]): CommandName | undefined {
  return COMMANDS.find((c) => c === words.slice(0, c.split(" ").length).join(" "));
}

/** The command the words at the start of argv name, if any: for messages about options. */
const guessCommand = (argv: string[]): CommandName | undefined => commandOf(argv);

/** The value of an option given at most once, or undefined. */
function single(option: string, values: string[] | undefined): string | undefined {
  if (values === undefined) return undefined;
  if (values.length > 1) {
    throw usage(`--${option} was given ${values.length} times (${values.map((v) => describeValue(v)).join(", ")}); expected it once.`);
  }
  return values[0]!;
}

/**
 * argv → Command. parseArgs splits argv into tokens (it knows every option of
 * every command, so `--uname=x`, `-h` and `--` work as usual); its strict mode
 * is left off because its errors do not say what was expected, and because it
 * refuses any value starting with "-": a token is opaque (base64url: 1 in 64
 * starts with "-"), and "-5" is an amount to refuse with a better message.
 * A value that looks like an option (-h, --name) is refused unless written
 * --option=value.
 */
export function parseCommand(argv: string[]): Command {
  const { tokens } = parseArgs({
    args: argv,
    strict: false,
    allowPositionals: true,
    tokens: true,
    options: {
      help: { type: "boolean", short: "h" },
      ...Object.fromEntries(FLAG_OPTIONS.map((o) => [o, { type: "boolean" as const }])),
      ...Object.fromEntries(VALUE_OPTION_NAMES.map((o) => [o, { type: "string" as const }])),
    },
  });

  const positionals: string[] = [];
  const given = new Map<OptionName, string[]>();
  let help = false;
  for (const token of tokens) {
    if (token.kind === "positional") positionals.push(token.value);
    if (token.kind !== "option") continue;
    const { name, rawName, value, inlineValue } = token;
    if (name === "help" || isFlagOption(name)) {
      if (value !== undefined) throw usage(`${rawName} takes no value; received ${describeValue(`${rawName}=${value}`)}.`);
      if (name === "help") help = true;
      else given.set(name, []);
      continue;
    }
    if (!isValueOption(name)) {
      const guess = guessCommand(argv);
      const expected = guess && COMMAND_SPECS[guess].options.length === 0 ? `"${guess}" takes no options` : `expected ${optionList(guess)}`;
      throw usage(`unknown option ${describeValue(rawName)}: ${expected} (hub --help).`);
    }
    const option: ValueOption = VALUE_OPTIONS[name];
    if (value === undefined) throw usage(`${rawName} needs a value, as in ${rawName}=${option.placeholder}; received none.`);
    if (!inlineValue && !option.dashValues && /^--?[A-Za-z]/.test(value)) {
      throw usage(`${rawName} is followed by ${describeValue(value)}, which looks like an option; to give it as the value, write ${rawName}=${value}.`);
    }
    given.set(name, [...(given.get(name) ?? []), value]);
  }

  if (help) return { name: "help" };
  if (positionals.length === 0) return { name: "none" };
  const command = commandOf(positionals);
  if (!command) throw usage(`unknown command ${describeValue(positionals.slice(0, 2).join(" "))}: expected ${commandList()} (hub --help).`);
  const spec = COMMAND_SPECS[command];
  const words = command.split(" ").length;
  const argument = spec.argument ? positionals[words] : undefined;
  if (spec.argument && argument === undefined) {
    throw usage(`"${command}" needs ${spec.argument.placeholder} (${spec.argument.what}); received none.`);
  }
  const extra = words + (spec.argument ? 1 : 0);
  if (positionals.length > extra) {
    throw usage(
      `unexpected argument ${describeValue(positionals[extra])} after "${[command, ...(argument === undefined ? [] : [argument])].join(" ")}": it takes no further arguments` +
        (spec.options.length > 0 ? ` (values go in ${either(spec.options.map((o) => `--${o}`))})` : "") +
        ".",
    );
  }
  const stray = ([...VALUE_OPTION_NAMES, ...FLAG_OPTIONS] as OptionName[]).find((o) => given.has(o) && !spec.options.includes(o));
  if (stray) {
    throw usage(
      spec.options.length === 0
        ? `--${stray} is not an option of "${command}"; it takes none.`
        : `--${stray} is not an option of "${command}"; expected ${optionList(command)}.`,
    );
  }

  const values: Values = {};
  for (const o of spec.options) {
    if (isFlagOption(o)) {
      values[o] = given.has(o);
      continue;
    }
    const text = single(o, given.get(o));
    const option: ValueOption = VALUE_OPTIONS[o];
    if (text === undefined) {
      const what = spec.required?.[o];
      if (what !== undefined) throw usage(`"${command}" needs --${o} ${option.placeholder} (${what}); received no --${o}.`);
      continue;
    }
    const parsed = option.parse ? option.parse(text) : { value: text };
    if ("expected" in parsed) {
      throw usage(option.invalid ? option.invalid(o, text, parsed.expected) : `--${o} ${describeValue(text)} is invalid: expected ${parsed.expected}.`);
    }
    values[o] = parsed.value;
  }
  return spec.build(values, argument);
}
