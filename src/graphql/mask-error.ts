/**
 * What a client sees of an error (grafserv's maskError, makeMaskError below):
 * errors raised on purpose pass; database outages, saturation and timeouts get
 * their own code; refusals of the client's input are the client's error; any
 * other error is a fault of the server, logged with a reference id.
 *
 * Input a client sent that the database refused is the client's mistake, not a
 * fault of the server. Whichever code sent it to Postgres (PostGraphile's own
 * SQL, a resolver-style plugin, a plan-style plugin on superuserPool), the error
 * reaches the GraphQL mask with its SQLSTATE, so it is classified here, once:
 * the client gets a message saying what was wrong and a stable code, and the
 * log gets an info line instead of an error with a stack.
 *
 * Two refusals are also made before the database is reached, where that is
 * cheap and gives a sharper message: NUL characters in the request (Postgres
 * text cannot hold U+0000) and negative pagination arguments (`first: -1`
 * would otherwise silently become `LIMIT 0`, because one extra row is fetched
 * to compute hasNextPage).
 *
 * Errors that graphql-js, grafast and @dataplan/pg raise about a request
 * without a code (validation, variables, operation name, pagination cursors)
 * get one, so a client can tell every refusal of its input by extensions.code.
 */
import {
  GraphQLError,
  Kind,
  type ASTNode,
  type ASTVisitor,
  type GraphQLErrorExtensions,
  type ObjectFieldNode,
  type ValidationContext,
  type ValidationRule,
} from "graphql";
import { isPromiseLike, isSafeError, lambda, SafeError, type FieldArg } from "grafast";
import { randomBytes } from "node:crypto";
import type { Logger } from "../logger.js";
import { ErrorCode } from "../errors.js";
import { isPoolSaturated } from "../db/pools.js";
import { requestIdOf } from "./request-id.js";

/**
 * A copy of a GraphQL error at the same place (document nodes, source
 * positions, result path) with another message, cause or extensions: what the
 * client receives instead of the error raised. Extensions left out (or null)
 * are taken from the cause, as GraphQLError does.
 */
export function rebuildGraphQLError(
  error: GraphQLError,
  changes: { message?: string; originalError?: Error | undefined; extensions?: GraphQLErrorExtensions | null },
): GraphQLError {
  return new GraphQLError(changes.message ?? error.message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    originalError: changes.originalError ?? error.originalError,
    extensions: changes.extensions ?? null,
  });
}

// ------------------------------------------------------------------ the mask

/**
 * Errors a plugin throws on purpose (GraphQLError, grafast SafeError) reach the
 * client as they are; anything else is an internal failure: the client gets an
 * id, the log gets the error with the same id (never `console`).
 */
export function makeMaskError(log: Logger) {
  return (error: GraphQLError): GraphQLError => {
    const original = error.originalError;
    if (!original && error instanceof GraphQLError) return error;
    if (original instanceof GraphQLError) return error;
    if (original != null && isSafeError(original)) {
      return rebuildGraphQLError(error, { message: original.message, extensions: (original as { extensions?: Record<string, unknown> }).extensions ?? null });
    }
    const reqId = requestIdOf(error);
    const refused = maskClientInputError(error, original, log, reqId);
    if (refused) return refused;
    const errorId = randomBytes(6).toString("hex");
    // Failures a client should treat differently from a bug: say what they are
    // (and nothing more), so clients can retry an outage or shrink a query.
    const known = classifyDatabaseError(original);
    // A saturated pool or a query cut by the statement timeout is load, not a
    // fault of the server's code: worth a warning, not an error-level alert.
    const level = known?.code === ErrorCode.SERVER_BUSY || known?.code === ErrorCode.STATEMENT_TIMEOUT ? "warn" : "error";
    log[level]({ errorId, reqId, err: original ?? error, path: error.path, code: known?.code }, "masked GraphQL error");
    if (known) {
      return rebuildGraphQLError(error, { message: known.message, extensions: { errorId, code: known.code } });
    }
    return rebuildGraphQLError(error, {
      message: `Internal error (reference ${errorId}); the server log has the details.`,
      extensions: { errorId, code: ErrorCode.INTERNAL_SERVER_ERROR },
    });
  };
}

