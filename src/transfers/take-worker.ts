import type pg from "pg";
import { ErrorCode } from "../errors.js";
import type { Logger } from "../logger.js";
import type { CasinoConnector, TakeOutcome, TakeRequestPage } from "./connector.js";
import { dbLockCasinoBalances } from "../db/locks.js";
import { TransferRefusal } from "./deposits.js";
import type { ResolvedTransferOptions } from "./options.js";
import { beforeTakeSend, sendWindowClosed, checkTakeRequest, loadTake, recordTakeOutcome, recordTakeRequest, refundTake, rejectedAtCasino, takeWindow, type TakeRow } from "./take-requests.js";
import type { TransferJob } from "./job.js";

/** What an attempt learnt from the casino, written in one transaction once the call is over. */
type Write = (client: pg.PoolClient) => Promise<void>;

const done = (job: TransferJob): Write => async (client) => {
  await client.query("update hub.transfer_job set status = 'DONE', updated_at = now() where id = $1", [job.id]);
};

function connectorTakes(connector: CasinoConnector) {
  const { fetchTakeRequests, transferTake, lookupTake, rejectTake } = connector;
  if (!fetchTakeRequests || !transferTake || !lookupTake || !rejectTake) {
    throw new Error("this casino's connector has no take requests (fetchTakeRequests, transferTake, lookupTake, rejectTake)");
  }
  return {
    fetch: fetchTakeRequests.bind(connector),
    transfer: transferTake.bind(connector),
    lookup: lookupTake.bind(connector),
    reject: rejectTake.bind(connector),
  };
}

function validTake(raw: unknown): { uname: string; experience: string; currencyKey: string } | undefined {
  try {
    return checkTakeRequest(raw);
  } catch {
    return undefined;
  }
}

/** A page of take requests: each received once (reserved or rejected), or kept as a FAILED item; then the cursor. */
async function recordTakePage(client: pg.PoolClient, job: TransferJob, page: TakeRequestPage, options: ResolvedTransferOptions, actor: string, log: Logger): Promise<void> {
  let received = 0;
  // The page's balances first, in the hub's lock order (core migration 0030).
  await dbLockCasinoBalances(client, job.casino_id, page.takeRequests.flatMap((raw) => validTake(raw) ?? []));
  for (const raw of page.takeRequests) {
    await client.query("savepoint take");
    try {
      const { created } = await recordTakeRequest(client, job.casino_id, checkTakeRequest(raw), actor, options.takeRequestTimeoutMs);
      if (created) received++;
      await client.query("release savepoint take");
    } catch (error) {
      await client.query("rollback to savepoint take");
      if (!(error instanceof TransferRefusal)) throw error;
      const rawId = (raw as { id?: unknown } | null)?.id;
      const id = `take request ${typeof rawId === "string" && rawId.length > 0 ? rawId.slice(0, 180) : "(no id)"}`;
      log.error({ casinoId: job.casino_id, takeRequestId: rawId, code: error.code }, `take request refused: ${error.message}`);
      await client.query("insert into hub.transfer_job (kind, casino_id, mp_transfer_id, status, attempts, last_error) values ('INCOMING', $1, $2, 'FAILED', 1, $3)", [
        job.casino_id, id, `${error.code}: ${error.message}`.slice(0, 1000),
      ]);
    }
  }
  await client.query(
    "update hub.transfer_job set cursor = $2, attempts = 0, last_error = null, next_attempt_at = now() + $3 * interval '1 millisecond', updated_at = now() where id = $1",
    [job.id, page.cursor, page.more ? 0 : options.casinoPollIntervalMs],
  );
  if (received > 0) log.info({ casinoId: job.casino_id, received }, "take requests received");
}

/**
 * A take request's attempts: fetch them (TAKE_POLL), then per request (TAKE)
 * have the casino apply the transfer, keyed by the take request's id, until it
 * answers; or tell it the hub rejected the request. Past give_up_at the hub
 * sends no more; once the last send's window has closed and the casino says
 * it never applied the transfer, the reserve goes back (REJECTED), once.
 */
export function createTakeAttempts(pool: pg.Pool, options: ResolvedTransferOptions, actor: string, log: Logger) {
  async function poll(job: TransferJob, connector: CasinoConnector): Promise<Write> {
    const page = await connectorTakes(connector).fetch(job.cursor);
    return (client) => recordTakePage(client, job, page, options, actor, log);
  }

  function later(job: TransferJob, at: Date, why: string): Write {
    return async (client) => {
      await client.query("update hub.transfer_job set last_error = $2, next_attempt_at = $3, updated_at = now() where id = $1", [job.id, why, at]);
    };
  }

  function record(take: TakeRow, outcome: TakeOutcome): Write {
    return (client) => recordTakeOutcome(client, take, outcome, actor, log);
  }

  async function settle(job: TransferJob, connector: CasinoConnector): Promise<Write> {
    const take = await loadTake(pool, job.take_request_id!);
    if (!take) return done(job);
    const casino = connectorTakes(connector);
    if (take.status === "REJECTED" && take.mp_status === "PENDING") {
      await casino.reject(take.mp_take_request_id, take.debug ?? "rejected by the hub");
      return (client) => rejectedAtCasino(client, take);
    }
    if (take.status !== "PROCESSING") return done(job);
    const window = await takeWindow(pool, take.id, options.clockSkewMs);
    if (window.givenUp) {
      // No more sends. The casino must say what it did; a send may still land until its window closes.
      if (window.sendOpenUntil) return later(job, window.sendOpenUntil, `given up at ${window.giveUpAt.toISOString()}: waiting for the last send's window to close`);
      const found = await casino.lookup(take.mp_take_request_id);
      if (found.status !== "NOT_FOUND") return record(take, found);
      const why = `${ErrorCode.TAKE_REQUEST_EXPIRED}: the casino did not complete the transfer by ${window.giveUpAt.toISOString()} and says it never applied it; the reserve was returned.`;
      return async (client) => {
        if (!(await sendWindowClosed(client, take.id, options.clockSkewMs))) {
          await client.query("update hub.transfer_job set next_attempt_at = now(), updated_at = now() where id = $1", [job.id]);
          return;
        }
        await refundTake(client, take, actor, { status: "REJECTED", why, mpTransferStatus: "EXPIRED" });
        log.warn({ takeRequestId: take.mp_take_request_id }, "take request given up; the reserve was returned");
      };
    }
    if (job.attempts > 0) {
      // An earlier attempt's outcome is unknown: ask first.
      const found = await casino.lookup(take.mp_take_request_id).catch(() => undefined);
      if (found && found.status !== "NOT_FOUND") return record(take, found);
    }
    const expiresAt = new Date(Date.now() + options.requestTimeoutMs);
    if (!(await beforeTakeSend(pool, take.id, expiresAt))) return later(job, new Date(), "no send: the hub gave up on the transfer meanwhile");
    const outcome = await casino.transfer({ takeRequestId: take.mp_take_request_id, uname: take.uname, currencyKey: take.currency_key, amount: take.reserved_amount, expiresAt });
    return record(take, outcome);
  }

  return { poll, settle };
}
