/**
 * What kind of failure a database error is, decided in this one module by the
 * error's SQLSTATE, its Node.js code or its origin, never by its message
 * (Postgres translates messages with lc_messages; libraries reword theirs).
 * The GraphQL mask, the credential check and start-up all ask here.
 *
 * Postgres's message and DETAIL are still quoted or mined for names (the key
 * columns of a unique violation, the byte Postgres refused) once the class is
 * decided: that shapes the wording the client reads, never the code.
 */
import type pg from "pg";
import { ErrorCode, HubError } from "../errors.js";

type Coded = { code?: unknown; cause?: unknown; errors?: unknown };

const codeOf = (error: unknown): string => {
  const code = error && typeof error === "object" ? (error as Coded).code : undefined;
  return typeof code === "string" ? code : "";
};

// ------------------------------------------------------------ the connection

/** admin_shutdown, crash_shutdown, cannot_connect_now: the server went away or is not up yet. */
const SERVER_GONE = new Set(["57P01", "57P02", "57P03"]);
/** Socket errors of Node.js: nothing (or nothing any more) answers at the address. */
const SOCKET_GONE = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT"]);
/**
 * node-postgres (8.x) reports a connection that ended, or a query on a client
 * whose connection already failed, with a plain Error that has no code, no
 * cause and no class of its own; its message is all there is. Listed here
 * once, as the one residual recognised by message.
 */
const DRIVER_CONNECTION_ERRORS = new Set([
  "Connection terminated",
  "Connection terminated unexpectedly",
  "Connection terminated due to connection timeout",
  "Client has encountered a connection error and is not queryable",
  "Client was closed and is not queryable",
]);

function lostHere(error: unknown): boolean {
  const code = codeOf(error);
  if (code) return code.startsWith("08") || SERVER_GONE.has(code) || SOCKET_GONE.has(code);
  return error instanceof Error && error.constructor === Error && DRIVER_CONNECTION_ERRORS.has(error.message);
}

/**
 * The error (or, up to a few levels down, its cause or one of an
 * AggregateError's errors) that says the connection failed rather than the
 * statement: SQLSTATE class 08, the server shutting down or starting, a socket
 * error, or node-postgres's own report of a dead connection.
 */
export function connectionLoss(error: unknown, depth = 0): Error | undefined {
  if (!(error instanceof Error) || depth > 5) return undefined;
  if (lostHere(error)) return error;
  const { cause, errors } = error as Coded;
  for (const inner of [cause, ...(Array.isArray(errors) ? errors : [])]) {
    const found = connectionLoss(inner, depth + 1);
    if (found) return found;
  }
  return undefined;
}

/**
 * Losses that happen before a statement reaches Postgres (nothing listens, the
 * server is starting, the pool could not connect in time, a client already
 * known dead): nothing it would have done can have committed.
 */
const BEFORE_SENDING_CODES = new Set(["ECONNREFUSED", "57P03"]);
const BEFORE_SENDING_MESSAGES = new Set([
  "Connection terminated due to connection timeout",
  "Client has encountered a connection error and is not queryable",
  "Client was closed and is not queryable",
]);

/**
 * The connection was lost while a statement was in flight: if that statement
 * commits (a COMMIT, or a statement run as its own transaction), Postgres may
 * have committed it and the answer is what was lost.
 */
export function lostInFlight(error: unknown): boolean {
  const lost = connectionLoss(error);
  if (!lost) return false;
  return !BEFORE_SENDING_CODES.has(codeOf(lost)) && !BEFORE_SENDING_MESSAGES.has(lost.message);
}

/**
 * A COMMIT whose answer was lost with the connection: the transaction may
 * have committed. withPgClientTransaction throws it; the GraphQL mask answers
 * OUTCOME_UNKNOWN for it, never a code that says "retry".
 */
export class CommitInDoubtError extends Error {
  constructor(cause: unknown) {
    super("The connection to the database was lost while the transaction was committing; whether it committed is unknown.", { cause });
    this.name = "CommitInDoubtError";
  }
}

export const isCommitInDoubt = (error: unknown): boolean => {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 6; e = (e as Coded).cause, depth++) if (e instanceof CommitInDoubtError) return true;
  return false;
};

/** The connection was lost, or Postgres refuses new ones (too_many_connections). */
export const isDatabaseUnavailable = (error: unknown): boolean => codeOf(error) === "53300" || connectionLoss(error) !== undefined;

// -------------------------------------------------------------- saturation