/** Connection-level failures (Postgres stopped, restarting, unreachable) and statement timeouts. */
export function classifyDatabaseError(error: unknown): { code: string; message: string } | undefined {
  const e = error as { code?: unknown; message?: unknown } | null | undefined;
  if (!e || typeof e !== "object") return undefined;
  const code = typeof e.code === "string" ? e.code : "";
  const message = typeof e.message === "string" ? e.message : "";
  // insufficient_privilege: a grant or policy the operator has yet to add, not a bug to hunt in the code.
  if (code === "42501") {
    return { code: ErrorCode.SERVER_MISCONFIGURED, message: "The server's configuration is incomplete: it lacks a database permission this operation needs. The server log says which, and the statement that adds it." };
  }
  if (code === "57014" && /statement timeout/.test(message)) {
    return { code: ErrorCode.STATEMENT_TIMEOUT, message: "The query took longer than the server's statement timeout and was cancelled." };
  }
  // Every pooled connection stayed in use for the whole connection timeout: busy, not down.
  if (isPoolSaturated(error)) {
    return { code: ErrorCode.SERVER_BUSY, message: "The server is busy: every database connection stayed in use; retry shortly." };
  }
  if (
    ["57P01", "57P02", "57P03", "53300", "ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT"].includes(code) ||
    code.startsWith("08") ||
    /Connection terminated|not queryable|Client has encountered a connection error/i.test(message)
  ) {
    return { code: ErrorCode.DATABASE_UNAVAILABLE, message: "The database is unavailable; retry shortly." };
  }
  return undefined;
}

// ------------------------------------------------------ refused by the database

/** Codes of client errors raised from database refusals (README: "Errors caused by the client's input"). */
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
 * Ledger refusals (SQLSTATE P0001 from hub_hidden.credit_balance & co.) whose
 * cause is the amount, account or reason a caller asked for. The other ledger
 * refusals (ledger_actor, ledger_append_only) can only come from server code
 * and stay internal errors.
 */
const LEDGER_CLIENT_REFUSALS = new Set([
  "ledger_sufficient_funds",
  "ledger_amount_positive",
  "ledger_amount_whole",
  "ledger_known_account",
  "ledger_reason",
]);

interface PgErrorFields {
  code?: unknown;
  message?: unknown;
  detail?: unknown;
  constraint?: unknown;
  table?: unknown;
  column?: unknown;
}

const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

/** "Key (casino_id, uname)=(…) already exists." → "casino_id, uname" (the values are left out). */
function keyColumns(detail: string | undefined): string | undefined {
  return detail ? /^Key \(([^)]*)\)=/.exec(detail)?.[1] : undefined;
}

