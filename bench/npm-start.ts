/**
 * Warm start of `npm start` (docs/performance.md; bench/results/npm-start.md):
 * the time from spawning `npm start` to the first `POST /graphql {__typename}`
 * answered 200 with {"data":{"__typename":"Query"}}, polled every 10 ms on a
 * port chosen beforehand. `npm start` runs its prestart (src/bin/prestart.mjs,
 * which builds only what changed) and then `node dist/server.js`; for
 * comparison each round also starts `node dist/server.js` alone, the same way.
 *
 *   npm run build && node --import tsx bench/npm-start.ts [--runs 5]
 *
 * Warm: one data dir for every start, made by a first start that is not
 * counted (initdb). The environment is the caller's as a developer's shell
 * has it (no NODE_ENV), without database settings; the demo configuration.
 * Each server is stopped with SIGINT to npm's process group, as Ctrl-C in a
 * terminal does, before the next starts.
 */
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { benchArgs, positiveOption } from "./lib/args.js";
import { stopLeftoverPostgres } from "./lib/startup.js";
import { ROOT, freePort, median, sleep } from "./lib/util.js";

const USAGE = "Usage: npm run build && node --import tsx bench/npm-start.ts [--runs 5]\n";
const { values } = benchArgs(USAGE, { options: { runs: { type: "string", default: "5" } } });
const RUNS = positiveOption(USAGE, "runs", values.runs);

type Kind = "npm start" | "node dist/server.js";
const COMMANDS: Record<Kind, [string, string[]]> = {
  "npm start": ["npm", ["start"]],
  "node dist/server.js": [process.execPath, ["dist/server.js"]],
};

function env(dataDir: string, port: number): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, HUB_DATA_DIR: dataDir, PORT: String(port), HOST: "127.0.0.1" };
  for (const name of ["DATABASE_URL", "SUPERUSER_DATABASE_URL", "HUB_CONFIG", "HUB_EXAMPLES", "NODE_ENV", "GRAPHILE_ENV", "NODE_OPTIONS", "HUB_REBUILD"]) delete e[name];
  // npm sets these for the scripts it runs (this one included): the child npm must not inherit them.
  for (const name of Object.keys(e)) if (name.startsWith("npm_")) delete e[name];
  return e;
}

let current: ReturnType<typeof spawn> | undefined;
const interrupt = () => {
  if (current?.pid && current.exitCode === null) process.kill(-current.pid, "SIGINT");
  process.exitCode = 130;
};
process.once("SIGINT", interrupt);
process.once("SIGTERM", interrupt);

/** ms from spawn to the first correct answer; the server is stopped (and its Postgres) before it resolves. */
async function startOnce(kind: Kind, dataDir: string, timeoutMs = 120_000): Promise<number> {
  const port = await freePort();
  const [command, args] = COMMANDS[kind];
  let output = "";
  const started = performance.now();
  const child = spawn(command, args, { cwd: ROOT, env: env(dataDir, port), stdio: ["ignore", "pipe", "pipe"], detached: true });
  current = child;
  child.stdout!.on("data", (c: Buffer) => (output = (output + c.toString()).slice(-10_000)));
  child.stderr!.on("data", (c: Buffer) => (output = (output + c.toString()).slice(-10_000)));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${kind} exited with ${child.exitCode} during start-up:\n${output}`);
      if (performance.now() - started > timeoutMs) throw new Error(`${kind} did not answer /graphql within ${timeoutMs} ms:\n${output}`);
      const res = await fetch(`http://127.0.0.1:${port}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"query":"{__typename}"}',
      }).catch(() => undefined); // not listening yet
      if (res) {
        const text = await res.text();
        if (res.status === 200 && text === '{"data":{"__typename":"Query"}}') return performance.now() - started;
        throw new Error(`${kind} answered ${res.status} ${text.slice(0, 200)}`);
      }
      await sleep(10);
    }
  } finally {
    // Ctrl-C: the whole process group (npm, its shell, node); the hub stops its Postgres.
    if (child.exitCode === null) process.kill(-child.pid!, "SIGINT");
    const timer = setTimeout(() => child.exitCode === null && process.kill(-child.pid!, "SIGKILL"), 30_000);
    await exited;
    clearTimeout(timer);
    await stopLeftoverPostgres(dataDir);
  }
}

const dryRun = spawnSync(process.execPath, ["src/bin/prestart.mjs", "--dry-run"], { cwd: ROOT, encoding: "utf8" });
const wouldBuild = `${dryRun.stdout}${dryRun.stderr}`.trim();
if (wouldBuild !== "") process.stderr.write(`warning: prestart would build something (run npm run build first): ${wouldBuild}\n`);

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-npm-start-"));
const times: Record<Kind, number[]> = { "npm start": [], "node dist/server.js": [] };
try {
  const firstMs = await startOnce("node dist/server.js", dataDir);
  process.stderr.write(`first start (initdb, not counted): ${firstMs.toFixed(0)} ms\n`);
  for (let i = 0; i < RUNS && process.exitCode === undefined; i++) {
    for (const kind of Object.keys(COMMANDS) as Kind[]) {
      const ms = await startOnce(kind, dataDir);
      times[kind].push(ms);
      process.stderr.write(`round ${i + 1}: ${kind} ${ms.toFixed(0)} ms\n`);
    }
  }
} finally {
  fs.rmSync(dataDir, { recursive: true, force: true });
}

const ms = (n: number) => n.toFixed(0);
const npmVersion = spawnSync("npm", ["--version"], { encoding: "utf8" }).stdout.trim();
const lines = [
  `Warm start, spawn → first 200 from POST /graphql {__typename}; Node ${process.version}, npm ${npmVersion}, ${os.cpus().length} CPUs, load average ${os.loadavg().map((l) => l.toFixed(2)).join(" ")} at the end; prestart --dry-run before the runs: ${wouldBuild === "" ? "nothing to build" : wouldBuild}`,
  "",
  `| round | ${Object.keys(COMMANDS).map((k) => `\`${k}\` (ms)`).join(" | ")} |`,
  `|---|${Object.keys(COMMANDS).map(() => "--:").join("|")}|`,
  ...times["npm start"].map((_, i) => `| ${i + 1} | ${(Object.keys(COMMANDS) as Kind[]).map((k) => (times[k][i] === undefined ? "" : ms(times[k][i]!))).join(" | ")} |`),
  `| median | ${(Object.keys(COMMANDS) as Kind[]).map((k) => ms(median(times[k]))).join(" | ")} |`,
  `| range | ${(Object.keys(COMMANDS) as Kind[]).map((k) => `${ms(Math.min(...times[k]))}–${ms(Math.max(...times[k]))}`).join(" | ")} |`,
  "",
];
process.stdout.write(lines.join("\n"));
