/**
 * Print the self-time summary of .cpuprofile files (from `npm run bench --
 * --profile`, or any `node --cpu-prof` run):
 *
 *   node --import tsx bench/summarise-profile.ts bench/results/profiles/*.cpuprofile [--top 40]
 */
import path from "node:path";
import { benchArgs } from "./lib/args.js";
import { summaryMarkdown } from "./lib/profile.js";

const USAGE = "Usage: node --import tsx bench/summarise-profile.ts FILE.cpuprofile... [--top N]\n";
const { values, positionals } = benchArgs(USAGE, { allowPositionals: true, options: { top: { type: "string", default: "25" } } });
if (positionals.length === 0) {
  process.stderr.write(`no profile given\n\n${USAGE}`);
  process.exit(2);
}
for (const file of positionals) process.stdout.write(`${summaryMarkdown(path.basename(file), path.resolve(file), Number(values.top))}\n`);
