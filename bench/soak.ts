/**
 * `npm run soak`: the demo server (`node dist/server.js`, NODE_ENV=production)
 * under a steady load for a minute (issue 7, Faults: "a soak of at least 60 s
 * at a steady load: zero errors, memory stable").
 *
 *   npm run soak                                   # 60 s at 150 req/s over 8 connections, after 10 s of warm-up
 *   npm run soak -- --duration 300 --rate 300      # longer, harder
 *   npm run soak -- --help
 *
 * The load cycles through five requests on every connection: `{__typename}`
 * (anonymous), a database query as a player (session token: identity lookup,
 * row-level security), the `makeCoinflip` mutation as that player (a
 * superuser transaction, then the row read back under RLS), a distinct
 * invalid document each time (6000 anonymous operations, ~90 KB, just under
 * the token limit: the kind of document that used to stay cached with its
 * whole AST) and a distinct valid ~100 KB document (padded with comments).
 * Every response is checked: valid requests must answer JSON with data and no
 * `errors`, the invalid one its validation error. The server's RSS is sampled
 * every second from /proc.
 *
 * Prints a table per 10 s window, RSS at the start (after the warm-up),
 * middle and end of the soak and its least-squares slope, and exits 1 when any
 * request failed (error, timeout, non-2xx or a bad body) or when the live
 * heap with no request in flight (full collections forced through SIGUSR2,
 * bench/lib/heap-on-signal.mjs) grew by more than --heap-growth MiB from the
 * end of the warm-up to the end of the soak.
 */
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { benchArgs, positiveOption } from "./lib/args.js";
import autocannon from "autocannon";
import pg from "pg";
import { createSession, ensurePlayer } from "../dist/src/auth/credentials.js";
import { freePort } from "./lib/util.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const MiB = 1024 * 1024;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const HELP = `npm run soak -- [options]

  --duration S      seconds of the measured soak (default 60, at least 60 for issue 7)
  --warmup S        seconds of load before it, not in the RSS slope (default 10)
  --rate N          requests per second over all connections (default 150)
  --connections N   autocannon connections (default 8)
  --window S        seconds per row of the table (default 10)
  --heap-growth M   most MiB the idle live heap may grow from after the warm-up to after the soak (default 16)
  --verbose         show the server's own output
