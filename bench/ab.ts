/**
 * A/B of the requests that need no data (`{__typename}`, `GET /health`)
 * between the hub, the baseline, `bench/bare/server.ts` (Fastify + grafserv
 * and nothing else) and `bench/fastify-express/server.ts` (the hub with
 * `@fastify/express` in place of its own Express bridge), on one embedded
 * Postgres, interleaved, with the median req/s (and its spread over the
 * rounds), the ratio to the baseline and the server CPU µs per request of
 * each. For finding where a request's time goes, not for the committed
 * results (`npm run bench`).
 *
 *   npm run build && node --import tsx bench/ab.ts [--targets hub,bare,baseline,fastify-express] [--scenarios typename,health] [--rounds 6] [--duration 3] [--rate N]
 *
 * --rate N sends N requests a second (all connections together) instead of as
 * many as the target answers: the machine is then not saturated, so the server
 * CPU per request is not bent by autocannon competing for the cores (it is
 * higher than at saturation, where one wake-up serves several requests; compare
 * targets within one run).
 */
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { benchArgs } from "./lib/args.js";
import { Target } from "./lib/target.js";
import { runLoad } from "./lib/load.js";
import { comparisonMarkdown } from "./lib/profile.js";
import { postgresCpuSampler } from "./lib/pg-cpu.js";
import type { HttpRequest } from "./lib/scenarios.js";
import { SERVER_ENV, median } from "./lib/util.js";

const USAGE = `Usage: npm run build && node --import tsx bench/ab.ts [options]

  --targets LIST      hub first, then any of bare, baseline, fastify-express and bare+PIECE+PIECE…
                      (the pieces are listed in bench/bare/server.ts; default hub,bare,baseline)
  --scenarios LIST    typename, health, query (anonymous allCoinflips: a statement in a transaction) (default typename)
  --rounds N          interleaved rounds (default 6)
  --duration S        seconds per timed run (default 3)
  --connections N     autocannon connections (default 10)
  --rate N            N requests a second in all instead of as many as are answered
  --pin               pin the targets to the last core, autocannon to the others
  --profile DIR       then one profiled run per target; comparisons in DIR/ab-profile-SCENARIO.md
`;
const { values: opts } = benchArgs(USAGE, {
  options: {
    targets: { type: "string", default: "hub,bare,baseline" },
    scenarios: { type: "string", default: "typename" },
    rounds: { type: "string", default: "6" },
    duration: { type: "string", default: "3" },
    connections: { type: "string", default: "10" },
    /** After the rounds, one run per target under the CPU profiler; hub vs each other target in DIR/ab-profile.md. */
    profile: { type: "string" },
    /** Pin the targets (all their threads) to the last core and this process (autocannon) to the others. */
    pin: { type: "boolean", default: false },
    /** A fixed request rate (req/s, all connections together) instead of as fast as answered. */
    rate: { type: "string" },
  },
});
const scripts: Record<string, string> = {
  hub: "bench/hub/server.ts",
  bare: "bench/bare/server.ts",
  baseline: "bench/baseline/server.ts",
  "fastify-express": "bench/fastify-express/server.ts",
};
const requests: Record<string, HttpRequest> = {
  typename: { method: "POST", path: "/graphql", headers: { "content-type": "application/json" }, body: '{"query":"{__typename}"}' },
  health: { method: "GET", path: "/health", headers: {} },
  // Anonymous: row-level security leaves no rows, but the statement still goes to Postgres in its transaction.
  query: { method: "POST", path: "/graphql", headers: { "content-type": "application/json" }, body: '{"query":"{allCoinflips(first:10,orderBy:ID_ASC){nodes{id}}}"}' },
};
const rate = opts.rate === undefined ? undefined : Number(opts.rate);
if (rate !== undefined && !(Number.isInteger(rate) && rate > 0)) throw new Error(`--rate: expected a whole number of requests per second above 0, received ${JSON.stringify(opts.rate)}`);
const names = opts.targets.split(",");
const scenarioIds = opts.scenarios.split(",");
// bare+logger+ids…: the bare reference plus some of the hub's own pieces (bench/bare/server.ts).
const scriptOf = (name: string) => scripts[name] ?? (name.startsWith("bare+") ? scripts.bare : undefined);
const envOf = (name: string): Record<string, string> => (name.startsWith("bare+") ? { BENCH_BARE_WITH: name.slice("bare+".length).replaceAll("+", ",") } : {});
for (const name of names) if (!scriptOf(name)) throw new Error(`--targets: unknown target ${JSON.stringify(name)}; known: ${Object.keys(scripts).join(", ")}`);
for (const id of scenarioIds) if (!requests[id]) throw new Error(`--scenarios: unknown scenario ${JSON.stringify(id)}; known: ${Object.keys(requests).join(", ")}`);
if (names[0] !== "hub") throw new Error("--targets: the first must be hub (it starts the embedded Postgres the others attach to)");

