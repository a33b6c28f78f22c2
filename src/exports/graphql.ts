// The server's own graphql module instance, so `instanceof GraphQLError` holds.
export * from "graphql";
// The hub's error codes (what each means: README, "Error codes") and the
// constructor of a client error that carries one.
export { ErrorCode, ErrorCodes } from "../errors.js";
export { clientError } from "../graphql/client-error.js";
