import path from "node:path";
import { fileURLToPath } from "node:url";

/** The package root (bench/lib/ → ../..). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/**
 * Node flags for every server process the bench starts, the baseline
 * included (BENCH_NODE_FLAGS, space-separated; none by default, as `npm start`
 * runs the hub): to see what a V8 setting changes, e.g.
 * `BENCH_NODE_FLAGS=--allocation-site-pretenuring` for the collector as it
 * behaved before the prelude turned pretenuring off.
 */
export const NODE_FLAGS: string[] = (process.env.BENCH_NODE_FLAGS ?? "").split(" ").filter(Boolean);

/** Settings every server process of the bench runs with (issue 6: production planner, quiet logs). */
export const SERVER_ENV = { NODE_ENV: "production", HUB_EMBEDDED_POSTGRES: "on", GRAPHILE_ENV: "production", LOG_LEVEL: "warn" } as const;

/**
 * The environment of a server process: ours without anything that would point
 * it at another database or configuration, plus SERVER_ENV and `extra`.
 */
export function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ["DATABASE_URL", "SUPERUSER_DATABASE_URL", "HUB_CONFIG", "HUB_EXAMPLES", "HUB_DATA_DIR", "HUB_PLAYGROUND", "PORT", "HOST", "NODE_OPTIONS"]) {
    delete env[name];
  }
  return { ...env, ...SERVER_ENV, ...extra };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function median(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export { freePort } from "../../test/helpers/ports.js";

export const MiB = 1024 * 1024;

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
