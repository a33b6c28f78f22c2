import { readConfig, type HubConfig, type LogLevel } from "./config.js";
import { HubError, optionInvalid } from "./errors.js";
import { optionChecker, pathText } from "./option-schema.js";
import { WEBSOCKET_OPTION_SCHEMA, webSocketLimits, type WebSocketLimits } from "./live/limits.js";
import { resolveTransferOptions, TRANSFER_OPTIONS_SCHEMA, type ResolvedTransferOptions } from "./transfers/options.js";
import { DEFAULT_QUERY_LIMITS } from "./graphql/query-limits.js";
import { DEFAULT_IDENTITY_LIMITS } from "./db/identity-limit.js";

/** What `configureApp` receives in the object form. */
export interface ConfigureAppArgs<App> {
  app: App;
  superuserPool: import("pg").Pool;
}

/**
 * Both revisions of the interface in one type: the argument is the Express app
 * itself, carrying `app` (itself) and `superuserPool`, so
 * `({ app, superuserPool }) => …` and `(app) => …` both type-check and run.
 */
export type ConfigureAppArgument<App = import("express").Express> = App & ConfigureAppArgs<App>;
export type ConfigureApp<App = import("express").Express> = (arg: ConfigureAppArgument<App>) => void | Promise<void>;

export interface ServerOptions {
  /** Plugins that build the GraphQL schema; `[...defaultPlugins, X]` keeps the hub's own. */
  plugins?: GraphileConfig.Plugin[];
  /** More Postgres schemas to expose, e.g. ["app"]. */
  extraPgSchemas?: string[];
  /** Adds Express routes and middleware. */
  configureApp?: ConfigureApp;
  /** A directory of NNN-name.sql files applied once each, in order, at start-up. */
  userDatabaseMigrationsPath?: string;
  /** Where to write the schema's SDL at every start. */
  exportSchemaSDLPath?: string;
  /** Overrides of the environment (README: Configuration). */
  port?: number;
  host?: string;
  dataDir?: string;
  /** With superuserDatabaseUrl, or neither: the pair replaces DATABASE_URL and SUPERUSER_DATABASE_URL. */
  databaseUrl?: string;
  superuserDatabaseUrl?: string;
  logLevel?: LogLevel;
  /**
   * How long a checked credential is reused without a database query (ms,
   * default 1000). Revocations reach every instance at once via LISTEN/NOTIFY;
   * this is the bound when that connection is down.
   */
  identityCacheTtlMs?: number;
  /** hubCreatePlaygroundSession in the schema (default: HUB_PLAYGROUND, else on with the embedded database outside production). */
  playground?: boolean;
  /** Deepest selection nesting accepted (default 16). */
  maxQueryDepth?: number;
  /** Most aliases in one GraphQL document (default 50). */
  maxQueryAliases?: number;
  /** Most field selections once fragments are expanded (default 1000). */
  maxQuerySelections?: number;
  /** Allow the embedded Postgres when no database URL is set (default: HUB_EMBEDDED_POSTGRES, else only outside production). */
  embeddedPostgres?: boolean;
  /** Allow introspection (default: HUB_INTROSPECTION, else on outside production). */
  introspection?: boolean;
  /** Postgres statement_timeout for GraphQL requests, ms (default 10000; 0 = none). */
  statementTimeoutMs?: number;
  /** Longest time to receive a whole request, ms (default 30000). */
  requestTimeoutMs?: number;
  /** How long stop() waits for in-flight requests before closing connections, ms (default 10000). */
  shutdownTimeoutMs?: number;
  /**
   * Most superuser-pool connections the GraphQL context's `superuserPool` lets
   * one player (or one API key) hold at once (default 3).
   */
  perIdentityConnections?: number;
  /** How many more of its requests may wait for one of those (default 256); beyond, TOO_MANY_REQUESTS. */
  perIdentityQueue?: number;
  /** The operator's dashboard: true (at /admin, the default), false (not served) or the path to serve it at. */
  dashboard?: boolean | string;
  /** Serve Ruru (GraphiQL); default: on outside production. */
  graphiql?: boolean;
  /**
   * graphile's lenient mode: a recoverable schema error (a plugin's unknown
   * type, a naming conflict) is logged and the part it affects left out,
   * instead of stopping the start with HUB_PLUGIN_FAILED (default false).
   */
  lenientSchema?: boolean;
  /**
   * startAndListen only: stop cleanly on SIGINT/SIGTERM (the drain, then the
   * close), then exit the process (default false: the library leaves the
   * process alone; `node dist/server.js` and the `hub init` project handle
   * their signals themselves). Ignored by the Fastify plugin and buildHub.
   */
  handleSignals?: boolean;
  /** Bounds on WebSocket (subscription) connections (README: Live updates). */
  websocket?: Partial<WebSocketLimits>;
  /** Deposits and withdrawals with casinos: the worker's intervals, timeouts and connector kinds (README: "Deposits and withdrawals"). */
  transfers?: import("./transfers/options.js").TransferOptions;
  /** The most connections to Postgres this instance opens in all, split across its pools (HUB_MAX_CONNECTIONS; docs/deployment.md). */
  maxConnections?: number;
  /** Each pool's most connections, instead of its share of maxConnections (or of today's defaults). */
  pools?: { graphql?: number; superuser?: number; credentials?: number; transferWorker?: number };
  /** A superuser URL straight to Postgres, bypassing any pooler: LISTEN and migrations (DIRECT_DATABASE_URL). */
  directDatabaseUrl?: string;
  /** "transaction" when the database URLs lead to a transaction pooler such as PgBouncer (HUB_DATABASE_POOLER). */
  databasePooler?: "none" | "transaction";
  /** The liveness path, answered without database work: true (at /healthz, the default), false, or the path (HUB_LIVENESS_PATH). */
  livenessPath?: boolean | string;
  /** The readiness path, 503 while draining: true (at /readyz, the default), false, or the path (HUB_READINESS_PATH). */
  readinessPath?: boolean | string;
  /**
   * How long stop() (and SIGTERM) keeps serving, with readiness answering 503
   * and every response `Connection: close`, before it stops accepting, ms
   * (HUB_DRAIN_MS; default 5000 in production, else 0).
   */
  drainMs?: number;
  /**
   * Which peers are proxies whose X-Forwarded-For gives the client's address
   * and whose X-Request-ID is taken as the request id: true, a number of hops,
   * or addresses and CIDR ranges (HUB_TRUST_PROXY; default none).
   */
  trustProxy?: boolean | number | string | string[];
  /**
   * Instances sharing a database move WebSockets off the one holding more
   * than its share: true, false, or its settings (HUB_SOCKET_REBALANCE;
   * default on in production).
   */
  socketRebalance?: boolean | Partial<import("./live/rebalance-options.js").SocketRebalance>;
}