`;

const { values: opts } = benchArgs(HELP, {
  options: {
    duration: { type: "string", default: "60" },
    warmup: { type: "string", default: "10" },
    rate: { type: "string", default: "150" },
    connections: { type: "string", default: "8" },
    window: { type: "string", default: "10" },
    "heap-growth": { type: "string", default: "16" },
    verbose: { type: "boolean", default: false },
  },
});
const positiveInt = (name: string, raw: string) => positiveOption(HELP, name, raw);
const durationS = positiveInt("duration", opts.duration);
const warmupS = positiveInt("warmup", opts.warmup);
const rate = positiveInt("rate", opts.rate);
const connections = positiveInt("connections", opts.connections);
const windowS = positiveInt("window", opts.window);
const heapGrowthMiB = positiveInt("heap-growth", opts["heap-growth"]);

// ------------------------------------------------------------------ the server


function rssBytes(pid: number): number {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = /VmRSS:\s+(\d+)\s+kB/.exec(status)?.[1];
    if (kb) return Number(kb) * 1024;
  } catch {
    // not Linux: ask ps
  }
  return Number(execFileSync("ps", ["-o", "rss=", "-p", String(pid)], { encoding: "utf8" }).trim()) * 1024;
}

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "hub-soak-"));
const port = await freePort();
const env: NodeJS.ProcessEnv = { ...process.env };
for (const name of ["DATABASE_URL", "SUPERUSER_DATABASE_URL", "HUB_CONFIG", "HUB_EXAMPLES", "NODE_OPTIONS"]) delete env[name];
// --trace-gc: V8 prints the heap size after every collection on stdout; the
// live heap after each full (mark-compact) collection tells a leak (it keeps
// rising) from a heap that V8 simply has not collected yet (RSS alone cannot).
// heap-on-signal: SIGUSR2 makes the server collect and print its live heap.
const child = spawn(process.execPath, ["--trace-gc", "--expose-gc", "--import", path.join(ROOT, "bench/lib/heap-on-signal.mjs"), path.join(ROOT, "dist/server.js")], {
  cwd: ROOT,
  env: { ...env, NODE_ENV: "production", HUB_EMBEDDED_POSTGRES: "on", LOG_LEVEL: "warn", HUB_DATA_DIR: dataDir, PORT: String(port), HOST: "127.0.0.1" },
  stdio: ["ignore", "pipe", "pipe"],
});
let serverOutput = "";
let partialLine = "";
/** Heap (MiB) after each mark-compact, with when it was seen (s since the load began; negative before). */
const majorGcs: { t: number; heapMiB: number }[] = [];
const GC_LINE = /\d+ ms: Mark-Compact(?: \(reduce\))? [\d.]+ \([\d.]+\) -> ([\d.]+) \([\d.]+\) MB/;
const collect = (chunk: Buffer) => {
  const lines = (partialLine + chunk.toString()).split("\n");
  partialLine = lines.pop() ?? "";
  for (const text of lines) {
    const gc = GC_LINE.exec(text);
    if (gc) majorGcs.push({ t: loadStartedAt === undefined ? -1 : (Date.now() - loadStartedAt) / 1000, heapMiB: Number(gc[1]) });
    const idle = /^soak-heap-used (\d+)$/.exec(text);
    if (idle) idleHeapWaiters.shift()?.(Number(idle[1]));
    if (/ ms: (Scavenge|Mark-Compact|Minor)/.test(text)) continue; // GC traces are not server output
    serverOutput += `${text}\n`;
    if (opts.verbose) process.stderr.write(`${text}\n`);
  }
};
let loadStartedAt: number | undefined;
const idleHeapWaiters: ((bytes: number) => void)[] = [];
/** The server's live heap after full collections, asked once its requests are answered. */
async function idleHeap(): Promise<number> {
  await sleep(2000);
  const answer = new Promise<number>((resolve) => idleHeapWaiters.push(resolve));
  child.kill("SIGUSR2");
  return Promise.race([answer, sleep(10_000).then(() => Number.NaN)]);
}
child.stdout.on("data", collect);
child.stderr.on("data", collect);
const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
let stopping = false;

async function stopServer(): Promise<number | null> {
  if (child.exitCode !== null) return child.exitCode;
  stopping = true;
  child.kill("SIGTERM");
  const code = await Promise.race([exited, sleep(30_000).then(() => "timeout" as const)]);
  if (code === "timeout") {
    child.kill("SIGKILL");
    return exited;
  }
  return code;
}
async function cleanup(): Promise<void> {
  await stopServer();
  fs.rmSync(dataDir, { recursive: true, force: true });
}
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => void cleanup().then(() => process.exit(130)));
}
void exited.then((code) => {
  if (!stopping) {
    process.stderr.write(`soak: the server exited (code ${code}) during the run:\n${serverOutput.slice(-3000)}\n`);
    fs.rmSync(dataDir, { recursive: true, force: true });
    process.exit(1);
  }
});

const url = `http://127.0.0.1:${port}`;
const startDeadline = Date.now() + 60_000;
for (;;) {
  try {
    const res = await fetch(`${url}/graphql`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"query":"{ __typename }"}' });
    if (res.status === 200) break;
  } catch {
    // not listening yet
  }
  if (Date.now() > startDeadline) {
    process.stderr.write(`soak: the server did not answer within 60 s:\n${serverOutput}\n`);
    await cleanup();
    process.exit(1);
  }
  await sleep(100);
}

