import type pg from "pg";
import type { DbBalance, DbBankroll } from "./types.js";

/**
 * Row locks for moving money between a player's balance and the house bankroll
 * (the names and shapes existing controller plugins call, so they port unchanged).
 *
 * They MUST run inside a transaction (`withPgPoolTransaction(superuserPool, …)`):
 * `select … for update` holds its lock until the transaction ends, so outside
 * one (autocommit) the lock is released as soon as the statement returns and
 * two concurrent bets could both spend the same balance. No single statement
 * can see whether it runs inside a transaction block, so this function cannot
 * refuse that mistake: the caller must get it right.
 *
 * Every path that moves money takes its row locks in the hub's one order,
 * written at the top of core migration 0030: claims (the transfer worker's
 * item, idempotency keys), hash chains, player balances by id, the rows that
 * record a transfer, bankroll slots, the house bankroll. A path may skip a
 * step but never goes back, so two transactions never each hold a lock the
 * other waits for (no deadlock), however many players share one bankroll.
 * A transaction that locks several balances locks them all first, in id
 * order (dbLockPlayerBalances). A plugin that locks more rows should take the
 * balance and bankroll locks here after its own claims and chain, and
 * nothing of the earlier steps after them.
 *
 * The bankroll of a casino's currency is one row that every bet of every
 * player updates, so the longer a bet holds it, the fewer bets per second the
 * whole casino makes. hubMakeOutcomeBet and the tower's start therefore never
 * lock it up front: they read it unlocked for the risk check, lock the chain
 * and the balance, and touch the bankroll only in their last write. The
 * bankroll is still the last lock taken.
 */

/** A pg client, pool client or anything with pg's `query`. */
type PgClient = Pick<pg.ClientBase, "query">;

export interface LockPlayerBalanceInput {
  userId: string;
  experienceId: string;
  currencyKey: string;
  /** When given, only a balance in this casino is locked (currency keys are per casino). */
  casinoId?: string;
}

export interface LockHouseBankrollInput {
  casinoId: string;
  currencyKey: string;
}

export interface LockPlayerBalanceAndHouseBankrollInput {
  userId: string;
  casinoId: string;
  experienceId: string;
  currencyKey: string;
}

export type LockPlayerBalanceAndHouseBankrollResult =
  | { found: false }
  | { found: true; dbPlayerBalance: DbBalance; dbHouseBankroll: DbBankroll };

const BALANCE_COLUMNS = "id, user_id, casino_id, experience_id, currency_key, amount";
const BANKROLL_COLUMNS = "id, casino_id, currency_key, amount, bets, wagered, expected_value";

/**
 * Lock the player's balance in one currency (unique per user, experience and
 * currency) and return it; undefined when the player has none.
 */
export async function dbLockPlayerBalance(pgClient: PgClient, input: LockPlayerBalanceInput): Promise<DbBalance | undefined> {
  const { rows } = await pgClient.query<DbBalance>(
    `select ${BALANCE_COLUMNS} from hub.balance
      where user_id = $1 and experience_id = $2 and currency_key = $3 and ($4::uuid is null or casino_id = $4::uuid)
      for update`,
    [input.userId, input.experienceId, input.currencyKey, input.casinoId ?? null],
  );
  return rows[0];
}

/**
 * Lock the casino's house bankroll in one currency and return it; undefined
 * when the casino has none. When the player's balance is needed too, use
 * dbLockPlayerBalanceAndHouseBankroll, which keeps the lock order.
 */
export async function dbLockHouseBankroll(pgClient: PgClient, input: LockHouseBankrollInput): Promise<DbBankroll | undefined> {
  const { rows } = await pgClient.query<DbBankroll>(
    `select ${BANKROLL_COLUMNS} from hub.bankroll
      where casino_id = $1 and currency_key = $2
      for update`,
    [input.casinoId, input.currencyKey],
  );
  return rows[0];
}

/**
 * Lock the player's balance, then the house bankroll, in one currency. Both
 * locks are held until the transaction ends; `found: false` when either row is
 * missing (a balance already locked stays locked until the transaction ends).
 *
 * The balance must belong to casinoId: a balance of the same user and
 * experience in another casino's currency of the same name is not this one.
 */
export async function dbLockPlayerBalanceAndHouseBankroll(
  pgClient: PgClient,
  input: LockPlayerBalanceAndHouseBankrollInput,
): Promise<LockPlayerBalanceAndHouseBankrollResult> {
  // Two statements, not one join: within a single statement Postgres locks rows
  // in whatever order its plan visits them, and the order is what prevents deadlocks.
  const dbPlayerBalance = await dbLockPlayerBalance(pgClient, input);
  if (!dbPlayerBalance || dbPlayerBalance.casino_id !== input.casinoId) return { found: false };
  const dbHouseBankroll = await dbLockHouseBankroll(pgClient, input);
  if (!dbHouseBankroll) return { found: false };
  return { found: true, dbPlayerBalance, dbHouseBankroll };
}

export interface PlayerBalanceKey {
  userId: string;
  experienceId: string;
  currencyKey: string;
}

/**
 * Lock the existing balances among `balances` in the hub's order (ascending
 * id), in one statement (hub_hidden.lock_balances, core migration 0030). A
 * transaction that moves several balances calls this before its first other
 * lock of a balance, slot or bankroll; a balance not created yet locks nothing.
 */
export async function dbLockPlayerBalances(pgClient: PgClient, balances: readonly PlayerBalanceKey[]): Promise<void> {
  if (balances.length === 0) return;
  await pgClient.query({
    name: "hub-lock-balances",
    text: "select hub_hidden.lock_balances($1::jsonb)",
    values: [JSON.stringify(balances.map((b) => [b.userId, b.experienceId, b.currencyKey]))],
  });
}

/** dbLockPlayerBalances for what a casino reports: players by uname, experiences by name. */
export async function dbLockCasinoBalances(pgClient: PgClient, casinoId: string, balances: readonly { uname: string; experience: string; currencyKey: string }[]): Promise<void> {
  if (balances.length === 0) return;
  await pgClient.query({
    name: "hub-lock-casino-balances",
    text: "select hub_hidden.lock_casino_balances($1, $2::jsonb)",
    values: [casinoId, JSON.stringify(balances.map((b) => [b.uname, b.experience, b.currencyKey]))],
  });
}
