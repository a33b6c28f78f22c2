import path from "node:path";
import { configInvalid, HubError, optionInvalid } from "./errors.js";
import * as parse from "./parse.js";
import type { Parsed } from "./parse.js";
import { DEFAULT_SOCKET_REBALANCE, socketRebalanceOption, type SocketRebalance } from "./live/rebalance-options.js";
import { trustProxyOption, trustProxyText, type TrustProxy } from "./trust-proxy.js";

/**
 * The process configuration: the environment (README: Configuration), each
 * setting overridable by its `startAndListen` option. Both sources go through
 * the same rules below, with the same messages; only the name of the source
 * differs ("Environment variable PORT" / "Server option "port"").
 */
export interface HubConfig {
  /** Connection used by GraphQL requests; it switches to `app_postgraphile` per request. */
  databaseUrl: string | undefined;
  /** Connection for migrations and `superuserPool`. */
  superuserDatabaseUrl: string | undefined;
  /** The variable that gave databaseUrl, for messages about that connection. */
  databaseUrlVariable: "DATABASE_URL" | "POSTGRAPHILE_DATABASE_URL";
  /** LOG_PRETTY: true for pino-pretty, false for JSON; unset: pretty in a development terminal. */
  logPretty: boolean | undefined;
  port: number;
  host: string;
  nodeEnv: "development" | "production" | "test";
  logLevel: LogLevel;
  /** Absolute path; holds the embedded database when no URL is set. */
  dataDir: string;
  /** HUB_EMBEDDED_POSTGRES: whether the embedded Postgres may run when no URL is set (default: outside production only). */
  embeddedPostgres: boolean;
  /** hubCreatePlaygroundSession in the schema: on by default with the embedded database, outside production. */
  playground: boolean;
  /** GraphQL introspection: on by default outside production. */
  introspection: boolean;
  /** Where the operator's dashboard is served (default /admin), or false: not served. */
  dashboard: string | false;
  /** HUB_MAX_CONNECTIONS: the most connections this instance opens in all (src/db/connection-budget.ts); undefined: the pools' own sizes. */
  maxConnections: { value: number; from: "env" | "option" } | undefined;
  /** DIRECT_DATABASE_URL: a superuser connection that bypasses any pooler, for LISTEN and migrations. */
  directDatabaseUrl: string | undefined;
  /** HUB_DATABASE_POOLER: "transaction" when the URLs lead to a transaction pooler (PgBouncer). */
  databasePooler: DatabasePooler;
  /** The liveness path (default /healthz), or false: not served. */
  livenessPath: string | false;
  /** The readiness path (default /readyz), or false: not served. */
  readinessPath: string | false;
  /** How long stop() keeps serving, with readiness 503, before it stops accepting (ms; 5000 in production, else 0). */
  drainMs: number;
  /** Which peers may set X-Forwarded-For and X-Request-ID (default: none). */
  trustProxy: TrustProxy;
  /** Moving WebSockets off an instance that holds more than its share (default: on in production). */
  socketRebalance: SocketRebalance | false;
}

export const DATABASE_POOLERS = ["none", "transaction"] as const;
export type DatabasePooler = (typeof DATABASE_POOLERS)[number];

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
const NODE_ENVS = ["development", "production", "test"] as const;

type Env = Record<string, string | undefined>;

/**
 * One setting: its environment variable, its option (if it has one), and how
 * a value from either is parsed. `env` receives the variable's text; `option_`
 * the option's value. Where the two can hold the same kind of value they share
 * one parser (and so one message).
 */
interface Rule<T> {
  variable: string;
  option?: string;
  env(raw: string): Parsed<T>;
  option_?(value: unknown): Parsed<T>;
}

export const DEFAULT_DASHBOARD_PATH = "/admin";
const dataDirPath = parse.filePath("a directory path (default ./.hub)");
const logLevel = parse.oneOf(LOG_LEVELS);

