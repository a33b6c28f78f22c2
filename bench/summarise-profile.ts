/**
 * Print the self-time summary of .cpuprofile files (from `npm run bench --
 * --profile`, or any `node --cpu-prof` run):
 *
 *   node --import tsx bench/summarise-profile.ts bench/results/profiles/*.cpuprofile [--top 40]
 */
import path from "node:path";
import { parseArgs } from "node:util";
import { summaryMarkdown } from "./lib/profile.js";

const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: "string", default: "25" } } });
if (positionals.length === 0) {
  process.stderr.write("usage: node --import tsx bench/summarise-profile.ts FILE.cpuprofile... [--top N]\n");
  process.exit(2);
}
for (const file of positionals) process.stdout.write(`${summaryMarkdown(path.basename(file), path.resolve(file), Number(values.top))}\n`);
