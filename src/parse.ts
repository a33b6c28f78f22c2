/**
 * What the hub accepts as each kind of value, wherever the value comes from:
 * an environment variable, a `startAndListen` option, the command line, the
 * Authorization header or a GraphQL argument. Each parser returns the value
 * (normalised where there is a canonical form) or, in words, what was
 * expected; the caller puts that into its own message, naming the value the
 * way its user knows it (PORT, "port", --id, jwksUrl).
 */

/** A value that passed its parser, or what was expected instead. */
export type Parsed<T> = { value: T } | { expected: string };
export type Parser<T> = (input: unknown) => Parsed<T>;

const ok = <T>(value: T): Parsed<T> => ({ value });
const expected = (text: string): Parsed<never> => ({ expected: text });

/** The expected text of a failed parse, or undefined when the input is valid. */
export function expectedOf<T>(parsed: Parsed<T>): string | undefined {
  return "expected" in parsed ? parsed.expected : undefined;
}

// Settings of the process

const PORT_EXPECTED = "an integer from 0 to 65535 (0 picks any free port)";

export const port: Parser<number> = (v) =>
  Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 65535 ? ok(v as number) : expected(PORT_EXPECTED);

/** A port written as text (an environment variable): digits only. */
export const portText: Parser<number> = (v) => (typeof v === "string" && /^\d{1,5}$/.test(v) ? port(Number(v)) : expected(PORT_EXPECTED));

export const host: Parser<string> = (v) =>
  typeof v === "string" && /^[A-Za-z0-9.:\-[\]]+$/.test(v) ? ok(v) : expected("a host name or IP address such as 127.0.0.1, 0.0.0.0 or ::");

/** A file or directory path: any string that is not blank. `what` says which, as in "a directory path". */
export const filePath =
  (what: string): Parser<string> =>
  (v) =>
    typeof v === "string" && v.trim() !== "" ? ok(v) : expected(what);

export const oneOf =
  <T extends string>(values: readonly T[]): Parser<T> =>
  (v) =>
    (values as readonly unknown[]).includes(v) ? ok(v as T) : expected(`one of ${values.join(", ")}`);

const POSTGRES_URL_EXAMPLE = "postgres://user:password@host:5432/dbname";

export const postgresUrl: Parser<string> = (v) => {
  if (typeof v !== "string") return expected(`a URL such as ${POSTGRES_URL_EXAMPLE}`);
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    return expected(`a URL such as ${POSTGRES_URL_EXAMPLE}`);
  }
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:") return expected("a URL starting with postgres:// or postgresql://");
  if (url.hostname === "" && !url.searchParams.has("host")) {
    return expected("a URL with a host, e.g. postgres://user:password@localhost:5432/dbname");
  }
  return ok(v);
};

/** Paths the hub itself answers: the dashboard cannot take them. */
const RESERVED_PATHS = ["/graphql", "/graphiql", "/ruru-static"];

/**
 * A path the hub answers itself (the dashboard, the health checks): an
 * absolute path of plain segments, not the site's root nor a path the hub
 * uses. `what` says what is accepted, as in "on, off or a path such as /admin".
 */
