/**
 * The fleet, as an operator runs it in production: one Postgres, three
 * `node dist/server.js` (NODE_ENV=production, DATABASE_URL) behind HAProxy
 * configured as docs/deployment.md says, players betting `hubMakeOutcomeBet`
 * with idempotency keys while holding `hubBalanceAlert`, an operator holding
 * `hubBetAlert`; then a rolling restart (SIGTERM, start again, wait ready —
 * one instance after the other), a minute for the sockets to spread, and a
 * Postgres restart of a few seconds, all under load. Then it checks what the
 * deployment page promises:
 *  - the rolling restart failed no request;
 *  - no bet answered with a code that says nothing committed was stored, and
 *    every bet retried with its key ended as exactly one bet;
 *  - every subscriber, resubscribing with `after`, received every alert of its
 *    topic exactly once;
 *  - the sockets ended spread over the instances (each between half and twice its share);
 *  - every balance equals its ledger.
 *
 *   npm run fleet [-- --players 20 --runs 1 --out bench/results/fleet.md]
 *
 * Exit status 1 when a check failed. Bounded: about two minutes a run.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { benchArgs, positiveOption } from "./lib/args.js";
import { freePort, makeHub, startHub, startPostgres, startProxy, stopHub, teardowns, waitFor200, type Hub } from "./lib/fleet-infra.js";
import { runBettor, holdSubscription, type Bettor, type Shared, type Subscription } from "./lib/fleet-clients.js";
import { seedBettors, fleetChecks, socketCounts, alertStart, storedBetCount, type Check } from "./lib/fleet-checks.js";
import { sleep } from "./lib/util.js";

const USAGE = `Usage: npm run fleet [-- options]

  --players N   players betting at once, each holding hubBalanceAlert (default 20)
  --runs N      runs, each on a fresh Postgres (default 1)
  --out FILE    also write the report (Markdown) to FILE
`;

const READY = "/readyz";

const BALANCE_ALERT = "subscription($after: String) { hubBalanceAlert(after: $after) { currencyKey cursor } }";
const BET_ALERT = "subscription($after: String) { hubBetAlert(after: $after) { betId cursor } }";

interface RunReport {
  checks: Check[];
  figures: Record<string, string | number>;
}

async function settled<T>(label: string, fn: () => Promise<T>): Promise<T> {
  const started = Date.now();
  const value = await fn();
  process.stderr.write(`  ${label}: ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  return value;
}

/** The rolling restart: each instance in turn gets SIGTERM, is started again and waited for until ready. */
async function rollingRestart(hubs: Hub[], env: Record<string, string>): Promise<number[]> {
  const stops: number[] = [];
  for (const hub of hubs) {
    const started = Date.now();
    const code = await stopHub(hub);
    stops.push(Date.now() - started);
    if (code !== 0) throw new Error(`${hub.name} exited with ${code} on SIGTERM:\n${hub.log.join("").slice(-3000)}`);
    await startHub(hub, env, READY);
  }
  return stops;
}

/** Seconds until every instance holds between half and twice its share of the sockets (or undefined after `limitMs`), and the last counts. */
async function awaitSpread(hubs: Hub[], pool: pg.Pool, limitMs: number): Promise<{ seconds: number | undefined; counts: number[] }> {
  const started = Date.now();
  let counts: number[] = [];
  while (Date.now() - started < limitMs) {
    counts = await socketCounts(pool);
    const total = counts.reduce((a, b) => a + b, 0);
    const share = total / hubs.length;
    if (total > 0 && counts.length === hubs.length && counts.every((c) => c >= share / 2 && c <= share * 2)) return { seconds: (Date.now() - started) / 1000, counts };
    await sleep(1000);
  }
  return { seconds: undefined, counts };
}