// A player session, minted in the database as the CLI does.
const { superuserPassword } = JSON.parse(fs.readFileSync(path.join(dataDir, "credentials.json"), "utf8")) as { superuserPassword: string };
const pgPort = Number(fs.readFileSync(path.join(dataDir, "pg/postmaster.pid"), "utf8").split("\n")[3]);
const pool = new pg.Pool({ host: "127.0.0.1", port: pgPort, user: "postgres", password: superuserPassword, database: "hub", max: 2 });
const { user, casino, experience } = await ensurePlayer(pool, { uname: "soak-player" });
const { token } = await createSession(pool, { userId: user.id, casinoId: casino.id, experienceId: experience.id });
await pool.end();

// ------------------------------------------------------------------ the load

const json = { "content-type": "application/json" };
const player = { ...json, authorization: `session:${token}` };
// The invalid document's errors come back with HTTP 200 (legacy JSON), so that
// autocannon counts only real failures as non-2xx.
const legacy = { ...json, accept: "application/json" };

type Body = { data?: unknown; errors?: { message?: string; extensions?: { code?: string } }[] };
const parse = (body: string): Body | undefined => {
  try {
    return JSON.parse(body) as Body;
  } catch {
    return undefined;
  }
};
/** Valid requests: JSON with data and without errors. */
const hasData = (body: string) => {
  const parsed = parse(body);
  return parsed !== undefined && parsed.errors === undefined && parsed.data != null && typeof parsed.data === "object";
};
const refusedAsInvalid = (body: string) => {
  const errors = parse(body)?.errors;
  // graphql stops at 100 errors and adds one saying so.
  return !!errors?.length && errors.every((e) => e.extensions?.code === "GRAPHQL_VALIDATION_FAILED") && /anonymous operation must be the only defined operation/.test(errors[0]!.message ?? "");
};

let distinct = 0;
const ANONYMOUS_OPERATIONS = "{ __typename } ".repeat(6000);
const COMMENTS = "# a comment line of some length\n".repeat(3200);
const REQUESTS: { name: string; headers: Record<string, string>; body: string | (() => string); check: (body: string) => boolean }[] = [
  { name: "typename", headers: json, body: JSON.stringify({ query: "{ __typename }" }), check: hasData },
  { name: "player query", headers: player, body: JSON.stringify({ query: "{ hubCurrentUser { id uname } allCoinflips(first: 5, orderBy: ID_DESC) { totalCount nodes { id net } } }" }), check: hasData },
  { name: "makeCoinflip", headers: player, body: JSON.stringify({ query: 'mutation { makeCoinflip(input: { currency: "HOUSE", wager: 1 }) { id wager net } }' }), check: hasData },
  { name: "distinct invalid ~90 KB", headers: legacy, body: () => JSON.stringify({ query: `${ANONYMOUS_OPERATIONS}#${distinct++}` }), check: refusedAsInvalid },
  { name: "distinct valid ~100 KB", headers: json, body: () => JSON.stringify({ query: `{ __typename } #${distinct++}\n${COMMENTS}` }), check: hasData },
];
const badBodies = new Map<string, number>();

interface Sample {
  t: number;
  rss: number;
}
interface Phase {
  name: string;
  startedAt: number;
  result: autocannon.Result;
}

const samples: Sample[] = [];
const latencies: { t: number; ms: number }[] = [];
const t0 = Date.now();
loadStartedAt = t0;
samples.push({ t: 0, rss: rssBytes(child.pid!) });
const sampler = setInterval(() => samples.push({ t: (Date.now() - t0) / 1000, rss: rssBytes(child.pid!) }), 1000);

async function run(name: string, seconds: number): Promise<Phase> {
  const startedAt = (Date.now() - t0) / 1000;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url,
        connections,
        overallRate: rate,
        duration: seconds,
        timeout: 10,
        requests: REQUESTS.map((r) => ({
          method: "POST" as const,
          path: "/graphql",
          headers: r.headers,
          ...(typeof r.body === "string"
            ? { body: r.body }
            : { setupRequest: (request: autocannon.Request) => ({ ...request, body: (r.body as () => string)() }) }),
          onResponse: (_status: number, body: string) => {
            if (!r.check(String(body))) badBodies.set(r.name, (badBodies.get(r.name) ?? 0) + 1);
          },
        })),
      },
      (error, res) => (error ? reject(error) : resolve(res)),
    );
    instance.on("response", (_client, _status, _bytes, responseTime) => {
      latencies.push({ t: (Date.now() - t0) / 1000, ms: responseTime });
    });
  });
  return { name, startedAt, result };
}

