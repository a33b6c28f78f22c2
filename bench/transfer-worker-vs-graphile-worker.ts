/**
 * The hub's transfer worker (a lease on hub.transfer_job, the casino called
 * with no transaction open) against graphile-worker running the same
 * withdrawal: docs/deposits-and-withdrawals.md ("Why not graphile-worker")
 * and bench/results/transfer-worker-vs-graphile-worker.md.
 *
 * graphile-worker is not a dependency of the hub: install it for the run only,
 *
 *   npm install --no-save graphile-worker@0.16.6   # 0.18 needs Node >= 22.18
 *   npm run build && node --import tsx bench/transfer-worker-vs-graphile-worker.ts [--jobs 1000] [--concurrency 16]
 *
 * (or point GRAPHILE_WORKER at its dist/index.js installed elsewhere).
 *
 * Both run the same job against the simulated casino of the tests, on one
 * throw-away database: a withdrawal made by the hub's own requestWithdrawal
 * (balance debited, rows written) and enqueued in the same transaction (the
 * hub's outbox row, or graphile_worker.add_job); the worker loads it, asks the
 * casino first on a retry, records the send window, sends (idempotency key =
 * request id) and records the outcome in a short transaction with the hub's
 * own functions. Only the queue differs. Measured:
 * - throughput: `jobs` queued while the worker is stopped, then the time from
 *   its start to the last COMPLETED;
 * - latency: with the worker idle, withdrawals one at a time, from the
 *   enqueue's commit to the casino receiving the send;
 * - a slow casino (every send answered after 3 s): the worker's connections
 *   and those "idle in transaction", sampled during the wait.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import pg from "pg";
import { benchArgs, positiveOption } from "./lib/args.js";
import { GW_APP, GW_INSTALL, loadGraphileWorker, startWorker as start, type GraphileWorker, type Kind, type Worker } from "./lib/transfer-workers.js";
import { startTestServer, createPlayer, type TestServer } from "../dist/src/test-kit/index.js";
import { resolveTransferOptions, type ResolvedTransferOptions } from "../dist/src/transfers/options.js";
import { requestWithdrawal } from "../dist/src/transfers/withdrawals.js";
import { startSimCasino, type SimCasino } from "../test/helpers/sim-casino.js";
import { addSimCasino } from "../test/helpers/transfers.js";

const USAGE = `Usage:\n  ${GW_INSTALL}\n  npm run build && node --import tsx bench/transfer-worker-vs-graphile-worker.ts [--jobs 1000] [--concurrency 16] [--latency 50] [--no-crash]\n`;
const { values } = benchArgs(USAGE, {
  options: { jobs: { type: "string", default: "1000" }, concurrency: { type: "string", default: "16" }, latency: { type: "string", default: "50" }, "no-crash": { type: "boolean", default: false } },
});
const JOBS = positiveOption(USAGE, "jobs", values.jobs);
const CONCURRENCY = positiveOption(USAGE, "concurrency", values.concurrency);
const LATENCY_SAMPLES = positiveOption(USAGE, "latency", values.latency);
const SLOW_MS = 3000;

interface Setup {
  server: TestServer;
  casino: SimCasino;
  player: { userId: string; casinoId: string; experienceId: string };
  options: ResolvedTransferOptions;
}

const startWorker = (kind: Kind, s: Setup, gw: GraphileWorker): Promise<Worker> => start(kind, s.server.superuserDatabaseUrl, s.options, gw);

/** A withdrawal of 1 and its queue entry, committed together; resolves at the commit. */
async function enqueue(pool: pg.Pool, kind: Kind, s: Setup): Promise<{ id: string; committedAt: number }> {
  const client = await pool.connect();
  try {
    await client.query("begin");
    const id = await requestWithdrawal(client, { ...s.player, currencyKey: "BTC", amount: 1, actor: "bench" });
    if (kind === "graphile") {
      // The outbox row is the hub worker's queue; with graphile-worker the job is graphile's.
      await client.query("update hub.transfer_job set status = 'DONE' where withdrawal_request_id = $1", [id]);
      await client.query("select graphile_worker.add_job('hub_withdraw', json_build_object('id', $1::text), max_attempts => 32767)", [id]);
    }
    await client.query("commit");
    return { id, committedAt: performance.now() };
  } catch (error) {
    await client.query("rollback").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

const statusOf = async (pool: pg.Pool, id: string) =>
  (await pool.query<{ status: string }>("select status from hub.withdrawal where withdrawal_request_id = $1", [id])).rows[0]?.status;

async function waitCompleted(pool: pg.Pool, ids: string[], timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await pool.query<{ n: number }>("select count(*)::int as n from hub.withdrawal where status = 'COMPLETED' and withdrawal_request_id = any($1::uuid[])", [ids]);
    if (rows[0]!.n === ids.length) return performance.now();
    if (Date.now() > deadline) throw new Error(`${ids.length - rows[0]!.n} of ${ids.length} withdrawals not COMPLETED within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function throughput(kind: Kind, s: Setup, gw: GraphileWorker): Promise<string> {
  const pool = s.server.dbPool;
  const ids: string[] = [];
  for (let i = 0; i < JOBS; i++) ids.push((await enqueue(pool, kind, s)).id);
  const started = performance.now();
  const worker = await startWorker(kind, s, gw);
  const done = await waitCompleted(pool, ids, 300_000);
  await worker.stop();
  const seconds = (done - started) / 1000;
  return `${JOBS} in ${seconds.toFixed(2)} s = **${(JOBS / seconds).toFixed(0)} jobs/s**`;
}

async function latency(kind: Kind, s: Setup, gw: GraphileWorker): Promise<string> {
  const pool = s.server.dbPool;
  const arrivals = new Map<string, number>();
  const onSend = (key: string) => arrivals.set(key, performance.now());
  s.casino.on("outgoing", onSend);
  const worker = await startWorker(kind, s, gw);
  await new Promise((r) => setTimeout(r, 1000));
  const samples: number[] = [];
  for (let i = 0; i < LATENCY_SAMPLES; i++) {
    const { id, committedAt } = await enqueue(pool, kind, s);
    await waitCompleted(pool, [id], 30_000);
    samples.push(arrivals.get(id)! - committedAt);
    // A random pause over two of the hub worker's poll intervals: a polling worker is met at every phase of its interval.
    await new Promise((r) => setTimeout(r, Math.random() * 2 * s.options.pollIntervalMs));
  }
  await worker.stop();
  s.casino.off("outgoing", onSend);
  samples.sort((a, b) => a - b);
  const pct = (p: number) => samples[Math.min(samples.length - 1, Math.floor((p / 100) * samples.length))]!.toFixed(1);
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  return `p50 ${pct(50)} ms, p90 ${pct(90)} ms, max ${samples[samples.length - 1]!.toFixed(1)} ms, mean ${mean.toFixed(1)} ms (${samples.length} one at a time)`;
}

async function slowCasino(kind: Kind, s: Setup, gw: GraphileWorker): Promise<string> {
  const pool = s.server.dbPool;
  const worker = await startWorker(kind, s, gw);
  await new Promise((r) => setTimeout(r, 1000));
  s.casino.failNext("outgoing", { kind: "delay", ms: SLOW_MS }, CONCURRENCY);
  const arrivals: number[] = [];
  const onSend = () => arrivals.push(performance.now());
  s.casino.on("outgoing", onSend);
  const ids: string[] = [];
  const started = performance.now();
  for (let i = 0; i < CONCURRENCY; i++) ids.push((await enqueue(pool, kind, s)).id);
  const app = kind === "hub" ? ["hub:transfers"] : [GW_APP, `${GW_APP}:task`];
  // Sampled every 100 ms until every send is answered and recorded: the most seen at once.
  const most = { total: 0, active: 0, idleInTx: 0, heldInTx: 0 };
  let done: number | undefined;
  const finished = waitCompleted(pool, ids, 60_000).then((at) => (done = at));
  while (done === undefined) {
    // "Held": idle in a transaction for over 500 ms, which only a transaction open across the casino's call is.
    const { rows } = await pool.query<{ total: number; active: number; idle_in_tx: number; held_in_tx: number }>(
      `select count(*)::int as total, count(*) filter (where state = 'active')::int as active,
              count(*) filter (where state like 'idle in transaction%')::int as idle_in_tx,
              count(*) filter (where state like 'idle in transaction%' and now() - state_change > interval '500 ms')::int as held_in_tx
         from pg_stat_activity where datname = current_database() and application_name = any($1)`,
      [app],
    );
    most.total = Math.max(most.total, rows[0]!.total);
    most.active = Math.max(most.active, rows[0]!.active);
    most.idleInTx = Math.max(most.idleInTx, rows[0]!.idle_in_tx);
    most.heldInTx = Math.max(most.heldInTx, rows[0]!.held_in_tx);
    await new Promise((r) => setTimeout(r, 100));
  }
  await finished;
  s.casino.off("outgoing", onSend);
  // Sends that reached the casino while the first one was still waiting for its answer.
  const together = arrivals.filter((at) => at < arrivals[0]! + SLOW_MS).length;
  await worker.stop();
  return `${CONCURRENCY} sends each answered after ${SLOW_MS} ms: at most **${most.total} connections** open (${most.active} active at once), **${most.heldInTx} idle in transaction for over 500 ms** (${most.idleInTx} for any time: between a short record's statements); ${together} of them reached the casino during the first one's wait; all ${CONCURRENCY} completed ${((done! - started) / 1000).toFixed(1)} s after the first enqueue`;
}

/**
 * A worker in a child process is SIGKILLed while the casino holds its answer
 * to a send it has applied; a fresh worker is started at once. How long until
 * the withdrawal is COMPLETED, and whether the casino applied it once.
 */
async function crash(kind: Kind, s: Setup, limitMs: number): Promise<string> {
  const pool = s.server.dbPool;
  const child = spawn(process.execPath, ["--import", "tsx", "bench/lib/transfer-worker-child.ts", kind, s.server.superuserDatabaseUrl], { stdio: ["ignore", "pipe", "inherit"] });
  await once(child.stdout!, "data");
  s.casino.failNext("outgoing", { kind: "hold" });
  const held = once(s.casino, "held");
  const { id } = await enqueue(pool, kind, s);
  await held;
  child.kill("SIGKILL");
  await once(child, "exit");
  const killedAt = performance.now();
  const hitsBefore = { ...s.casino.hits };
  s.casino.release();
  const worker = await startWorker(kind, s, await loadGraphileWorker());
  let result: string;
  try {
    const done = await waitCompleted(pool, [id], limitMs);
    result = `COMPLETED **${((done - killedAt) / 1000).toFixed(1)} s** after the SIGKILL`;
  } catch {
    // The jobs view leaves the payload out: its table is read here, for the report only.
    const { rows } = await pool.query<{ locked_at: Date | null; attempts: number }>("select locked_at, attempts from graphile_worker._private_jobs where payload->>'id' = $1", [id]);
    result = `**still PENDING ${limitMs / 1000} s after the SIGKILL** (${rows[0] ? `job locked since ${rows[0].locked_at?.toISOString()} by the dead worker, attempts ${rows[0].attempts}` : "no job row"})`;
  }
  await worker.stop();
  const after = `after it: ${s.casino.hits.lookup - hitsBefore.lookup} lookup(s), ${s.casino.hits.outgoing - hitsBefore.outgoing} send(s)`;
  return `${result}; ${after}; the casino applied the key once (its idempotency), the hub's withdrawal is ${await statusOf(pool, id)}`;
}

async function setUp(): Promise<Setup> {
  const casino = await startSimCasino();
  const server = await startTestServer({ logLevel: "warn", transfers: { worker: false } });
  const { apiKey } = await server.authenticateOperator();
  const casinoId = await addSimCasino(server.url, { authorization: `apikey:${apiKey}` }, casino, { poll: false });
  const user = await createPlayer(server.dbPool, { casinoId, uname: "bench" });
  const { rows } = await server.dbPool.query<{ id: string }>("insert into hub.experience (casino_id, name) values ($1, 'main') returning id", [casinoId]);
  await server.dbPool.query("select hub_hidden.credit_balance($1, $2, $3, 'BTC', 1000000000, 'bench', 'bench')", [user.id, casinoId, rows[0]!.id]);
  casino.fund("bench", "BTC", 0);
  const options = resolveTransferOptions({ concurrency: CONCURRENCY });
  return { server, casino, player: { userId: user.id, casinoId, experienceId: rows[0]!.id }, options };
}

const gw = await loadGraphileWorker();
const s = await setUp();
try {
  await gw.runMigrations({ connectionString: s.server.superuserDatabaseUrl, logger: new gw.Logger(() => () => undefined) });
  console.log(`Node ${process.version}; concurrency ${CONCURRENCY}; hub worker pollIntervalMs ${s.options.pollIntervalMs}; graphile-worker pollInterval 2000 (plus LISTEN)`);
  for (const kind of ["hub", "graphile"] as const) {
    console.log(`\n${kind}`);
    console.log(`  throughput: ${await throughput(kind, s, gw)}`);
    console.log(`  latency enqueue commit → casino receives the send: ${await latency(kind, s, gw)}`);
    console.log(`  slow casino: ${await slowCasino(kind, s, gw)}`);
    // The hub's lease is 3 × requestTimeoutMs + 5 s (35 s by default): waited for up to twice that.
    if (!values["no-crash"]) console.log(`  SIGKILL during a send: ${await crash(kind, s, 2 * (3 * s.options.requestTimeoutMs + 5000))}`);
  }
} finally {
  await s.server.stop();
  await s.casino.close();
}
