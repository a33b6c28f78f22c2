import { randomUUID } from "node:crypto";
import pg from "pg";
import type { Logger } from "../logger.js";
import { sendQueriesUnnamed } from "../db/pools.js";
import { dbLockCasinoBalances } from "../db/locks.js";
import { OutcomeUnknownError, type CasinoConnector, type IncomingPage, type OutgoingOutcome } from "./connector.js";
import { connectorForCasino } from "./connectors.js";
import { checkIncoming, recordDeposit, TransferRefusal } from "./deposits.js";
import { backoffMs, type ResolvedTransferOptions } from "./options.js";
import { createTakeAttempts } from "./take-worker.js";
import { completeWithdrawal, extendSendWindow, loadWithdrawal, refundWithdrawal, type WithdrawalForSend } from "./withdrawals.js";
import type { TransferJob } from "./job.js";

export const WORKER_ACTOR = "transfers:worker";

export interface TransferWorker {
  /** Look for due work now instead of at the next interval. */
  wake(): void;
  /** Stop picking work and wait for the items in progress. */
  stop(): Promise<void>;
}

/** An item the worker should take now; both the idle look and the claim ask it, so they never disagree. */
const DUE = "status = 'PENDING' and next_attempt_at <= now() and (locked_until is null or locked_until <= now())";

/** What an attempt learnt from the casino, written in one transaction once the call is over. */
type Write = (client: pg.PoolClient) => Promise<void>;

/**
 * Claiming an item with a lease, and recording what an attempt learnt while
 * the lease is still this worker's (the lease ends with the record).
 */
function createLeases(pool: pg.Pool, me: string, leaseMs: number, log: Logger) {
  async function claim(): Promise<TransferJob | undefined> {
    const { rows } = await pool.query<TransferJob>(
      `update hub.transfer_job j
          set locked_by = $1, locked_until = now() + $2 * interval '1 millisecond', attempts = j.attempts + 1, last_attempt_at = now(), updated_at = now()
        where j.id = (select id from hub.transfer_job where ${DUE} order by next_attempt_at limit 1 for update skip locked)
        returning j.id, j.kind, j.casino_id, j.withdrawal_request_id, j.take_request_id, j.mp_transfer_id, j.cursor, j.attempts - 1 as attempts`,
      [me, leaseMs],
    );
    return rows[0];
  }

  /** Write what the attempt learnt, if the item is still this worker's; the lease ends with it. */
  async function record(job: TransferJob, write: Write): Promise<void> {
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      await client.query("begin");
      const { rowCount } = await client.query("select 1 from hub.transfer_job where id = $1 and locked_by = $2 for update", [job.id, me]);
      if (rowCount === 0) {
        await client.query("rollback");
        log.warn({ jobId: job.id, kind: job.kind }, "transfer worker: the item's lease ran out during the casino's call; another attempt records it");
        return;
      }
      await write(client);
      await client.query("update hub.transfer_job set locked_by = null, locked_until = null where id = $1", [job.id]);
      await client.query("commit");
    } catch (error) {
      broken = error as Error;
      await client.query("rollback").catch(() => undefined);
      throw error;
    } finally {
      client.release(broken);
    }
  }
  return { claim, record };
}

/** The casino's answer to a send: completed, or refused and refunded. */
async function recordOutcome(client: pg.PoolClient, w: WithdrawalForSend, outcome: OutgoingOutcome, log: Logger): Promise<void> {
  const requestId = w.withdrawal_request_id;
  if (outcome.status === "COMPLETED") {
    await completeWithdrawal(client, requestId, outcome.mpTransferId);
    log.info({ withdrawalRequestId: requestId, mpTransferId: outcome.mpTransferId }, "withdrawal completed");
  } else {
    await refundWithdrawal(client, w, WORKER_ACTOR, `the casino refused it: ${outcome.reason}`);
    log.info({ withdrawalRequestId: requestId, reason: outcome.reason }, "withdrawal refused by the casino; refunded");
  }
}

