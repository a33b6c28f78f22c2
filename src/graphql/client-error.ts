import { GraphQLError, type GraphQLErrorExtensions } from "graphql";
import type { ErrorCode } from "../errors.js";

/**
 * A GraphQL error for the client: its message reaches the client as written,
 * with `extensions.code` from the catalogue (src/errors.ts) and any further
 * extensions (a limit, the SQLSTATE, the constraint).
 */
export function clientError(code: ErrorCode, message: string, extensions?: GraphQLErrorExtensions): GraphQLError {
  return new GraphQLError(message, { extensions: Object.assign({ code }, extensions, { code }) });
}
