/** bench/results/latest.md: the tables of a run, with pass/miss against issue 6's targets. */
import type { IdentityEvidence } from "./identity-evidence.js";
import type { LockStats } from "./locks.js";
import type { RunResult } from "./load.js";
import type { Scenario } from "./scenarios.js";
import type { StartMeasurement } from "./startup.js";
import { MiB, median } from "./util.js";

export interface ScenarioResult {
  scenario: Scenario;
  /** Keyed by target name: hub, baseline, and bare where the scenario compares with it. */
  warmup: Partial<Record<string, RunResult>>;
  rounds: Partial<Record<string, RunResult>>[];
  /** Lock waits sampled during each timed round (scenarios with sampleLocks), by target name. */
  locks?: Partial<Record<string, LockStats[]>>;
}

export interface StartupResult {
  first: StartMeasurement;
  warm: StartMeasurement[];
  /** Spawn → hub and plugins imported, in a bare node process (median). */
  importMs: number;
}

export interface RunSettings {
  connections: number;
  durationS: number;
  warmupS: number;
  rounds: number;
  pinned: boolean;
  baselineGraphqlFirst: boolean;
  argv: string[];
}

export interface Machine {
  date: string;
  cpu: string;
  cores: number;
  memoryGiB: number;
  os: string;
  node: string;
  postgres: string;
  postgresSettings: string;
  versions: string;
  loadBefore: number[];
  loadAfter?: number[];
}

export const TARGETS = { warmStartMs: 1000, firstStartMs: 5000, idleRssBytes: 120 * MiB };

const fmt = (x: number, digits = 0) => (Number.isFinite(x) ? x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits }) : "n/a");

function failures(runs: RunResult[]): { total: number; text: string } {
  const sum = (k: keyof RunResult) => runs.reduce((acc, r) => acc + (r[k] as number), 0);
  const parts: string[] = [];
  const errors = sum("errors");
  const timeouts = sum("timeouts");
  const non2xx = sum("non2xx");
  const bad = sum("mismatches");
  if (errors) parts.push(`${errors} errors`);
  if (timeouts) parts.push(`${timeouts} timeouts`);
  if (non2xx) parts.push(`${non2xx} non-2xx`);
  if (bad) parts.push(`${bad} bad bodies`);
  return { total: errors + timeouts + non2xx + bad, text: parts.length ? parts.join(", ") : "0" };
}

/** Over this spread (max − min over the median of the rounds) a figure is not quoted as a result. */
export const MAX_SPREAD = 0.1;

export function spread(values: number[]): number {
  const m = median(values);
  return values.length > 1 && m > 0 ? (Math.max(...values) - Math.min(...values)) / m : 0;
}

/** The median and its spread, or, when the spread is over MAX_SPREAD, the range marked as unsteady. */
function cell(values: number[], digits = 0, suffix = ""): string {
  if (!values.length || values.some((v) => !Number.isFinite(v))) return "n/a";
  const sp = spread(values);
  if (sp > MAX_SPREAD) return `⚠ ${fmt(Math.min(...values), digits)}–${fmt(Math.max(...values), digits)}${suffix} (${fmt(sp * 100)}%)`;
  return `${fmt(median(values), digits)}${suffix} (${fmt(sp * 100)}%)`;
}

export interface Summary {
  scenario: Scenario;
  hubRps: number;
  baseRps: number;
  ratio: number;
  verdict: "pass" | "miss" | "unsteady" | "INVALID";
}

const of = (r: ScenarioResult, target: string): RunResult[] => r.rounds.map((x) => x[target]).filter((x): x is RunResult => x !== undefined);

/** Per round, a over b: the ratio's median and spread come from the rounds, each measured at the same time. */
function perRound(r: ScenarioResult, a: string, b: string, f: (x: RunResult) => number): number[] {
  return r.rounds.filter((x) => x[a] && x[b]).map((x) => f(x[a]!) / f(x[b]!));
}

function verdictOf(ratios: number[], target: number, invalid: boolean): Summary["verdict"] {
  if (invalid) return "INVALID";
  if (spread(ratios) > MAX_SPREAD) return "unsteady";
  return median(ratios) >= target ? "pass" : "miss";
}

