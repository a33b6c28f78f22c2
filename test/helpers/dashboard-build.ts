/**
 * The dashboard's build, for the tests that serve it: `npm test` builds only the server,
 * so these build the page themselves, once, when dist/dashboard is older than a file of
 * src/dashboard (or missing). Several tap processes may ask at once: one builds under a
 * lock (a directory, created atomically), into a folder of its own that then replaces
 * dist/dashboard, so no other process ever reads a half-written build; the others wait
 * for the lock, then find the build fresh.
 */
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { ROOT } from "./process.js";

const SOURCES = path.join(ROOT, "src/dashboard");
const BUILT = path.join(ROOT, "dist/dashboard");
const LOCK = path.join(ROOT, "dist/.dashboard-build.lock");
/** Outside dist/, so `npm pack` (the scaffold test) never ships a build in progress; same filesystem, so a rename. */
const WORK = path.join(ROOT, ".tap");
/** tsc and vite take 15–40 s on a busy 2-core machine; a lock this old belongs to a process that died. */
const LOCK_STALE_MS = 5 * 60_000;

function newestSource(dir: string): number {
  let latest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newestSource(full) : fs.statSync(full).mtimeMs);
  }
  return latest;
}

function isFresh(): boolean {
  try {
    return fs.statSync(path.join(BUILT, "index.html")).mtimeMs >= newestSource(SOURCES);
  } catch {
    return false;
  }
}

function tryLock(): boolean {
  try {
    fs.mkdirSync(LOCK);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    try {
      if (Date.now() - fs.statSync(LOCK).mtimeMs > LOCK_STALE_MS) fs.rmSync(LOCK, { recursive: true, force: true });
    } catch {
      // Released between the two calls: the next try takes it.
    }
    return false;
  }
}

function build(): void {
  const out = path.join(WORK, `dashboard-build-${process.pid}`);
  const old = `${out}-old`;
  fs.mkdirSync(WORK, { recursive: true });
  const bin = (name: string) => path.join(ROOT, "node_modules/.bin", name);
  execFileSync(bin("tsc"), ["-p", "src/dashboard/tsconfig.json"], { cwd: ROOT, stdio: "inherit" });
  execFileSync(bin("vite"), ["build", "--config", "src/dashboard/vite.config.ts", "--outDir", out, "--emptyOutDir"], { cwd: ROOT, stdio: "inherit" });
  if (fs.existsSync(BUILT)) fs.renameSync(BUILT, old);
  fs.renameSync(out, BUILT);
  fs.rmSync(old, { recursive: true, force: true });
}

/** Build dist/dashboard unless it is newer than every file of src/dashboard; safe from several processes at once. */
export async function ensureDashboardBuilt(): Promise<void> {
  if (isFresh()) return;
  fs.mkdirSync(path.dirname(LOCK), { recursive: true });
  const deadline = Date.now() + LOCK_STALE_MS + 60_000;
  while (!tryLock()) {
    if (Date.now() > deadline) throw new Error(`the dashboard's build lock ${LOCK} (still held after ${(LOCK_STALE_MS + 60_000) / 1000} s)`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  try {
    // Another process may have built it while this one waited.
    if (!isFresh()) build();
  } finally {
    fs.rmSync(LOCK, { recursive: true, force: true });
  }
}
