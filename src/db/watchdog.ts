import { spawn, type ChildProcess } from "node:child_process";
import type { Writable } from "node:stream";
import { fileURLToPath } from "node:url";

/**
 * Small watchdog processes that stop a postmaster when nobody else will: one
 * per hub that started the embedded Postgres (src/db/owner-watchdog.ts: it
 * stops that Postgres when the hub dies, however it dies), and the test kit's
 * (src/db/test-kit-watchdog.ts: it stops the shared test cluster once no test
 * process has used it for a while).
 *
 * A watchdog runs as `node <its file>` with an empty environment: test
 * runners inject loaders into every child through NODE_OPTIONS (tap's
 * processinfo does), and the watchdog must not depend on them or outlive them
 * half-loaded. So it imports nothing but Node's built-ins and
 * src/db/postmaster.ts.
 */
export type WatchdogScript = "owner-watchdog" | "test-kit-watchdog";

/**
 * The command line of a watchdog: the compiled file beside this one; when
 * this module is itself run from the TypeScript sources, the source file,
 * through tsx (a development dependency, present wherever the sources run).
 */
function commandOf(script: WatchdogScript): string[] {
  const compiled = import.meta.url.endsWith(".js");
  const file = fileURLToPath(new URL(`./${script}.${compiled ? "js" : "ts"}`, import.meta.url));
  return compiled ? [file] : ["--import", import.meta.resolve("tsx"), file];
}

export interface Watchdog {
  pid: number | undefined;
  /** The owner stopped the postmaster itself: let the watchdog go (it exits, finding it gone). */
  release(): void;
}

/** Start a detached `node <script> args…` watchdog that outlives this process. */
export function spawnWatchdog(script: WatchdogScript, args: string[], options: { cwd: string; stdin: "pipe" | "ignore" }): ChildProcess {
  const child = spawn(process.execPath, [...commandOf(script), ...args], {
    detached: true,
    stdio: [options.stdin, "ignore", "ignore"],
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
  });
  child.unref();
  return child;
}

/**
 * Tie a postmaster's life to this process: when this process ends without
 * stopping it, the watchdog does. Holding the pipe costs this process nothing
 * (the pipe does not keep its event loop alive).
 */
export function watchPostmaster(clusterDir: string, pid: number, onError: (error: Error) => void): Watchdog {
  const child = spawnWatchdog("owner-watchdog", [clusterDir, String(pid)], { cwd: "/", stdin: "pipe" });
  child.on("error", onError);
  const pipe = child.stdin as (Writable & { unref?: () => void }) | null;
  pipe?.on("error", () => undefined); // the watchdog gone first: nothing to tell it
  pipe?.unref?.();
  return {
    pid: child.pid,
    release() {
      pipe?.destroy();
    },
  };
}
