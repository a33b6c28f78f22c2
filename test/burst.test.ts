import "./helpers/env.js";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { spawn } from "node:child_process";
import t from "tap";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
import pg from "pg";
import { createCurrency, createHouseBankroll, createPlayerBalance } from "@hubpkg/hub/test";
import { timedRequest as request, type TimedAnswer as Answer } from "./helpers/http.js";
import { ROOT, startServerProcess } from "./helpers/process.js";
import { makePlayer } from "./helpers/credentials.js";

/** User + system CPU time of a process so far, in ms (Linux /proc). */
function processCpuMs(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

/*
 * One player's burst must not starve everyone else. The demo server
 * (node dist/server.js: reference plugins and routes) in its own process; one
 * player fires BURST makeCoinflipBet at once on one balance, from its own
 * process and each on its own socket, while a second player bets one request
 * after the other and GET /health is polled. Then:
 *  - the second player saw no error and kept playing while the flood was
 *    served (its p99 is printed against the 500 ms goal: about 130–220 ms on
 *    the quiet 2-core machine; BURST_DEBUG=1 prints every latency);
 *  - /health answered 200 every time;
 *  - the flooder saw only successes and TOO_MANY_REQUESTS (a GraphQL error, or
 *    a 429 for requests refused on arrival), never a database-unavailable
 *    error (Postgres was up all along);
 *  - the books reconcile: balances + bankroll = what was put in, each ledger
 *    sums to its amount, and the stored bets are exactly the accepted ones.
 */

const BURST = 2000;
/** Whole units ≥ 2, so a win pays something whatever the rounding of the payout. */
const WAGER = 2;
const CURRENCY = "BURST";
const FLOODER_BALANCE = 1_000_000;
const SECOND_BALANCE = 100_000;
const BANKROLL = 10_000_000;
/** Reported against, never asserted. */
const P99_GOAL_MS = 500;

function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}
const fmt = (values: number[]) =>
  `n=${values.length} p50=${percentile(values, 50).toFixed(0)} ms p99=${percentile(values, 99).toFixed(0)} ms max=${Math.max(...values).toFixed(0)} ms`;
const close = (a: number, b: number) => Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(a), Math.abs(b));
const sum = (xs: number[]) => xs.reduce((s, x) => s + x, 0);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const BET = "mutation($i: MakeCoinflipBetInput!) { makeCoinflipBet(input: $i) { bet { id wager net } balance } }";