export const RULES = {
  port: { variable: "PORT", option: "port", env: parse.portText, option_: parse.port } as Rule<number>,
  host: { variable: "HOST", option: "host", env: parse.host, option_: parse.host } as Rule<string>,
  nodeEnv: { variable: "NODE_ENV", env: parse.oneOf(NODE_ENVS) } as Rule<HubConfig["nodeEnv"]>,
  logLevel: { variable: "LOG_LEVEL", option: "logLevel", env: logLevel, option_: logLevel } as Rule<LogLevel>,
  dataDir: { variable: "HUB_DATA_DIR", option: "dataDir", env: dataDirPath, option_: dataDirPath } as Rule<string>,
  databaseUrl: { variable: "DATABASE_URL", option: "databaseUrl", env: parse.postgresUrl, option_: parse.postgresUrl } as Rule<string>,
  // The GraphQL connection under the name existing controller templates' .env files give it; the same setting as DATABASE_URL.
  postgraphileDatabaseUrl: { variable: "POSTGRAPHILE_DATABASE_URL", env: parse.postgresUrl } as Rule<string>,
  logPretty: { variable: "LOG_PRETTY", env: parse.trueFalse } as Rule<boolean>,
  superuserDatabaseUrl: { variable: "SUPERUSER_DATABASE_URL", option: "superuserDatabaseUrl", env: parse.postgresUrl, option_: parse.postgresUrl } as Rule<string>,
  playground: {
    variable: "HUB_PLAYGROUND",
    option: "playground",
    env: (raw) => (raw === "auto" ? { value: undefined } : raw === "on" || raw === "off" ? parse.onOff(raw) : { expected: "on, off or auto" }),
    option_: parse.boolean,
  } as Rule<boolean | undefined>,
  embeddedPostgres: { variable: "HUB_EMBEDDED_POSTGRES", option: "embeddedPostgres", env: parse.onOff, option_: parse.boolean } as Rule<boolean>,
  introspection: { variable: "HUB_INTROSPECTION", option: "introspection", env: parse.onOff, option_: parse.boolean } as Rule<boolean>,
  // The operator's dashboard: on (at /admin), off, or moved to another path.
  dashboard: {
    variable: "HUB_DASHBOARD",
    option: "dashboard",
    env: (raw) => (raw === "on" ? { value: DEFAULT_DASHBOARD_PATH } : raw === "off" ? { value: false } : parse.dashboardPath(raw, "on, off or")),
    option_: (v) => (v === true ? { value: DEFAULT_DASHBOARD_PATH } : v === false ? { value: false } : parse.dashboardPath(v, "true, false or")),
  } as Rule<string | false>,
  // The connection budget and the pooler (docs/deployment.md).
  maxConnections: {
    variable: "HUB_MAX_CONNECTIONS",
    option: "maxConnections",
    env: (raw) => (/^\d{1,6}$/.test(raw) ? parse.integerAtLeast(1)(Number(raw)) : { expected: "an integer >= 1" }),
    option_: parse.integerAtLeast(1),
  } as Rule<number>,
  directDatabaseUrl: { variable: "DIRECT_DATABASE_URL", option: "directDatabaseUrl", env: parse.postgresUrl, option_: parse.postgresUrl } as Rule<string>,
  databasePooler: { variable: "HUB_DATABASE_POOLER", option: "databasePooler", env: parse.oneOf(DATABASE_POOLERS), option_: parse.oneOf(DATABASE_POOLERS) } as Rule<DatabasePooler>,
  livenessPath: healthPathRule("HUB_LIVENESS_PATH", "livenessPath", "/healthz"),
  readinessPath: healthPathRule("HUB_READINESS_PATH", "readinessPath", "/readyz"),
  drainMs: { variable: "HUB_DRAIN_MS", option: "drainMs", env: parse.wholeMillisecondsText, option_: parse.wholeMilliseconds } as Rule<number>,
  trustProxy: { variable: "HUB_TRUST_PROXY", option: "trustProxy", env: trustProxyText, option_: trustProxyOption } as Rule<TrustProxy>,
  socketRebalance: {
    variable: "HUB_SOCKET_REBALANCE",
    option: "socketRebalance",
    env: (raw) => (raw === "on" ? { value: DEFAULT_SOCKET_REBALANCE } : raw === "off" ? { value: false } : { expected: "on or off" }),
    option_: socketRebalanceOption,
  } as Rule<SocketRebalance | false>,
} satisfies Record<string, Rule<unknown>>;

