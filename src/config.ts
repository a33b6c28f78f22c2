import path from "node:path";
import { configInvalid } from "./errors.js";

/** The process configuration, read once from the environment (README: Configuration). */
export interface HubConfig {
  /** Connection used by GraphQL requests; it switches to `app_postgraphile` per request. */
  databaseUrl: string | undefined;
  /** Connection for migrations and `superuserPool`. */
  superuserDatabaseUrl: string | undefined;
  port: number;
  host: string;
  nodeEnv: "development" | "production" | "test";
  logLevel: LogLevel;
  /** Absolute path; holds the embedded database when no URL is set. */
  dataDir: string;
  /** hubCreatePlaygroundSession in the schema: on by default with the embedded database, outside production. */
  playground: boolean;
  /** GraphQL introspection: on by default outside production. */
  introspection: boolean;
}

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
const NODE_ENVS = ["development", "production", "test"] as const;

type Env = Record<string, string | undefined>;

function parsePort(raw: string | undefined): number {
  if (raw === undefined || raw === "") return 4000;
  if (!/^\d{1,5}$/.test(raw) || Number(raw) > 65535) {
    throw configInvalid("PORT", raw, "an integer from 0 to 65535 (0 picks any free port)");
  }
  return Number(raw);
}

function parseDatabaseUrl(name: string, raw: string | undefined): string | undefined {
  if (raw === undefined || raw === "") return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw configInvalid(name, redactUrl(raw), "a URL such as postgres://user:password@host:5432/dbname");
  }
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:") {
    throw configInvalid(name, redactUrl(raw), "a URL starting with postgres:// or postgresql://");
  }
  if (url.hostname === "" && !url.searchParams.has("host")) {
    throw configInvalid(name, redactUrl(raw), "a URL with a host, e.g. postgres://user:password@localhost:5432/dbname");
  }
  return raw;
}

/** Never echo a database password into a log or an error message. */
export function redactUrl(raw: string): string {
  return raw.replace(/^([a-z]+:\/\/[^:/@]*:)[^@]*@/i, "$1***@");
}

function oneOf<T extends string>(name: string, raw: string | undefined, allowed: readonly T[], fallback: T): T {
  if (raw === undefined || raw === "") return fallback;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw configInvalid(name, raw, `one of ${allowed.join(", ")}`);
  }
  return raw as T;
}

export function readConfig(env: Env = process.env): HubConfig {
  const nodeEnv = oneOf("NODE_ENV", env.NODE_ENV, NODE_ENVS, "development");
  const databaseUrl = parseDatabaseUrl("DATABASE_URL", env.DATABASE_URL);
  const superuserDatabaseUrl = parseDatabaseUrl("SUPERUSER_DATABASE_URL", env.SUPERUSER_DATABASE_URL);
  if (databaseUrl !== undefined && superuserDatabaseUrl === undefined) {
    throw configInvalid(
      "SUPERUSER_DATABASE_URL",
      env.SUPERUSER_DATABASE_URL,
      "a postgres:// URL whenever DATABASE_URL is set (migrations and superuserPool need it); unset both to use the embedded database",
    );
  }
  if (superuserDatabaseUrl !== undefined && databaseUrl === undefined) {
    throw configInvalid(
      "DATABASE_URL",
      env.DATABASE_URL,
      "a postgres:// URL whenever SUPERUSER_DATABASE_URL is set; unset both to use the embedded database",
    );
  }
  const host = env.HOST ?? "";
  if (host !== "" && !/^[A-Za-z0-9.:\-[\]]+$/.test(host)) {
    throw configInvalid("HOST", host, "a host name or IP address such as 127.0.0.1, 0.0.0.0 or ::");
  }
  const dataDir = env.HUB_DATA_DIR ?? "";
  if (env.HUB_DATA_DIR !== undefined && dataDir.trim() === "") {
    throw configInvalid("HUB_DATA_DIR", dataDir, "a directory path (default ./.hub)");
  }
  return {
    databaseUrl,
    superuserDatabaseUrl,
    port: parsePort(env.PORT),
    host: host !== "" ? host : nodeEnv === "production" ? "0.0.0.0" : "127.0.0.1",
    nodeEnv,
    logLevel: oneOf("LOG_LEVEL", env.LOG_LEVEL, LOG_LEVELS, nodeEnv === "test" ? "warn" : "info"),
    dataDir: path.resolve(dataDir !== "" ? dataDir : ".hub"),
    introspection: oneOf("HUB_INTROSPECTION", env.HUB_INTROSPECTION, ["on", "off"] as const, nodeEnv === "production" ? "off" : "on") === "on",
    // Anyone can mint playground players: never on in production unless asked for.
    playground: oneOf("HUB_PLAYGROUND", env.HUB_PLAYGROUND, ["on", "off", "auto"] as const, "auto") === "auto" ? databaseUrl === undefined && nodeEnv !== "production" : env.HUB_PLAYGROUND === "on",
  };
}
