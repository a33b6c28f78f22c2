import { spawn, type ChildProcess } from "node:child_process";
import type { Writable } from "node:stream";

/**
 * Small watchdog processes that stop a postmaster when nobody else will: one
 * per hub that started the embedded Postgres (it stops that Postgres when the
 * hub dies, however it dies), and the test kit's (it stops the shared test
 * cluster once no test process has used it for a while).
 *
 * A watchdog runs as `node -e <source>` with an empty environment: test
 * runners inject loaders into every child through NODE_OPTIONS (tap's
 * processinfo does), and the watchdog must not depend on them or outlive them
 * half-loaded. So it uses nothing but Node's built-ins; this prelude holds the
 * helpers both watchdogs share.
 */
export const WATCHDOG_PRELUDE = String.raw`
"use strict";
const fs = require("fs"), path = require("path");
const alive = (pid) => { try { process.kill(pid, 0); return true; } catch (e) { return e.code === "EPERM"; } };
const readPid = (file) => { try { return Number(fs.readFileSync(file, "utf8").split("\n")[0]) || 0; } catch { return 0; } };
// SIGINT is Postgres's "fast" shutdown (aborts sessions, writes a checkpoint);
// SIGQUIT after 15 s if it is still there. Then done().
const stopPostmaster = (pid, done) => {
  try { process.kill(pid, "SIGINT"); } catch {}
  const deadline = Date.now() + 15000;
  const wait = () => {
    if (alive(pid) && Date.now() < deadline) return setTimeout(wait, 50);
    if (alive(pid)) try { process.kill(pid, "SIGQUIT"); } catch {}
    done();
  };
  wait();
};
`;

/**
 * The owner's watchdog. argv: clusterDir, postmaster pid. Its standard input
 * is a pipe from the hub that started the postmaster; the kernel closes that
 * pipe when the hub ends, however it ends (exit, crash, abort, SIGKILL, the OOM
 * killer). On end of input it stops the postmaster, unless it is already gone
 * or the cluster now runs another postmaster (someone started it again after
 * the owner had stopped it: not ours to stop).
 */
const OWNER_WATCHDOG_SOURCE = `${WATCHDOG_PRELUDE}
const [clusterDir, pidRaw] = process.argv.slice(1);
const pid = Number(pidRaw);
let done = false;
const ownerGone = () => {
  if (done) return;
  done = true;
  if (readPid(path.join(clusterDir, "postmaster.pid")) !== pid || !alive(pid)) process.exit(0);
  stopPostmaster(pid, () => process.exit(0));
};
process.stdin.on("end", ownerGone);
process.stdin.on("close", ownerGone);
process.stdin.on("error", ownerGone);
process.stdin.resume();
`;

export interface Watchdog {
  pid: number | undefined;
  /** The owner stopped the postmaster itself: let the watchdog go (it exits, finding it gone). */
  release(): void;
}

/** Start a detached `node -e source args…` watchdog that outlives this process. */
export function spawnWatchdog(source: string, args: string[], options: { cwd: string; stdin: "pipe" | "ignore" }): ChildProcess {
  const child = spawn(process.execPath, ["-e", source, ...args], {
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
  const child = spawnWatchdog(OWNER_WATCHDOG_SOURCE, [clusterDir, String(pid)], { cwd: "/", stdin: "pipe" });
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