/** A health path: on (its default), off, or another path; never one the hub uses. */
function healthPathRule(variable: string, option: string, fallback: string): Rule<string | false> {
  return {
    variable,
    option,
    env: (raw) => (raw === "on" ? { value: fallback } : raw === "off" ? { value: false } : parse.servedPath(raw, `on, off or a path such as ${fallback}`)),
    option_: (v) => (v === true ? { value: fallback } : v === false ? { value: false } : parse.servedPath(v, `true, false or a path such as ${fallback}`)),
  };
}

type Settings = typeof RULES;
type ValueOf<K extends keyof Settings> = Settings[K] extends Rule<infer T> ? T : never;

/** Never echo a database password into a log or an error message. */
export function redactUrl(raw: string): string {
  return raw.replace(/^([a-z]+:\/\/[^:/@]*:)[^@]*@/i, "$1***@");
}

/** Where a setting's value came from: the error names it that way. */
type Source = "env" | "option";

function invalid(rule: Rule<unknown>, source: Source, received: unknown, what: string): HubError {
  const shown = typeof received === "string" && /URL/.test(rule.variable) ? redactUrl(received) : received;
  return source === "option" ? optionInvalid(rule.option!, shown, what) : configInvalid(rule.variable, shown, what);
}

const nameOf = (rule: Rule<unknown>, source: Source) => (source === "option" ? `"${rule.option!}"` : rule.variable);

export type ConfigOptions = Partial<Record<string, unknown>>;

/**
 * The configuration from the environment, each setting overridden by its
 * option when that is given. An empty variable counts as unset.
 */
export function readConfig(env: Env = process.env, options: ConfigOptions = {}): HubConfig {
  const pick = <K extends keyof Settings>(key: K): { value: ValueOf<K>; source: Source } | undefined => {
    const rule = RULES[key] as Rule<ValueOf<K>>;
    const fromOption = rule.option !== undefined ? options[rule.option] : undefined;
    if (fromOption !== undefined) {
      const checked = rule.option_!(fromOption);
      if ("expected" in checked) throw invalid(rule, "option", fromOption, checked.expected);
      return { value: checked.value, source: "option" };
    }
    const raw = env[rule.variable];
    if (raw === undefined || (raw === "" && key !== "dataDir")) return undefined;
    const checked = rule.env(raw);
    if ("expected" in checked) throw invalid(rule, "env", raw, checked.expected);
    return { value: checked.value, source: "env" };
  };

  const nodeEnv = pick("nodeEnv")?.value ?? "development";
  const { databaseUrl, superuserDatabaseUrl, databaseUrlVariable } = databaseUrls(env, options, pick);
  const embeddedPostgres = embeddedAllowed(nodeEnv, databaseUrl, pick("embeddedPostgres"));
  const host = pick("host")?.value;
  const dataDir = pick("dataDir")?.value;
  const config: HubConfig = {
    databaseUrl,
    superuserDatabaseUrl,
    databaseUrlVariable,
    logPretty: pick("logPretty")?.value,
    port: pick("port")?.value ?? 4000,
    host: host ?? (nodeEnv === "production" ? "0.0.0.0" : "127.0.0.1"),
    nodeEnv,
    logLevel: pick("logLevel")?.value ?? (nodeEnv === "test" ? "warn" : "info"),
    dataDir: path.resolve(dataDir ?? ".hub"),
    embeddedPostgres,
    introspection: pick("introspection")?.value ?? nodeEnv !== "production",
    dashboard: pick("dashboard")?.value ?? DEFAULT_DASHBOARD_PATH,
    // Anyone can mint playground players: never on in production unless asked for.
    playground: pick("playground")?.value ?? (databaseUrl === undefined && nodeEnv !== "production"),
    ...sessionSettings(databaseUrl, pick),
    livenessPath: pick("livenessPath")?.value ?? "/healthz",
    readinessPath: pick("readinessPath")?.value ?? "/readyz",
    // A proxy needs a few seconds to see readiness fail; a developer's Ctrl-C should not wait.
    drainMs: pick("drainMs")?.value ?? (nodeEnv === "production" ? 5000 : 0),
    trustProxy: pick("trustProxy")?.value ?? false,
    socketRebalance: pick("socketRebalance")?.value ?? (nodeEnv === "production" ? DEFAULT_SOCKET_REBALANCE : false),
  };
  checkHealthPaths(config, (key) => pick(key)?.source);
  return config;
}

