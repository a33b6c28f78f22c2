import type pg from "pg";
import { dbLockPlayerBalances } from "../db/locks.js";

/**
 * The withdrawal's rows in the database: a request (the player's debit), the
 * withdrawal (its status), and the outbox item the worker sends it from. Every
 * function here runs inside its caller's transaction.
 */

export interface WithdrawalForSend {
  withdrawal_request_id: string;
  casino_id: string;
  user_id: string;
  experience_id: string;
  uname: string;
  currency_key: string;
  amount: number;
  status: string;
}

/** Debit the balance and queue the transfer, in one transaction: both or neither. */
/** Where a casino's transfers go, or null when it has none (the http connector needs a URL). */
export async function transferEndpoint(client: Pick<pg.ClientBase, "query">, casinoId: string): Promise<{ found: boolean; reachable: boolean }> {
  const { rows } = await client.query<{ connector: string | null; url: string | null }>(
    "select s.connector, coalesce(s.url, c.base_url) as url from hub.casino c left join hub.casino_transfer_config s on s.casino_id = c.id where c.id = $1",
    [casinoId],
  );
  const row = rows[0];
  return { found: row !== undefined, reachable: row !== undefined && ((row.connector ?? "http") !== "http" || row.url !== null) };
}

export async function requestWithdrawal(
  client: pg.ClientBase,
  input: { userId: string; casinoId: string; experienceId: string; currencyKey: string; amount: number; actor: string },
): Promise<string> {
  const { rows } = await client.query<{ id: string }>(
    `insert into hub.withdrawal_request (casino_id, user_id, experience_id, currency_key, amount)
     values ($1, $2, $3, $4, $5) returning id`,
    [input.casinoId, input.userId, input.experienceId, input.currencyKey, input.amount],
  );
  const requestId = rows[0]!.id;
  await client.query("select hub_hidden.debit_balance($1, $2, $3, $4, $5, $6, $7)", [
    input.userId, input.casinoId, input.experienceId, input.currencyKey, input.amount, input.actor, `withdrawal ${requestId}`,
  ]);
  await client.query(
    `insert into hub.withdrawal (withdrawal_request_id, casino_id, user_id, experience_id, currency_key, amount)
     values ($1, $2, $3, $4, $5, $6)`,
    [requestId, input.casinoId, input.userId, input.experienceId, input.currencyKey, input.amount],
  );
  await client.query("insert into hub.transfer_job (kind, casino_id, withdrawal_request_id) values ('WITHDRAWAL', $1, $2)", [input.casinoId, requestId]);
  return requestId;
}

export async function loadWithdrawal(client: Pick<pg.ClientBase, "query">, requestId: string): Promise<WithdrawalForSend | undefined> {
  const { rows } = await client.query<WithdrawalForSend>(
    `select w.withdrawal_request_id, w.casino_id, w.user_id, w.experience_id, u.uname, w.currency_key, w.amount, w.status
       from hub.withdrawal w join hub.user u on u.id = w.user_id
      where w.withdrawal_request_id = $1`,
    [requestId],
  );
  return rows[0];
}

/** The casino confirmed: record its transfer id; the item is done. */
export async function completeWithdrawal(client: pg.ClientBase, requestId: string, mpTransferId: string): Promise<void> {
  await client.query("update hub.withdrawal set status = 'COMPLETED', status_at = now(), mp_transfer_id = $2 where withdrawal_request_id = $1 and status = 'PENDING'", [requestId, mpTransferId]);
  await client.query("update hub.withdrawal_request set mp_transfer_id = $2 where id = $1", [requestId, mpTransferId]);
  await client.query("update hub.transfer_job set status = 'DONE', last_error = null, updated_at = now() where withdrawal_request_id = $1", [requestId]);
}

/**
 * The casino did not and will not apply the transfer: the amount goes back to
 * the balance through the ledger, and the withdrawal is CANCELED.
 */
export async function refundWithdrawal(client: pg.ClientBase, w: WithdrawalForSend, actor: string, why: string): Promise<void> {
  // The balance before the withdrawal's row: the hub's lock order (core migration 0030).
  await dbLockPlayerBalances(client, [{ userId: w.user_id, experienceId: w.experience_id, currencyKey: w.currency_key }]);
  const { rowCount } = await client.query("update hub.withdrawal set status = 'CANCELED', status_at = now() where withdrawal_request_id = $1 and status = 'PENDING'", [w.withdrawal_request_id]);
  if (rowCount !== 1) return;
  await client.query("select hub_hidden.credit_balance($1, $2, $3, $4, $5, $6, $7)", [
    w.user_id, w.casino_id, w.experience_id, w.currency_key, w.amount, actor, `refund of withdrawal ${w.withdrawal_request_id}: ${why}`.slice(0, 1000),
  ]);
  await client.query("update hub.transfer_job set status = 'DONE', last_error = $2, updated_at = now() where withdrawal_request_id = $1", [w.withdrawal_request_id, `refunded: ${why}`.slice(0, 1000)]);
}

/**
 * Until when a send about to go out may be applied by the casino. Written on
 * its own connection and committed before the send, so it survives the
 * sender's transaction being lost with the process: a refund checks it.
 */
export async function extendSendWindow(pool: pg.Pool, requestId: string, expiresAt: Date): Promise<void> {
  await pool.query(
    `insert into hub_hidden.withdrawal_send_window (withdrawal_request_id, expires_at) values ($1, $2)
     on conflict (withdrawal_request_id) do update set expires_at = greatest(hub_hidden.withdrawal_send_window.expires_at, excluded.expires_at)`,
    [requestId, expiresAt],
  );
}
