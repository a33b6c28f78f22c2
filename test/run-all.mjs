/**
 * `npm test`'s runs of tap: every file in parallel, then the burst test alone
 * (it measures another player's latency while one player floods the server,
 * so it must not share the machine with other files). Both always run, so a
 * failure in the first does not hide the second's result; the exit status is
 * non-zero when either failed, and the end of the output names which.
 */
import { spawnSync } from "node:child_process";

const runs = [
  { name: "every test file but the burst test", args: [] },
  { name: "test/burst.test.ts (alone)", args: ["--jobs=1", "test/burst.test.ts"] },
];
const failed = [];
for (const run of runs) {
  const result = spawnSync("npx", ["tap", ...run.args], { stdio: "inherit" });
  if (result.status !== 0) failed.push(`${run.name}: ${result.error ? result.error.message : `exit status ${result.status ?? result.signal}`}`);
}
if (failed.length > 0) {
  process.stderr.write(`\nnpm test failed:\n${failed.map((f) => `  - ${f}`).join("\n")}\n`);
  process.exit(1);
}
process.stdout.write(`\nnpm test: all ${runs.length} tap runs passed\n`);
