/**
 * Every error code of the hub, in one place, each with what it means.
 *
 * Two vocabularies, kept apart because they reach different people:
 * - `ErrorCode`: what a client receives, as a GraphQL error's
 *   `extensions.code` or as the `code` of an HTTP error body. Clients test
 *   these, so they never change meaning.
 * - `HubErrorCode`: what the process itself reports (start-up, options,
 *   migrations, the command-line tool, the test kit) on a `HubError`, for the
 *   operator's logs, alerts and tests.
 *
 * Messages say what was received and what was expected, so a reader can act
 * on an error without reading the source. This module is loaded before
 * Postgres is spawned, so it imports nothing: the GraphQL constructor built on
 * these codes, `clientError`, lives in client-error.ts.
 */

/** The codes clients receive, with what each means. */
export const ErrorCodes = {
  // Who is calling
  UNAUTHENTICATED: "The operation needs an identity and the request carries none (no, unknown, expired or revoked credential).",
  FORBIDDEN: "The request's identity is of the wrong kind for the operation (a player calling an operator mutation, an operator playing a game).",
  // The document
  GRAPHQL_PARSE_FAILED: "The document is not valid GraphQL syntax.",
  GRAPHQL_VALIDATION_FAILED: "The document does not fit the schema (unknown field, wrong literal, missing argument, introspection off).",
  OPERATION_RESOLUTION_FAILURE: "No operation of the requested operationName is in the document.",
  OPERATION_TYPE_NOT_SUPPORTED: "The operation's root type is not in the schema.",
  QUERY_TOO_LARGE: "The document has more field selections, or lexical tokens, than the server accepts.",
  QUERY_TOO_DEEP: "Selections are nested deeper than the server accepts.",
  TOO_MANY_ALIASES: "The document has more aliases than the server accepts.",
  QUERY_TOO_COMPLEX: "graphql gave up comparing overlapping fields of the document.",
  // The input
  BAD_USER_INPUT: "A value the client sent does not fit: a variable's type, a malformed value the database refused, a NUL character, a negative page size, a bad cursor.",
  INVALID_AMOUNT: "An amount is not a whole number of base units from 1 to 2^53 − 1 (or the smallest the operation accepts).",
  CONSTRAINT_VIOLATION: "The database refused the change as an integrity violation (unique, foreign key, check, not null, exclusion).",
  INSUFFICIENT_FUNDS: "A debit beyond the balance or the house bankroll.",
  UNAME_TAKEN: "hubCreatePlaygroundSession: a player of that name already exists in the playground casino.",
  // Provably fair games (hash chains, hubMakeOutcomeBet)
  HASH_CHAIN_NOT_FOUND: "hubRevealHashChain: the chain id is not one of this player's chains in the session's casino and experience.",
  INVALID_OUTCOMES: "hubMakeOutcomeBet: the outcomes are too few or too many, a weight is negative or not finite, the weights sum to 0, or a profit is below -1 or not finite.",
  HOUSE_EDGE_TOO_LOW: "hubMakeOutcomeBet: the outcomes' weighted mean profit is above -houseEdge of the bet kind (the player's edge would be too good).",
  INVALID_CLIENT_SEED: "hubMakeOutcomeBet: the client seed is longer than 32 characters or contains control characters.",
  UNKNOWN_CURRENCY: "The currency key is not a currency of the session's casino, or the house has no bankroll in it.",
  // Casino token exchange (hubAuthenticate)
  UNKNOWN_CASINO: "No casino has the given id or base URL.",
  CASINO_NOT_CONFIGURED: "The casino has no public key or JWKS URL registered, so its tokens cannot be verified.",
  CASINO_KEYS_UNAVAILABLE: "The casino's key set (its JWKS URL) could not be fetched: no answer in time, refused, not HTTP 200, larger than the hub reads, not a JSON key set, no usable public key, or private key material in it. The casino is unreachable or misconfigured, not the player's token; extensions.casinoId names it (and extensions.limit the size limit, when that was the cause).",
  USER_TOKEN_EXPIRED: "The casino's user token has expired.",
  USER_TOKEN_BAD_SIGNATURE: "The user token was not signed by the key registered for the casino.",
  USER_TOKEN_CLAIM: "A claim of the user token is missing or not acceptable (player name, experience, issuer, audience).",
  USER_TOKEN_MALFORMED: "The user token is not a signed JWT the hub accepts (syntax, or an algorithm outside RS*, PS*, ES*, EdDSA).",
  // Deposits and withdrawals with the casino (src/transfers/)
  TRANSFER_MISMATCH: "A casino reported a transfer id already recorded with another amount, player, experience or currency: refused and logged at error level (the first record stands).",
  TRANSFER_INVALID: "An incoming transfer lacks a field or has one the hub cannot accept (an id, player or experience name of 1 to 200 characters, a known currency).",
  TRANSFER_NOT_FOUND: "No withdrawal request has the given id.",
  TRANSFER_NOT_PENDING: "The withdrawal is no longer pending (completed or refunded): nothing to retry or refund.",
  TRANSFER_IN_PROGRESS: "A worker is talking to the casino about this withdrawal right now; try again in a moment.",
  TRANSFER_REFUND_UNSAFE: "The withdrawal cannot be refunded: the casino applied it, or a send may still reach it, or the casino cannot say; the message says which.",
  TRANSFERS_NOT_CONFIGURED: "The casino has no transfer endpoint: no base URL and no url set by hubSetCasinoTransfers, so nothing can be sent to it or fetched from it.",
  CASINO_UNREACHABLE: "The casino's transfer endpoint did not give a usable answer (timeout, connection error, 5xx, malformed body).",
  CASINO_ANSWER_TOO_LARGE: "An answer of a casino's transfer endpoint (a page of transfers or take requests, an outcome) was larger than the hub reads (1 MiB): read only that far, nothing of it used; recorded as the transfer job's last error, naming the casino and the limit, and retried like an unknown outcome.",
  // Idempotency keys of money mutations
  IDEMPOTENCY_KEY_REUSED: "The idempotency key was already used by this player (or API key) for another operation or with other input within the last 24 hours: nothing was done.",
  OUTCOME_COMMITTED: "The money mutation committed, but reading its answer back failed (the database went away after the commit): do not repeat it without its idempotency key; extensions name what committed.",
  OUTCOME_UNKNOWN: "The connection to the database was lost while a money mutation was committing, so whether it took effect is unknown: retry with the same idempotency key to learn which; without one, check the player's bets and balance before sending it again.",
  // Load and faults
  TOO_MANY_REQUESTS: "This player or API key already has its share of requests, superuser connections or hash chain creations in use: slow down (HTTP 429 when refused on arrival or in an Express route).",
  SERVER_BUSY: "Every connection of a hub pool stayed in use for 10 s: Postgres is up, the server is saturated; retry.",
  DATABASE_UNAVAILABLE: "Postgres cannot be reached or lost the connection; retry shortly.",
  STATEMENT_TIMEOUT: "A query ran past the statement timeout and was cancelled.",
  // Subscriptions (WebSocket)
  SUBSCRIPTION_NEEDS_WEBSOCKET: "A subscription was sent over HTTP POST or GET: open a WebSocket to the GraphQL path (graphql-transport-ws) instead.",
  TOO_MANY_OPERATIONS: "A WebSocket connection already runs as many operations as the server allows: complete one first, or open another connection.",
  LIVE_CURSOR_EXPIRED: "A live alert subscription's after names a cursor whose following alerts are no longer kept (the hub keeps at least an hour's and the last 10,000): refetch the state, then subscribe without after.",
  INTERNAL_SERVER_ERROR: "A fault of the server; the message holds a reference logged with the details.",
  // The bet history (the query hubBets, and GET /bets of the reference routes)
  INVALID_LIMIT: "GET /bets: ?limit= is not a whole number from 1 to 1000, or is given more than once; hubBets: first is not from 1 to 1000.",
  INVALID_CURSOR: "GET /bets: ?before= is not the id of a bet, or is given more than once; hubBets: after is not the cursor of a bet.",
  UNKNOWN_BET_KIND: "hubBets: kind names no table tagged @hubBet; the message lists the kinds there are.",
  UNKNOWN_PARAMETER: "GET /bets: a query parameter other than limit and before.",
  // Bets (dbSettleBet and every game settled through it)
  METADATA_TOO_LARGE: "A bet's metadata is larger than the hub stores (8192 bytes as JSON; extensions.limit says so).",
  // Chat (hubChat* mutations)
  CHAT_BODY_EMPTY: "A chat message's body is empty or only spaces.",
  CHAT_BODY_TOO_LONG: "A chat message's body has more than 500 characters (Unicode code points); extensions.limit holds the limit.",
  CHAT_BODY_CONTROL_CHARACTER: "A chat message's body contains a control character (a line break, tab, NUL, DEL or a C1 control) or a Unicode line or paragraph separator (U+2028, U+2029): a body is one line.",
  CHAT_NOT_FOUND: "A chat operation names a player, experience or message that does not exist, or a player outside the casino or experience it acts in.",
  CHAT_NOT_MUTED: "hubChatUnmuteUser: the player has no mute in force to end.",
  CHAT_MODERATION_FORBIDDEN: "hubChatMuteUser / hubChatUnmuteUser: a mod tried to lift or change a mute an operator made (an operator outranks a mod), or their own mute; nothing changed.",
  CHAT_MUTE_INVALID: "hubChatMuteUser: expiredAt is not in the future, or the reason has more than 500 characters or is not one line (a control character, U+2028, U+2029).",
  // Configuration
  SERVER_MISCONFIGURED: "The server's configuration is incomplete: the database refused the server access it needs (SQLSTATE 42501, e.g. a table of a user migration without its GRANT to app_postgraphile); the server log names the object and the statement to run.",
  // Operator updates and the faucet
  BANKROLL_NOT_FOUND: "updateHubBankrollById: no house bankroll has the given id.",
  READ_ONLY_FIELD: "An update's patch changes a field the hub keeps itself (a bankroll's bets, wagered, expected value or keys): only amount may differ.",
  FAUCET_NOT_ENABLED: "hubClaimFaucet: the operator has not enabled the faucet for that currency in the session's casino (or the currency does not exist).",
  FAUCET_TOO_SOON: "hubClaimFaucet: the player already claimed that currency in this experience within the cooldown; extensions.retryAfterSeconds says how long to wait.",
  // Take requests (the casino takes a player's funds back)
  TAKE_REQUEST_INVALID: "A take request lacks a field or has one the hub cannot accept (a UUID id, player and experience names of 1 to 200 characters, a currency of the casino): not received, nothing reserved.",
  TAKE_REQUEST_MISMATCH: "A casino reported a take request id already received with another casino, amount, player, experience or currency: refused and logged at error level (the first report stands).",
  TAKE_REQUEST_INSUFFICIENT_FUNDS: "A take request asks for more than the player's balance (or for the whole of an empty balance): recorded REJECTED with insufficientBalanceError, nothing taken, the casino told.",
  TAKE_REQUEST_EXPIRED: "The casino did not apply a take request's transfer before the hub gave up (transfers.takeRequestTimeoutMs) and says it never applied it: recorded REJECTED, the reserve returned through the ledger, the casino told.",
  TAKE_REQUESTS_NOT_SUPPORTED: "hubSetCasinoTransfers: takeRequests is true but the casino's connector has no take requests (fetchTakeRequests, transferTake, lookupTake, rejectTake).",
} as const;

