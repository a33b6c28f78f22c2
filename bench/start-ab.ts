/**
 * Warm starts of `node dist/server.js` (spawn → first correct `{__typename}`),
 * alternated with and without a module given to `--import`: what that
 * module's work changes in a start, paired round by round.
 *
 *   npm run build && node --import tsx bench/start-ab.ts --import bench/lib/preload-pg-stream.mjs [--rounds 10]
 *
 * One data dir for all, made by a first start that is not counted.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { benchArgs, positiveOption } from "./lib/args.js";
import { measureStart, stopStartupServers } from "./lib/startup.js";
import { NODE_FLAGS, ROOT, median } from "./lib/util.js";

const USAGE = "Usage: npm run build && node --import tsx bench/start-ab.ts --import FILE [--rounds 10]\n";
const { values } = benchArgs(USAGE, { options: { import: { type: "string" }, rounds: { type: "string", default: "10" } } });
if (!values.import) throw new Error(`--import is required\n${USAGE}`);
const ROUNDS = positiveOption(USAGE, "rounds", values.rounds);
const module = path.resolve(ROOT, values.import);
const base = [...NODE_FLAGS];
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hub-start-ab-"));
const ms: Record<"with" | "without", number[]> = { with: [], without: [] };
try {
  await measureStart(dir, 0);
  for (let round = 0; round < ROUNDS; round++) {
    // Which goes first alternates, so a drift of the machine's load hits both alike.
    for (const variant of round % 2 ? (["without", "with"] as const) : (["with", "without"] as const)) {
      NODE_FLAGS.splice(0, NODE_FLAGS.length, ...base, ...(variant === "with" ? ["--import", module] : []));
      ms[variant].push((await measureStart(dir, 0)).ms);
    }
  }
} finally {
  await stopStartupServers();
  fs.rmSync(dir, { recursive: true, force: true });
}
const spread = (a: number[]) => (Math.max(...a) - Math.min(...a)) / median(a);
for (const variant of ["with", "without"] as const) {
  const a = ms[variant];
  process.stdout.write(`${variant} ${values.import}: median ${median(a).toFixed(0)} ms, spread ${(100 * spread(a)).toFixed(0)}% (rounds ${a.map((x) => x.toFixed(0)).join(" ")})\n`);
}
const diffs = ms.without.map((x, i) => x - ms.with[i]!);
process.stdout.write(`without − with, paired: median ${median(diffs).toFixed(0)} ms = ${((100 * median(diffs)) / median(ms.with)).toFixed(1)}% of a start (rounds ${diffs.map((x) => x.toFixed(0)).join(" ")})\n`);