/** The class of a Postgres error a client caused, or undefined when it is not one. */
export function classifyClientInputError(error: unknown): ClientInputError | undefined {
  if (!error || typeof error !== "object") return undefined;
  const e = error as PgErrorFields;
  const sqlstate = str(e.code);
  // SQLSTATEs are five characters; node's own error codes (ECONNRESET…) are not.
  if (!sqlstate || !/^[0-9A-Z]{5}$/.test(sqlstate)) return undefined;
  const pgMessage = str(e.message) ?? "";
  const detail = str(e.detail);
  const constraint = str(e.constraint);
  const table = str(e.table);
  const column = str(e.column);
  const of = (name: string | undefined, prefix: string) => (name ? `${prefix}${name}` : "");
  const bad = (message: string): ClientInputError => ({ code: ErrorCode.BAD_USER_INPUT, message, sqlstate });
  const violated = (message: string): ClientInputError => ({ code: ErrorCode.CONSTRAINT_VIOLATION, message, sqlstate, ...(constraint ? { constraint } : {}) });

  if (sqlstate.startsWith("22")) {
    switch (sqlstate) {
      case "22021": // character_not_in_repertoire: the NUL byte, or invalid UTF-8
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

  if (sqlstate.startsWith("23")) {
    const named = constraint ? ` (constraint "${constraint}"${of(table, " on ")})` : of(table, " (on ");
    const close = !constraint && table ? ")" : "";
    switch (sqlstate) {
      case "23505": {
        const cols = keyColumns(detail);
        return violated(`A row with the same ${cols ?? "key"} already exists${named}${close}.`);
      }
      case "23503": {
        const referenced = detail ? /is still referenced from table "([^"]+)"/.exec(detail)?.[1] : undefined;
        if (referenced) return violated(`The row is still referenced from ${referenced}${named}${close}.`);
        const missing = detail ? /is not present in table "([^"]+)"/.exec(detail)?.[1] : undefined;
        const cols = keyColumns(detail);
        return violated(`${cols ?? "A reference"} refers to ${missing ? `a row of ${missing}` : "a row"} that does not exist${named}${close}.`);
      }
      case "23514":
        return violated(`A value is not allowed by a check${named}${close}.`);
      case "23502":
        return violated(`${column ?? "A column"}${of(table, " of ")} must not be null.`);
      case "23P01":
        return violated(`The row conflicts with an existing row${named}${close}.`);
      default:
        return violated(`The change violates an integrity rule of the database${named}${close}.`);
    }
  }

  if (sqlstate === "P0001" && constraint && LEDGER_CLIENT_REFUSALS.has(constraint)) {
    if (constraint === "ledger_sufficient_funds") {
      // The house bankroll's size is the casino's business: a plugin calling
      // adjust_bankroll on a player's behalf must not tell the player.
      const message = /^adjust_bankroll:/.test(pgMessage) ? "adjust_bankroll: insufficient funds: the house bankroll cannot cover this change." : pgMessage;
      return { code: ErrorCode.INSUFFICIENT_FUNDS, message, sqlstate, constraint };
    }
    // Amounts are whole base units: the same code as the GraphQL-level check of an amount.
    if (constraint === "ledger_amount_whole") return { code: ErrorCode.INVALID_AMOUNT, message: pgMessage, sqlstate, constraint };
    return { code: ErrorCode.BAD_USER_INPUT, message: pgMessage, sqlstate, constraint };
  }
  return undefined;
}

/**
 * The client's version of a masked error whose cause is a database refusal of
 * client input, logged at info; undefined when the cause is anything else.
 */
export function maskClientInputError(error: GraphQLError, original: unknown, log: Logger, reqId: string | undefined): GraphQLError | undefined {
  const known = classifyClientInputError(original);
  if (!known) return undefined;
  const { code, message, sqlstate, constraint } = known;
  log.info({ reqId, code, sqlstate, constraint, path: error.path, reason: (original as Error).message }, "request refused: the database rejected the client's input");
  return rebuildGraphQLError(error, { message, originalError: original as Error, extensions: { code, sqlstate, ...(constraint ? { constraint } : {}) } });
}

// --------------------------------------------------------- before the database

/** Whether a JSON value holds a NUL character in any string or key (iterative: nesting can be deep). */
function hasNul(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === "string") {
      if (v.includes("\u0000")) return true;
    } else if (Array.isArray(v)) {
      for (const item of v) stack.push(item);
    } else if (v && typeof v === "object") {
      for (const key in v) {
        if (key.includes("\u0000")) return true;
        stack.push((v as Record<string, unknown>)[key]);
      }
    }
  }
  return false;
}

/**
 * Where in a JSON value the first NUL character is ("input.uname", "ids[2]"),
 * or undefined. The common case (none) costs one walk without bookkeeping.
 */