/**
 * Raised by a hub pool when every connection stayed checked out for the whole
 * connection timeout: Postgres may be fine, the server is busy. pg-pool itself
 * rejects with a plain Error without code, told apart from its other errors
 * only by its wording; instead codePoolSaturation() sees where the rejection
 * came from (the waiting request pg-pool marked as timed out) and raises this.
 */
export class PoolSaturatedError extends HubError {
  constructor(pool: string, waitedMs: number, cause: unknown) {
    super("HUB_POOL_SATURATED", `Every connection of the ${pool} database pool stayed in use for ${waitedMs} ms.`, { cause });
    this.name = "PoolSaturatedError";
  }
}

export const isPoolSaturated = (error: unknown): boolean => error instanceof PoolSaturatedError;

/** pg-pool's error for a request that waited in its queue for connectionTimeoutMillis (test/error-class.test.ts pins it). */
const QUEUE_TIMEOUT = "timeout exceeded when trying to connect";
type Callback = (error: Error | undefined, client?: pg.PoolClient, done?: (release?: unknown) => void) => void;

/**
 * Make `pool.connect()` (and so `pool.query()`, which goes through it) reject
 * with a PoolSaturatedError where pg-pool gave up waiting for a free
 * connection: the request was queued (the pool's public `waitingCount` grew
 * when it was made) and failed with pg-pool's queue timeout. Should a later
 * pg-pool word that error differently, saturation would be reported as an
 * ordinary connection error.
 */
export function codePoolSaturation(pool: pg.Pool, name: string): pg.Pool {
  const connect = pool.connect.bind(pool) as (cb: Callback) => void;
  const waitedMs = pool.options.connectionTimeoutMillis ?? 0;
  function coded(cb?: Callback): Promise<pg.PoolClient> | undefined {
    let settle!: Callback;
    const promise = cb ? undefined : new Promise<pg.PoolClient>((resolve, reject) => (settle = (error, client) => (error ? reject(error) : resolve(client!))));
    const before = pool.waitingCount;
    let queued = false;
    connect((error, client, done) => {
      const why = error && queued && error.message === QUEUE_TIMEOUT ? new PoolSaturatedError(name, waitedMs, error) : error;
      (cb ?? settle)(why, client, done);
    });
    queued = pool.waitingCount > before;
    return promise;
  }
  (pool as unknown as { connect: typeof coded }).connect = coded;
  return pool;
}

// ------------------------------------------------------------- load and faults

/** What the mask tells a client of a failure that is neither its input nor a bug: an outage, load, a missing grant. */
export function classifyDatabaseError(error: unknown): { code: ErrorCode; message: string } | undefined {
  if (!error || typeof error !== "object") return undefined;
  const code = codeOf(error);
  // insufficient_privilege: a grant or policy the operator has yet to add, not a bug to hunt in the code.
  if (code === "42501") {
    return { code: ErrorCode.SERVER_MISCONFIGURED, message: "The server's configuration is incomplete: it lacks a database permission this operation needs. The server log says which, and the statement that adds it." };
  }
  // query_canceled: the hub cancels nothing itself, so this is the statement
  // timeout it sets (an administrator's pg_cancel_backend has the same code).
  if (code === "57014") {
    return { code: ErrorCode.STATEMENT_TIMEOUT, message: "The query took longer than the server's statement timeout and was cancelled." };
  }
  // deadlock_detected, serialization_failure: Postgres rolled the whole transaction back, so a retry is safe.
  if (code === "40P01" || code === "40001") {
    return { code: ErrorCode.TRANSACTION_CONFLICT, message: "The operation conflicted with another running at the same moment and was rolled back; nothing was changed. Retry it." };
  }
  if (isPoolSaturated(error)) {
    return { code: ErrorCode.SERVER_BUSY, message: "The server is busy: every database connection stayed in use; retry shortly." };
  }
  if (isDatabaseUnavailable(error)) {
    return { code: ErrorCode.DATABASE_UNAVAILABLE, message: "The database is unavailable; retry shortly." };
  }
  return undefined;
}

// ------------------------------------------------------ the client's input

/** Codes of client errors raised from database refusals. */
export type ClientInputCode =
  | typeof ErrorCode.BAD_USER_INPUT
  | typeof ErrorCode.CONSTRAINT_VIOLATION
  | typeof ErrorCode.INSUFFICIENT_FUNDS
  | typeof ErrorCode.INVALID_AMOUNT;

export interface ClientInputError {
  code: ClientInputCode;
  message: string;
  /** The Postgres SQLSTATE, for clients that want the precise class. */
  sqlstate: string;
  constraint?: string;
}