/** A page of incoming transfers: each credited once and acknowledged, or kept as a FAILED item; then the cursor. */
async function recordIncoming(client: pg.PoolClient, job: TransferJob, page: IncomingPage, options: ResolvedTransferOptions, log: Logger): Promise<void> {
  let credited = 0;
  // The page's balances first, in the hub's lock order: crediting them in the casino's order could deadlock with a group of bets.
  await dbLockCasinoBalances(client, job.casino_id, page.transfers.flatMap((raw) => validIncoming(raw) ?? []));
  for (const raw of page.transfers) {
    await client.query("savepoint incoming");
    try {
      const transfer = checkIncoming(raw);
      const { created } = await recordDeposit(client, job.casino_id, transfer, WORKER_ACTOR);
      if (created) credited++;
      await client.query(
        "insert into hub.transfer_job (kind, casino_id, mp_transfer_id) values ('ACKNOWLEDGE', $1, $2) on conflict (casino_id, mp_transfer_id) where kind = 'ACKNOWLEDGE' do nothing",
        [job.casino_id, transfer.id],
      );
      await client.query("release savepoint incoming");
    } catch (error) {
      await client.query("rollback to savepoint incoming");
      if (!(error instanceof TransferRefusal)) throw error;
      // Neither credited nor acknowledged: kept as a FAILED item operators see, once per delivery.
      const rawId = (raw as { id?: unknown } | null)?.id;
      const id = typeof rawId === "string" && rawId.length > 0 ? rawId.slice(0, 200) : "(no id)";
      log.error({ casinoId: job.casino_id, mpTransferId: id, code: error.code }, `incoming transfer refused: ${error.message}`);
      await client.query("insert into hub.transfer_job (kind, casino_id, mp_transfer_id, status, attempts, last_error) values ('INCOMING', $1, $2, 'FAILED', 1, $3)", [
        job.casino_id, id, `${error.code}: ${error.message}`.slice(0, 1000),
      ]);
    }
  }
  const pause = page.more ? 0 : options.casinoPollIntervalMs;
  await client.query(
    "update hub.transfer_job set cursor = $2, attempts = 0, last_error = null, next_attempt_at = now() + $3 * interval '1 millisecond', updated_at = now() where id = $1",
    [job.id, page.cursor, pause],
  );
  if (credited > 0) log.info({ casinoId: job.casino_id, credited }, "incoming transfers credited");
}

function validIncoming(raw: unknown): { uname: string; experience: string; currencyKey: string } | undefined {
  try {
    return checkIncoming(raw);
  } catch {
    return undefined;
  }
}

/** One attempt at an item: the casino's calls, made with no transaction open, and what to record. */
function createAttempts(pool: pg.Pool, options: ResolvedTransferOptions, log: Logger) {
  const takes = createTakeAttempts(pool, options, WORKER_ACTOR, log);
  /** Talk to the casino about the item; what to record. Anything short of the database failing is a retry. */
  async function attempt(job: TransferJob): Promise<Write> {
    const attempts = job.attempts + 1;
    try {
      const connector = await connectorForCasino(pool, job.casino_id, options);
      if (job.kind === "WITHDRAWAL") return await sendWithdrawal(job, connector);
      if (job.kind === "TAKE") return await takes.settle(job, connector);
      if (job.kind === "TAKE_POLL") return await takes.poll(job, connector);
      if (job.kind === "ACKNOWLEDGE") {
        await connector.acknowledge(job.mp_transfer_id!);
        return async (client) => {
          await client.query("update hub.transfer_job set status = 'DONE', last_error = null, updated_at = now() where id = $1", [job.id]);
        };
      }
      const page = await connector.fetchIncoming(job.cursor);
      return (client) => recordIncoming(client, job, page, options, log);
    } catch (error) {
      return retryLater(job, attempts, error as Error);
    }
  }

  function retryLater(job: TransferJob, attempts: number, error: Error): Write {
    const delay = backoffMs(options, attempts);
    const unknown = error instanceof OutcomeUnknownError;
    log[unknown ? "warn" : "error"]({ jobId: job.id, kind: job.kind, casinoId: job.casino_id, attempts, retryInMs: delay, err: unknown ? undefined : error }, `transfer ${job.kind.toLowerCase()}: ${error.message}; retrying`);
    return async (client) => {
      await client.query("update hub.transfer_job set last_error = $2, next_attempt_at = now() + $3 * interval '1 millisecond', updated_at = now() where id = $1", [
        job.id, error.message.slice(0, 1000), delay,
      ]);
    };
  }

  async function sendWithdrawal(job: TransferJob, connector: CasinoConnector): Promise<Write> {
    const requestId = job.withdrawal_request_id!;
    const w = await loadWithdrawal(pool, requestId);
    if (!w || w.status !== "PENDING") {
      return async (client) => {
        await client.query("update hub.transfer_job set status = 'DONE', updated_at = now() where id = $1", [job.id]);
      };
    }
    let outcome: OutgoingOutcome | undefined;
    if (job.attempts > 0) {
      // An earlier attempt's outcome is unknown: ask first, so a casino whose
      // sends keep failing after applying them still gets the result recorded.
      const found = await connector.lookup(requestId).catch(() => undefined);
      if (found && found.status !== "NOT_FOUND") outcome = found;
    }
    if (!outcome) {
      const expiresAt = new Date(Date.now() + options.requestTimeoutMs);
      await extendSendWindow(pool, requestId, expiresAt);
      outcome = await connector.send({ idempotencyKey: requestId, uname: w.uname, currencyKey: w.currency_key, amount: w.amount, expiresAt });
    }
    return (client) => recordOutcome(client, w, outcome, log);
  }
  return { attempt };
}