export function findNul(value: unknown, at: string): string | undefined {
  if (!hasNul(value)) return undefined;
  // Found: walk again, spelling out the path (each node: its parent's index and its own key).
  const parents: number[] = [-1];
  const keys: string[] = [at];
  const stack: [unknown, number][] = [[value, 0]];
  const pathOf = (index: number, last = ""): string => {
    let path = last;
    for (let i = index; i >= 0; i = parents[i]!) path = keys[i]! + path;
    return path;
  };
  while (stack.length > 0) {
    const [v, index] = stack.pop()!;
    if (typeof v === "string") {
      if (v.includes("\u0000")) return pathOf(index);
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) {
        stack.push([v[i], keys.push(`[${i}]`) - 1]);
        parents.push(index);
      }
    } else if (v && typeof v === "object") {
      for (const [key, inner] of Object.entries(v).reverse()) {
        if (key.includes("\u0000")) return pathOf(index, `.${JSON.stringify(key)}`);
        stack.push([inner, keys.push(`.${key}`) - 1]);
        parents.push(index);
      }
    }
  }
  return undefined;
}

/** String literals of the document (arguments, defaults, list and object values). */
const noNulLiteralsRule: ValidationRule = (context: ValidationContext): ASTVisitor => ({
  StringValue(node, _key, parent, _path, ancestors) {
    if (!node.value.includes("\u0000")) return;
    const arg = context.getArgument();
    const field = context.getFieldDef();
    // The input fields on the way from the argument to this string: "input.currency".
    const inner: string[] = [];
    for (const a of [...ancestors, parent]) if (a && !Array.isArray(a) && (a as ASTNode).kind === Kind.OBJECT_FIELD) inner.push((a as ObjectFieldNode).name.value);
    const at = arg && inner.length ? ` (at ${[arg.name, ...inner].join(".")})` : "";
    const where = arg && field ? `the value of argument "${arg.name}"${at} of field "${field.name}"` : "a string in the document";
    context.reportError(
      new GraphQLError(`${where[0]!.toUpperCase()}${where.slice(1)} contains a NUL character (\\u0000), which the database cannot store.`, {
        nodes: [node],
        extensions: { code: ErrorCode.BAD_USER_INPUT },
      }),
    );
  },
});

/** A copy of a GraphQL error with this code, unless it has one. */
export function withCode(error: GraphQLError, code: string, message = error.message): GraphQLError {
  if (error.extensions?.code !== undefined && message === error.message) return error;
  return rebuildGraphQLError(error, { message, extensions: { ...error.extensions, code: error.extensions?.code ?? code } });
}

/**
 * A validation rule whose errors carry GRAPHQL_VALIDATION_FAILED unless they
 * have a code of their own (graphql-js's rules give none).
 */
function withValidationCode(rule: ValidationRule): ValidationRule {
  return (context) => {
    const coded = Object.create(context, {
      reportError: { value: (error: GraphQLError) => context.reportError(withCode(error, ErrorCode.GRAPHQL_VALIDATION_FAILED)) },
    }) as ValidationContext;
    return rule(coded);
  };
}

/**
 * Refusals of pagination arguments that grafast and @dataplan/pg raise as
 * SafeErrors without a code (their messages are for the client already).
 */
const PAGINATION_REFUSALS = /^(Invalid cursor|Invalid '(after|before)' cursor|Cannot use 'offset' with 'last'|Can only use '(after|before)' cursor when)/;

/**
 * Codes for the errors of a result that graphql-js, grafast and @dataplan/pg
 * raise without one: the request's variables or operation name (before
 * execution starts: the result has no data) and pagination cursors.
 */
function codeRequestErrors<R>(result: R): R {
  const r = result as { data?: unknown; errors?: readonly GraphQLError[] } | null;
  if (!r || typeof r !== "object" || !Array.isArray(r.errors)) return result;
  const beforeExecution = !("data" in r);
  let changed = false;
  const errors = r.errors.map((error) => {
    if (!(error instanceof GraphQLError) || typeof error.extensions?.code === "string") return error;
    const original = error.originalError;
    if (original && isSafeError(original) && original.extensions?.code === undefined && PAGINATION_REFUSALS.test(original.message)) {
      changed = true;
      // The mask rebuilds a SafeError's GraphQL error from the SafeError's own extensions.
      const coded = new SafeError(original.message, { ...original.extensions, code: ErrorCode.BAD_USER_INPUT });
      return rebuildGraphQLError(error, { originalError: coded });
    }
    if (!beforeExecution) return error;
    const code = /^Variable "\$/.test(error.message)
      ? ErrorCode.BAD_USER_INPUT
      : /^(Unknown operation named|Must provide operation name|Must provide an operation)/.test(error.message)
        ? ErrorCode.OPERATION_RESOLUTION_FAILURE
        : undefined;
    if (!code) return error;
    changed = true;
    return withCode(error, code);
  });
  return changed ? ({ ...r, errors } as R) : result;
}

