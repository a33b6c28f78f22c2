/**
 * Grouped commits for hubMakeOutcomeBet: every bet of a casino's currency
 * updates that currency's one house bankroll row, whose lock is held until
 * the bet commits, through its WAL flush. Settled one commit each, bets of
 * one currency queue behind each other's flushes. Here the bets of one
 * casino and currency that arrive while a settlement is in flight wait for
 * it and then settle together, in one statement (hub_hidden.settle_outcome_bets)
 * and so one commit. Each bet is checked, settled and ledgered exactly as
 * alone; only the commit is shared.
 *
 * One group at a time per casino and currency within a server: the next
 * group forms while the current one commits. A lone bet goes alone at once
 * (no waiting for company). When a group's statement fails, nothing of it
 * was written and each of its bets settles alone, so an error belongs to
 * the bet that caused it; but when the connection was lost, the statement
 * may have committed: each bet gets the error instead.
 *
 * The state each bet reads before it draws (src/fair/bet-state.ts) is read
 * in shared round trips the same way, whatever its casino and currency.
 */
import type pg from "pg";
import { createBetStateReads, type BetStateReads } from "./bet-state.js";
import { isDatabaseUnavailable } from "../db/error-class.js";

/** What hub_hidden.settle_outcome_bet answers for one bet. */
export interface SettleRow {
  status: string;
  balance: number | null;
  bet_id: string | null;
}

/** The arguments of hub_hidden.settle_outcome_bet_once, in its order (25 values: settle_outcome_bet's 21, the key's scope, key and fingerprint, the answer to store). */
export type SettleOutcomeArgs = unknown[];

export interface SettleGroups {
  /** Settle one bet, grouped with others of the same casino and currency. */
  settle(pool: pg.Pool, groupKey: string, args: SettleOutcomeArgs): Promise<SettleRow>;
  /** Read one bet's state, in one query with the other bets' reads waiting at the time. */
  readState: BetStateReads;
}

/** The most bets one statement settles: bounds a statement's time and its locks. */
export const MAX_GROUP = 64;

const SINGLE = "select status, balance, bet_id from hub_hidden.settle_outcome_bet($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)";
const SINGLE_ONCE =
  "select status, balance, bet_id from hub_hidden.settle_outcome_bet_once($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25)";
/** Where the key sits in a bet's arguments: a bet without one settles through the statements of before keys existed. */
const KEY = 22;
const keyed = (args: SettleOutcomeArgs) => args[KEY] != null;

/** One bet alone: the statement hubMakeOutcomeBet always used. */
export async function settleOne(db: Pick<pg.ClientBase, "query">, args: SettleOutcomeArgs): Promise<SettleRow> {
  if (!keyed(args)) return (await db.query<SettleRow>({ name: "hub-outcome-bet-settle", text: SINGLE, values: args.slice(0, 21) })).rows[0]!;
  const values = args.map((v, i) => (i === args.length - 1 ? JSON.stringify(v) : v));
  const { rows } = await db.query<SettleRow>({ name: "hub-outcome-bet-settle-once", text: SINGLE_ONCE, values });
  return rows[0]!;
}

/** A bet's arguments as the JSON element settle_outcome_bets reads (the digest as hex). */
function jsonArgs(args: SettleOutcomeArgs): unknown[] {
  return args.map((v) => (Buffer.isBuffer(v) ? v.toString("hex") : v));
}

interface Waiting {
  args: SettleOutcomeArgs;
  resolve: (row: SettleRow) => void;
  reject: (error: unknown) => void;
}

async function settleGroup(pool: pg.Pool, group: Waiting[]): Promise<void> {
  if (group.length === 1) {
    const [w] = group;
    await settleOne(pool, w!.args).then(w!.resolve, w!.reject);
    return;
  }
  let rows: (SettleRow & { n: number })[];
  try {
    const once = group.some((w) => keyed(w.args));
    ({ rows } = await pool.query<SettleRow & { n: number }>({
      name: once ? "hub-outcome-bets-settle-once" : "hub-outcome-bets-settle",
      text: `select n, status, balance, bet_id from hub_hidden.settle_outcome_bets${once ? "_once" : ""}($1::jsonb)`,
      values: [JSON.stringify(group.map((w) => jsonArgs(once ? w.args : w.args.slice(0, 21))))],
    }));
  } catch (error) {
    // A lost connection may have lost the answer of a commit: settling each bet again would bet twice
    // (without a key). Each bet gets the error, and a retry with its key finds what committed.
    if (isDatabaseUnavailable(error)) {
      for (const w of group) w.reject(error);
      return;
    }
    // Rolled back whole: each bet alone, so the failure reaches only its own bet.
    await Promise.all(group.map((w) => settleOne(pool, w.args).then(w.resolve, w.reject)));
    return;
  }
  for (const [i, w] of group.entries()) {
    const row = rows.find((r) => r.n === i);
    if (row) w.resolve({ status: row.status, balance: row.balance, bet_id: row.bet_id });
    else w.reject(new Error(`settle_outcome_bets answered no row for bet ${i} of ${group.length}`));
  }
}

/** Per server (like its chain queue): two servers in one process share nothing. */
export function createSettleGroups(maxGroup = MAX_GROUP): SettleGroups {
  // Only keys with bets waiting or in flight have an entry.
  const queues = new Map<string, Waiting[]>();
  async function drain(pool: pg.Pool, key: string, queue: Waiting[]): Promise<void> {
    try {
      while (queue.length) await settleGroup(pool, queue.splice(0, maxGroup));
    } catch (error) {
      for (const w of queue.splice(0)) w.reject(error);
    } finally {
      queues.delete(key);
    }
  }
  return {
    readState: createBetStateReads(),
    settle(pool, groupKey, args) {
      return new Promise<SettleRow>((resolve, reject) => {
        const queue = queues.get(groupKey);
        if (queue) {
          queue.push({ args, resolve, reject });
          return;
        }
        const fresh: Waiting[] = [{ args, resolve, reject }];
        queues.set(groupKey, fresh);
        void drain(pool, groupKey, fresh);
      });
    },
  };
}