process.stdout.write(
  `soak: demo server pid ${child.pid} (NODE_ENV=production) at ${url}; ${rate} req/s over ${connections} connections, ` +
    `${warmupS} s warm-up + ${durationS} s soak; mix: ${REQUESTS.map((r) => r.name).join(" / ")}\n`,
);
const loadBefore = os.loadavg();
const warmup = await run("warm-up", warmupS);
const heapBefore = await idleHeap();
const soak = await run("soak", durationS);
clearInterval(sampler);
const heapAfter = await idleHeap();
samples.push({ t: (Date.now() - t0) / 1000, rss: rssBytes(child.pid!) });
const code = await stopServer();

// ------------------------------------------------------------------ the report

const fmtMiB = (bytes: number) => (bytes / MiB).toFixed(1);
const percentile = (values: number[], p: number) => {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};
const rssAt = (t: number) => samples.reduce((best, s) => (Math.abs(s.t - t) < Math.abs(best.t - t) ? s : best)).rss;
/** The live heap after the last full collection at or before t, MiB ("–" before the first). */
const heapAt = (t: number) => {
  const before = majorGcs.filter((g) => g.t <= t);
  return before.length ? before[before.length - 1]!.heapMiB.toFixed(1) : "–";
};
/** Least-squares slope of y over t, per minute. */
function slopePerMinute(points: { t: number; y: number }[]): number {
  const n = points.length;
  if (n < 2) return Number.NaN;
  const meanT = points.reduce((a, p) => a + p.t, 0) / n;
  const meanY = points.reduce((a, p) => a + p.y, 0) / n;
  return (points.reduce((a, p) => a + (p.t - meanT) * (p.y - meanY), 0) / points.reduce((a, p) => a + (p.t - meanT) ** 2, 0)) * 60;
}
const signed = (x: number, digits: number) => `${x >= 0 ? "+" : ""}${x.toFixed(digits)}`;