t.test(`one player's ${BURST} concurrent bets do not starve a second player or /health, and the books reconcile`, async (t) => {
  // The demo server as operators run it (node dist/server.js), in its own
  // process: what it does for the flood is not mixed with the test's own work.
  // On a database of the test kit's shared cluster (dropped whatever happens): nothing here is about the embedded Postgres.
  const database = await sharedClusterDatabase(t);
  const superuserUrl = database.SUPERUSER_DATABASE_URL;
  const proc = await startServerProcess({ ...database, LOG_LEVEL: "info" });
  t.teardown(async () => {
    if (proc.child.exitCode === null) {
      proc.child.kill("SIGINT");
      const timer = setTimeout(() => proc.child.kill("SIGKILL"), 20_000);
      await proc.exited;
      clearTimeout(timer);
    }
  });
  const server = { url: proc.url };
  const db = new pg.Pool({ connectionString: superuserUrl, max: 2 });
  t.teardown(() => db.end());
  const flooder = await makePlayer(superuserUrl, "flooder");
  const second = await makePlayer(superuserUrl, "second");
  const casinoId = flooder.casinoId;
  await createCurrency(db, { casinoId, key: CURRENCY });
  await createHouseBankroll(db, { casinoId, currencyKey: CURRENCY, amount: BANKROLL });
  await createPlayerBalance(db, { userId: flooder.userId, experienceId: flooder.experienceId, currencyKey: CURRENCY, amount: FLOODER_BALANCE });
  await createPlayerBalance(db, { userId: second.userId, experienceId: second.experienceId, currencyKey: CURRENCY, amount: SECOND_BALANCE });
  const flooderAuth = flooder.header.authorization;
  const secondHeaders = second.header;
  const betBody = { query: BET, variables: { i: { wager: WAGER, currency: CURRENCY, side: "TAILS" } } };

  // Warm-up by the flooder (plans cached, pools connected); the second player's
  // first request is sent during the burst, with its credential not yet cached.
  const warm = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => warm.destroy());
  const warmups: Answer[] = [];
  for (let i = 0; i < 3; i++) warmups.push(await request(warm, server.url, "POST", "/graphql", { authorization: flooderAuth }, betBody));
  t.same(warmups.map((a) => [a.status, a.body.errors]), warmups.map(() => [200, undefined]), "warm-up bets succeed");

  const child = spawn(process.execPath, [path.join(ROOT, "test/fixtures/burst-flooder.mjs"), server.url, flooderAuth, String(BURST), String(WAGER), CURRENCY], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  t.teardown(() => {
    if (child.exitCode === null) child.kill("SIGKILL");
  });
  let out = "";
  child.stdout.setEncoding("utf8");
  let markSending: () => void;
  const sending = new Promise<void>((resolve) => (markSending = resolve));
  child.stdout.on("data", (chunk: string) => {
    out += chunk;
    if (out.includes("sending\n")) markSending();
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  await Promise.race([sending, exited]);
  const burstStarted = performance.now();
  const cpuBefore = processCpuMs(proc.child.pid!);
  let burstOver = false;
  void exited.then(() => (burstOver = true));

  // The second player: one bet after the other until the burst is answered.
  const secondAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => secondAgent.destroy());
  const secondAnswers: Answer[] = [];
  const secondLoop = (async () => {
    while (!burstOver) secondAnswers.push(await request(secondAgent, server.url, "POST", "/graphql", secondHeaders, betBody));
  })();
  // /health, polled every 50 ms.
  const healthAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => healthAgent.destroy());
  const healthAnswers: Answer[] = [];
  const healthLoop = (async () => {
    while (!burstOver) {
      healthAnswers.push(await request(healthAgent, server.url, "GET", "/health"));
      await sleep(50);
    }
  })();

  t.equal(await exited, 0, "the flooder process ran to the end");
  const burstMs = performance.now() - burstStarted;
  const cpuMs = processCpuMs(proc.child.pid!) - cpuBefore;
  await Promise.all([secondLoop, healthLoop]);
  const lines = out.trim().split("\n");
  const flood = JSON.parse(lines[lines.length - 1]!) as { ms: number; status: number; code: string; message?: string; net?: number; id?: string }[];

  // What happened, for the report.
  const codes: Record<string, number> = {};
  for (const r of flood) codes[`${r.status} ${r.code}`] = (codes[`${r.status} ${r.code}`] ?? 0) + 1;
  t.comment(`burst of ${BURST} answered in ${burstMs.toFixed(0)} ms (server process CPU ${cpuMs.toFixed(0)} ms); flooder outcomes ${JSON.stringify(codes)}; flooder latency ${fmt(flood.map((r) => r.ms))}`);
  const rejected = flood.find((r) => r.code === "TOO_MANY_REQUESTS");
  if (rejected) t.comment(`a rejected bet: ${JSON.stringify(rejected.message)}`);
  const secondMs = secondAnswers.map((a) => a.ms);
  if (process.env.BURST_DEBUG) t.comment(`second player's latencies in order: ${secondMs.map((m) => m.toFixed(0)).join(" ")}`);
  t.comment(`second player: ${fmt(secondMs)}; first request ${secondMs[0]?.toFixed(0)} ms`);
  t.comment(`/health: ${fmt(healthAnswers.map((a) => a.ms))}; statuses ${JSON.stringify(Object.fromEntries([...new Set(healthAnswers.map((a) => a.status))].map((s) => [s, healthAnswers.filter((a) => a.status === s).length])))}`);

  // The second player.
  t.ok(secondAnswers.length >= 5, `the second player played during the burst (${secondAnswers.length} bets)`);
  const secondFailures = secondAnswers.filter((a) => a.status !== 200 || a.body?.errors || !a.body?.data?.makeCoinflipBet);
  t.same(secondFailures.slice(0, 3).map((a) => ({ status: a.status, body: a.body })), [], `the second player saw no error (${secondFailures.length} of ${secondAnswers.length} failed)`);
  // Speed is reported, not asserted (a loaded machine is slower, not wrong). Starving shows as order: a
  // second player queued behind the flood is answered once or twice while it lasts, not again and again.
  const floodMedian = percentile(flood.filter((r) => r.code === "OK").map((r) => r.ms), 50);
  t.ok(percentile(secondMs, 50) < floodMedian, `the second player's median wait is below that of the flooder's accepted bets (${percentile(secondMs, 50).toFixed(0)} < ${floodMedian.toFixed(0)} ms): not queued behind the flood`);
  t.comment(`second player's p99 ${percentile(secondMs, 99).toFixed(0)} ms (goal on a quiet machine: under ${P99_GOAL_MS} ms)`);

  // /health.
  t.ok(healthAnswers.length >= 3, `/health was polled during the burst (${healthAnswers.length} times)`);
  t.same(healthAnswers.filter((a) => a.status !== 200).slice(0, 3).map((a) => ({ status: a.status, body: a.body })), [], "/health answered 200 every time");

  // The flooder: successes and TOO_MANY_REQUESTS only.
  const accepted = flood.filter((r) => r.code === "OK");
  t.ok(accepted.length > 0, `some of the flooder's bets were accepted (${accepted.length})`);
  t.same(
    flood.filter((r) => !((r.status === 200 && r.code === "OK") || ((r.status === 200 || r.status === 429) && r.code === "TOO_MANY_REQUESTS"))).slice(0, 3),
    [],
    "every flooder answer is a success or TOO_MANY_REQUESTS, as a GraphQL error or a 429 (no DATABASE_UNAVAILABLE, no 5xx, no dropped connection)",
  );
  if (rejected) t.match(rejected.message, /too many|at most \d+/i, "the refusal says what the limit is");

  // The books.
  const secondAccepted = secondAnswers.filter((a) => a.body?.data?.makeCoinflipBet);
  const acceptedIds = [
    ...warmups.map((a) => a.body.data.makeCoinflipBet.bet.id as string),
    ...accepted.map((r) => r.id!),
    ...secondAccepted.map((a) => a.body.data.makeCoinflipBet.bet.id as string),
  ];
  const { rows: stored } = await db.query<{ id: string; net: number; user_id: string }>(
    "select id, net, user_id from app.coinflip_bet where casino_id = $1 and currency_key = $2",
    [casinoId, CURRENCY],
  );
  t.same(stored.map((b) => b.id).sort(), acceptedIds.sort(), `the ${stored.length} stored bets are exactly the ${acceptedIds.length} accepted ones`);
  const { rows: balances } = await db.query<{ user_id: string; amount: number }>(
    "select user_id, amount from hub.balance where casino_id = $1 and currency_key = $2",
    [casinoId, CURRENCY],
  );
  const { rows: bankrolls } = await db.query<{ amount: number; bets: string }>(
    "select amount, bets from hub.bankroll where casino_id = $1 and currency_key = $2",
    [casinoId, CURRENCY],
  );
  const bankroll = bankrolls[0]!;
  const total = sum(balances.map((b) => b.amount)) + bankroll.amount;
  t.ok(close(total, FLOODER_BALANCE + SECOND_BALANCE + BANKROLL), `balances + bankroll = ${total}, what was put in (${FLOODER_BALANCE + SECOND_BALANCE + BANKROLL})`);
  t.equal(Number(bankroll.bets), stored.length, "bankroll.bets counts every stored bet");
  for (const [name, id, initial] of [["flooder", flooder.userId, FLOODER_BALANCE], ["second player", second.userId, SECOND_BALANCE]] as const) {
    const amount = balances.find((b) => b.user_id === id)!.amount;
    const nets = sum(stored.filter((b) => b.user_id === id).map((b) => b.net));
    t.ok(close(amount, initial + nets), `${name}: balance ${amount} = ${initial} + the nets of its stored bets (${nets})`);
  }
  const { rows: ledger } = await db.query<{ account: string; user_id: string | null; total: number }>(
    "select account, user_id, sum(amount_delta) as total from hub.ledger where casino_id = $1 and currency_key = $2 group by 1, 2",
    [casinoId, CURRENCY],
  );
  for (const b of balances) t.ok(close(ledger.find((l) => l.account === "player" && l.user_id === b.user_id)?.total ?? NaN, b.amount), `the ledger sums to the balance ${b.amount}`);
  t.ok(close(ledger.find((l) => l.account === "house")?.total ?? NaN, bankroll.amount), `the ledger sums to the bankroll ${bankroll.amount}`);
});