export const NUL_MESSAGE = "A string argument contains a NUL character (\\u0000), which the database cannot store.";

/**
 * Ledger refusals (SQLSTATE P0001 from hub_hidden.credit_balance & co., told
 * apart by their CONSTRAINT field) whose cause is the amount, account or
 * reason a caller asked for. The other ledger refusals (ledger_actor,
 * ledger_append_only) can only come from server code and stay internal errors.
 */
const LEDGER_CLIENT_REFUSALS = new Set(["ledger_sufficient_funds", "ledger_amount_positive", "ledger_amount_whole", "ledger_known_account", "ledger_reason"]);

interface PgErrorFields {
  code?: unknown;
  message?: unknown;
  detail?: unknown;
  constraint?: unknown;
  table?: unknown;
  column?: unknown;
  where?: unknown;
}

const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

/** "Key (casino_id, uname)=(…) already exists." → "casino_id, uname" (the values are left out). */
function keyColumns(detail: string | undefined): string | undefined {
  return detail ? /^Key \(([^)]*)\)=/.exec(detail)?.[1] : undefined;
}

type Fields = { sqlstate: string; pgMessage: string; detail: string | undefined; constraint: string | undefined; table: string | undefined; column: string | undefined; where: string | undefined };

/** Class 22, data exception: a value the client sent does not fit. */
function dataException({ sqlstate, pgMessage, detail }: Fields): ClientInputError {
  const bad = (message: string): ClientInputError => ({ code: ErrorCode.BAD_USER_INPUT, message, sqlstate });
  switch (sqlstate) {
    case "22021": // character_not_in_repertoire: the NUL byte (Postgres names it 0x00), or invalid UTF-8
      return bad(/0x00/.test(pgMessage) ? NUL_MESSAGE : `A string argument is not valid UTF-8 text (${pgMessage}).`);
    case "22P05": // untranslatable_character, e.g. \u0000 inside a JSON value
      return bad(/\\u0000/.test(`${pgMessage} ${detail ?? ""}`) ? NUL_MESSAGE : `A value contains a character the database cannot store (${pgMessage}).`);
    case "2201W":
      return bad("The number of rows to return (first, last or a limit) must not be negative.");
    case "2201X":
      return bad("The number of rows to skip (offset) must not be negative.");
    case "22003":
      return bad(`A number is outside the range the database can store (${pgMessage}).`);
    case "22001":
      return bad(`A text value is longer than the database accepts (${pgMessage}).`);
    case "22P02":
      return bad(`A value has the wrong format (${pgMessage}).`);
    case "22007":
    case "22008":
      return bad(`A date or time value is invalid (${pgMessage}).`);
    default:
      return bad(`The database refused a value (${pgMessage}).`);
  }
}

/**
 * The whole-amount checks of the core baseline's money tables and what they
 * guard. Only the player's own balance is shown: the bankroll's size is the
 * casino's business.
 */
const WHOLE_AMOUNT_CHECKS: Record<string, { what: string; shown: boolean }> = {
  balance_amount_whole: { what: "the player's balance", shown: true },
  bankroll_amount_whole: { what: "the house bankroll", shown: false },
  bankroll_wagered_whole: { what: "the bankroll's wagered total", shown: false },
  ledger_amount_delta_whole: { what: "a ledger row's amount", shown: false },
  ledger_balance_after_whole: { what: "a ledger row's balance", shown: false },
};

/** The first fractional (or non-finite) number of "Failing row contains (…)", as Postgres printed it. */
function fractionalValue(detail: string | undefined): string | undefined {
  const row = detail ? /^Failing row contains \((.*)\)\.?$/s.exec(detail)?.[1] : undefined;
  return row?.split(", ").find((value) => /^-?(\d+\.\d+(e[-+]?\d+)?|\d+e-\d+|NaN|Infinity)$/i.test(value) && !Number.isInteger(Number(value)));
}

/**
 * A game that wrote a fraction into a balance or bankroll, typically a payout
 * computed by multiplying (the original template's coinflip credits
 * wager × 1.98 − wager) through the lock helpers: the amount, and the fix.
 */
function fractionalAmount({ sqlstate, detail, constraint, table }: Fields & { constraint: string }): ClientInputError {
  const { what, shown } = WHOLE_AMOUNT_CHECKS[constraint]!;
  const value = shown ? fractionalValue(detail) : undefined;
  const message =
    `Amounts are whole numbers of base units, and this would set ${what}${value ? ` to ${value}` : ""} (constraint "${constraint}"${table ? ` on ${table}` : ""}). ` +
    "A payout computed by multiplying must be rounded down before it is written: Math.floor(wager * 1.98) - wager, not wager * 1.98 - wager.";
  return { code: ErrorCode.INVALID_AMOUNT, message, sqlstate, constraint };
}

