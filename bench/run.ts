/**
 * `npm run bench`: the hub against the original system's architecture (issue 6).
 *
 *   npm run bench                                   # defaults for a 2-core machine
 *   npm run bench -- --duration 2 --rounds 1        # a quick look
 *   npm run bench -- --connections 20 --profile     # plus CPU profiles of both targets
 *   npm run bench -- --help
 *
 * Writes bench/results/latest.md and prints it. See bench/README.md.
 */
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { benchArgs, positiveOption } from "./lib/args.js";
import pg from "pg";
import { identityEvidence, type IdentityEvidence } from "./lib/identity-evidence.js";
import { runLoad, type RunResult } from "./lib/load.js";
import { comparisonMarkdown } from "./lib/profile.js";
import { renderReport, summariseScenario, type Machine, type ScenarioResult, type StartupResult } from "./lib/report.js";
import { fetchOnce, scenarios as allScenarios, type Scenario } from "./lib/scenarios.js";
import { seed, seedFair, type Fixtures } from "./lib/seed.js";
import { sampleLocks, type LockStats } from "./lib/locks.js";
import { measureImportMs, measureStart, stopLeftoverPostgres, stopStartupServers, type StartMeasurement } from "./lib/startup.js";
import { Target } from "./lib/target.js";
import { postgresCpuSampler } from "./lib/pg-cpu.js";
import { ceilingsMarkdown, measureCeilings, type CeilingsResult } from "./lib/pg-ceilings.js";
import { ROOT, median, sleep } from "./lib/util.js";

const HELP = `npm run bench -- [options]

  --connections N        autocannon connections per run (default 10)
  --duration S           seconds per timed run (default 5)
  --warmup S             seconds of the discarded warm-up per scenario and target (default 3)
  --rounds N             timed rounds, interleaved hub/baseline (default 3)
  --scenarios a,b        subset of: ${allScenarios.map((s) => s.id).join(", ")} (default all)
  --startup-runs N       warm starts to measure (default 3)
  --skip-startup         skip the start-up and idle-RSS measurements
  --skip-identity        skip the identity-cache evidence
  --skip-ceilings        skip the database's own ceilings (pgbench; run with the outcome bet scenarios)
  --identity-requests N  requests per part of the identity-cache evidence (default 2000)
  --profile              after the timed rounds, one extra run per scenario and target under the
                         CPU profiler; profiles in bench/results/profiles/, summary in bench/results/profile.md
  --pin                  pin the target servers (all threads) to the last core and the bench
                         (autocannon) to the others; the report says whether it was on
  --baseline-graphql-first  mount GraphQL before configureApp's middleware in the baseline
  --out FILE             report file (default bench/results/latest.md)
  --verbose              show the target servers' own output
`;

const { values: opts } = benchArgs(HELP, {
  options: {
    connections: { type: "string", default: "10" },
    duration: { type: "string", default: "5" },
    warmup: { type: "string", default: "3" },
    rounds: { type: "string", default: "3" },
    scenarios: { type: "string" },
    "startup-runs": { type: "string", default: "3" },
    "skip-startup": { type: "boolean", default: false },
    "skip-identity": { type: "boolean", default: false },
    "skip-ceilings": { type: "boolean", default: false },
    "identity-requests": { type: "string", default: "2000" },
    profile: { type: "boolean", default: false },
    pin: { type: "boolean", default: false },
    "baseline-graphql-first": { type: "boolean", default: false },
    out: { type: "string", default: "bench/results/latest.md" },
    verbose: { type: "boolean", default: false },
  },
});

const positive = (name: string, raw: string, integer = true) => positiveOption(HELP, name, raw, integer);

const connections = positive("connections", opts.connections);
const durationS = positive("duration", opts.duration);
const warmupS = positive("warmup", opts.warmup);
const rounds = positive("rounds", opts.rounds);
const startupRuns = positive("startup-runs", opts["startup-runs"]);
const identityRequests = positive("identity-requests", opts["identity-requests"]);
let scenarios: Scenario[] = allScenarios;
if (opts.scenarios) {
  const wanted = opts.scenarios.split(",").map((s) => s.trim());
  const unknown = wanted.filter((id) => !allScenarios.some((s) => s.id === id));
  if (unknown.length) {
    process.stderr.write(`unknown scenario ${unknown.join(", ")}; known: ${allScenarios.map((s) => s.id).join(", ")}\n`);
    process.exit(2);
  }
  scenarios = allScenarios.filter((s) => wanted.includes(s.id));
}
const outFile = path.resolve(ROOT, opts.out);
const profileDir = path.join(ROOT, "bench/results/profiles");
const profileReport = path.join(ROOT, "bench/results/profile.md");