export function summariseScenario(r: ScenarioResult): Summary & { row: string } {
  const hub = of(r, "hub");
  const base = of(r, "baseline");
  const hubRps = median(hub.map((x) => x.rps));
  const baseRps = median(base.map((x) => x.rps));
  const ratios = perRound(r, "hub", "baseline", (x) => x.rps);
  const ratio = median(ratios);
  const hubFail = failures(hub);
  const baseFail = failures(base);
  const verdict = verdictOf(ratios, r.scenario.targetRatio, hubFail.total + baseFail.total > 0);
  const row = [
    r.scenario.title,
    cell(hub.map((x) => x.rps)),
    cell(base.map((x) => x.rps)),
    `**${cell(ratios, 2, "×")}**`,
    `≥ ${fmt(r.scenario.targetRatio, 2)}×`,
    verdict,
    `${cell(hub.map((x) => x.cpuUsPerReq))} / ${cell(base.map((x) => x.cpuUsPerReq))}`,
    `${fmt(median(hub.map((x) => x.pgRoundTripsPerReq)), 2)} / ${fmt(median(base.map((x) => x.pgRoundTripsPerReq)), 2)}`,
    `${cell(hub.map((x) => x.pgCpuUsPerReq))} / ${cell(base.map((x) => x.pgCpuUsPerReq))}`,
    `${fmt(median(hub.map((x) => x.p99Ms)), 1)} / ${fmt(median(base.map((x) => x.p99Ms)), 1)}`,
    `${hubFail.text} / ${baseFail.text}`,
  ];
  return { scenario: r.scenario, hubRps, baseRps, ratio, verdict, row: `| ${row.join(" | ")} |` };
}

/** The hub against bare Fastify + grafserv with the same preset: what the hub's own front costs a request. */
export function summariseOwnCost(r: ScenarioResult): { verdict: Summary["verdict"]; row: string } | undefined {
  const target = r.scenario.bareTargetRatio;
  const hub = of(r, "hub");
  const bare = of(r, "bare");
  if (target === undefined || !bare.length) return undefined;
  const rpsRatios = perRound(r, "hub", "bare", (x) => x.rps);
  // bare's CPU per request over the hub's: 1 when the hub adds nothing, 0.95 when it adds 5% more.
  const cpuRatios = perRound(r, "bare", "hub", (x) => x.cpuUsPerReq);
  const own = r.rounds.filter((x) => x.hub && x.bare).map((x) => x.hub!.cpuUsPerReq - x.bare!.cpuUsPerReq);
  const invalid = failures(hub).total + failures(bare).total > 0;
  const v1 = verdictOf(rpsRatios, target, invalid);
  const v2 = verdictOf(cpuRatios, target, invalid);
  const verdict = v1 === "INVALID" || v2 === "INVALID" ? "INVALID" : v1 === "unsteady" && v2 === "unsteady" ? "unsteady" : v1 === "miss" || v2 === "miss" ? "miss" : "pass";
  const row = [
    r.scenario.title,
    cell(hub.map((x) => x.rps)),
    cell(bare.map((x) => x.rps)),
    `**${cell(rpsRatios, 2, "×")}**`,
    `${cell(hub.map((x) => x.cpuUsPerReq))} / ${cell(bare.map((x) => x.cpuUsPerReq))}`,
    `**${cell(cpuRatios, 2, "×")}**`,
    `${fmt(median(own), 1)} (rounds ${own.map((x) => fmt(x, 0)).join(", ")})`,
    `≥ ${fmt(target, 2)}×`,
    verdict,
  ];
  return { verdict, row: `| ${row.join(" | ")} |` };
}

