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

/**
 * One outcome bet to settle: hub_hidden.outcome_settlement (core migration
 * 0031-typed-settlement) in TypeScript, built by tryOutcomeBet
 * (src/fair/outcome-bet.ts) and sent as one JSON object by settlementRow.
 */
export interface OutcomeSettlement {
  userId: string;
  casinoId: string;
  experienceId: string;
  /** The currency of the player's balance and of the house bankroll the bet settles against. */
  currencyKey: string;
  /** The bet's id, or null for a new one. */
  betId: string | null;
  /** Whole base units: the balance pays the wager and receives the payout. */
  wager: number;
  payout: number;
  /** The bet's largest payout, which the bankroll's free cover must hold. */
  maxPayout: number;
  /** The house's expected gain (the bankroll's statistic). */
  expectedValue: number;
  /** The ledger rows' tags. */
  actor: string;
  reason: string;
  /** The chain and the hash the outcome was drawn from: still its next one, or the bet is "chain-moved". */
  hashChainId: string;
  iteration: number;
  /** That hash, revealed with the bet, and the client's seed. */
  digest: Uint8Array;
  clientSeed: string;
  kind: string;
  /** The drawn outcome's profit and index. */
  profit: number;
  outcomeIdx: number;
  /** Every outcome, stored with the bet; empty arrays store none. */
  weights: number[];
  profits: number[];
  /** The client's metadata: a JSON value (checked by betMetadataJson), or null. */
  metadata: unknown;
  /** The client's idempotency key, the fingerprint of the rest of its input, and the answer the key stores (the bet's id and balance added). */
  idempotency: { scope: string; key: string; fingerprint: string; answer: { outcomeIdx: number; net: number } } | null;
}

export interface SettleGroups {
  /** Settle one bet, grouped with others of the same casino and currency. */
  settle(pool: pg.Pool, groupKey: string, bet: OutcomeSettlement): Promise<SettleRow>;
  /** Read one bet's state, in one query with the other bets' reads waiting at the time. */
  readState: BetStateReads;
}

/** The most bets one statement settles: bounds a statement's time and its locks. */
export const MAX_GROUP = 64;

/** The one serialisation of a bet: hub_hidden.outcome_settlement's fields by name, as outcome_settlement_of reads them. */
function settlementRow(bet: OutcomeSettlement): Record<string, unknown> {
  const key = bet.idempotency;
  return {
    user_id: bet.userId, casino_id: bet.casinoId, experience_id: bet.experienceId, currency_key: bet.currencyKey,
    bet_id: bet.betId, wager: bet.wager, payout: bet.payout, max_payout: bet.maxPayout, expected_value: bet.expectedValue,
    actor: bet.actor, reason: bet.reason,
    hash_chain_id: bet.hashChainId, iteration: bet.iteration, digest: `\\x${Buffer.from(bet.digest).toString("hex")}`, client_seed: bet.clientSeed,
    kind: bet.kind, profit: bet.profit, outcome_idx: bet.outcomeIdx, weights: bet.weights, profits: bet.profits, metadata: bet.metadata ?? null,
    idempotency_scope: key?.scope ?? null, idempotency_key: key?.key ?? null, fingerprint: key?.fingerprint ?? null, answer: key?.answer ?? null,
  };
}

const SINGLE = "select status, balance, bet_id from hub_hidden.settle_outcome_bet(hub_hidden.outcome_settlement_of($1::jsonb))";
const SINGLE_ONCE = "select status, balance, bet_id from hub_hidden.settle_outcome_bet_once(hub_hidden.outcome_settlement_of($1::jsonb))";
const GROUP = "select n, status, balance, bet_id from hub_hidden.settle_outcome_bets(hub_hidden.outcome_settlements_of($1::jsonb))";
const GROUP_ONCE = "select n, status, balance, bet_id from hub_hidden.settle_outcome_bets_once(hub_hidden.outcome_settlements_of($1::jsonb))";

/** A bet without a key settles through the functions that take none (one call less). */
const keyed = (bet: OutcomeSettlement) => bet.idempotency !== null;

/** One bet alone: the statement hubMakeOutcomeBet always used. */
export async function settleOne(db: Pick<pg.ClientBase, "query">, bet: OutcomeSettlement): Promise<SettleRow> {
  const once = keyed(bet);
  const { rows } = await db.query<SettleRow>({
    name: once ? "hub-outcome-bet-settle-once" : "hub-outcome-bet-settle",
    text: once ? SINGLE_ONCE : SINGLE,
    values: [JSON.stringify(settlementRow(bet))],
  });
  return rows[0]!;
}

interface Waiting {
  bet: OutcomeSettlement;
  resolve: (row: SettleRow) => void;
  reject: (error: unknown) => void;
}

async function settleGroup(pool: pg.Pool, group: Waiting[]): Promise<void> {
  if (group.length === 1) {
    const [w] = group;
    await settleOne(pool, w!.bet).then(w!.resolve, w!.reject);
    return;
  }
  let rows: (SettleRow & { n: number })[];
  try {
    const once = group.some((w) => keyed(w.bet));
    ({ rows } = await pool.query<SettleRow & { n: number }>({
      name: once ? "hub-outcome-bets-settle-once" : "hub-outcome-bets-settle",
      text: once ? GROUP_ONCE : GROUP,
      values: [JSON.stringify(group.map((w) => settlementRow(w.bet)))],
    }));
  } catch (error) {
    // A lost connection may have lost the answer of a commit: settling each bet again would bet twice
    // (without a key). Each bet gets the error, and a retry with its key finds what committed.
    if (isDatabaseUnavailable(error)) {
      for (const w of group) w.reject(error);
      return;
    }
    // Rolled back whole: each bet alone, so the failure reaches only its own bet.
    await Promise.all(group.map((w) => settleOne(pool, w.bet).then(w.resolve, w.reject)));
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
    settle(pool, groupKey, bet) {
      return new Promise<SettleRow>((resolve, reject) => {
        const queue = queues.get(groupKey);
        if (queue) {
          queue.push({ bet, resolve, reject });
          return;
        }
        const fresh: Waiting[] = [{ bet, resolve, reject }];
        queues.set(groupKey, fresh);
        void drain(pool, groupKey, fresh);
      });
    },
  };
}