const integerAtLeast = (min: number) => ({ type: "integer", minimum: min, expected: `an integer >= ${min}` });
const wholeMilliseconds = { type: "integer", minimum: 0, expected: "an integer number of milliseconds >= 0" };
const trueOrFalse = { type: "boolean", expected: "true or false" };
const path = (what: string) => ({ type: "string", pattern: "\\S", expected: what });
/** Settings that override an environment variable: readConfig checks them with the variable's rule and message. */
const checkedWithTheEnvironment = {};

/** What each option must be (the schema's `expected` words the message). */
const OPTION_SCHEMAS: Record<keyof ServerOptions, object> = {
  plugins: {
    type: "array",
    expected: "an array of Graphile plugins (objects with a name), e.g. [...defaultPlugins, MyPlugin]",
    items: { type: "object", required: ["name"], properties: { name: { type: "string" } }, expected: "a Graphile plugin (an object with a name)" },
  },
  extraPgSchemas: {
    type: "array",
    expected: 'an array of Postgres schema names, e.g. ["app"]',
    items: { type: "string", pattern: "^[A-Za-z_][A-Za-z0-9_$]*$", expected: 'a Postgres schema name such as "app"' },
  },
  configureApp: { isFunction: true, expected: "a function receiving { app, superuserPool } (or the app)" },
  userDatabaseMigrationsPath: path("a directory path"),
  exportSchemaSDLPath: path("a file path"),
  port: checkedWithTheEnvironment,
  host: checkedWithTheEnvironment,
  dataDir: checkedWithTheEnvironment,
  databaseUrl: checkedWithTheEnvironment,
  superuserDatabaseUrl: checkedWithTheEnvironment,
  logLevel: checkedWithTheEnvironment,
  identityCacheTtlMs: { type: "number", minimum: 0, expected: "a number of milliseconds >= 0" },
  playground: checkedWithTheEnvironment,
  maxQueryDepth: integerAtLeast(1),
  maxQueryAliases: integerAtLeast(0),
  maxQuerySelections: integerAtLeast(1),
  embeddedPostgres: checkedWithTheEnvironment,
  introspection: checkedWithTheEnvironment,
  statementTimeoutMs: wholeMilliseconds,
  requestTimeoutMs: wholeMilliseconds,
  shutdownTimeoutMs: wholeMilliseconds,
  perIdentityConnections: integerAtLeast(1),
  perIdentityQueue: integerAtLeast(0),
  dashboard: checkedWithTheEnvironment,
  graphiql: trueOrFalse,
  lenientSchema: trueOrFalse,
  handleSignals: trueOrFalse,
  websocket: WEBSOCKET_OPTION_SCHEMA,
  transfers: TRANSFER_OPTIONS_SCHEMA,
  maxConnections: checkedWithTheEnvironment,
  pools: {
    type: "object",
    expected: "an object with any of graphql, superuser, credentials, transferWorker (each an integer >= 1)",
    additionalProperties: false,
    properties: { graphql: integerAtLeast(1), superuser: integerAtLeast(1), credentials: integerAtLeast(1), transferWorker: integerAtLeast(1) },
  },
  directDatabaseUrl: checkedWithTheEnvironment,
  databasePooler: checkedWithTheEnvironment,
  livenessPath: checkedWithTheEnvironment,
  readinessPath: checkedWithTheEnvironment,
  drainMs: checkedWithTheEnvironment,
  trustProxy: checkedWithTheEnvironment,
  socketRebalance: checkedWithTheEnvironment,
};