export const servedPath = (v: unknown, what: string): Parsed<string> => {
  const full = `${what} (segments of letters, digits, - _ . ~; not / nor ${RESERVED_PATHS.join(", ")})`;
  if (typeof v !== "string" || !/^(\/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+\/?$/.test(v)) return expected(full);
  const normalised = v.replace(/\/$/, "");
  if (RESERVED_PATHS.some((p) => normalised === p || normalised.startsWith(`${p}/`))) return expected(full);
  return ok(normalised);
};

/** Where the dashboard is mounted. `alternatives` names the other accepted values, as in "on, off or". */
export const dashboardPath = (v: unknown, alternatives: string): Parsed<string> => servedPath(v, `${alternatives} a path such as /admin`);

/** A switch written as text (an environment variable). */
export const onOff: Parser<boolean> = (v) => (v === "on" ? ok(true) : v === "off" ? ok(false) : expected("on or off"));

/** A switch written as text where the convention is true/false (LOG_PRETTY). */
export const trueFalse: Parser<boolean> = (v) => (v === "true" ? ok(true) : v === "false" ? ok(false) : expected("true or false"));

/** A switch given as a value (an option). */
export const boolean: Parser<boolean> = (v) => (typeof v === "boolean" ? ok(v) : expected("true or false"));

export const integerAtLeast =
  (min: number): Parser<number> =>
  (v) =>
    Number.isInteger(v) && (v as number) >= min ? ok(v as number) : expected(`an integer >= ${min}`);

/** A duration that may have a fraction of a millisecond. */
export const milliseconds: Parser<number> = (v) =>
  typeof v === "number" && Number.isFinite(v) && v >= 0 ? ok(v) : expected("a number of milliseconds >= 0");

/** A duration in whole milliseconds, as Postgres and Node's timers take it. */
export const wholeMilliseconds: Parser<number> = (v) =>
  Number.isInteger(v) && (v as number) >= 0 ? ok(v as number) : expected("an integer number of milliseconds >= 0");

/** wholeMilliseconds written as text (an environment variable): digits only. */
export const wholeMillisecondsText: Parser<number> = (v) =>
  typeof v === "string" && /^\d{1,10}$/.test(v) ? wholeMilliseconds(Number(v)) : expected("an integer number of milliseconds >= 0");

/** A Postgres schema name as written unquoted. */
export const pgSchemaName: Parser<string> = (v) =>
  typeof v === "string" && /^[a-z_][a-z0-9_$]*$/i.test(v) ? ok(v) : expected('a Postgres schema name such as "app"');

// Credentials and the Authorization header

/** The Authorization header's prefix of a player's session token. */
export const SESSION_PREFIX = "session:";
/** The Authorization header's prefix of an operator API key. */
export const API_KEY_PREFIX = "apikey:";

/** Longest credential accepted, in characters; ours are 36 (a UUID), or 43 when issued before UUIDs. */
export const MAX_CREDENTIAL_LENGTH = 512;

/**
 * A session token or API key as sent: 1 to 512 visible ASCII characters
 * (0x21–0x7E), so no whitespace, control or non-ASCII characters. Ours are
 * UUIDs (36 characters), or 43 base64url characters when issued by earlier
 * versions; anything else is simply unknown, not refused.
 */
export const credential: Parser<string> = (v) =>
  typeof v === "string" && v.length >= 1 && v.length <= MAX_CREDENTIAL_LENGTH && /^[\x21-\x7e]+$/.test(v)
    ? ok(v)
    : expected(`1 to ${MAX_CREDENTIAL_LENGTH} visible ASCII characters`);

export type CredentialKind = "session" | "apikey";

/** Split an Authorization header into kind and credential, or undefined when it is not one we accept. */
export function parseAuthorization(header: unknown): { kind: CredentialKind; credential: string } | undefined {
  if (typeof header !== "string") return undefined;
  const kind: CredentialKind | undefined = header.startsWith(SESSION_PREFIX) ? "session" : header.startsWith(API_KEY_PREFIX) ? "apikey" : undefined;
  if (kind === undefined) return undefined;
  const parsed = credential(header.slice((kind === "session" ? SESSION_PREFIX : API_KEY_PREFIX).length));
  return "value" in parsed ? { kind, credential: parsed.value } : undefined;
}

// Values of records: ids, names, amounts, URLs

export const UUID_EXAMPLE = "0190f3a0-6b1c-7cde-8f00-1234567890ab";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** The forms PostGraphile's UUID scalar accepts: the hyphens may be left out. */
const UUID_HYPHENS_OPTIONAL = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;

/**
 * A UUID, returned in its canonical form (lower case, 8-4-4-4-12). Typed
 * input (the command line) must have the hyphens; `hyphensOptional` accepts
 * what the GraphQL UUID scalar lets through.
 */
export function uuid(v: unknown, options: { hyphensOptional?: boolean } = {}): Parsed<string> {
  if (typeof v !== "string" || !(options.hyphensOptional ? UUID_HYPHENS_OPTIONAL : UUID).test(v)) return expected(`a UUID such as ${UUID_EXAMPLE}`);
  const hex = v.replace(/-/g, "").toLowerCase();
  return ok(`${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`);
}

const CONTROL = /[\u0000-\u001f\u007f]/;

/** Free text of 1 to max characters, without control characters (a name, a reason). */
export const text =
  (max: number): Parser<string> =>
  (v) =>
    typeof v === "string" && v.length >= 1 && v.length <= max && !CONTROL.test(v)
      ? ok(v)
      : expected(`1 to ${max} characters, without control characters`);

/** Names of casinos, players and experiences: the database accepts 1 to 200 characters. */
export const name = text(200);

/** A currency key, as the database's check on hub.currency.key has it. */
export const currencyKey: Parser<string> = (v) =>
  typeof v === "string" && /^[A-Za-z0-9_]{1,32}$/.test(v)
    ? ok(v)
    : expected("a currency key of 1 to 32 letters, digits or underscores, such as HOUSE");

/** The largest whole number a float8 (and a JavaScript number) holds exactly. */
export const MAX_AMOUNT = Number.MAX_SAFE_INTEGER;
export const AMOUNT_EXPECTED = `a whole number of base units from 1 to ${MAX_AMOUNT}`;

/**
 * Amounts are whole base units of the currency (display_unit_scale of them
 * make one display unit): a fraction, 5e-324 or 1e300 would move nothing or
 * more than anyone can count.
 */
export const amount: Parser<number> = (v) => (Number.isSafeInteger(v) && (v as number) >= 1 ? ok(v as number) : expected(AMOUNT_EXPECTED));

/** An amount written as text: decimal digits only (no sign but "+", no exponent, no hex). */
export const amountText: Parser<number> = (v) => (typeof v === "string" && /^\+?[0-9]{1,16}$/.test(v) ? amount(Number(v)) : expected(AMOUNT_EXPECTED));

const HTTP_URL_EXPECTED = "an http:// or https:// URL such as https://casino.example";

/**
 * An http:// or https:// URL (a casino's base URL, a JWKS URL), at most 2000
 * characters and without control characters: the URL parser would silently
 * drop a tab or a newline, and the stored text would then differ from the URL
 * fetched.
 */
export const httpUrl: Parser<string> = (v) => {
  if (typeof v !== "string" || v.length > 2000 || CONTROL.test(v)) return expected(HTTP_URL_EXPECTED);
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    return expected(HTTP_URL_EXPECTED);
  }
  return url.protocol === "http:" || url.protocol === "https:" ? ok(v) : expected(HTTP_URL_EXPECTED);
};

/**
 * A casino's base URL in the one form compared when a client names the casino
 * by it: scheme and host lower case (the URL parser does that, and drops a
 * default port), path, query and fragment as written, trailing slashes removed.
 * Applied to the stored base_url and to the client's value alike, so
 * "HTTPS://Casino.Example/" finds a casino registered as "https://casino.example".
 */
export const baseUrl: Parser<string> = (v) => {
  const url = httpUrl(v);
  if ("expected" in url) return url;
  return ok(new URL(url.value).href.replace(/\/+$/, ""));
};
