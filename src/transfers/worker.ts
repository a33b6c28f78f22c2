import pg from "pg";
import type { Logger } from "../logger.js";
import { OutcomeUnknownError, type CasinoConnector, type OutgoingOutcome } from "./connector.js";
import { connectorForCasino } from "./connectors.js";
import { checkIncoming, recordDeposit, TransferRefusal } from "./deposits.js";
import { backoffMs, type ResolvedTransferOptions } from "./options.js";
import { completeWithdrawal, extendSendWindow, loadWithdrawal, refundWithdrawal } from "./withdrawals.js";

/** A row of the outbox (hub.transfer_job). */
export interface TransferJob {
  id: string;
  kind: "WITHDRAWAL" | "ACKNOWLEDGE" | "POLL" | "INCOMING";
  casino_id: string;
  withdrawal_request_id: string | null;
  mp_transfer_id: string | null;
  cursor: string | null;
  attempts: number;
}

export const WORKER_ACTOR = "transfers:worker";

export interface TransferWorker {
  /** Look for due work now instead of at the next interval. */
  wake(): void;
  /** Stop picking work and wait for the items in progress. */
  stop(): Promise<void>;
}

/** An item the worker should take now; both the idle look and the claim ask it, so they never disagree. */
const DUE = "status = 'PENDING' and next_attempt_at <= now()";

/**
 * The transfer worker of one hub instance. Each item is claimed with
 * `select … for update skip locked` in a transaction held while the casino is
 * called and its answer recorded: another instance skips it meanwhile, and if
 * this process dies the transaction ends with its connection, so the item is
 * due again for any instance. Calls are idempotent (the key is the request
 * id), so a send repeated after such a death is answered with the casino's
 * first outcome and recorded once.
 */
export function startTransferWorker(superuserUrl: string, options: ResolvedTransferOptions, log: Logger): TransferWorker {
  const pool = new pg.Pool({ connectionString: superuserUrl, max: options.concurrency + 1, application_name: "hub:transfers", idleTimeoutMillis: 10_000 });
  // A lost connection is reported by the query that used it; an idle one dying needs no action.
  pool.on("error", (error) => log.debug({ err: error }, "transfer worker: an idle connection ended"));
  // A connection can end while an item holds it (Postgres restarted during a casino call):
  // the next query on it fails and the item's transaction is gone; nothing else to do here.
  pool.on("connect", (client) => client.on("error", (error) => log.debug({ err: error }, "transfer worker: a connection ended")));
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let wakeUp: (() => void) | undefined;
  let lastOutageLog = 0;
  let woken = false;
  let busy = false;

  /**
   * Whether any item is due, in one statement outside a transaction. An idle
   * worker looks every pollIntervalMs, and finding nothing with runOne's
   * begin, locking select and commit costs three round trips and a pooled
   * connection each time. A database error answers yes, so that runOne meets
   * it and reports it as it does any other.
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
    let client: pg.PoolClient | undefined;
    let broken: Error | undefined;
    try {
      client = await pool.connect();
      await client.query("begin");
      const { rows } = await client.query<TransferJob>(
        `select id, kind, casino_id, withdrawal_request_id, mp_transfer_id, cursor, attempts from hub.transfer_job
          where ${DUE}
          order by next_attempt_at limit 1
          for update skip locked`,
      );
      const job = rows[0];
      if (!job) {
        await client.query("commit");
        return false;
      }
      await handle(client, job);
      await client.query("commit");
      return true;
    } catch (error) {
      broken = error as Error;
      if (client) await client.query("rollback").catch(() => undefined);
      // Postgres away: the transaction is gone and the item due again; say so once in a while, not per attempt.
      if (Date.now() - lastOutageLog > 5000) {
        lastOutageLog = Date.now();
        log.warn({ err: error }, "transfer worker: database error; the item is retried");
      }
      return false;
    } finally {
      client?.release(broken);
    }
  }

  async function handle(client: pg.PoolClient, job: TransferJob): Promise<void> {
    await client.query("update hub.transfer_job set attempts = attempts + 1, last_attempt_at = now(), updated_at = now() where id = $1", [job.id]);
    const attempts = job.attempts + 1;
    let connector: CasinoConnector;
    try {
      connector = await connectorForCasino(client, job.casino_id, options);
    } catch (error) {
      return retryLater(client, job, attempts, error as Error);
    }
    await client.query("savepoint work");
    try {
      if (job.kind === "WITHDRAWAL") await sendWithdrawal(client, job, connector);
      else if (job.kind === "ACKNOWLEDGE") await acknowledge(client, job, connector);
      else await poll(client, job, connector);
      await client.query("release savepoint work");
    } catch (error) {
      // Anything short of the database itself failing: keep the attempt, back off.
      await client.query("rollback to savepoint work");
      await retryLater(client, job, attempts, error as Error);
    }
  }

  async function retryLater(client: pg.PoolClient, job: TransferJob, attempts: number, error: Error): Promise<void> {
    const delay = backoffMs(options, attempts);
    const unknown = error instanceof OutcomeUnknownError;
    log[unknown ? "warn" : "error"]({ jobId: job.id, kind: job.kind, casinoId: job.casino_id, attempts, retryInMs: delay, err: unknown ? undefined : error }, `transfer ${job.kind.toLowerCase()}: ${error.message}; retrying`);
    await client.query("update hub.transfer_job set last_error = $2, next_attempt_at = now() + $3 * interval '1 millisecond', updated_at = now() where id = $1", [
      job.id, error.message.slice(0, 1000), delay,
    ]);
  }

  async function sendWithdrawal(client: pg.PoolClient, job: TransferJob, connector: CasinoConnector): Promise<void> {
    const requestId = job.withdrawal_request_id!;
    const w = await loadWithdrawal(client, requestId);
    if (!w || w.status !== "PENDING") {
      await client.query("update hub.transfer_job set status = 'DONE', updated_at = now() where id = $1", [job.id]);
      return;
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
    if (outcome.status === "COMPLETED") {
      await completeWithdrawal(client, requestId, outcome.mpTransferId);
      log.info({ withdrawalRequestId: requestId, mpTransferId: outcome.mpTransferId }, "withdrawal completed");
    } else {
      await refundWithdrawal(client, w, WORKER_ACTOR, `the casino refused it: ${outcome.reason}`);
      log.info({ withdrawalRequestId: requestId, reason: outcome.reason }, "withdrawal refused by the casino; refunded");
    }
  }

  async function acknowledge(client: pg.PoolClient, job: TransferJob, connector: CasinoConnector): Promise<void> {
    await connector.acknowledge(job.mp_transfer_id!);
    await client.query("update hub.transfer_job set status = 'DONE', last_error = null, updated_at = now() where id = $1", [job.id]);
  }

  async function poll(client: pg.PoolClient, job: TransferJob, connector: CasinoConnector): Promise<void> {
    const page = await connector.fetchIncoming(job.cursor);
    let credited = 0;
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