const soakStart = soak.startedAt;
const soakEnd = soakStart + durationS;
const rows: string[][] = [];
const windowRow = (label: string, from: number, to: number) => {
  const inWindow = latencies.filter((l) => l.t >= from && l.t < to).map((l) => l.ms);
  rows.push([label, (inWindow.length / (to - from)).toFixed(0), percentile(inWindow, 50).toFixed(1), percentile(inWindow, 99).toFixed(1), fmtMiB(rssAt(to)), heapAt(to)]);
};
windowRow("warm-up", 0, soakStart);
for (let from = 0; from < durationS - 0.5; from += windowS) {
  const to = Math.min(from + windowS, durationS);
  windowRow(`soak ${from}–${to} s`, soakStart + from, soakStart + to);
}
const header = ["window", "responses/s", "p50 ms", "p99 ms", "RSS MiB (end)", "heap after last full GC MiB"];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
const line = (cells: string[]) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(" | ")} |`;
process.stdout.write(`\n${line(header)}\n|${widths.map((w, i) => (i === 0 ? "-".repeat(w + 2) : `${"-".repeat(w + 1)}:`)).join("|")}|\n${rows.map(line).join("\n")}\n\n`);

// Least-squares slopes over the soak (after the warm-up), MiB per minute.
const soakSamples = samples.filter((s) => s.t >= soakStart && s.t <= soakEnd + 1);
const n = soakSamples.length;
const slopeMiBPerMin = slopePerMinute(soakSamples.map((s) => ({ t: s.t, y: s.rss / MiB })));
const soakGcs = majorGcs.filter((g) => g.t >= soakStart && g.t <= soakEnd + 1);
const heapSlope = slopePerMinute(soakGcs.map((g) => ({ t: g.t, y: g.heapMiB })));
const rssStart = rssAt(soakStart);
const rssMiddle = rssAt(soakStart + durationS / 2);
const rssEnd = rssAt(soakEnd);
const rssPeak = Math.max(...soakSamples.map((s) => s.rss));

let failed = [...badBodies.values()].reduce((a, b) => a + b, 0);
for (const phase of [warmup, soak]) {
  const r = phase.result;
  const bad = r.errors + r.timeouts + r.non2xx + r.mismatches;
  failed += bad;
  process.stdout.write(
    `${phase.name.padEnd(8)} ${r.requests.total} requests (${r.requests.average.toFixed(0)} req/s), 2xx ${r["2xx"]}, non-2xx ${r.non2xx}, ` +
      `errors ${r.errors}, timeouts ${r.timeouts}, bad bodies ${r.mismatches}; latency p50 ${r.latency.p50} ms, p99 ${r.latency.p99} ms, max ${r.latency.max} ms\n`,
  );
}
process.stdout.write(
  `RSS idle before load ${fmtMiB(samples[0]!.rss)} MiB; soak start ${fmtMiB(rssStart)} MiB, middle ${fmtMiB(rssMiddle)} MiB, ` +
    `end ${fmtMiB(rssEnd)} MiB, peak ${fmtMiB(rssPeak)} MiB; slope ${signed(slopeMiBPerMin, 2)} MiB/min ` +
    `(least squares over ${n} one-second samples of the soak); end − start ${signed((rssEnd - rssStart) / MiB, 1)} MiB\n`,
);
process.stdout.write(
  soakGcs.length === 0
    ? "V8 heap: no full (mark-compact) collection during the soak\n"
    : `V8 heap after full collections during the soak (${soakGcs.length}): first ${soakGcs[0]!.heapMiB.toFixed(1)} MiB, ` +
        `last ${soakGcs[soakGcs.length - 1]!.heapMiB.toFixed(1)} MiB, min ${Math.min(...soakGcs.map((g) => g.heapMiB)).toFixed(1)}, ` +
        `max ${Math.max(...soakGcs.map((g) => g.heapMiB)).toFixed(1)}; slope ${Number.isNaN(heapSlope) ? "n/a" : `${signed(heapSlope, 2)} MiB/min`}\n`,
);
if (badBodies.size) process.stdout.write(`bad bodies by request: ${[...badBodies].map(([name, n]) => `${name} ${n}`).join(", ")}\n`);
// Flat heap: the live heap with no request in flight, after full collections,
// once after the warm-up and once after the soak. (The samples under load
// above include what the requests in flight hold at that moment.)
const heapGrowth = (heapAfter - heapBefore) / MiB;
const heapFlat = heapGrowth <= heapGrowthMiB;
process.stdout.write(
  Number.isNaN(heapGrowth)
    ? "heap check: FAILED, the server did not report its heap\n"
    : `heap check: idle live heap ${fmtMiB(heapBefore)} MiB after the warm-up, ${fmtMiB(heapAfter)} MiB after the soak: ${signed(heapGrowth, 1)} MiB (bound ${heapGrowthMiB} MiB): ${heapFlat ? "flat" : "FAILED"}\n`,
);
process.stdout.write(`server stopped with exit code ${code} after SIGTERM\n`);
process.stdout.write(
  `machine: ${os.cpus().length} CPUs, load average ${loadBefore.map((l) => l.toFixed(2)).join(" ")} before, ` +
    `${os.loadavg().map((l) => l.toFixed(2)).join(" ")} after (latency and RSS figures are only comparable on an idle machine)\n`,
);
fs.rmSync(dataDir, { recursive: true, force: true });
if (failed > 0 || code !== 0 || !heapFlat) {
  process.stdout.write(`soak: FAILED (${failed} bad responses${code !== 0 ? `, server exit code ${code}` : ""}${heapFlat ? "" : ", heap not flat"})\n`);
  process.exit(1);
}
process.stdout.write("soak: OK, zero errors, flat heap\n");
