/**
 * The test kit's start times (docs/testing.md, "Speed"; bench/results/test-kit-start.md):
 * `startTestServer` called --servers times (default 5) one after another in one
 * process, with the options of the original's controller template
 * (`[...defaultPlugins, TowerPlugin]`, `extraPgSchemas: ["app"]`, its two
 * migrations: the fixture of test/original-template.test.ts). Each server
 * answers one `{ __typename }` and is stopped before the next starts, as test
 * files run one after another.
 *
 *   npm run build && node --import tsx bench/test-kit-start.ts [--servers 5] [--data-dir DIR]
 *
 * By default the cluster directory is new, so the first start includes the
 * shared cluster's own (initdb, Postgres, the template database migrated): the
 * first test server on a machine. `--data-dir` uses that directory instead
 * (e.g. a cluster already running: the first server of a later test file).
 *
 * The measured process is a child: it runs with bench/tsconfig.child.json, so
 * `@hubpkg/hub` resolves to dist/ as in a user's project (not to src/ through
 * tsx), and NODE_ENV=test as under a test runner. This process makes the
 * directory, and removes it once the cluster's watchdog has stopped Postgres.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { benchArgs, positiveOption } from "./lib/args.js";
import { ROOT, isAlive, sleep } from "./lib/util.js";

const USAGE = "Usage: npm run build && node --import tsx bench/test-kit-start.ts [--servers 5] [--data-dir DIR]\n";
const { values } = benchArgs(USAGE, { options: { servers: { type: "string", default: "5" }, "data-dir": { type: "string" } } });
const SERVERS = positiveOption(USAGE, "servers", values.servers);
const CHILD = "BENCH_TEST_KIT_CHILD";

/** What the child reports for each server, in ms. */
interface Timing {
  startMs: number;
  firstAnswerMs: number;
  stopMs: number;
}

if (process.env[CHILD]) await measure(process.env[CHILD]);
else await orchestrate();

async function orchestrate(): Promise<void> {
  const fresh = values["data-dir"] === undefined;
  const dataDir = fresh ? path.join(fs.mkdtempSync(path.join(os.tmpdir(), "bench-test-kit-")), "cluster") : path.resolve(values["data-dir"]!);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    [CHILD]: dataDir,
    TSX_TSCONFIG_PATH: path.join(ROOT, "bench/tsconfig.child.json"),
    NODE_ENV: "test",
    LOG_LEVEL: "warn",
    // A fresh cluster is this run's alone: its watchdog stops it as soon as the child exits.
    ...(fresh ? { HUB_TEST_KIT_IDLE_SECONDS: "0" } : {}),
  };
  for (const name of ["DATABASE_URL", "SUPERUSER_DATABASE_URL", "HUB_TEST_KIT_DIR"]) delete env[name];
  const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), "--servers", String(SERVERS)], { cwd: ROOT, env, stdio: ["ignore", "pipe", "inherit"] });
  const stopChild = () => child.kill("SIGTERM");
  process.once("SIGINT", stopChild);
  process.once("SIGTERM", stopChild);
  let out = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  if (fresh) await removeCluster(dataDir);
  if (code !== 0) {
    process.stderr.write(`the measuring process exited with ${code}\n${out}`);
    process.exit(1);
  }
  const timings = JSON.parse(/^@@timings (.*)$/m.exec(out)?.[1] ?? "null") as Timing[] | null;
  if (!timings) {
    process.stderr.write(`the measuring process printed no timings\n${out}`);
    process.exit(1);
  }
  process.stdout.write(report(timings, fresh ? "new (the first start includes the cluster's)" : dataDir));
}

/** Wait for the watchdog to stop the cluster's Postgres (at most 60 s), then remove its directory. */
async function removeCluster(dataDir: string): Promise<void> {
  const pidFile = path.join(dataDir, "pg", "postmaster.pid");
  for (let i = 0; i < 600; i++) {
    let pid = 0;
    try {
      pid = Number(fs.readFileSync(pidFile, "utf8").split("\n")[0]);
    } catch {
      break; // no pid file: Postgres is down
    }
    if (!isAlive(pid)) break;
    await sleep(100);
  }
  if (fs.existsSync(pidFile)) {
    process.stderr.write(`the cluster in ${dataDir} is still running: left in place (stop it with kill -INT $(head -1 ${pidFile}))\n`);
    return;
  }
  fs.rmSync(path.dirname(dataDir), { recursive: true, force: true });
}

function report(timings: Timing[], cluster: string): string {
  const ms = (n: number) => n.toFixed(0);
  const rows = timings.map((t, i) => `| ${i + 1}${i === 0 ? " (first)" : ""} | ${ms(t.startMs)} | ${ms(t.firstAnswerMs)} | ${ms(t.stopMs)} |`);
  const next = timings.slice(1).map((t) => t.startMs);
  const nextLine = next.length > 0 ? `each next: ${ms(Math.min(...next))}–${ms(Math.max(...next))} ms` : "no next server";
  return [
    `startTestServer ×${timings.length} in one process, Node ${process.version}, ${os.cpus().length} CPUs, load average ${os.loadavg().map((l) => l.toFixed(2)).join(" ")} at the end; cluster directory: ${cluster}`,
    "",
    "| server | startTestServer (ms) | first `{ __typename }` (ms) | stop() (ms) |",
    "|---|--:|--:|--:|",
    ...rows,
    "",
    `first: ${ms(timings[0]!.startMs)} ms; ${nextLine}`,
    "",
  ].join("\n");
}

async function measure(dataDir: string): Promise<void> {
  // Imported here, in the child, so that they resolve through bench/tsconfig.child.json to dist/.
  const { defaultPlugins } = await import("@hubpkg/hub");
  const { startTestServer } = await import("@hubpkg/hub/test");
  const { TowerPlugin } = await import("../test/fixtures/original-template/tower-plugin.js");
  const migrations = path.join(ROOT, "test/fixtures/original-template/migrations");
  const riskPolicy = ({ bankroll }: { bankroll: number }) => ({ maxPayout: bankroll * 0.1 });
  const timings: Timing[] = [];
  for (let i = 0; i < SERVERS; i++) {
    const started = performance.now();
    const server = await startTestServer({
      dataDir,
      plugins: [...defaultPlugins, TowerPlugin({ maxFloor: 10, riskPolicy })],
      extraPgSchemas: ["app"],
      userDatabaseMigrationsPath: migrations,
    });
    const startMs = performance.now() - started;
    const asked = performance.now();
    const answer = await server.graphqlClient.request<{ __typename: string }>("{ __typename }");
    const firstAnswerMs = performance.now() - asked;
    if (answer.__typename !== "Query") throw new Error(`server ${i + 1} answered ${JSON.stringify(answer)}`);
    const stopping = performance.now();
    await server.stop();
    timings.push({ startMs, firstAnswerMs, stopMs: performance.now() - stopping });
  }
  // Marked: anything else a module might print to stdout stays out of the figures.
  process.stdout.write(`\n@@timings ${JSON.stringify(timings)}\n`);
}