export function renderReport(input: {
  machine: Machine;
  settings: RunSettings;
  scenarios: ScenarioResult[];
  startup: StartupResult | undefined;
  identity: IdentityEvidence[];
  notes: string[];
  profileFile: string | undefined;
}): string {
  const { machine, settings } = input;
  const out: string[] = [];
  out.push("# Benchmark: hub vs. the Express architecture");
  out.push("");
  out.push(
    "**hub**: this package (Fastify 5 → grafserv's Fastify adapter; the Express 5 app of `configureApp` mounted for non-GraphQL routes, its requests built with Express's prototypes; GraphQL transactions with a pipelined prologue, `src/db/pipelined-adaptor.ts`, and for @dataplan/pg's own one-statement calls the commit in the same packet, `adapters/dataplan-pg-executor.ts`) with the demo configuration. " +
      `**baseline**: the original system's architecture, in \`bench/baseline/\` (one Express 5 app: identity middleware → \`configureApp\`'s middleware and routes → ${settings.baselineGraphqlFirst ? "(here: GraphQL mounted *before* them) " : ""}PostGraphile through \`grafserv/express/v4\`), serving the same preset with the same pools (the GraphQL pool not in pipeline mode: @dataplan/pg's stock adaptor), plugins, identity resolver and \`configureApp\`. ` +
      "Both run in their own process on one embedded Postgres, with NODE_ENV=production, GRAPHILE_ENV=production, LOG_LEVEL=warn.",
  );
  out.push("");
  out.push(`Machine: ${machine.cpu}, ${machine.cores} cores, ${fmt(machine.memoryGiB, 1)} GiB; ${machine.os}; Node ${machine.node}; ${machine.postgres} (${machine.postgresSettings}).`);
  out.push(`Date: ${machine.date}. Load average before the run: ${machine.loadBefore.map((x) => x.toFixed(2)).join(" ")}${machine.loadAfter ? `; after: ${machine.loadAfter.map((x) => x.toFixed(2)).join(" ")}` : ""}.`);
  out.push(`Versions: ${machine.versions}.`);
  out.push(
    `Settings: autocannon ${settings.connections} connections, ${settings.durationS} s per timed run, ${settings.rounds} rounds interleaved hub, baseline(, bare), hub, baseline…, after a discarded ${settings.warmupS} s warm-up per cell; ${settings.pinned ? "servers pinned with taskset to the last core, autocannon to the others (--pin)" : "no CPU pinning (the servers, Postgres and autocannon share every core)"}. Command: \`npm run bench${settings.argv.length ? ` -- ${settings.argv.join(" ")}` : ""}\`.`,
  );
  out.push("");

  if (input.scenarios.length) {
    out.push("## Throughput and cost per request");
    out.push("");
    out.push(
      `Each figure: the median of the ${settings.rounds} rounds, then in brackets its spread, (max − min) / median. A figure whose spread is over ${fmt(MAX_SPREAD * 100)}% is not quoted: it shows as ⚠ with its range, and a ratio that unsteady gives the result \`unsteady\` instead of pass or miss. Ratios are taken per round (the two targets measured back to back) and then their median.`,
    );
    out.push("");
    out.push("| scenario | hub req/s | baseline req/s | hub / baseline | target | result | server CPU µs/req hub / baseline | Postgres round trips/req hub / baseline | Postgres CPU µs/req hub / baseline | p99 ms hub / baseline | errors hub / baseline |");
    out.push("|---|--:|--:|--:|--:|---|--:|--:|--:|--:|---|");
    for (const r of input.scenarios) out.push(summariseScenario(r).row);
    out.push("");
    const own = input.scenarios.map((r) => summariseOwnCost(r)).filter((x) => x !== undefined);
    if (own.length) {
      out.push("### The hub's own cost: against bare Fastify + grafserv with the same preset");
      out.push("");
      out.push(
        "**bare** (`bench/bare/server.ts`): Fastify 5 with logging off and grafserv's Fastify adapter serving the hub's preset, nothing else: no identity hook, request ids, per-identity admission, response counters or Express app. The difference is what the hub's own front costs a request (docs/performance.md). CPU ratio = bare's server CPU per request / the hub's, per round: 1 when the hub adds nothing. Both ratios must meet the target.",
      );
      out.push("");
      out.push("| scenario | hub req/s | bare req/s | hub / bare req/s | server CPU µs/req hub / bare | bare / hub CPU | hub − bare, µs/req | target | result |");
      out.push("|---|--:|--:|--:|--:|--:|--:|--:|---|");
      for (const o of own) out.push(o!.row);
      out.push("");
    }
    out.push("Every round, req/s and server CPU µs/req (warm-up in brackets, discarded):");
    out.push("");
    out.push(`| scenario | target | ${Array.from({ length: settings.rounds }, (_, i) => `round ${i + 1}`).join(" | ")} | warm-up |`);
    out.push(`|---|---|${"--:|".repeat(settings.rounds)}--:|`);
    for (const r of input.scenarios) {
      for (const t of Object.keys(r.warmup)) {
        const w = r.warmup[t]!;
        out.push(`| ${r.scenario.id} | ${t} | ${r.rounds.map((x) => (x[t] ? `${fmt(x[t]!.rps)}; ${fmt(x[t]!.cpuUsPerReq)} µs` : "")).join(" | ")} | (${fmt(w.rps)}; ${fmt(w.cpuUsPerReq)} µs) |`);
      }
    }
    out.push("");
    const warmupFailures = input.scenarios.flatMap((r) =>
      Object.keys(r.warmup).map((t) => ({ t, id: r.scenario.id, f: failures([r.warmup[t]!]) })).filter((x) => x.f.total),
    );
    for (const w of warmupFailures) out.push(`- warm-up of ${w.id} on ${w.t} had failures: ${w.f.text}`);
    if (warmupFailures.length) out.push("");

    const withLocks = input.scenarios.filter((r) => r.locks?.hub?.length);
    if (withLocks.length) {
      out.push("Lock waits during the timed rounds (`pg_stat_activity` every 50 ms: client backends of the database running a statement, and those waiting for a lock), median of the rounds:");
      out.push("");
      out.push("| scenario | connections | hub: active / waiting (max) | baseline: active / waiting (max) |");
      out.push("|---|--:|--:|--:|");
      const cell = (l: LockStats[] | undefined) => !l?.length ? "" : `${fmt(median(l.map((x) => x.meanActive)), 1)} / ${fmt(median(l.map((x) => x.meanWaiting)), 1)} (${Math.max(...l.map((x) => x.maxWaiting))})`;
      for (const r of withLocks) out.push(`| ${r.scenario.id} | ${r.scenario.connections ?? settings.connections} | ${cell(r.locks!.hub)} | ${cell(r.locks!.baseline)} |`);
      out.push("");
    }
  }

  if (input.startup) {
    const { first, warm } = input.startup;
    const warmMs = median(warm.map((x) => x.ms));
    const idle = median(warm.map((x) => x.idleRssBytes));
    const verdict = (ok: boolean) => (ok ? "pass" : "miss");
    out.push("## Start-up and memory (`node dist/server.js`, demo configuration)");
    out.push("");
    out.push("| measure | value | target | result |");
    out.push("|---|--:|--:|---|");
    out.push(
      `| warm start (existing data dir) to the first answered /graphql, median of ${warm.length} (spread) | ${cell(warm.map((x) => x.ms / 1000), 2, " s")}: ${warm.map((x) => fmt(x.ms / 1000, 2)).join(", ")} | ≤ ${fmt(TARGETS.warmStartMs / 1000, 1)} s | ${spread(warm.map((x) => x.ms)) > MAX_SPREAD ? "unsteady" : verdict(warmMs <= TARGETS.warmStartMs)} |`,
    );
    out.push(`| first start (initdb with fsync, migrations) to the first answered /graphql | ${fmt(first.ms / 1000, 2)} s | ≤ ${fmt(TARGETS.firstStartMs / 1000, 0)} s | ${verdict(first.ms <= TARGETS.firstStartMs)} |`);
    const settled = warm.find((x) => x.settled)?.settled;
    out.push(
      `| RSS of the hub process 2 s after its first answer (warm start), median | ${fmt(idle / MiB)} MiB (${warm.map((x) => fmt(x.idleRssBytes / MiB)).join(", ")}; after the first start ${fmt(first.idleRssBytes / MiB)}) | | start-up peak |`,
    );
    if (settled) {
      out.push(
        `| idle RSS of the hub process, ${fmt(settled.afterMs / 1000)} s without traffic after a warm start | ${fmt(settled.rssBytes / MiB)} MiB | ≤ ${fmt(TARGETS.idleRssBytes / MiB)} MiB | ${verdict(settled.rssBytes <= TARGETS.idleRssBytes)} |`,
      );
    }
    out.push("");
    const phase = (m: StartMeasurement) =>
      `Postgres up at ${m.postgresReadyMs !== undefined ? fmt(m.postgresReadyMs / 1000, 2) : "?"} s, listening at ${m.listeningMs !== undefined ? fmt(m.listeningMs / 1000, 2) : "?"} s, answered at ${fmt(m.ms / 1000, 2)} s`;
    out.push(
      `Where the time goes (from spawn, from the server's own log lines): first start: ${phase(first)}; warm starts: ${warm.map(phase).join("; ")}. ` +
        `Node itself plus importing the hub and the reference plugins takes ${fmt(input.startup.importMs / 1000, 2)} s (median, a bare \`node\` importing dist/src/index.js and dist/plugins/index.js; Fastify, grafserv's Fastify adapter and Express are not in it: \`startAndListen\` loads them while Postgres runs the introspection query). ` +
        "Between Postgres up and listening: migrations check, PostGraphile introspection and schema build, Fastify start. " +
        "RSS is the Node process alone (VmRSS); Postgres runs in its own processes. 2 s after the first answer the process still holds the young-generation space V8 grew during the start-up (32 MiB, \`process.memoryUsage()\` and \`v8.getHeapSpaceStatistics()\` of a started server); V8's memory reducer returns it some tens of seconds into idleness, so the idle figure is read after " +
        `${settled ? fmt(settled.afterMs / 1000) : "?"} s without traffic${settled ? ` (every second from 3 s: ${settled.everySecondMiB.join(" ")} MiB)` : ""}. ` +
        "The server logs at the default level (info) here, the targets above at warn.",
    );
    out.push("");
  }

  if (input.identity.length) {
    out.push("## A cached identity costs no database round-trip");
    out.push("");
    out.push("| target | control: requests, each with a different unknown token | lookups seen | transactions | requests with one valid session (GET /whoami, then POST /graphql {__typename}) | in | lookups seen | transactions | lookups per request |");
    out.push("|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    for (const e of input.identity) {
      out.push(
        `| ${e.target} | ${e.control.requests} | ${e.control.lookups} | ${e.control.transactions} | ${fmt(e.cached.requests)}${e.cached.bad ? ` (${e.cached.bad} wrong answers!)` : ""} | ${fmt(e.cached.seconds, 1)} s | ${e.cached.lookups} | ${e.cached.transactions} | ${fmt(e.cached.lookups / e.cached.requests, 4)} |`,
      );
    }
    out.push("");
    out.push(
      "Lookups are counted by Postgres itself: the growth of `seq_scan + idx_scan` of `hub.session` (pg_stat_all_tables), which only session lookups read, each reading taken after 11 s without traffic (backends publish their counters when idle, with a delay of up to 10 s). " +
        "The control shows the counter sees every lookup (one per unknown token). With one valid token, the identity is cached for 1 s, so the only lookups left are about one refresh per second of traffic, whatever the request rate; every answer was checked to carry the identity. " +
        "Transactions (xact_commit + xact_rollback of the database, minus our own reading) count everything done in the database in the same window, autovacuum included (it may run after the mutation scenario): an upper bound on what the requests cost.",
    );
    out.push("");
  }

  if (input.notes.length) {
    out.push("## Notes");
    out.push("");
    for (const n of input.notes) out.push(`- ${n}`);
    out.push("");
  }
  if (input.profileFile) {
    out.push(`CPU profiles of one extra (untimed) run per scenario and target are summarised in [${input.profileFile}](${input.profileFile.replace(/^bench\/results\//, "")}).`);
    out.push("");
  }
  out.push("## Method");
  out.push("");
  out.push(
    [
      "- One embedded Postgres (a fresh data dir in the system temp directory) serves both targets; the hub's process starts it and runs the migrations, the baseline attaches to it. Data: an operator API key, a player with exactly 10 `app.coinflip` rows, one player per connection for the mutations (so the first keeps 10 rows; each request takes the next player in turn, so no player has more bets in flight than the hub's per-player bound of 3 transactions lets run, a bound the baseline does not have), 50,000 rows of a third player inserted after them (the first 10 by id stay the reader's; a table of realistic size, analysed, so query plans stay the same while the mutation scenario adds rows).",
      "- Scenarios: `{__typename}` anonymous; `allCoinflips(first: 10, orderBy: ID_ASC)` with 7 columns, as the operator (API key: an anonymous request sees no rows under row-level security) and as the player (session token, RLS scoping to the player); `makeCoinflip(input: {currency: \"HOUSE\", wager: 1})` as those players (one insert on the superuser pool, then the row read back under RLS); `GET /health`, a plain Express route from `configureApp` behind `express.json()` and a logging middleware.",
      "- Before a scenario is timed, one request to each target is checked in full (JSON parsed: data present, no errors, the 10 seeded rows of the right owner, a new bet of the right player…). During every run each response body is checked too (a GraphQL error is an HTTP 200): failures appear in the errors column and make the result INVALID, never dropped.",
      "- Server CPU µs/req: process.cpuUsage() of the target (all its threads, read over IPC before and after the run) divided by the responses of the run. Postgres CPU µs/req: the growth of utime + stime of the embedded Postgres's processes (/proc; the postmaster's cutime/cstime keeps exited backends) during the run, divided likewise; only one target is under load at a time, so it is that target's database cost. On 2 cores the server, Postgres and autocannon share the CPU, so the Postgres share of a request caps what the HTTP architecture can change. RSS: the largest at the end of a round.",
      "- Postgres round trips/req: counted in each target process (bench/lib/child-prelude.ts wraps node-postgres's `Client.query`): a statement sent while nothing is outstanding on its connection starts a round trip; one written behind statements still awaiting their answer (pipeline mode) shares theirs. Divided by the responses; load does not move it.",
      "- Ratio = the median over the rounds of hub req/s ÷ baseline req/s of the same round. autocannon runs in the bench's own process on the same machine, so absolute figures depend on what else runs there; compare ratios.",
    ].join("\n"),
  );
  out.push("");
  return out.join("\n");
}
