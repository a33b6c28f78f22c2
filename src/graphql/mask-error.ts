/**
 * What a client sees of an error (grafserv's maskError): errors raised on
 * purpose pass; refusals of the client's input are the client's error, logged
 * at info; database outages, saturation and timeouts get their own code; any
 * other error is a fault of the server, logged with a reference id.
 *
 * Input a client sent that the database refused is the client's mistake, not a
 * fault of the server. Whichever code sent it to Postgres (PostGraphile's own
 * SQL, a resolver-style plugin, a plan-style plugin on superuserPool), the error
 * reaches this mask with its SQLSTATE; src/db/error-class.ts says what it is.
 */
import { GraphQLError } from "graphql";
import { isSafeError } from "grafast";
import { randomBytes } from "node:crypto";
import type { Logger } from "../logger.js";
import { ErrorCode } from "../errors.js";
import { classifyClientInputError, classifyDatabaseError, isCommitInDoubt } from "../db/error-class.js";
import { requestIdOf } from "./request-id.js";
import { rebuildGraphQLError } from "./request-errors.js";
import { committedOf } from "./committed.js";
import { outcomeUnknownMessage, type CommittedMoney } from "../money/committed.js";

// Where the transfers' mutations have always imported it from.
export { classifyClientInputError } from "../db/error-class.js";

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
    const commits = committedOf(error);
    if (commits) return maskAfterCommit(error, original, commits, log, reqId);
    if (isCommitInDoubt(original)) return maskCommitInDoubt(error, original, log, reqId);
    const refused = maskClientInputError(error, original, log, reqId);
    if (refused) return refused;
    const errorId = randomBytes(6).toString("hex");
    // Failures a client should treat differently from a bug: say what they are
    // (and nothing more), so clients can retry an outage or shrink a query.
    const known = classifyDatabaseError(original);
    // A saturated pool, a query cut by the statement timeout, a transaction
    // Postgres rolled back for a conflict: load, answered with a code the client
    // retries on, so a warning rather than an error-level alert (the log line
    // keeps Postgres's report, which names a deadlock's two statements).
    const warnOnly: readonly string[] = [ErrorCode.SERVER_BUSY, ErrorCode.STATEMENT_TIMEOUT, ErrorCode.TRANSACTION_CONFLICT];
    const level = known && warnOnly.includes(known.code) ? "warn" : "error";
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

/**
 * A failure in a request that had committed money (the payload read back
 * after the commit, on another connection): OUTCOME_COMMITTED, never a
 * retryable code, with what committed (ids, idempotency key) in extensions.
 */
function maskAfterCommit(error: GraphQLError, original: unknown, commits: readonly CommittedMoney[], log: Logger, reqId: string | undefined): GraphQLError {
  const errorId = randomBytes(6).toString("hex");
  const cause = classifyDatabaseError(original)?.code ?? classifyClientInputError(original)?.code ?? ErrorCode.INTERNAL_SERVER_ERROR;
  log.warn({ errorId, reqId, err: original ?? error, path: error.path, cause, commits }, "a request failed after committing money");
  const last = commits[commits.length - 1]!;
  const ids = Object.entries(last.ids).map(([name, id]) => `${name} ${id}`).join(", ");
  const retry = last.idempotencyKey !== undefined
    ? `retry with the same idempotency key (${JSON.stringify(last.idempotencyKey)}) to read its answer; nothing will move again`
    : "do not send it again (it would move money again); read the result by its id, and send an idempotencyKey with money mutations to retry safely";
  return rebuildGraphQLError(error, {
    message: `${last.operation} committed (${ids}), but its answer could not be read back (${cause}): ${retry}.`,
    extensions: {
      errorId, code: ErrorCode.OUTCOME_COMMITTED, cause, operation: last.operation, ...last.ids,
      ...(last.idempotencyKey !== undefined ? { idempotencyKey: last.idempotencyKey } : {}),
      ...(commits.length > 1 ? { committed: commits.map((c) => ({ operation: c.operation, ...c.ids, idempotencyKey: c.idempotencyKey ?? null })) } : {}),
    },
  });
}

/**
 * A COMMIT whose answer the lost connection took with it: the mutation may or
 * may not have taken effect, so it is OUTCOME_UNKNOWN, never a code that says
 * "retry" (a retry without an idempotency key could move money twice).
 */
function maskCommitInDoubt(error: GraphQLError, original: unknown, log: Logger, reqId: string | undefined): GraphQLError {
  const errorId = randomBytes(6).toString("hex");
  const operation = typeof error.path?.[0] === "string" ? error.path[0] : "the mutation";
  log.warn({ errorId, reqId, err: original, path: error.path }, "the connection was lost while a transaction was committing: its outcome is unknown");
  return rebuildGraphQLError(error, {
    message: outcomeUnknownMessage(operation, undefined),
    extensions: { errorId, code: ErrorCode.OUTCOME_UNKNOWN, cause: ErrorCode.DATABASE_UNAVAILABLE, operation },
  });
}

