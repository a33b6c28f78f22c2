import type pg from "pg";
import { ensureUserAndExperience } from "../auth/credentials.js";
import { describeValue, ErrorCode } from "../errors.js";
import { dbLockPlayerBalances } from "../db/locks.js";
import type { IncomingTransfer } from "./connector.js";

/** A hub.deposit row as the worker and the mutation read it. */
export interface DepositRow {
  id: string;
  casino_id: string;
  mp_transfer_id: string;
  user_id: string;
  experience_id: string;
  currency_key: string;
  amount: number;
}

/** A transfer the hub refuses, with the client code it is answered with. */
export class TransferRefusal extends Error {
  constructor(readonly code: ErrorCode, message: string) {
    super(message);
    this.name = "TransferRefusal";
  }
}

const text = (v: unknown) => typeof v === "string" && v.length >= 1 && v.length <= 200;

/** The fields every incoming transfer must have, whichever way it arrives. */
export function checkIncoming(transfer: unknown): IncomingTransfer {
  const t = (transfer ?? {}) as Record<string, unknown>;
  for (const field of ["id", "uname", "experience", "currencyKey"] as const) {
    if (!text(t[field])) throw new TransferRefusal(ErrorCode.TRANSFER_INVALID, `an incoming transfer's ${field} must be a string of 1 to 200 characters; received ${describeValue(t[field])}.`);
  }
  if (!Number.isSafeInteger(t.amount) || (t.amount as number) < 1) {
    throw new TransferRefusal(ErrorCode.INVALID_AMOUNT, `incoming transfer ${describeValue(t.id)}: amount must be a whole number of base units from 1 to 9007199254740991; received ${describeValue(t.amount)}.`);
  }
  return { id: t.id as string, uname: t.uname as string, experience: t.experience as string, currencyKey: t.currencyKey as string, amount: t.amount as number };
}

/**
 * Credit an incoming transfer once per (casino, transfer id), inside the
 * caller's transaction. The deposit row is inserted first: its unique key makes
 * a concurrent report of the same transfer wait for this one and then find it,
 * so two reports (two instances polling, a push and a poll) credit once. The
 * balance is locked before that insert (the lock order of core migration
 * 0030: balances, then the rows recording a transfer). The insert's trigger
 * queues hub_put_alert, delivered when the transaction commits.
 */
export async function recordDeposit(
  client: pg.ClientBase,
  casinoId: string,
  transfer: IncomingTransfer,
  actor: string,
): Promise<{ deposit: DepositRow; created: boolean }> {
  const { rows: currencies } = await client.query("select 1 from hub.currency where casino_id = $1 and key = $2", [casinoId, transfer.currencyKey]);
  if (!currencies[0]) throw new TransferRefusal(ErrorCode.TRANSFER_INVALID, `incoming transfer ${describeValue(transfer.id)}: casino ${casinoId} has no currency ${describeValue(transfer.currencyKey)}.`);
  const { user, experience } = await ensureUserAndExperience(client, { casinoId, uname: transfer.uname, experienceName: transfer.experience });
  await dbLockPlayerBalances(client, [{ userId: user.id, experienceId: experience.id, currencyKey: transfer.currencyKey }]);
  const inserted = await client.query<DepositRow>(
    `insert into hub.deposit (casino_id, mp_transfer_id, user_id, experience_id, currency_key, amount)
     values ($1, $2, $3, $4, $5, $6)
     on conflict (casino_id, mp_transfer_id) do nothing
     returning id, casino_id, mp_transfer_id, user_id, experience_id, currency_key, amount`,
    [casinoId, transfer.id, user.id, experience.id, transfer.currencyKey, transfer.amount],
  );
  if (inserted.rows[0]) {
    await client.query("select hub_hidden.credit_balance($1, $2, $3, $4, $5, $6, $7)", [
      user.id, casinoId, experience.id, transfer.currencyKey, transfer.amount, actor, `deposit ${transfer.id}`,
    ]);
    return { deposit: inserted.rows[0], created: true };
  }
  const { rows } = await client.query<DepositRow>(
    "select id, casino_id, mp_transfer_id, user_id, experience_id, currency_key, amount from hub.deposit where casino_id = $1 and mp_transfer_id = $2",
    [casinoId, transfer.id],
  );
  const existing = rows[0]!;
  const differences = [
    existing.amount !== transfer.amount ? `amount ${existing.amount} ≠ ${transfer.amount}` : "",
    existing.user_id !== user.id ? `player ${user.id} (${describeValue(transfer.uname)}) ≠ ${existing.user_id}` : "",
    existing.experience_id !== experience.id ? `experience ${experience.id} ≠ ${existing.experience_id}` : "",
    existing.currency_key !== transfer.currencyKey ? `currency ${describeValue(transfer.currencyKey)} ≠ ${describeValue(existing.currency_key)}` : "",
  ].filter(Boolean);
  if (differences.length > 0) {
    throw new TransferRefusal(
      ErrorCode.TRANSFER_MISMATCH,
      `casino ${casinoId} reported transfer ${describeValue(transfer.id)} again with different details (${differences.join(", ")}); deposit ${existing.id} already recorded it and stands, nothing was credited.`,
    );
  }
  return { deposit: existing, created: false };
}
