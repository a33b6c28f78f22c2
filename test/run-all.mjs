/**
 * `npm test`'s runs of tap: every file, three at a time (the 2-core machines
 * the suite must fit: files spend part of their time waiting on servers and
 * timers), with the type check of the tests alongside (its output held back
 * until it ends, so it does not cut into tap's), then the burst test alone (it
 * compares another player's latency with the time a flood takes, so it must
 * not share the machine with other files). All always run, so a failure in
 * one does not hide another's result; the exit status is non-zero when any
 * failed, and the end of the output names which. After the first run the
 * slowest files are listed with tap's own per-file times.
 *
 * tap starts files in alphabetical order, which would start the longest ones
 * (the scaffold, tenant isolation) near the end, where they alone keep the run
 * going. So the files are run longest first: three workers each take the next
 * job, a tap of its own over one long file or a few short ones, one at a time
 * (--jobs=1); a line as each passes, its whole TAP output when it fails. How long a file is comes from
 * the previous run's results in .tap/test-results when there are some, else
 * from the list of files long by construction below.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { roomyTmpfs } from "./helpers/memory-tmp.mjs";

/** What the suite may keep in memory at its peak: the shared cluster's databases, two installed projects, clusters of tests' own. */
const MEMORY_NEEDED = 6 * 1024 ** 3;

/**
 * The suite's temporary files (the shared Postgres cluster, clusters and data
 * dirs of tests' own, installed projects) in memory when /dev/shm is a tmpfs
 * with room to spare and TMPDIR is not set: on a disk's filesystem, creating,
 * extending and removing those files costs a third more CPU, in kernel time
 * (the suite is CPU-bound on 2 cores). Left between runs, as in /tmp: the
 * shared cluster (about 150 MB) for the next run to reuse.
 */
function memoryTmpDir() {
  // No /dev/shm (macOS, Windows), or short of room: the system's temporary folder.
  if (process.env.TMPDIR || !roomyTmpfs("/dev/shm", MEMORY_NEEDED)) return undefined;
  const dir = path.join("/dev/shm", `hub-tests-${process.getuid?.() ?? "user"}`);
  try {
    // Others may pass through, not list it: Postgres runs as its own account when the tests run as root.
    fs.mkdirSync(dir, { recursive: true, mode: 0o711 });
    return dir;
  } catch {
    return undefined;
  }
}
const inMemory = memoryTmpDir();
if (inMemory) process.env.TMPDIR = inMemory;

/**
 * Stopped shared clusters of other checkouts (each checkout's Postgres binaries have a cluster of their
 * own) removed from the in-memory folder, so clean clones run one after another do not pile up in RAM;
 * another checkout whose cluster this removes builds it again (initdb and template) at its next run.
 */
async function removeStoppedClusters(dir) {
  const { defaultClusterDir } = await import("../dist/src/test-kit/cluster.js");
  const ours = path.basename(defaultClusterDir());
  /** Whether the process exists (EPERM: it does, as another account's). */
  const alive = (pid) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch (error) {
      return error.code === "EPERM";
    }
  };
  const readPid = (file) => {
    try {
      return Number(fs.readFileSync(file, "utf8").split("\n")[0]);
    } catch {
      return undefined;
    }
  };
  for (const name of fs.readdirSync(dir)) {
    if (!name.startsWith("hub-test-kit-") || name === ours) continue;
    const cluster = path.join(dir, name);
    const postmaster = readPid(path.join(cluster, "pg", "postmaster.pid"));
    // A process of another checkout holds a lease while it uses (or is starting) the cluster.
    let leases = [];
    try {
      leases = fs.readdirSync(path.join(cluster, "leases")).map(Number);
    } catch {
      leases = [];
    }
    if ((postmaster !== undefined && alive(postmaster)) || leases.some((pid) => pid > 0 && alive(pid))) continue;
    fs.rmSync(cluster, { recursive: true, force: true });
  }
}
if (inMemory) {
  await removeStoppedClusters(inMemory).catch((error) => process.stdout.write(`stopped clusters of other checkouts left in ${inMemory}: ${error.message}\n`));
}

// TypeScript by Node's own type stripping where Node has it (22.18 and later): a third of a second
// less CPU per test process than tap's compiler (ts-node); test/helpers/ts-specifiers.mjs resolves the
// tests' ".js" imports of .ts files. Node 20 keeps tap's compiler.
if (process.features.typescript) process.env.TAP_TYPE_STRIP_ONLY ??= "1";

// Node (22.1 and later) keeps the bytecode of the modules it compiles here and
// reuses it: every test process and every server a test spawns loads the same
// large dependency tree (PostGraphile, grafast, Fastify, pg). Node 20 ignores it.
process.env.NODE_COMPILE_CACHE ??= path.join(os.tmpdir(), `hub-test-compile-cache-${process.getuid?.() ?? "user"}`);

/** The slowest files of the tap run started at `since` (results of files it did not run, such as the burst test, are older). */
function slowestFiles(count, since) {
  return [...fileTimes(since)].map(([file, ms]) => ({ file, ms })).sort((a, b) => b.ms - a.ms).slice(0, count);
}