export const KNOWN_OPTIONS = Object.keys(OPTION_SCHEMAS) as (keyof ServerOptions)[];

const checkOptions = optionChecker({ type: "object", properties: OPTION_SCHEMAS, additionalProperties: false });

/** Reject misspelt or mistyped options up front, naming what was received. */
export function validateOptions(options: unknown, entry = "startAndListen"): ServerOptions {
  if (options === undefined) return {};
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new HubError("HUB_OPTION_INVALID", `${entry} expects an options object; received ${typeof options}.`);
  }
  const problem = checkOptions(options);
  if (!problem) return options as ServerOptions;
  const [option, ...inner] = problem.path.map(String);
  if (problem.unknownKey && inner.length === 0) {
    throw new HubError("HUB_OPTION_UNKNOWN", `Unknown server option "${option}". Known options: ${KNOWN_OPTIONS.join(", ")}.`);
  }
  throw optionInvalid(option!, problem.received, problem.expected, inner.length ? pathText(problem.path) : undefined);
}

/**
 * Every setting a server runs with, resolved once: the options checked, the
 * environment merged under them (readConfig: the options override their
 * variables), and each default filled in. What the server reads, it reads here.
 */
export interface ResolvedOptions extends HubConfig {
  /** The plugins option as given: undefined means defaultPlugins (resolved where the schema is built, to keep this module light). */
  plugins: GraphileConfig.Plugin[] | undefined;
  extraPgSchemas: string[];
  configureApp: ConfigureApp | undefined;
  userDatabaseMigrationsPath: string | undefined;
  exportSchemaSDLPath: string | undefined;
  /** Whether the port came from the options (a taken port is then reported as the option's). */
  portFromOption: boolean;
  logPretty: boolean;
  identityCacheTtlMs: number;
  maxQueryDepth: number;
  maxQueryAliases: number;
  maxQuerySelections: number;
  statementTimeoutMs: number;
  requestTimeoutMs: number;
  shutdownTimeoutMs: number;
  perIdentityConnections: number;
  perIdentityQueue: number;
  graphiql: boolean;
  lenientSchema: boolean;
  handleSignals: boolean;
  websocket: WebSocketLimits;
  transfers: ResolvedTransferOptions;
  pools: ServerOptions["pools"];
}

/** Check the options, read the environment under them, and fill in every default: one object for the whole server. */
export function resolveOptions(raw: unknown, env: Record<string, string | undefined> = process.env, entry?: string): ResolvedOptions {
  const options = validateOptions(raw, entry);
  const config = readConfig(env, options as Record<string, unknown>);
  const production = config.nodeEnv === "production";
  return {
    ...config,
    plugins: options.plugins,
    extraPgSchemas: options.extraPgSchemas ?? [],
    configureApp: options.configureApp,
    userDatabaseMigrationsPath: options.userDatabaseMigrationsPath,
    exportSchemaSDLPath: options.exportSchemaSDLPath,
    portFromOption: options.port !== undefined,
    logPretty: config.logPretty ?? (config.nodeEnv === "development" && process.stdout.isTTY === true),
    identityCacheTtlMs: options.identityCacheTtlMs ?? 1000,
    maxQueryDepth: options.maxQueryDepth ?? DEFAULT_QUERY_LIMITS.maxDepth,
    maxQueryAliases: options.maxQueryAliases ?? DEFAULT_QUERY_LIMITS.maxAliases,
    maxQuerySelections: options.maxQuerySelections ?? DEFAULT_QUERY_LIMITS.maxSelections,
    statementTimeoutMs: options.statementTimeoutMs ?? 10_000,
    requestTimeoutMs: options.requestTimeoutMs ?? 30_000,
    shutdownTimeoutMs: options.shutdownTimeoutMs ?? 10_000,
    perIdentityConnections: options.perIdentityConnections ?? DEFAULT_IDENTITY_LIMITS.connections,
    perIdentityQueue: options.perIdentityQueue ?? DEFAULT_IDENTITY_LIMITS.queue,
    graphiql: options.graphiql ?? !production,
    lenientSchema: options.lenientSchema ?? false,
    handleSignals: options.handleSignals ?? false,
    websocket: webSocketLimits(options.websocket),
    transfers: resolveTransferOptions(options.transfers),
    pools: options.pools,
  };
}
