import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { stopPostmasterOf } from "./external-postgres.js";

/** The Postgres clusters under `dir` (a `postmaster.pid` at most two levels down: `dir/pg`, `dir/x/pg`). */
function clustersUnder(dir: string): string[] {
  const found: string[] = [];
  const walk = (at: string, depth: number) => {
    if (fs.existsSync(path.join(at, "postmaster.pid"))) found.push(at);
    if (depth === 0) return;
    let entries: fs.Dirent[] = [];
    try {
      entries = fs.readdirSync(at, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) if (entry.isDirectory()) walk(path.join(at, entry.name), depth - 1);
  };
  walk(dir, 2);
  return found;
}

/** Whether the pid in the cluster's postmaster.pid is a Postgres of that cluster (a stale file's pid may be anyone's now). */
function postmasterRunsIn(cluster: string): boolean {
  try {
    const pid = Number(fs.readFileSync(path.join(cluster, "postmaster.pid"), "utf8").split("\n")[0]);
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(cluster);
  } catch {
    return false;
  }
}

/**
 * A fresh directory removed when the test ends, passed or failed: a Postgres
 * still running in it (a server process the test killed leaves its postmaster
 * to a watchdog that takes seconds) is stopped first, so neither the process
 * nor the files outlive the test. Under `base` when given (a faster filesystem).
 */
export function tmpDir(t: { teardown(fn: () => unknown): void }, prefix = "hub-test-", base = os.tmpdir()): string {
  const dir = fs.mkdtempSync(path.join(base, prefix));
  t.teardown(async () => {
    for (const cluster of clustersUnder(dir)) if (postmasterRunsIn(cluster)) await stopPostmasterOf(cluster).catch(() => undefined);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

export function writeFiles(dir: string, files: Record<string, string | Buffer>): string {
  fs.mkdirSync(dir, { recursive: true });
  for (const [name, content] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), content);
  return dir;
}