export type ErrorCode = keyof typeof ErrorCodes;

/** The codes as constants (`ErrorCode.UNAUTHENTICATED === "UNAUTHENTICATED"`), for clients and plugins to compare and throw. */
export const ErrorCode = Object.freeze(
  Object.fromEntries(Object.keys(ErrorCodes).map((code) => [code, code])) as { readonly [C in ErrorCode]: C },
);

/** The codes of HubError, with what each means. */
export const HubErrorCodes = {
  HUB_CONFIG_INVALID: "An environment variable (or HUB_CONFIG's module) is malformed; the message names it, what it received and what it expects.",
  HUB_OPTION_UNKNOWN: "startAndListen (or startTestServer) received an option it does not know; the message lists the known ones.",
  HUB_OPTION_INVALID: "An option of startAndListen (or startTestServer) has a value it does not accept.",
  HUB_INVALID_ARGUMENT: "A function of the hub's API (a test kit helper, createSession) was called with an argument it does not accept, or one naming a row that does not exist.",
  HUB_DB_ROLE: "The GraphQL connection's user cannot switch to app_postgraphile and the hub could not grant it; the message prints the GRANT to run.",
  HUB_DB_CONNECT: "A database connection failed or was lost during start-up.",
  HUB_DB_TLS: "A database URL asks for TLS and the server's certificate did not verify against its CA (sslrootcert), or a TLS file it names cannot be read; the message names the variable and the file.",
  HUB_DATABASE_REQUIRED: "No database URL is set where the embedded Postgres is not allowed (NODE_ENV=production, or HUB_EMBEDDED_POSTGRES=off); the message names DATABASE_URL, SUPERUSER_DATABASE_URL and HUB_EMBEDDED_POSTGRES.",
  HUB_EMBEDDED_PG: "The embedded Postgres could not be initialised, started or shared.",
  HUB_MIGRATION_FAILED: "A migration failed, is not valid UTF-8, or has a hub:replaces-checksum line that names no checksum; nothing of it was applied.",
  HUB_MIGRATION_CHANGED: "A migration already applied has changed since, and does not declare the text it replaces (hub:replaces-checksum).",
  HUB_MIGRATION_PRE_BASELINE: "The database has some but not all of the core migrations 0001 to 0029 that the baseline (0029-baseline) replaces: start it once with a hub from before the baseline, which applies the rest, then with this one.",
  HUB_MIGRATION_NAME: "The migrations folder cannot be read, a numbered file is not named like 001-name.sql, or two files share a number.",
  HUB_NESTED_TRANSACTION: "withPgClientTransaction was called on a client already inside a transaction it began.",
  HUB_NOT_STARTED: "The superuserPool exported by @hubpkg/hub/db was used before the server started.",
  HUB_CLI_USAGE: "The command line does not fit the grammar of the `hub` tool, or `node dist/server.js` was given an argument (it takes none) (exit status 2).",
  HUB_CLI_FAILED: "A command of the tool failed for a reason its message fully explains: no such key, casino or player, a duplicate name (exit status 1).",
  HUB_ROUTE_CONFLICT: "A route or mount of configureApp takes a path the hub serves itself (the dashboard, /graphql, /graphiql), so it would never run; the message names both.",
  HUB_PLUGIN_FAILED: "Building the GraphQL schema failed, usually in a plugin; the message names the file and line it was thrown at, or the plugin, the field and the type at fault (an unknown type in `typeDefs`, a resolver for an undeclared field, a mutation without a resolver).",
  HUB_PORT_IN_USE: "The server could not listen: the port is taken (or needs privileges); the message names the port and the setting to change.",
  HUB_POOL_SATURATED: "Every connection of a hub database pool stayed in use for the whole connection timeout (10 s): raised to the code that asked for one; a GraphQL client receives SERVER_BUSY.",
} as const;