async function oneRun(players: number): Promise<RunReport> {
  const t = teardowns();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hub-fleet-"));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  try {
    const postgres = await settled("Postgres", () => startPostgres(t, path.join(dir, "pg")));
    const env = { NODE_ENV: "production", DATABASE_URL: postgres.authenticatorUrl, SUPERUSER_DATABASE_URL: postgres.superuserUrl, LOG_LEVEL: "warn" };
    const hubs = await Promise.all(["h1", "h2", "h3"].map((name) => makeHub(name)));
    t.teardown(() => Promise.all(hubs.map((hub) => stopHub(hub, 5000))));
    // The first migrates; the others start on the migrated database.
    await settled("h1", () => startHub(hubs[0]!, env, READY));
    await settled("h2, h3", () => Promise.all(hubs.slice(1).map((hub) => startHub(hub, env, READY))));
    const proxyPort = await freePort();
    await startProxy(t, dir, proxyPort, hubs);
    const proxyUrl = `http://127.0.0.1:${proxyPort}`;
    await waitFor200(`${proxyUrl}${READY}`, 20_000);

    const pool = new pg.Pool({ connectionString: postgres.superuserUrl, max: 4 });
    pool.on("error", () => undefined);
    t.teardown(() => pool.end());
    const { bettors, operatorKey } = await settled("players", () => seedBettors(pool, proxyUrl, players));
    const shared: Shared = { proxyUrl, phase: "warm-up", stopping: false, unsubscribing: false, answers: [], committedButRetryable: [], bets: new Map(), attempts: new Map(), pool, storedBetCount };
    const start = await alertStart(pool);
    const subs: { sub: Subscription; bettor?: Bettor }[] = [];
    const held: Promise<void>[] = [];
    for (const b of bettors) {
      const sub: Subscription = { name: b.name, cursors: [], errors: [], reconnects: 0, closeCodes: [] };
      subs.push({ sub, bettor: b });
      held.push(holdSubscription(shared, sub, `session:${b.token}`, "hubBalanceAlert", BALANCE_ALERT, start));
    }
    const operator: Subscription = { name: "operator", cursors: [], errors: [], reconnects: 0, closeCodes: [] };
    subs.push({ sub: operator });
    held.push(holdSubscription(shared, operator, `apikey:${operatorKey}`, "hubBetAlert", BET_ALERT, start));
    const betting = bettors.map((b) => runBettor(shared, b, 20));

    await sleep(5000);
    shared.phase = "rolling restart";
    const stopMs = await settled("rolling restart", () => rollingRestart(hubs, env));
    shared.phase = "spreading";
    const spread = await settled("spread", () => awaitSpread(hubs, pool, 60_000));
    shared.phase = "Postgres restart";
    const blipStarted = Date.now();
    await postgres.stop();
    await sleep(4000);
    await postgres.start();
    const blipMs = Date.now() - blipStarted;
    await sleep(10_000);
    shared.phase = "after";
    shared.stopping = true;
    await Promise.all(betting);
    // The last bets' alerts: give them time to arrive before the subscriptions stop.
    await sleep(3000);
    shared.unsubscribing = true;
    await Promise.all(held);
    const checks = await fleetChecks(pool, shared, subs, start);
    const figures = {
      "bets answered": shared.bets.size,
      "answers in all": shared.answers.length,
      "SIGTERM to exit, ms (h1, h2, h3)": stopMs.join(", "),
      "Postgres down, ms": blipMs,
      "sockets spread after, s": spread.seconds === undefined ? "not within 60 s" : spread.seconds.toFixed(0),
      "sockets per instance at the end of the wait": spread.counts.join(", "),
      "resubscriptions": subs.reduce((n, s) => n + s.sub.reconnects, 0),
    };
    checks.push({ name: "sockets spread within a minute of the rolling restart (each instance between half and twice its share)", ok: spread.seconds !== undefined, detail: `counts ${spread.counts.join(", ")}` });
    return { checks, figures };
  } finally {
    await t.run();
  }
}

function markdown(reports: RunReport[]): string {
  const lines = [`# Fleet scenario (${new Date().toISOString()})`, ""];
  reports.forEach((report, i) => {
    lines.push(`## Run ${i + 1}`, "", "| figure | value |", "|---|---|");
    for (const [name, value] of Object.entries(report.figures)) lines.push(`| ${name} | ${value} |`);
    lines.push("", "| check | result |", "|---|---|");
    for (const check of report.checks) lines.push(`| ${check.name} | ${check.ok ? "pass" : "**FAIL**"}${check.detail ? ` — ${check.detail}` : ""} |`);
    lines.push("");
  });
  return lines.join("\n");
}

const { values } = benchArgs(USAGE, { options: { players: { type: "string", default: "20" }, runs: { type: "string", default: "1" }, out: { type: "string" } } });
const players = positiveOption(USAGE, "players", values.players);
const runs = positiveOption(USAGE, "runs", values.runs);
const reports: RunReport[] = [];
for (let i = 0; i < runs; i++) {
  process.stderr.write(`run ${i + 1} of ${runs}\n`);
  reports.push(await oneRun(players));
}
const text = markdown(reports);
process.stdout.write(`${text}\n`);
if (values.out) fs.writeFileSync(values.out, `${text}\n`);
process.exit(reports.every((r) => r.checks.every((c) => c.ok)) ? 0 : 1);