/**
 * The transfer worker of one hub instance. An item is claimed with a lease
 * (locked_by, locked_until) in one statement; the casino is called with no
 * transaction open and no connection held; the outcome is recorded in a short
 * transaction that first checks the lease is still this worker's. Another
 * instance skips a leased item; if this process dies, the item is due again
 * once its lease ends. Calls are idempotent (the key is the request id), so a
 * send repeated then is answered with the casino's first outcome and recorded
 * once; a worker whose lease ran out records nothing.
 */
export function startTransferWorker(
  superuserUrl: string,
  options: ResolvedTransferOptions,
  log: Logger,
  /** The pool's most connections (default concurrency + 1; fewer make attempts wait for one), and whether to send prepared statements unnamed (a transaction pooler). */
  poolOptions: { max?: number; unnamedStatements?: boolean } = {},
): TransferWorker {
  const pool = new pg.Pool({ connectionString: superuserUrl, max: poolOptions.max ?? options.concurrency + 1, application_name: "hub:transfers", idleTimeoutMillis: 10_000 });
  if (poolOptions.unnamedStatements) pool.on("connect", sendQueriesUnnamed);
  // A lost connection is reported by the query that used it; an idle one dying needs no action.
  pool.on("error", (error) => log.debug({ err: error }, "transfer worker: an idle connection ended"));
  pool.on("connect", (client) => client.on("error", (error) => log.debug({ err: error }, "transfer worker: a connection ended")));
  // Longer than the calls of one attempt (a lookup, then a send), each bounded by requestTimeoutMs.
  const { claim, record } = createLeases(pool, `hub:${randomUUID()}`, 3 * options.requestTimeoutMs + 5000, log);
  const { attempt } = createAttempts(pool, options, log);
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let wakeUp: (() => void) | undefined;
  let lastOutageLog = 0;
  let woken = false;
  let busy = false;

  /**
   * Whether any item is due, in one statement. An idle worker looks every
   * pollIntervalMs. A database error answers yes, so that runOne meets it and
   * reports it as it does any other.
   */
  async function anyDue(): Promise<boolean> {
    try {
      const { rows } = await pool.query(`select 1 from hub.transfer_job where ${DUE} limit 1`);
      return rows.length > 0;
    } catch {
      return true;
    }
  }

  async function runOne(): Promise<boolean> {
    try {
      const job = await claim();
      if (!job) return false;
      await record(job, await attempt(job));
      return true;
    } catch (error) {
      // Postgres away: the item stays leased and is due again when the lease ends; say so once in a while.
      if (Date.now() - lastOutageLog > 5000) {
        lastOutageLog = Date.now();
        log.warn({ err: error }, "transfer worker: database error; the item is retried");
      }
      return false;
    }
  }

  async function loop(): Promise<void> {
    while (!stopped) {
      // One look while idle; once there is work, up to `concurrency` items at once, until none is due.
      const found = busy ? (await Promise.all(Array.from({ length: options.concurrency }, () => runOne()))).some(Boolean) : (await anyDue()) && (await runOne());
      busy = found;
      if (stopped) break;
      if (found) continue;
      // A wake during the round may be for work committed after its select: look again.
      if (woken) {
        woken = false;
        continue;
      }
      await new Promise<void>((resolve) => {
        wakeUp = resolve;
        timer = setTimeout(resolve, options.pollIntervalMs);
      });
      wakeUp = undefined;
      woken = false;
    }
  }

  const running = loop().catch((error: unknown) => log.error({ err: error }, "transfer worker stopped by an unexpected error"));
  log.debug("transfer worker started");
  return {
    wake() {
      woken = true;
      if (timer) clearTimeout(timer);
      wakeUp?.();
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      wakeUp?.();
      await running;
      await pool.end().catch(() => undefined);
    },
  };
}
