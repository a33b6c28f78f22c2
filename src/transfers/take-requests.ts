import type pg from "pg";
import { ensureUserAndExperience } from "../auth/credentials.js";
import { describeValue, ErrorCode } from "../errors.js";
import type { Logger } from "../logger.js";
import type { TakeOutcome, TakeRequest } from "./connector.js";
import { dbLockPlayerBalances } from "../db/locks.js";
import { TransferRefusal } from "./deposits.js";

/**
 * A take request's rows: hub.take_request (what the player and operators
 * read), its reserve in the ledger, its window (hub_hidden.take_request_window)
 * and the worker's TAKE item. Functions taking a client run inside the caller's
 * transaction.
 */

type Queryable = Pick<pg.ClientBase, "query">;

export interface TakeRow {
  id: string;
  mp_take_request_id: string;
  casino_id: string;
  user_id: string;
  experience_id: string;
  uname: string;
  currency_key: string;
  amount: number | null;
  reserved_amount: number;
  status: "PENDING" | "PROCESSING" | "COMPLETED" | "FAILED" | "REJECTED";
  mp_status: "PENDING" | "TRANSFERRED" | "CONTROLLER_REJECTED" | "USER_CANCELED";
  debug: string | null;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const text = (v: unknown) => typeof v === "string" && v.length >= 1 && v.length <= 200;
const MP_STATUSES = new Set(["PENDING", "TRANSFERRED", "CONTROLLER_REJECTED", "USER_CANCELED"]);

/** The fields every take request must have, whichever way it arrives. */
export function checkTakeRequest(raw: unknown): TakeRequest {
  const t = (raw ?? {}) as Record<string, unknown>;
  if (typeof t.id !== "string" || !UUID.test(t.id)) {
    throw new TransferRefusal(ErrorCode.TAKE_REQUEST_INVALID, `a take request's id must be a UUID; received ${describeValue(t.id)}.`);
  }
  for (const field of ["uname", "experience", "currencyKey"] as const) {
    if (!text(t[field])) throw new TransferRefusal(ErrorCode.TAKE_REQUEST_INVALID, `take request ${t.id}: ${field} must be a string of 1 to 200 characters; received ${describeValue(t[field])}.`);
  }
  if (t.amount != null && (!Number.isSafeInteger(t.amount) || (t.amount as number) < 1)) {
    throw new TransferRefusal(ErrorCode.INVALID_AMOUNT, `take request ${t.id}: amount must be null (the whole balance) or a whole number of base units from 1 to 9007199254740991; received ${describeValue(t.amount)}.`);
  }
  return { id: t.id.toLowerCase(), uname: t.uname as string, experience: t.experience as string, currencyKey: t.currencyKey as string, amount: (t.amount as number | null | undefined) ?? null };
}

const COLUMNS = `t.id, t.mp_take_request_id, t.casino_id, t.user_id, t.experience_id, u.uname, t.currency_key, t.amount, t.reserved_amount, t.status, t.mp_status, t.debug`;

export async function loadTake(client: Queryable, id: string): Promise<TakeRow | undefined> {
  const { rows } = await client.query<TakeRow>(`select ${COLUMNS} from hub.take_request t join hub.user u on u.id = t.user_id where t.id = $1`, [id]);
  return rows[0];
}

/**
 * Receive a take request once per casino id, inside the caller's transaction:
 * reserve the amount from the balance through the ledger (PROCESSING), or
 * reject it when the balance cannot cover it (REJECTED, nothing taken); either
 * way queue the worker's item that tells the casino. The balance is locked
 * first (the lock order of core migration 0030), then the row inserted: its
 * unique key makes a concurrent delivery of the same request wait and then
 * find it, so two deliveries reserve once.
 */
export async function recordTakeRequest(client: pg.ClientBase, casinoId: string, take: TakeRequest, actor: string, giveUpMs: number): Promise<{ row: TakeRow; created: boolean }> {
  const { rows: currencies } = await client.query("select 1 from hub.currency where casino_id = $1 and key = $2", [casinoId, take.currencyKey]);
  if (!currencies[0]) throw new TransferRefusal(ErrorCode.TAKE_REQUEST_INVALID, `take request ${take.id}: casino ${casinoId} has no currency ${describeValue(take.currencyKey)}.`);
  const { user, experience } = await ensureUserAndExperience(client, { casinoId, uname: take.uname, experienceName: take.experience });
  await dbLockPlayerBalances(client, [{ userId: user.id, experienceId: experience.id, currencyKey: take.currencyKey }]);
  const inserted = await client.query<{ id: string }>(
    `insert into hub.take_request (mp_take_request_id, casino_id, user_id, experience_id, currency_key, amount)
     values ($1, $2, $3, $4, $5, $6) on conflict (mp_take_request_id) do nothing returning id`,
    [take.id, casinoId, user.id, experience.id, take.currencyKey, take.amount],
  );
  if (!inserted.rows[0]) {
    const { rows } = await client.query<TakeRow>(`select ${COLUMNS} from hub.take_request t join hub.user u on u.id = t.user_id where t.mp_take_request_id = $1`, [take.id]);
    const existing = rows[0]!;
    const differences = [
      existing.casino_id !== casinoId ? `casino ${casinoId} ≠ ${existing.casino_id}` : "",
      existing.amount !== take.amount ? `amount ${take.amount} ≠ ${existing.amount}` : "",
      existing.user_id !== user.id ? `player ${describeValue(take.uname)} ≠ ${describeValue(existing.uname)}` : "",
      existing.experience_id !== experience.id ? `experience ${experience.id} ≠ ${existing.experience_id}` : "",
      existing.currency_key !== take.currencyKey ? `currency ${describeValue(take.currencyKey)} ≠ ${describeValue(existing.currency_key)}` : "",
    ].filter(Boolean);
    if (differences.length > 0) {
      throw new TransferRefusal(ErrorCode.TAKE_REQUEST_MISMATCH, `take request ${take.id} was reported again with different details (${differences.join(", ")}); the first report stands and nothing more was reserved.`);
    }
    return { row: existing, created: false };
  }
  const id = inserted.rows[0].id;
  const { rows: balances } = await client.query<{ amount: number }>(
    "select amount from hub.balance where user_id = $1 and experience_id = $2 and currency_key = $3 for update",
    [user.id, experience.id, take.currencyKey],
  );
  const balance = balances[0]?.amount ?? 0;
  const wanted = take.amount ?? balance;
  if (wanted < 1 || balance < wanted) {
    const why = `${ErrorCode.TAKE_REQUEST_INSUFFICIENT_FUNDS}: the balance is ${balance} ${take.currencyKey}, the take request ${take.amount === null ? "asks for the whole balance" : `asks for ${take.amount}`}; nothing was taken.`;
    await client.query(
      "update hub.take_request set status = 'REJECTED', insufficient_balance_error = true, debug = $2, status_changed_at = now(), updated_at = now() where id = $1",
      [id, why],
    );
  } else {
    await client.query("select hub_hidden.debit_balance($1, $2, $3, $4, $5, $6, $7)", [user.id, casinoId, experience.id, take.currencyKey, wanted, actor, `take request ${take.id}`]);
    await client.query(
      "update hub.take_request set status = 'PROCESSING', reserved_amount = $2, transfer_needs_completion = true, status_changed_at = now(), updated_at = now() where id = $1",
      [id, wanted],
    );
    await client.query("insert into hub_hidden.take_request_window (take_request_id, give_up_at) values ($1, now() + $2 * interval '1 millisecond')", [id, giveUpMs]);
  }
  await client.query("insert into hub.transfer_job (kind, casino_id, take_request_id) values ('TAKE', $1, $2)", [casinoId, id]);
  return { row: (await loadTake(client, id))!, created: true };
}

/** The casino applied the transfer: the reserve is now the casino's; the item is done. */
export async function completeTake(client: pg.ClientBase, take: TakeRow, mpTransferId: string): Promise<void> {
  await client.query(
    `update hub.take_request set status = 'COMPLETED', mp_status = 'TRANSFERRED', mp_transfer_id = $2, mp_transfer_status = 'COMPLETED',
            transfer_needs_completion = false, debug = null, status_changed_at = now(), updated_at = now()
      where id = $1 and status = 'PROCESSING'`,
    [take.id, mpTransferId],
  );
  await client.query("update hub.transfer_job set status = 'DONE', last_error = null, updated_at = now() where take_request_id = $1", [take.id]);
}

/**
 * The casino did not and will not apply the transfer: the reserve goes back to
 * the balance through the ledger, once (only a PROCESSING row is refunded).
 * FAILED: the casino refused it, and knows. REJECTED: the hub gave up, and the
 * item stays due to tell the casino.
 */
export async function refundTake(
  client: pg.ClientBase,
  take: TakeRow,
  actor: string,
  outcome: { status: "FAILED" | "REJECTED"; why: string; mpStatus?: string; mpTransferStatus: "CANCELED" | "EXPIRED" },
): Promise<boolean> {
  const mpStatus = outcome.mpStatus && MP_STATUSES.has(outcome.mpStatus) && outcome.mpStatus !== "TRANSFERRED" ? outcome.mpStatus : null;
  // The balance before the take request's row: the hub's lock order (core migration 0030).
  await dbLockPlayerBalances(client, [{ userId: take.user_id, experienceId: take.experience_id, currencyKey: take.currency_key }]);
  const { rowCount } = await client.query(
    `update hub.take_request set status = $2, refunded_at = now(), transfer_needs_completion = false, debug = $3,
            mp_status = coalesce($4::hub.mp_take_request_status, mp_status), mp_transfer_status = $5, status_changed_at = now(), updated_at = now()
      where id = $1 and status = 'PROCESSING'`,
    [take.id, outcome.status, outcome.why.slice(0, 1000), mpStatus, outcome.mpTransferStatus],
  );
  if (rowCount !== 1) return false;
  await client.query("select hub_hidden.credit_balance($1, $2, $3, $4, $5, $6, $7)", [
    take.user_id, take.casino_id, take.experience_id, take.currency_key, take.reserved_amount, actor, `refund of take request ${take.mp_take_request_id}: ${outcome.why}`.slice(0, 1000),
  ]);
  if (outcome.status === "FAILED") {
    await client.query("update hub.transfer_job set status = 'DONE', last_error = $2, updated_at = now() where take_request_id = $1", [take.id, `refunded: ${outcome.why}`.slice(0, 1000)]);
  } else {
    await client.query("update hub.transfer_job set attempts = 0, last_error = null, next_attempt_at = now(), updated_at = now() where take_request_id = $1", [take.id]);
  }
  return true;
}

/** The casino's answer about the transfer: completed, or refused and refunded. */
export async function recordTakeOutcome(client: pg.ClientBase, take: TakeRow, outcome: TakeOutcome, actor: string, log: Logger): Promise<void> {
  if (outcome.status === "COMPLETED") {
    await completeTake(client, take, outcome.mpTransferId);
    log.info({ takeRequestId: take.mp_take_request_id, mpTransferId: outcome.mpTransferId }, "take request transferred");
    return;
  }
  await refundTake(client, take, actor, {
    status: "FAILED",
    why: `the casino refused the transfer: ${outcome.reason}`,
    ...(outcome.takeRequestStatus ? { mpStatus: outcome.takeRequestStatus } : {}),
    mpTransferStatus: outcome.reason === "expired" ? "EXPIRED" : "CANCELED",
  });
  log.info({ takeRequestId: take.mp_take_request_id, reason: outcome.reason }, "take request refused by the casino; the reserve was refunded");
}

/** The casino has recorded the hub's rejection: nothing more to tell it. */
export async function rejectedAtCasino(client: pg.ClientBase, take: TakeRow): Promise<void> {
  await client.query("update hub.take_request set mp_status = 'CONTROLLER_REJECTED', updated_at = now() where id = $1 and status = 'REJECTED' and mp_status = 'PENDING'", [take.id]);
  await client.query("update hub.transfer_job set status = 'DONE', last_error = null, updated_at = now() where take_request_id = $1", [take.id]);
}

/** Where the take request stands in time: given up (no more sends), and until when a send made may still be applied (with the allowed clock difference). */
export async function takeWindow(pool: pg.Pool, takeId: string, clockSkewMs: number): Promise<{ givenUp: boolean; sendOpenUntil: Date | null; giveUpAt: Date }> {
  const { rows } = await pool.query<{ given_up: boolean; open_until: Date | null; give_up_at: Date }>(
    `select give_up_at <= now() as given_up, give_up_at,
            case when send_expires_at + $2 * interval '1 millisecond' > now() then send_expires_at + $2 * interval '1 millisecond' end as open_until
       from hub_hidden.take_request_window where take_request_id = $1`,
    [takeId, clockSkewMs],
  );
  const row = rows[0];
  if (!row) throw new Error(`take request ${takeId} has no window: it was never reserved`);
  return { givenUp: row.given_up, sendOpenUntil: row.open_until, giveUpAt: row.give_up_at };
}

/**
 * Before a send: until when it may be applied, committed on its own connection
 * so that it outlives a crash of the sender, and the attempt counted on the
 * row. false: no send may go out (the hub has given up, or the request is no
 * longer PROCESSING). The window's row lock orders this with a give-up.
 */
export async function beforeTakeSend(pool: pg.Pool, takeId: string, expiresAt: Date): Promise<boolean> {
  const { rowCount } = await pool.query(
    `with w as (
       update hub_hidden.take_request_window set send_expires_at = greatest(send_expires_at, $2)
        where take_request_id = $1 and give_up_at > now() returning take_request_id)
     update hub.take_request t set completion_attempt_count = coalesce(t.completion_attempt_count, 0) + 1, transfer_completion_attempted_at = now(), updated_at = now()
       from w where t.id = w.take_request_id and t.status = 'PROCESSING'`,
    [takeId, expiresAt],
  );
  return rowCount === 1;
}

/**
 * Whether no send of the take request can still be applied, checked again
 * while holding the window's row: a send that recorded its window after the
 * worker looked is seen here, and one not yet recorded can no longer be.
 */
export async function sendWindowClosed(client: pg.ClientBase, takeId: string, clockSkewMs: number): Promise<boolean> {
  const { rows } = await client.query<{ closed: boolean }>(
    `select give_up_at <= now() and (send_expires_at is null or send_expires_at + $2 * interval '1 millisecond' <= now()) as closed
       from hub_hidden.take_request_window where take_request_id = $1 for update`,
    [takeId, clockSkewMs],
  );
  return rows[0]?.closed === true;
}