/**
 * Production without database URLs would otherwise start, without a word, on
 * a Postgres inside this machine's data dir, listening on 0.0.0.0: refused
 * unless HUB_EMBEDDED_POSTGRES (or the option) asks for exactly that.
 */
function embeddedAllowed(nodeEnv: HubConfig["nodeEnv"], databaseUrl: string | undefined, chosen: { value: boolean; source: Source } | undefined): boolean {
  const allowed = chosen?.value ?? nodeEnv !== "production";
  if (databaseUrl !== undefined || allowed) return allowed;
  const why = chosen
    ? `${nameOf(RULES.embeddedPostgres, chosen.source)} is ${chosen.source === "option" ? "false" : "off"}`
    : "NODE_ENV is production";
  throw new HubError(
    "HUB_DATABASE_REQUIRED",
    `No database is configured and ${why}, so the embedded Postgres is not started. Set DATABASE_URL and SUPERUSER_DATABASE_URL ` +
      `(postgres:// URLs of your Postgres: the GraphQL connection and the superuser one), or set HUB_EMBEDDED_POSTGRES=on ` +
      `(option embeddedPostgres: true) to run the embedded Postgres in HUB_DATA_DIR on this machine.`,
  );
}

/**
 * A health check under the dashboard's path, or both checks on one path,
 * would not be answered as configured: refused, naming the setting given
 * (the dashboard's when the check kept its default path).
 */
function checkHealthPaths(config: HubConfig, sourceOf: (key: "livenessPath" | "readinessPath" | "dashboard") => Source | undefined): void {
  for (const key of ["livenessPath", "readinessPath"] as const) {
    const at = config[key];
    if (at === false) continue;
    const { dashboard } = config;
    const inDashboard = dashboard !== false && (at === dashboard || at.startsWith(`${dashboard}/`));
    const sameAsLiveness = key === "readinessPath" && at === config.livenessPath;
    if (!inDashboard && !sameAsLiveness) continue;
    const what = inDashboard ? `the dashboard's (${String(dashboard)})` : `the liveness check's (${at})`;
    const source = sourceOf(key);
    if (source) throw invalid(RULES[key], source, at, `a path other than ${what}`);
    throw invalid(RULES.dashboard, sourceOf("dashboard") ?? "env", dashboard, `a path that does not hold the ${key === "livenessPath" ? "liveness" : "readiness"} check's ${at}`);
  }
}

/**
 * The connection budget, and what needs a session: behind a transaction
 * pooler, LISTEN and the migrations' advisory lock go to DIRECT_DATABASE_URL,
 * so a pooler without it is refused, and so is either with the embedded database.
 */