const log = (line: string) => process.stderr.write(`${line}\n`);

// ---------------------------------------------------------------------------
// Everything started here is stopped here, on success, error or Ctrl-C.

const targets: Target[] = [];
const tmpDirs: string[] = [];
let pool: pg.Pool | undefined;
let cleaning: Promise<void> | undefined;

function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    await pool?.end().catch(() => undefined);
    // The baseline first: the hub's process owns the Postgres the baseline is connected to.
    for (const t of [...targets].reverse()) await t.stop().catch((e: unknown) => log(`stopping ${t.name}: ${String(e)}`));
    await stopStartupServers();
    for (const dir of tmpDirs) {
      await stopLeftoverPostgres(dir);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  })();
  return cleaning;
}

let interrupted = 0;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    interrupted++;
    if (interrupted > 1) {
      log("second signal: killing the servers");
      for (const t of targets) t.child.kill("SIGKILL");
      process.exit(130);
    }
    log(`${signal}: stopping everything the bench started…`);
    void cleanup().finally(() => process.exit(130));
  });
}

function tmpDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tmpDirs.push(dir);
  return dir;
}

/** --pin: the servers on the last core, this process (autocannon) on the others. */
function pinTargets(list: Target[]): void {
  const last = os.cpus().length - 1;
  for (const t of list) execFileSync("taskset", ["-a", "-cp", String(last), String(t.child.pid)], { stdio: "ignore" });
  execFileSync("taskset", ["-a", "-cp", `0-${Math.max(0, last - 1)}`, String(process.pid)], { stdio: "ignore" });
}

// ---------------------------------------------------------------------------