export type HubErrorCode = keyof typeof HubErrorCodes;

export class HubError extends Error {
  readonly code: HubErrorCode;
  constructor(code: HubErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "HubError";
    this.code = code;
  }
}

/** Quote a received value for an error message without flooding the log. */
export function describeValue(value: unknown): string {
  if (value === undefined) return "undefined";
  if (typeof value === "number" && !Number.isFinite(value)) return String(value); // JSON would say null
  let text: string;
  try {
    text = typeof value === "string" ? JSON.stringify(value) : JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}

export const configInvalid = (variable: string, received: unknown, expected: string): HubError =>
  new HubError(
    "HUB_CONFIG_INVALID",
    `Environment variable ${variable} is invalid: received ${describeValue(received)}, expected ${expected}.`,
  );

/** `at` names the place inside the option's value (websocket.maxOperations, plugins[0]) when that is not the whole value. */
export const optionInvalid = (option: string, received: unknown, expected: string, at?: string): HubError =>
  new HubError(
    "HUB_OPTION_INVALID",
    `Server option "${option}" is invalid${at ? ` at ${at}` : ""}: received ${describeValue(received)}, expected ${expected}.`,
  );

/** A call of the hub's API whose arguments do not fit (a test kit helper naming a row that does not exist). */
export const invalidArgument = (message: string): HubError => new HubError("HUB_INVALID_ARGUMENT", message);

/**
 * A number outside the range an API function accepts: still a RangeError, as
 * such checks throw in JavaScript, with the catalogue's code.
 */
export const argumentOutOfRange = (message: string): RangeError & { readonly code: "HUB_INVALID_ARGUMENT" } =>
  Object.assign(new RangeError(message), { code: "HUB_INVALID_ARGUMENT" as const });
