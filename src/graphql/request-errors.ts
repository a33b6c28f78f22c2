/**
 * Codes for the errors graphql-js, grafast and @dataplan/pg raise about a
 * request without one (syntax, validation, variables, operation name,
 * pagination cursors), so a client can tell every refusal of its input by
 * extensions.code. Each is recognised by where it came from (its class, the
 * node it points at, graphql's own singleton), never by its wording.
 */
import { GraphQLError, Kind, Lexer, TokenKind, getOperationAST, type DocumentNode, type Source, type ValidationContext, type ValidationRule } from "graphql";
import { validationAbortedError } from "graphql/validation/validationAbortedError.js";
import { isSafeError, SafeError } from "grafast";
import { ErrorCode } from "../errors.js";

/**
 * A copy of a GraphQL error at the same place (document nodes, source
 * positions, result path) with another message, cause or extensions: what the
 * client receives instead of the error raised. Extensions left out (or null)
 * are taken from the cause, as GraphQLError does.
 */
export function rebuildGraphQLError(
  error: GraphQLError,
  changes: { message?: string; originalError?: Error | undefined; extensions?: Record<string, unknown> | null },
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

/** A copy of a GraphQL error with this code, unless it has one. */
export function withCode(error: GraphQLError, code: string, message = error.message): GraphQLError {
  if (error.extensions?.code !== undefined && message === error.message) return error;
  return rebuildGraphQLError(error, { message, extensions: { ...error.extensions, code: error.extensions?.code ?? code } });
}

/**
 * A validation rule whose errors carry GRAPHQL_VALIDATION_FAILED unless they
 * have a code of their own (graphql-js's rules give none).
 */
export function withValidationCode(rule: ValidationRule): ValidationRule {
  return (context) => {
    const coded = Object.create(context, {
      reportError: { value: (error: GraphQLError) => context.reportError(withCode(error, ErrorCode.GRAPHQL_VALIDATION_FAILED)) },
    }) as ValidationContext;
    return rule(coded);
  };
}

/** graphql's "give up" error (one shared object), returned when its work budget for comparing fields runs out. */
export const isValidationAborted = (error: GraphQLError): boolean => error === validationAbortedError;

/**
 * Whether a syntax error is graphql's refusal to read past `maxTokens`
 * lexical tokens: raised at the first token beyond them (counted again here,
 * as the parser counts them: comments and the end of the document do not count).
 */
export function isTokenLimit(error: GraphQLError, source: Source, maxTokens: number): boolean {
  const at = error.positions?.[0];
  if (at === undefined) return false;
  const lexer = new Lexer(source);
  let tokens = 0;
  try {
    for (let token = lexer.advance(); token.kind !== TokenKind.EOF; token = lexer.advance()) {
      if (++tokens > maxTokens) return token.start === at;
      if (token.start >= at) return false;
    }
  } catch {
    // A lexical error on the way: that is the syntax error.
  }
  return false;
}

/**
 * grafast's SafeError is an error its author made for the client to read; the
 * ones grafast and @dataplan/pg raise without a code refuse the request's
 * input (a cursor that is not one the API gave, `offset` with `last`, a value
 * of the wrong shape, an update without a patch).
 */
function codeSafeError(error: GraphQLError): GraphQLError | undefined {
  const original = error.originalError;
  if (!original || !isSafeError(original) || original.extensions?.code !== undefined) return undefined;
  // The mask rebuilds a SafeError's GraphQL error from the SafeError's own extensions.
  const coded = new SafeError(original.message, { ...original.extensions, code: ErrorCode.BAD_USER_INPUT });
  return rebuildGraphQLError(error, { originalError: coded });
}

/**
 * The code of an error raised before execution starts: the variables (each
 * such error points at the variable's definition) or the operation to run
 * (none the operation name selects).
 */
function preExecutionCode(error: GraphQLError, args: { document: DocumentNode; operationName?: string | null | undefined }): string | undefined {
  if (error.nodes?.[0]?.kind === Kind.VARIABLE_DEFINITION) return ErrorCode.BAD_USER_INPUT;
  if (!error.originalError && !error.nodes?.length && getOperationAST(args.document, args.operationName) === null) return ErrorCode.OPERATION_RESOLUTION_FAILURE;
  return undefined;
}

/** Codes for the errors of a result that graphql-js, grafast and @dataplan/pg raise without one. */
export function codeRequestErrors<R>(result: R, args: { document: DocumentNode; operationName?: string | null | undefined }): R {
  const r = result as { data?: unknown; errors?: readonly GraphQLError[] } | null;
  if (!r || typeof r !== "object" || !Array.isArray(r.errors)) return result;
  const beforeExecution = !("data" in r);
  let changed = false;
  const errors = r.errors.map((error) => {
    if (!(error instanceof GraphQLError) || typeof error.extensions?.code === "string") return error;
    const coded = codeSafeError(error);
    const code = coded || !beforeExecution ? undefined : preExecutionCode(error, args);
    if (!coded && !code) return error;
    changed = true;
    return coded ?? withCode(error, code!);
  });
  return changed ? ({ ...r, errors } as R) : result;
}