function version(pkg: string): string {
  try {
    return (JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules", pkg, "package.json"), "utf8")) as { version: string }).version;
  } catch {
    return "?";
  }
}

function cpuModel(): string {
  const model = os.cpus()[0]?.model?.trim() ?? "unknown CPU";
  try {
    const info = fs.readFileSync("/proc/cpuinfo", "utf8");
    const mhz = /^cpu MHz\s*:\s*([\d.]+)/m.exec(info)?.[1];
    return mhz ? `${model} @ ${Math.round(Number(mhz))} MHz` : model;
  } catch {
    return model;
  }
}

async function describeMachine(db: pg.Pool): Promise<Machine> {
  const { rows } = await db.query<{ version: string; fsync: string; sync: string; sb: string }>(
    "select version() as version, current_setting('fsync') as fsync, current_setting('synchronous_commit') as sync, current_setting('shared_buffers') as sb",
  );
  const r = rows[0]!;
  return {
    date: new Date().toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC"),
    cpu: cpuModel(),
    cores: os.cpus().length,
    memoryGiB: os.totalmem() / 1024 ** 3,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    postgres: r.version.split(" on ")[0]!,
    postgresSettings: `fsync ${r.fsync}, synchronous_commit ${r.sync}, shared_buffers ${r.sb}`,
    versions: ["fastify", "express", "grafserv", "postgraphile", "grafast", "pg", "autocannon"].map((p) => `${p} ${version(p)}`).join(", "),
    loadBefore: os.loadavg(),
  };
}

/** The same preset must give the same schema: compare the SDL both targets printed at start. */
function compareSchemas(hubFile: string, baselineFile: string): void {
  const lines = (file: string) => new Set(fs.readFileSync(file, "utf8").split("\n").map((l) => l.trim()).filter(Boolean));
  const a = fs.readFileSync(hubFile, "utf8");
  const b = fs.readFileSync(baselineFile, "utf8");
  if (a !== b) {
    const la = lines(hubFile);
    const lb = lines(baselineFile);
    const onlyHub = [...la].filter((x) => !lb.has(x)).slice(0, 10);
    const onlyBase = [...lb].filter((x) => !la.has(x)).slice(0, 10);
    throw new Error(
      `the two targets do not serve the same schema (SDL in ${hubFile} and ${baselineFile}); only on the hub: ${onlyHub.join(" ⏎ ") || "-"}; only on the baseline: ${onlyBase.join(" ⏎ ") || "-"}`,
    );
  }
  log(`schemas identical on both targets (${a.length} characters of SDL)`);
}

async function checkScenario(s: Scenario, f: Fixtures, measured: Target[]): Promise<void> {
  for (const t of measured) {
    const req = s.request(f);
    const res = await fetchOnce(t.url, req);
    const problem = s.check(res.status, res.body, f);
    if (problem) throw new Error(`${s.id} on ${t.name} answers wrongly, not timing it: ${problem}`);
    if (!s.quick(res.body)) throw new Error(`${s.id} on ${t.name}: the per-response check rejects a correct answer: ${res.body.slice(0, 300)}`);
  }
}

const fmtRun = (r: RunResult) =>
  `${r.rps.toFixed(0).padStart(6)} req/s  p99 ${r.p99Ms.toFixed(1).padStart(6)} ms  CPU ${r.cpuUsPerReq.toFixed(0).padStart(5)} µs/req (Postgres ${r.pgCpuUsPerReq.toFixed(0).padStart(4)}, ${r.pgRoundTripsPerReq.toFixed(2)} round trips)  rss ${(r.rssBytes / 1048576).toFixed(0)} MiB` +
  (r.errors + r.timeouts + r.non2xx + r.mismatches ? `  FAILURES: ${r.errors} errors, ${r.timeouts} timeouts, ${r.non2xx} non-2xx, ${r.mismatches} bad bodies` : "");

/** How long the first warm start stays idle for its settled RSS. */
const SETTLE_MS = 60_000;

async function main(): Promise<void> {
  if (!fs.existsSync(path.join(ROOT, "dist/server.js"))) throw new Error("dist/ is missing: run `npm run build` (npm run bench does)");
  const notes: string[] = [];
  const loadBefore = os.loadavg();

  // 1. Start-up and idle memory, first, on a quiet machine.
  let startup: StartupResult | undefined;
  if (!opts["skip-startup"]) {
    const dir = tmpDir("hub-bench-start-");
    log("start-up: first start of node dist/server.js on a fresh data dir (initdb, migrations)…");
    const first = await measureStart(dir, 2000);
    const phases = (m: StartMeasurement) => `(Postgres up ${((m.postgresReadyMs ?? NaN) / 1000).toFixed(2)} s, listening ${((m.listeningMs ?? NaN) / 1000).toFixed(2)} s)`;
    log(`  first start ${(first.ms / 1000).toFixed(2)} s ${phases(first)}, RSS ${(first.idleRssBytes / 1048576).toFixed(0)} MiB`);
    const warm: StartMeasurement[] = [];
    for (let i = 0; i < startupRuns; i++) {
      // The first warm start also stays idle until its memory has settled (bench/lib/startup.ts).
      const m = await measureStart(dir, 2000, i === 0 ? SETTLE_MS : 0);
      log(`  warm start ${i + 1}: ${(m.ms / 1000).toFixed(2)} s ${phases(m)}, idle RSS ${(m.idleRssBytes / 1048576).toFixed(0)} MiB${m.settled ? `, ${(m.settled.rssBytes / 1048576).toFixed(0)} MiB after ${m.settled.afterMs / 1000} s` : ""}`);
      warm.push(m);
    }
    const imports: number[] = [];
    for (let i = 0; i < startupRuns; i++) imports.push(await measureImportMs());
    log(`  node + importing the hub and plugins: ${imports.map((x) => (x / 1000).toFixed(2)).join(", ")} s`);
    startup = { first, warm, importMs: median(imports) };
  }

  // 2. The two targets on one embedded Postgres.
  const dataDir = tmpDir("hub-bench-data-");
  const schemaDir = tmpDir("hub-bench-schema-");
  const schemaFiles = { hub: path.join(schemaDir, "hub.graphql"), baseline: path.join(schemaDir, "baseline.graphql") };
  log(`starting the hub target (data dir ${dataDir})…`);
  const hub = await Target.start("hub", "bench/hub/server.ts", { BENCH_DATA_DIR: dataDir, BENCH_SCHEMA_FILE: schemaFiles.hub }, 120_000, opts.verbose);
  targets.push(hub);
  log(`  hub at ${hub.url}`);
  const baseline = await Target.start(
    "baseline",
    "bench/baseline/server.ts",
    { BENCH_DATA_DIR: dataDir, BENCH_SCHEMA_FILE: schemaFiles.baseline, BASELINE_GRAPHQL_FIRST: opts["baseline-graphql-first"] ? "1" : "0" },
    120_000,
    opts.verbose,
  );
  targets.push(baseline);
  log(`  baseline at ${baseline.url}`);
  // The reference for the hub's own cost: bare Fastify + grafserv, same preset (bench/bare/server.ts).
  let bare: Target | undefined;
  if (scenarios.some((s) => s.bareTargetRatio !== undefined)) {
    bare = await Target.start("bare", "bench/bare/server.ts", { BENCH_DATA_DIR: dataDir }, 120_000, opts.verbose);
    targets.push(bare);
    log(`  bare at ${bare.url}`);
  }
  if (opts.pin) pinTargets([hub, baseline, ...(bare ? [bare] : [])]);

  pool = new pg.Pool({ connectionString: hub.superuserDatabaseUrl, max: 2, application_name: "hub-bench" });
  const machine = await describeMachine(pool);
  machine.loadBefore = loadBefore;
  compareSchemas(schemaFiles.hub, schemaFiles.baseline);
  // One makeCoinflip player per connection (bench/lib/seed.ts says why).
  const fixtures = await seed(pool, connections);
  if (scenarios.some((s) => s.fair)) {
    log("seeding the outcome bet players (balances, bankrolls, hash chains)…");
    fixtures.fair = await seedFair(pool);
  }
  // The database's own ceilings for bets, on this Postgres now: the hub's outcome bet rates are read against them.
  let ceilings: CeilingsResult | undefined;
  if (fixtures.fair && !opts["skip-ceilings"]) {
    log(`pgbench ceilings (${rounds} × ${durationS} s each)…`);
    ceilings = await measureCeilings(pool, hub.superuserDatabaseUrl, fixtures.fair.crowd, fixtures.currency, { durationS, rounds });
    if (ceilings.skipped) log(`  skipped: ${ceilings.skipped}`);
    for (const c of ceilings.ceilings) log(`  ${c.title}: ${c.betsPerSecond.toFixed(0)} bets/s (runs ${c.runs.map((x) => x.toFixed(0)).join(", ")})`);
  }
  const postgresCpu = postgresCpuSampler(dataDir);

  // 3. Scenarios: check, warm up (discarded), then rounds interleaved hub, baseline(, bare).
  const results: ScenarioResult[] = [];
  const profiled: { scenario: Scenario; files: Record<"hub" | "baseline", string>; responses: Record<"hub" | "baseline", number> }[] = [];
  for (const s of scenarios) {
    log(`\n${s.title}`);
    const measured = [hub, baseline, ...(bare && s.bareTargetRatio !== undefined ? [bare] : [])];
    await checkScenario(s, fixtures, measured);
    const req = s.request(fixtures);
    const load = {
      connections: s.connections ?? connections,
      durationS,
      verify: s.quick,
      postgresCpu,
      ...(s.perConnection ? { perConnection: (i: number) => s.perConnection!(fixtures, i) } : {}),
    };
    const fmtLocks = (l: LockStats | undefined) => (l ? `  locks: ${l.meanWaiting.toFixed(1)} of ${l.meanActive.toFixed(1)} active backends waiting (max ${l.maxWaiting})` : "");
    const warmup: ScenarioResult["warmup"] = {};
    for (const t of measured) {
      warmup[t.name] = await runLoad(t, req, { ...load, durationS: warmupS });
      log(`  warm-up  ${t.name.padEnd(8)} ${fmtRun(warmup[t.name]!)}`);
    }
    const result: ScenarioResult = { scenario: s, warmup, rounds: [], ...(s.sampleLocks ? { locks: {} } : {}) };
    for (let r = 0; r < rounds; r++) {
      const round: ScenarioResult["rounds"][number] = {};
      for (const t of measured) {
        await sleep(300);
        // Lock waits of a timed run, sampled on the bench's own connection.
        const sampler = s.sampleLocks ? sampleLocks(pool!) : undefined;
        round[t.name] = await runLoad(t, req, load);
        const l = await sampler?.stop();
        if (l) (result.locks![t.name] ??= []).push(l);
        log(`  round ${r + 1}  ${t.name.padEnd(8)} ${fmtRun(round[t.name]!)}${fmtLocks(l)}`);
      }
      result.rounds.push(round);
    }
    results.push(result);
    const sum = summariseScenario(result);
    log(`  → ratio ${sum.ratio.toFixed(2)}× (target ≥ ${s.targetRatio}×): ${sum.verdict}`);

    if (opts.profile) {
      const files = { hub: path.join(profileDir, `${s.id}.hub.cpuprofile`), baseline: path.join(profileDir, `${s.id}.baseline.cpuprofile`) };
      const responses = { hub: 0, baseline: 0 };
      for (const t of [hub, baseline]) {
        const name = t.name as "hub" | "baseline";
        await t.profileStart();
        const p = await runLoad(t, req, load);
        await t.profileStop(files[name]);
        responses[name] = p.responses;
        log(`  profiled ${t.name.padEnd(8)} ${fmtRun(p)} → ${path.relative(ROOT, files[name])}`);
      }
      profiled.push({ scenario: s, files, responses });
    }
  }

  // 4. Identity cache evidence.
  const identity: IdentityEvidence[] = [];
  if (!opts["skip-identity"]) {
    for (const t of [hub, baseline]) {
      log(`\nidentity cache evidence on ${t.name}…`);
      const e = await identityEvidence(t, pool, identityRequests, connections);
      log(`  control: ${e.control.requests} unknown tokens → ${e.control.lookups} lookups; cached: ${e.cached.requests} requests in ${e.cached.seconds.toFixed(1)} s → ${e.cached.lookups} lookups, ${e.cached.transactions} transactions`);
      if (e.control.lookups < e.control.requests) notes.push(`identity evidence on ${t.name}: the control saw ${e.control.lookups} lookups for ${e.control.requests} unknown tokens; the statistics may not have been flushed, so the cached figure is not conclusive.`);
      identity.push(e);
    }
  }

  machine.loadAfter = os.loadavg();
  if (loadBefore[0]! > os.cpus().length * 0.25) {
    notes.push(`The machine was not idle when the run started (1-minute load average ${loadBefore[0]!.toFixed(2)} on ${os.cpus().length} cores): absolute figures are depressed and noisier; ratios are more robust but not immune.`);
  }
  if (durationS < 5 || rounds < 3) notes.push(`Short run (${durationS} s × ${rounds} rounds): for orientation only.`);

  let profileFile: string | undefined;
  if (profiled.length) {
    const md = [
      "# CPU profiles (one untimed run per scenario and target, inspector sampling profiler)",
      "",
      `Self time: time spent in the function itself, not in what it calls, per response served during the profiled run (${connections} connections, ${durationS} s). Profiles: bench/results/profiles/ (open in Chrome DevTools or speedscope); \`node --import tsx bench/summarise-profile.ts FILE\` summarises one.`,
      "",
      "Read the hub − baseline column with care: the same work can carry different names in the two stacks (e.g. the JSON serialisation of a result is `serialize fastify/lib/reply.js` in the hub, where grafserv hands Fastify an object, and `stringifyPayload grafast/...` in the baseline), and a single profiled run on a busy machine is noisy. Compare totals and packages first.",
      "",
      ...profiled.map((p) =>
        comparisonMarkdown(p.scenario.title, { file: p.files.hub, responses: p.responses.hub }, { file: p.files.baseline, responses: p.responses.baseline }),
      ),
    ].join("\n");
    fs.mkdirSync(path.dirname(profileReport), { recursive: true });
    fs.writeFileSync(profileReport, md);
    profileFile = path.relative(ROOT, profileReport);
  }

  const report = renderReport({
    machine,
    settings: { connections, durationS, warmupS, rounds, pinned: opts.pin, baselineGraphqlFirst: opts["baseline-graphql-first"], argv: process.argv.slice(2).filter((a) => a !== "--") },
    scenarios: results,
    startup,
    identity,
    notes,
    profileFile,
  });
  const full = ceilings ? `${report}\n${ceilingsMarkdown(ceilings, results)}` : report;
  fs.mkdirSync(path.dirname(outFile), { recursive: true });
  fs.writeFileSync(outFile, full);
  process.stdout.write(`\n${full}\n`);
  log(`written to ${path.relative(ROOT, outFile)}`);
}

try {
  await main();
  await cleanup();
} catch (error) {
  log(`bench failed: ${(error as Error)?.stack ?? String(error)}`);
  for (const t of targets) if (t.tail().trim()) log(`--- last output of ${t.name} ---\n${t.tail()}`);
  await cleanup();
  process.exitCode = 1;
}
