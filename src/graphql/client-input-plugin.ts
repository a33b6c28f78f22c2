import { isPromiseLike } from "grafast";
import { noNulLiteralsRule, refuseNulVariables } from "./nul-input.js";
import { guardPaginationArgs } from "./pagination-guard.js";
import { codeRequestErrors, withValidationCode } from "./request-errors.js";

/**
 * The refusals of a client's input made before the database, where that is
 * cheap and gives a sharper message, and codes for graphql-js's own errors:
 * NUL characters are refused for the whole request, in variables (before
 * parsing) and in literals (at validation, cached with the document);
 * `first`, `last` and `offset` of every connection and list field must not be
 * negative; graphql-js's validation, variable and operation errors, and
 * grafast's refusals of cursors, get a code.
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
        refuseNulVariables((event.body as { variableValues?: unknown }).variableValues);
        return next();
      },
    },
  },
  grafast: {
    middleware: {
      execute(next, event) {
        const result = next();
        return isPromiseLike(result) ? result.then((r) => codeRequestErrors(r, event.args)) : codeRequestErrors(result, event.args);
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