/** Files long by construction, longest first: started first when no earlier run says otherwise. */
const LONG = [
  "test/scaffold.test.ts",
  "test/outcome-bet-fairness.test.ts",
  "test/lifecycle.test.ts",
  "test/coin-fairness.test.ts",
  "test/transfers-crash.test.ts",
  "test/tenant-isolation.test.ts",
  "test/fuzz-every-field.test.ts",
  "test/memory.test.ts",
  "test/scaffold-mistakes.test.ts",
  "test/docs.test.ts",
  "test/faults.test.ts",
  "test/nginx.test.ts",
  "test/dashboard.test.ts",
  "test/deadlocks.test.ts",
  "test/rolling-restart.test.ts",
  "test/test-kit.test.ts",
];
const WORKERS = 3;
/** tap's own bin, not through npx (a quarter of a second of CPU each time, some thirty taps a run). */
const TAP = path.join("node_modules", ".bin", "tap");
/** Short files per tap: each tap costs about a second of CPU to start, so not one per file. */
const PER_JOB = 4;
/** A file is run alone when the previous run took this long (ms) or more. */
const LONG_MS = 25_000;

/** Each file's time (ms) in tap's results in .tap/test-results, of the runs since `since` (ms since the epoch). */
function fileTimes(since = 0) {
  const dir = path.join(".tap", "test-results", "test");
  const times = new Map();
  let names = [];
  try {
    names = fs.readdirSync(dir).filter((name) => name.endsWith(".tap") && fs.statSync(path.join(dir, name)).mtimeMs >= since);
  } catch {
    return times;
  }
  for (const name of names) {
    const all = [...fs.readFileSync(path.join(dir, name), "utf8").matchAll(/^# time=([\d.]+)ms$/gm)];
    if (all.length > 0) times.set(`test/${name.replace(/\.tap$/, "")}`, Number(all[all.length - 1][1]));
  }
  return times;
}

/** The jobs of the first run, longest first: one file each for the long files, PER_JOB for the others. */
function jobsOf(files) {
  const before = fileTimes();
  const weight = (f) => before.get(f) ?? (LONG.includes(f) ? LONG_MS * (1 + LONG.length - LONG.indexOf(f)) : 0);
  const sorted = [...files].sort((a, b) => weight(b) - weight(a));
  const jobs = [];
  let short = [];
  for (const file of sorted) {
    if (weight(file) >= LONG_MS) jobs.push([file]);
    else if ((short = [...short, file]).length === PER_JOB) (jobs.push(short), (short = []));
  }
  if (short.length > 0) jobs.push(short);
  return jobs;
}

const failed = [];

/** Run a command to its end: its exit status (or signal, or spawn error) and, when piped, its output. */
function runToEnd(command, args, stdio) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio });
    let output = "";
    child.stdout?.on("data", (chunk) => (output += chunk));
    child.stderr?.on("data", (chunk) => (output += chunk));
    child.on("error", (error) => resolve({ status: null, error, output }));
    child.on("close", (status, signal) => resolve({ status, signal, output }));
  });
}

// In the background beside the tap runs, its output held back so it does not cut into theirs.
const typecheck = runToEnd("npm", ["run", "--silent", "typecheck"], ["ignore", "pipe", "pipe"]);
const failure = (result) => (result.error ? result.error.message : `exit status ${result.status ?? result.signal}`);

/** Every file but the burst test, WORKERS taps at a time; resolves once all ended. */
async function runAll() {
  const listed = await runToEnd(TAP, ["list"], ["ignore", "pipe", "pipe"]);
  const files = listed.output.split("\n").map((line) => line.trim()).filter((line) => line.endsWith(".test.ts"));
  if (listed.status !== 0 || files.length === 0) {
    failed.push(`npx tap list: ${failure(listed)}\n${listed.output}`);
    return;
  }
  const jobs = jobsOf(files);
  const worker = async () => {
    for (let job = jobs.shift(); job; job = jobs.shift()) {
      const jobStarted = Date.now();
      // TAP, not a reporter that redraws: read only when the job failed.
      const result = await runToEnd(TAP, ["--jobs=1", "--reporter=tap", ...job], ["ignore", "pipe", "pipe"]);
      const seconds = ((Date.now() - jobStarted) / 1000).toFixed(0);
      if (result.status === 0) process.stdout.write(`passed (${seconds} s): ${job.join(" ")}\n`);
      else {
        process.stdout.write(`\nFAILED (${seconds} s, ${failure(result)}): ${job.join(" ")}\n${result.output}\n`);
        failed.push(`${job.join(" ")}: ${failure(result)}`);
      }
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, worker));
}

process.stdout.write(`temporary files in ${os.tmpdir()}${inMemory ? " (memory)" : ""}\n`);
let started = Date.now();
await runAll();
const slowest = slowestFiles(10, started);
process.stdout.write(`\nevery test file but the burst test: ${((Date.now() - started) / 1000).toFixed(0)} s${slowest.length > 1 ? `; slowest files: ${slowest.map((f) => `${f.file} ${(f.ms / 1000).toFixed(1)} s`).join(", ")}` : ""}\n`);
// Reported before the burst test, which must have the machine to itself.
const checked = await typecheck;
process.stdout.write(`\nnpm run typecheck: ${checked.status === 0 ? "passed" : failure(checked)}\n${checked.output}`);
if (checked.status !== 0) failed.push(`npm run typecheck: ${failure(checked)}`);
started = Date.now();
const burst = await runToEnd(TAP, ["--jobs=1", "test/burst.test.ts"], "inherit");
if (burst.status !== 0) failed.push(`test/burst.test.ts (alone): ${failure(burst)}`);
process.stdout.write(`\ntest/burst.test.ts (alone): ${((Date.now() - started) / 1000).toFixed(0)} s\n`);

if (failed.length > 0) {
  process.stderr.write(`\nnpm test failed:\n${failed.map((f) => `  - ${f}`).join("\n")}\n`);
  process.exit(1);
}
process.stdout.write("\nnpm test: every test file, the burst test and the type check passed\n");