const PAGINATION_ARGS = ["first", "last", "offset"] as const;

function nonNegative(argName: string) {
  return (value: unknown) => {
    if (typeof value === "number" && value < 0) {
      throw new SafeError(`${argName} must not be negative; received ${value}.`, { code: ErrorCode.BAD_USER_INPUT });
    }
    return value;
  };
}

/** Wraps the plans of `first`, `last` and `offset` of connection and list fields with a check. */
function guardPaginationArgs<Args extends Record<string, { type: unknown; applyPlan?: ((...a: any[]) => unknown) | undefined }>>(
  args: Args,
  build: GraphileBuild.Build,
  context: { scope: object },
): Args {
  const { isPgFieldConnection, isPgFieldSimpleCollection } = context.scope as { isPgFieldConnection?: boolean; isPgFieldSimpleCollection?: boolean };
  if (!isPgFieldConnection && !isPgFieldSimpleCollection) return args;
  for (const name of PAGINATION_ARGS) {
    const arg = args[name];
    const applyPlan = arg?.applyPlan;
    if (!arg || !applyPlan || arg.type !== build.graphql.GraphQLInt) continue;
    const check = nonNegative(name);
    arg.applyPlan = (parent: unknown, $target: unknown, fieldArg: FieldArg) =>
      applyPlan(parent, $target, {
        ...fieldArg,
        getRaw: ((path?: string | ReadonlyArray<string | number>) =>
          path === undefined ? lambda(fieldArg.getRaw(), check, true) : fieldArg.getRaw(path)) as FieldArg["getRaw"],
      });
  }
  return args;
}

/**
 * NUL characters are refused for the whole request, in variables (before
 * parsing) and in literals (at validation, cached with the document);
 * `first`, `last` and `offset` of every connection and list field must not be
 * negative. graphql-js's own validation, variable and operation errors get a
 * code.
 */
export const ClientInputPlugin: GraphileConfig.Plugin = {
  name: "HubClientInputPlugin",
  version: "0.1.0",
  after: ["PgFirstLastBeforeAfterArgsPlugin"],
  grafserv: {
    middleware: {
      setPreset(next, event) {
        event.validationRules = [...event.validationRules.map(withValidationCode), noNulLiteralsRule];
        return next();
      },
      processGraphQLRequestBody(next, event) {
        // grafserv has already parsed the body (JSON, or GET's query string) into variableValues.
        const variables = (event.body as { variableValues?: unknown }).variableValues;
        if (variables && typeof variables === "object" && !Array.isArray(variables)) {
          for (const [name, value] of Object.entries(variables)) {
            const at = findNul(value, name);
            if (at) {
              const where = at === name ? "" : ` (at ${at})`;
              throw new SafeError(`Variable "$${name}" contains a NUL character (\\u0000)${where}, which the database cannot store.`, {
                statusCode: 400,
                code: ErrorCode.BAD_USER_INPUT,
              });
            }
          }
        }
        return next();
      },
    },
  },
  grafast: {
    middleware: {
      execute(next) {
        const result = next();
        return isPromiseLike(result) ? result.then(codeRequestErrors) : codeRequestErrors(result);
      },
    },
  },
  schema: {
    hooks: {
      GraphQLObjectType_fields_field_args: guardPaginationArgs,
      GraphQLInterfaceType_fields_field_args: guardPaginationArgs,
    },
  },
};
