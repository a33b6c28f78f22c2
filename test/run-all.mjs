/**
 * `npm test`'s runs of tap: every file, several at a time (.taprc: jobs, on
 * the 2-core machines the suite must fit, since files spend part of their time
 * waiting on servers and timers), with the type check of the tests alongside
 * (its output held back until it ends, so it does not cut into tap's), then
 * the burst test alone (it compares another player's latency with the time a
 * flood takes, so it must not share the machine with other files). All
 * always run, so a failure in one does not hide another's result; the exit
 * status is non-zero when any failed, and the end of the output names which.
 * After the first run the slowest files are listed with tap's own per-file
 * times, to see where the suite's time goes.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

/** The slowest files of the tap run started at `since`, from the results tap keeps in .tap/test-results. */
function slowestFiles(count, since) {
  const dir = path.join(".tap", "test-results", "test");
  let names = [];
  try {
    // Results of files this run did not run (the burst test, run alone) are older: left out.
    names = fs.readdirSync(dir).filter((name) => name.endsWith(".tap") && fs.statSync(path.join(dir, name)).mtimeMs >= since);
  } catch {
    return [];
  }
  const times = [];
  for (const name of names) {
    const text = fs.readFileSync(path.join(dir, name), "utf8");
    const all = [...text.matchAll(/^# time=([\d.]+)ms$/gm)];
    if (all.length > 0) times.push({ file: `test/${name.replace(/\.tap$/, "")}`, ms: Number(all[all.length - 1][1]) });
  }
  return times.sort((a, b) => b.ms - a.ms).slice(0, count);
}

const runs = [
  { name: "every test file but the burst test", args: [], listSlowest: true },
  { name: "test/burst.test.ts (alone)", args: ["--jobs=1", "test/burst.test.ts"], listSlowest: false },
];
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

for (const run of runs) {
  const started = Date.now();
  const result = await runToEnd("npx", ["tap", ...run.args], "inherit");
  if (result.status !== 0) failed.push(`${run.name}: ${failure(result)}`);
  const slowest = run.listSlowest ? slowestFiles(10, started) : [];
  process.stdout.write(`\n${run.name}: ${((Date.now() - started) / 1000).toFixed(0)} s${slowest.length > 1 ? `; slowest files: ${slowest.map((f) => `${f.file} ${(f.ms / 1000).toFixed(1)} s`).join(", ")}` : ""}\n`);
  if (run === runs[0]) {
    // Reported before the burst test, which must have the machine to itself.
    const checked = await typecheck;
    process.stdout.write(`\nnpm run typecheck: ${checked.status === 0 ? "passed" : failure(checked)}\n${checked.output}`);
    if (checked.status !== 0) failed.push(`npm run typecheck: ${failure(checked)}`);
  }
}
if (failed.length > 0) {
  process.stderr.write(`\nnpm test failed:\n${failed.map((f) => `  - ${f}`).join("\n")}\n`);
  process.exit(1);
}
process.stdout.write(`\nnpm test: all ${runs.length} tap runs and the type check passed\n`);