/** Class 23, integrity constraint violation: named by constraint and table, never by the key values. */
function integrityViolation({ sqlstate, detail, constraint, table, column }: Fields): ClientInputError {
  const of = (name: string | undefined, prefix: string) => (name ? `${prefix}${name}` : "");
  const named = constraint ? ` (constraint "${constraint}"${of(table, " on ")})` : of(table, " (on ");
  const close = !constraint && table ? ")" : "";
  const violated = (message: string): ClientInputError => ({ code: ErrorCode.CONSTRAINT_VIOLATION, message, sqlstate, ...(constraint ? { constraint } : {}) });
  switch (sqlstate) {
    case "23505":
      return violated(`A row with the same ${keyColumns(detail) ?? "key"} already exists${named}${close}.`);
    case "23503": {
      const referenced = detail ? /is still referenced from table "([^"]+)"/.exec(detail)?.[1] : undefined;
      if (referenced) return violated(`The row is still referenced from ${referenced}${named}${close}.`);
      const missing = detail ? /is not present in table "([^"]+)"/.exec(detail)?.[1] : undefined;
      return violated(`${keyColumns(detail) ?? "A reference"} refers to ${missing ? `a row of ${missing}` : "a row"} that does not exist${named}${close}.`);
    }
    case "23514":
      if (constraint && Object.hasOwn(WHOLE_AMOUNT_CHECKS, constraint)) return fractionalAmount({ sqlstate, detail, constraint, table, column, pgMessage: "", where: undefined });
      return violated(`A value is not allowed by a check${named}${close}.`);
    case "23502":
      return violated(`${column ?? "A column"}${of(table, " of ")} must not be null.`);
    case "23P01":
      return violated(`The row conflicts with an existing row${named}${close}.`);
    default:
      return violated(`The change violates an integrity rule of the database${named}${close}.`);
  }
}

/** The innermost PL/pgSQL function of the error's context (Postgres's CONTEXT field, first line). */
const raisedIn = (where: string | undefined): string | undefined => (where ? /function ([\w.]+)\(/.exec(where.split("\n")[0]!)?.[1] : undefined);

/** A ledger refusal of what the caller asked for (P0001 with one of the ledger's client constraints). */
function ledgerRefusal({ sqlstate, pgMessage, constraint, where }: Fields & { constraint: string }): ClientInputError {
  if (constraint === "ledger_sufficient_funds") {
    // The house bankroll's size is the casino's business: a plugin calling
    // adjust_bankroll on a player's behalf must not tell the player.
    const message = raisedIn(where) === "hub_hidden.adjust_bankroll" ? "adjust_bankroll: insufficient funds: the house bankroll cannot cover this change." : pgMessage;
    return { code: ErrorCode.INSUFFICIENT_FUNDS, message, sqlstate, constraint };
  }
  // Amounts are whole base units: the same code as the GraphQL-level check of an amount.
  if (constraint === "ledger_amount_whole") return { code: ErrorCode.INVALID_AMOUNT, message: pgMessage, sqlstate, constraint };
  return { code: ErrorCode.BAD_USER_INPUT, message: pgMessage, sqlstate, constraint };
}

/** The class of a Postgres error a client caused, by its SQLSTATE (and a ledger refusal's constraint), or undefined when it is not one. */
export function classifyClientInputError(error: unknown): ClientInputError | undefined {
  if (!error || typeof error !== "object") return undefined;
  const e = error as PgErrorFields;
  const sqlstate = str(e.code);
  // SQLSTATEs are five characters; node's own error codes (ECONNRESET…) are not.
  if (!sqlstate || !/^[0-9A-Z]{5}$/.test(sqlstate)) return undefined;
  const fields: Fields = { sqlstate, pgMessage: str(e.message) ?? "", detail: str(e.detail), constraint: str(e.constraint), table: str(e.table), column: str(e.column), where: str(e.where) };
  if (sqlstate.startsWith("22")) return dataException(fields);
  if (sqlstate.startsWith("23")) return integrityViolation(fields);
  const { constraint } = fields;
  if (sqlstate === "P0001" && constraint && LEDGER_CLIENT_REFUSALS.has(constraint)) return ledgerRefusal({ ...fields, constraint });
  return undefined;
}
