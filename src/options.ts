import type { LogLevel } from "./config.js";
import { HubError, optionInvalid } from "./errors.js";
import * as parse from "./parse.js";
import { checkWebSocketOption, type WebSocketLimits } from "./live/limits.js";
import { checkTransferOptions } from "./transfers/options.js";

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
  /** Stop cleanly on SIGINT/SIGTERM; default true. */
  handleSignals?: boolean;
  /** Bounds on WebSocket (subscription) connections (README: Live updates). */
  websocket?: Partial<WebSocketLimits>;
  /** Deposits and withdrawals with casinos: the worker's intervals, timeouts and connector kinds (README: "Deposits and withdrawals"). */
  transfers?: import("./transfers/options.js").TransferOptions;
}

/** What each option must be: the text of what was expected, or undefined when the value is fine. */
const KNOWN: Record<keyof ServerOptions, (v: unknown) => string | undefined> = {
  plugins: (v) => (Array.isArray(v) && v.every((p) => typeof p === "object" && p !== null && typeof (p as { name?: unknown }).name === "string") ? undefined : "an array of Graphile plugins (objects with a name), e.g. [...defaultPlugins, MyPlugin]"),
  extraPgSchemas: (v) => (Array.isArray(v) && v.every((s) => "value" in parse.pgSchemaName(s)) ? undefined : 'an array of Postgres schema names, e.g. ["app"]'),
  configureApp: (v) => (typeof v === "function" ? undefined : "a function receiving { app, superuserPool } (or the app)"),
  userDatabaseMigrationsPath: checkedBy(parse.filePath("a directory path")),
  exportSchemaSDLPath: checkedBy(parse.filePath("a file path")),
  port: checkedWithTheEnvironment,
  host: checkedWithTheEnvironment,
  dataDir: checkedWithTheEnvironment,
  databaseUrl: checkedWithTheEnvironment,
  superuserDatabaseUrl: checkedWithTheEnvironment,
  logLevel: checkedWithTheEnvironment,
  identityCacheTtlMs: checkedBy(parse.milliseconds),
  playground: checkedWithTheEnvironment,
  maxQueryDepth: checkedBy(parse.integerAtLeast(1)),
  maxQueryAliases: checkedBy(parse.integerAtLeast(0)),
  maxQuerySelections: checkedBy(parse.integerAtLeast(1)),
  introspection: checkedWithTheEnvironment,
  statementTimeoutMs: checkedBy(parse.wholeMilliseconds),
  requestTimeoutMs: checkedBy(parse.wholeMilliseconds),
  shutdownTimeoutMs: checkedBy(parse.wholeMilliseconds),
  perIdentityConnections: checkedBy(parse.integerAtLeast(1)),
  perIdentityQueue: checkedBy(parse.integerAtLeast(0)),
  dashboard: checkedWithTheEnvironment,
  graphiql: checkedBy(parse.boolean),
  handleSignals: checkedBy(parse.boolean),
  websocket: checkWebSocketOption,
  transfers: checkTransferOptions,
};

function checkedBy(parser: parse.Parser<unknown>): (v: unknown) => string | undefined {
  return (v) => parse.expectedOf(parser(v));
}

/** Settings that override an environment variable: readConfig checks them with the variable's rule and message. */
function checkedWithTheEnvironment(): undefined {
  return undefined;
}

export const KNOWN_OPTIONS = Object.keys(KNOWN) as (keyof ServerOptions)[];

/** Reject misspelt or mistyped options up front, naming what was received. */
export function validateOptions(options: unknown): ServerOptions {
  if (options === undefined) return {};
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new HubError("HUB_OPTION_INVALID", `startAndListen expects an options object; received ${typeof options}.`);
  }
  for (const [key, value] of Object.entries(options)) {
    const check = KNOWN[key as keyof ServerOptions];
    if (!check) {
      throw new HubError(
        "HUB_OPTION_UNKNOWN",
        `Unknown server option "${key}". Known options: ${KNOWN_OPTIONS.join(", ")}.`,
      );
    }
    if (value === undefined) continue;
    const expected = check(value);
    if (expected) throw optionInvalid(key, value, expected);
  }
  return options as ServerOptions;
}
