/**
 * Start-up and memory, measured on the stock server exactly as an operator
 * runs it: `node dist/server.js` (the demo configuration), NODE_ENV=production
 * (so initdb fsyncs), GRAPHILE_ENV=production, and the default LOG_LEVEL
 * (info), whose timestamped lines split the time into phases.
 *
 * The clock runs from spawn() to the first `POST /graphql {__typename}` that
 * answers {"data":{"__typename":"Query"}}, polled every 10 ms on a port chosen
 * beforehand (so nothing depends on the server's logs).
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { NODE_FLAGS, ROOT, childEnv, freePort, isAlive, sleep } from "./util.js";

export interface StartMeasurement {
  /** ms from spawn to the first correct /graphql answer. */
  ms: number;
  /** ms from spawn to the log line saying the embedded Postgres is up (started or attached). */
  postgresReadyMs: number | undefined;
  /** ms from spawn to the "hub listening" log line. */
  listeningMs: number | undefined;
  /** RSS of the server process after idleMs of idling, bytes (Postgres not included). */
  idleRssBytes: number;
  /** With settleMs: RSS once settleMs have passed since the first answer without any traffic, and each second's reading. */
  settled?: { rssBytes: number; afterMs: number; everySecondMiB: number[] };
}

const running = new Set<ChildProcess>();

/** Stop any `node dist/server.js` this module started and that is still running (Ctrl-C, errors). */
export async function stopStartupServers(): Promise<void> {
  await Promise.all([...running].map((child) => stopServer(child)));
}

async function stopServer(child: ChildProcess, timeoutMs = 20_000): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM"); // the hub stops HTTP, its pools and the embedded Postgres it started
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    await exited;
    clearTimeout(timer);
  }
  running.delete(child);
}

function rssOf(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const match = /^VmRSS:\s+(\d+) kB/m.exec(status);
  if (!match) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(match[1]) * 1024;
}

export async function measureStart(dataDir: string, idleMs: number, settleMs = 0, timeoutMs = 120_000): Promise<StartMeasurement> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/graphql`;
  let output = "";
  const started = performance.now();
  const startedAt = Date.now(); // the clock of the server's log timestamps
  const child = spawn(process.execPath, [...NODE_FLAGS, path.join(ROOT, "dist/server.js")], {
    cwd: ROOT,
    env: childEnv({ HUB_DATA_DIR: dataDir, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "info" }),
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  running.add(child);
  let postgresReadyMs: number | undefined;
  let listeningMs: number | undefined;
  let partial = "";
  child.stdout!.on("data", (c: Buffer) => {
    const text = c.toString();
    output = (output + text).slice(-10_000);
    const lines = (partial + text).split("\n");
    partial = lines.pop()!;
    for (const line of lines) {
      let entry: { time?: number; msg?: string };
      try {
        entry = JSON.parse(line) as { time?: number; msg?: string };
      } catch {
        continue;
      }
      if (typeof entry.time !== "number" || typeof entry.msg !== "string") continue;
      if (postgresReadyMs === undefined && /embedded Postgres started|using the embedded Postgres/.test(entry.msg)) postgresReadyMs = entry.time - startedAt;
      if (listeningMs === undefined && /hub listening/.test(entry.msg)) listeningMs = entry.time - startedAt;
    }
  });
  child.stderr!.on("data", (c: Buffer) => (output = (output + c.toString()).slice(-10_000)));
  try {
    let ms: number | undefined;
    while (ms === undefined) {
      if (child.exitCode !== null) throw new Error(`node dist/server.js exited with ${child.exitCode} during start-up:\n${output}`);
      if (performance.now() - started > timeoutMs) throw new Error(`node dist/server.js did not answer /graphql within ${timeoutMs} ms:\n${output}`);
      try {
        const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: '{"query":"{__typename}"}' });
        const text = await res.text();
        if (res.status === 200 && text === '{"data":{"__typename":"Query"}}') ms = performance.now() - started;
        else throw new Error(`node dist/server.js answered ${res.status} ${text.slice(0, 200)}`);
      } catch (error) {
        if ((error as Error).message.startsWith("node dist/server.js answered")) throw error;
        await sleep(10); // not listening yet
      }
    }
    const answeredAt = performance.now();
    await sleep(idleMs);
    const idleRssBytes = rssOf(child.pid!);
    if (settleMs <= idleMs) return { ms, postgresReadyMs, listeningMs, idleRssBytes };
    // V8 returns the young-generation space the start-up grew (32 MiB) only
    // when its memory reducer runs, some tens of seconds into idleness: so the
    // reading 2 s after the first answer is the start-up's peak, not what an
    // idle server holds. Read it every second until settleMs.
    const everySecondMiB: number[] = [];
    let rssBytes = idleRssBytes;
    while (performance.now() - answeredAt < settleMs) {
      await sleep(1000);
      rssBytes = rssOf(child.pid!);
      everySecondMiB.push(Math.round(rssBytes / 1048576));
    }
    return { ms, postgresReadyMs, listeningMs, idleRssBytes, settled: { rssBytes, afterMs: settleMs, everySecondMiB } };
  } finally {
    await stopServer(child);
    const pidFile = path.join(dataDir, "pg", "postmaster.pid");
    // The server stops the Postgres it started; give it a moment, then check.
    for (let i = 0; i < 100 && fs.existsSync(pidFile); i++) await sleep(50);
    await stopLeftoverPostgres(dataDir);
  }
}

/** If a postmaster of this data dir is still running (its server was killed), stop it. */
export async function stopLeftoverPostgres(dataDir: string): Promise<void> {
  const pidFile = path.join(dataDir, "pg", "postmaster.pid");
  let pid: number;
  try {
    pid = Number(fs.readFileSync(pidFile, "utf8").split("\n")[0]);
  } catch {
    return;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return;
  // Only a postgres process: a stale pid file may name a pid since reused by something else.
  try {
    if (!fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("postgres")) return;
  } catch {
    return;
  }
  process.stderr.write(`stopping the leftover embedded Postgres (pid ${pid}) of ${dataDir}\n`);
  process.kill(pid, "SIGINT");
  for (let i = 0; i < 300 && isAlive(pid); i++) await sleep(50);
  if (isAlive(pid)) process.kill(pid, "SIGQUIT");
}

/**
 * ms from spawn until a fresh `node` has imported the hub and the reference
 * plugins (what dist/server.js loads before it does anything): the share of a
 * start that is Node and module loading.
 */
export async function measureImportMs(): Promise<number> {
  const script = `await import(${JSON.stringify(path.join(ROOT, "dist/src/index.js"))}); await import(${JSON.stringify(path.join(ROOT, "dist/plugins/index.js"))}); process.stdout.write("imported");`;
  const started = performance.now();
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { cwd: ROOT, env: childEnv({}), stdio: ["ignore", "pipe", "pipe"] });
  let importedMs: number | undefined;
  let err = "";
  child.stdout!.on("data", () => (importedMs ??= performance.now() - started));
  child.stderr!.on("data", (c: Buffer) => (err += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  if (code !== 0 || importedMs === undefined) throw new Error(`importing the hub failed (${code}): ${err}`);
  return importedMs;
}