function sessionSettings(
  databaseUrl: string | undefined,
  pick: <K extends "maxConnections" | "directDatabaseUrl" | "databasePooler">(key: K) => { value: ValueOf<K>; source: Source } | undefined,
): Pick<HubConfig, "maxConnections" | "directDatabaseUrl" | "databasePooler"> {
  const max = pick("maxConnections");
  const direct = pick("directDatabaseUrl");
  const pooler = pick("databasePooler");
  const databasePooler = pooler?.value ?? "none";
  if (databaseUrl === undefined && direct) {
    throw invalid(RULES.directDatabaseUrl, direct.source, direct.value, "unset with the embedded database (it has no pooler); set it with DATABASE_URL and SUPERUSER_DATABASE_URL");
  }
  if (databasePooler === "transaction" && databaseUrl === undefined) {
    throw invalid(RULES.databasePooler, pooler!.source, pooler!.value, "none with the embedded database; transaction only with DATABASE_URL and SUPERUSER_DATABASE_URL leading to the pooler");
  }
  if (databasePooler === "transaction" && !direct) {
    throw invalid(
      RULES.directDatabaseUrl,
      pooler!.source,
      undefined,
      `a postgres:// URL whenever ${nameOf(RULES.databasePooler, pooler!.source)} is transaction: a superuser connection straight to Postgres, bypassing the pooler, for what needs a session of its own (LISTEN, migrations and their advisory lock)`,
    );
  }
  return { maxConnections: max && { value: max.value, from: max.source }, directDatabaseUrl: direct?.value, databasePooler };
}

/**
 * The two URLs are one setting: both or neither, from one source. Given as
 * options they replace the environment's pair; one URL alone (from either
 * source) is refused rather than ignored, since the hub would otherwise start
 * the embedded Postgres (or mix two servers) without saying so.
 */
function databaseUrls(
  env: Env,
  options: ConfigOptions,
  pick: (key: "databaseUrl" | "postgraphileDatabaseUrl" | "superuserDatabaseUrl") => { value: unknown } | undefined,
): { databaseUrl: string | undefined; superuserDatabaseUrl: string | undefined; databaseUrlVariable: HubConfig["databaseUrlVariable"] } {
  const source: Source = options.databaseUrl !== undefined || options.superuserDatabaseUrl !== undefined ? "option" : "env";
  // From options, a URL not given is missing, not taken from the environment.
  const get = (key: "databaseUrl" | "superuserDatabaseUrl") =>
    source === "option" && options[RULES[key].option!] === undefined ? undefined : (pick(key)?.value as string | undefined);
  let databaseUrl = get("databaseUrl");
  const superuserDatabaseUrl = get("superuserDatabaseUrl");
  let db = RULES.databaseUrl as Rule<unknown>;
  const su = RULES.superuserDatabaseUrl as Rule<unknown>;
  if (source === "env") {
    // Two names for one setting: either may be used, both only if they agree.
    const alias = RULES.postgraphileDatabaseUrl as Rule<unknown>;
    const aliased = pick("postgraphileDatabaseUrl")?.value as string | undefined;
    if (aliased !== undefined && databaseUrl !== undefined && aliased !== databaseUrl) {
      throw invalid(
        alias,
        "env",
        aliased,
        `the same URL as ${db.variable} (${redactUrl(databaseUrl)}) when both are set: both name the GraphQL connection, so set only one of them`,
      );
    }
    if (aliased !== undefined && databaseUrl === undefined) {
      databaseUrl = aliased;
      db = alias;
    }
  }
  if (databaseUrl !== undefined && superuserDatabaseUrl === undefined) {
    throw invalid(
      su,
      source,
      source === "env" ? env[su.variable] : undefined,
      `a postgres:// URL whenever ${nameOf(db, source)} is set (migrations and superuserPool need it); unset both to use the embedded database`,
    );
  }
  if (superuserDatabaseUrl !== undefined && databaseUrl === undefined) {
    throw invalid(
      db,
      source,
      source === "env" ? env[db.variable] : undefined,
      `a postgres:// URL whenever ${nameOf(su, source)} is set; unset both to use the embedded database`,
    );
  }
  return { databaseUrl, superuserDatabaseUrl, databaseUrlVariable: db.variable as HubConfig["databaseUrlVariable"] };
}