const load = () => os.loadavg().map((x) => x.toFixed(2)).join(" ");
process.stdout.write(`${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? "unknown CPU"}, Node ${process.version}; load average before: ${load()}\n`);
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "hub-ab-"));
const targets: Array<{ name: string; target: Target }> = [];
try {
  for (const name of names) {
    const target = await Target.start(name === "baseline" ? "baseline" : "hub", scriptOf(name)!, { ...SERVER_ENV, ...envOf(name), BENCH_DATA_DIR: dataDir });
    targets.push({ name, target });
    if (opts.pin) execFileSync("taskset", ["-a", "-cp", String(os.cpus().length - 1), String(target.child.pid)], { stdio: "ignore" });
  }
  if (opts.pin) execFileSync("taskset", ["-a", "-cp", `0-${Math.max(0, os.cpus().length - 2)}`, String(process.pid)], { stdio: "ignore" });
  // Cumulative CPU of the embedded Postgres (the hub target started it): one target is under load at a time.
  const postgresCpu = postgresCpuSampler(dataDir);
  const bodies: Record<string, string> = { typename: '{"data":{"__typename":"Query"}}', query: '{"data":{"allCoinflips":{"nodes":[]}}}' };
  const ok = (id: string) => (bodies[id] !== undefined ? (b: string) => b === bodies[id] : (b: string) => b.includes('"ok"'));
  for (const id of scenarioIds) {
    const runs = targets.map(() => ({ pg: [] as number[], trips: [] as number[], rps: [] as number[], cpu: [] as number[], sys: [] as number[], gc: [] as number[], minor: [] as number[], scav: [] as number[], other: [] as number[] }));
    for (let round = -1; round < Number(opts.rounds); round++) {
      for (const [i, { name, target }] of targets.entries()) {
        const r = await runLoad(target, requests[id]!, { connections: Number(opts.connections), durationS: round < 0 ? 2 : Number(opts.duration), verify: ok(id), postgresCpu, ...(rate ? { rate } : {}) });
        const failures = r.errors + r.timeouts + r.non2xx + r.mismatches;
        if (failures) throw new Error(`${id} on ${name}: ${failures} failed responses`);
        if (round >= 0) {
          runs[i]!.rps.push(r.rps);
          runs[i]!.trips.push(r.pgRoundTripsPerReq);
          runs[i]!.pg.push(r.pgCpuUsPerReq);
          runs[i]!.cpu.push(r.cpuUsPerReq);
          runs[i]!.sys.push(r.sysUsPerReq);
          runs[i]!.gc.push(r.gcUsPerReq);
          runs[i]!.minor.push(r.gcMinorUsPerReq);
          runs[i]!.scav.push(r.scavengesPer1k);
          runs[i]!.other.push(r.otherGcPer1k);
        }
      }
    }
    const baselineIndex = targets.findIndex((t) => t.name === "baseline");
    for (const [i, { name }] of targets.entries()) {
      const { rps, cpu, sys, gc, minor, scav, other, trips, pg } = runs[i]!;
      // Per round, this target's req/s over the baseline's of the same round: the spread of the ratio.
      const ratios = baselineIndex < 0 ? [] : rps.map((r, round) => r / runs[baselineIndex]!.rps[round]!);
      const ratio = ratios.length ? `  ${median(ratios).toFixed(2)}× baseline (rounds ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})` : "";
      process.stdout.write(
        `${id} ${name.padEnd(24)} ${Math.round(median(rps)).toString().padStart(6)} req/s (rounds ${Math.round(Math.min(...rps))}–${Math.round(Math.max(...rps))})${ratio}  ${Math.round(median(cpu)).toString().padStart(4)} µs/req, min ${Math.round(Math.min(...cpu))}  (rounds: ${cpu.map(Math.round).join(" ")} µs); of which kernel ${Math.round(median(sys))}, GC pauses ${median(gc).toFixed(1)} µs (scavenges ${median(minor).toFixed(1)} µs, ${median(scav).toFixed(2)} and ${median(other).toFixed(2)} other pauses per 1,000 requests); Postgres round trips ${median(trips).toFixed(2)} and Postgres CPU ${Math.round(median(pg))} µs per request\n`,
      );
    }
    // Per round, the hub's CPU per request less each other target's, measured back to back: the hub's own cost, paired.
    for (const [i, { name }] of targets.entries()) {
      if (i === 0) continue;
      const diffs = runs[0]!.cpu.map((c, round) => c - runs[i]!.cpu[round]!);
      process.stdout.write(`${id} hub − ${name}: ${median(diffs).toFixed(1)} µs/req, median of the rounds (${diffs.map((d) => d.toFixed(0)).join(" ")})\n`);
    }
    // A target and the same target with one more piece (bare+x, bare+x+y), measured back to back in each round: that piece's cost.
    for (const [i, { name }] of targets.entries()) {
      for (const [j, { name: other }] of targets.entries()) {
        if (!other.startsWith(`${name}+`)) continue;
        const ratios = runs[j]!.rps.map((r, round) => r / runs[i]!.rps[round]!);
        const diffs = runs[j]!.cpu.map((c, round) => c - runs[i]!.cpu[round]!);
        const pgDiffs = runs[j]!.pg.map((c, round) => c - runs[i]!.pg[round]!);
        process.stdout.write(
          `${id} ${other} ÷ ${name}: req/s ${median(ratios).toFixed(3)}× (rounds ${ratios.map((r) => r.toFixed(2)).join(" ")}); CPU ${median(diffs).toFixed(1)} µs/req (rounds ${diffs.map((d) => d.toFixed(0)).join(" ")}); Postgres CPU ${median(pgDiffs).toFixed(1)} µs/req (rounds ${pgDiffs.map((d) => d.toFixed(0)).join(" ")})\n`,
        );
      }
    }
    if (opts.profile) {
      const dir = path.resolve(opts.profile);
      const profiled: Array<{ name: string; file: string; responses: number }> = [];
      for (const { name, target } of targets) {
        const file = path.join(dir, `${id}.${name}.cpuprofile`);
        await target.profileStart();
        const r = await runLoad(target, requests[id]!, { connections: Number(opts.connections), durationS: Number(opts.duration), verify: ok(id) });
        await target.profileStop(file);
        profiled.push({ name, file, responses: r.responses });
      }
      const [hub, ...others] = profiled;
      const md = others.map((o) => comparisonMarkdown(`${id}: hub vs ${o.name} (the "baseline" columns are ${o.name})`, hub!, o, 40)).join("\n");
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, `ab-profile-${id}.md`), md);
      process.stdout.write(`profiles and their comparison in ${dir}\n`);
    }
  }
  process.stdout.write(`load average after: ${load()}\n`);
} finally {
  for (const { target } of targets.reverse()) await target.stop();
}
