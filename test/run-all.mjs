/**
 * `npm test`'s runs of tap: every file, three at a time (.taprc: jobs 3 on the
 * 2-core machines the suite must fit, since files spend part of their time
 * waiting on servers and timers), then the burst test alone
 * (it compares another player's latency with the time a flood takes, so it
 * must not share the machine with other files). Both always run, so a failure
 * in the first does not hide the second's result; the exit status is non-zero
 * when either failed, and the end of the output names which. After the first
 * run the slowest files are listed with tap's own per-file times, to see where
 * the suite's time goes.
 */
import { spawnSync } from "node:child_process";
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
for (const run of runs) {
  const started = Date.now();
  const result = spawnSync("npx", ["tap", ...run.args], { stdio: "inherit" });
  if (result.status !== 0) failed.push(`${run.name}: ${result.error ? result.error.message : `exit status ${result.status ?? result.signal}`}`);
  const slowest = run.listSlowest ? slowestFiles(10, started) : [];
  process.stdout.write(`\n${run.name}: ${((Date.now() - started) / 1000).toFixed(0)} s${slowest.length > 1 ? `; slowest files: ${slowest.map((f) => `${f.file} ${(f.ms / 1000).toFixed(1)} s`).join(", ")}` : ""}\n`);
}
if (failed.length > 0) {
  process.stderr.write(`\nnpm test failed:\n${failed.map((f) => `  - ${f}`).join("\n")}\n`);
  process.exit(1);
}
process.stdout.write(`\nnpm test: all ${runs.length} tap runs passed\n`);
