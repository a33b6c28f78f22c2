/**
 * hubMakeOutcomeBet's settlement: the bet as one named row
 * (OutcomeSettlement, hub_hidden.outcome_settlement) settled by
 * hub_hidden.settle_outcome_bet (core migration 0032-one-settlement), which
 * checks the chain's next hash, moves the money through hub_hidden.settle_bet
 * (dbSettleBet's function), reveals the hash and stores the bet.
 *
 * Bets share commits: the bets that arrive while a statement is in flight
 * wait for it and then settle together in one statement
 * (hub_hidden.settle_outcome_bets), one commit for all of them. Each bet is
 * checked, settled and ledgered exactly as alone; only the commit is shared.
 * A server keeps one statement in flight, and starts more (up to
 * MAX_IN_FLIGHT) only while a whole group is waiting: bets of every
 * bankroll share commits, the larger the load the larger the groups. A lone
 * bet goes alone at once (no waiting for company). When a group's statement
 * fails, nothing of it was written and each of its bets settles alone, so an
 * error belongs to the bet that caused it; but when the connection was lost,
 * the statement may have committed: each bet gets the error instead.
 *
 * A bet that settled against cover set aside (pending_bankroll) is folded
 * into its bankroll right after the statement commits, on the same client,
 * before the bet is answered.
 */
import type pg from "pg";
import { isDatabaseUnavailable } from "../db/error-class.js";
import { foldBankroll } from "../money/fold.js";
import { createBetStateReads, type BetStateReads } from "./bet-state.js";

/** What hub_hidden.settle_outcome_bet answers for one bet. */
export interface SettleRow {
  status: string;
  balance: number | null;
  bet_id: string | null;
  /** The bankroll to fold once the statement has committed (the bet settled against a slot), or null. */
  pending_bankroll: string | null;
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

const SINGLE = "select status, balance, bet_id, pending_bankroll from hub_hidden.settle_outcome_bet(hub_hidden.outcome_settlement_of($1::jsonb))";
const SINGLE_ONCE = "select status, balance, bet_id, pending_bankroll from hub_hidden.settle_outcome_bet_once(hub_hidden.outcome_settlement_of($1::jsonb))";
const GROUP = "select n, status, balance, bet_id, pending_bankroll from hub_hidden.settle_outcome_bets(hub_hidden.outcome_settlements_of($1::jsonb))";
const GROUP_ONCE = "select n, status, balance, bet_id, pending_bankroll from hub_hidden.settle_outcome_bets_once(hub_hidden.outcome_settlements_of($1::jsonb))";

/** A bet without a key settles through the functions that take none (one call less). */
const keyed = (bet: OutcomeSettlement) => bet.idempotency !== null;

/** One bet, in one statement on db (which commits it, unless db is in a transaction: then the caller folds after its commit). */
export async function settleOutcome(db: Pick<pg.ClientBase, "query">, bet: OutcomeSettlement): Promise<SettleRow> {
  const once = keyed(bet);
  const { rows } = await db.query<SettleRow>({
    name: once ? "hub-outcome-bet-settle-once" : "hub-outcome-bet-settle",
    text: once ? SINGLE_ONCE : SINGLE,
    values: [JSON.stringify(settlementRow(bet))],
  });
  return rows[0]!;
}

/** The rows of one statement of its own on a client of pool, after the folds its bets need. */
async function settleCommitted<R extends SettleRow>(pool: pg.Pool, run: (client: pg.PoolClient) => Promise<R[]>): Promise<R[]> {
  const client = await pool.connect();
  let failed: Error | undefined;
  try {
    const rows = await run(client);
    // Committed: the bets left pending are folded now, before their answers.
    for (const bankrollId of new Set(rows.map((r) => r.pending_bankroll))) if (bankrollId !== null) await foldBankroll(client, bankrollId);
    return rows;
  } catch (error) {
    failed = error instanceof Error ? error : new Error(String(error));
    throw error;
  } finally {
    client.release(failed);
  }
}

/** One bet alone, committed and folded. */
export const settleAlone = (pool: pg.Pool, bet: OutcomeSettlement): Promise<SettleRow> =>
  settleCommitted(pool, async (client) => [await settleOutcome(client, bet)]).then((rows) => rows[0]!);

interface Waiting {
  bet: OutcomeSettlement;
  resolve: (row: SettleRow) => void;
  reject: (error: unknown) => void;
}

async function settleGroup(pool: pg.Pool, group: Waiting[]): Promise<void> {
  if (group.length === 1) {
    const [w] = group;
    await settleAlone(pool, w!.bet).then(w!.resolve, w!.reject);
    return;
  }
  let rows: (SettleRow & { n: number })[];
  try {
    const once = group.some((w) => keyed(w.bet));
    rows = await settleCommitted(pool, async (client) =>
      (await client.query<SettleRow & { n: number }>({
        name: once ? "hub-outcome-bets-settle-once" : "hub-outcome-bets-settle",
        text: once ? GROUP_ONCE : GROUP,
        values: [JSON.stringify(group.map((w) => settlementRow(w.bet)))],
      })).rows);
  } catch (error) {
    // A lost connection may have lost the answer of a commit: settling each bet again would bet twice
    // (without a key). Each bet gets the error, and a retry with its key finds what committed.
    if (isDatabaseUnavailable(error)) {
      for (const w of group) w.reject(error);
      return;
    }
    // Rolled back whole: each bet alone, so the failure reaches only its own bet.
    await Promise.all(group.map((w) => settleAlone(pool, w.bet).then(w.resolve, w.reject)));
    return;
  }
  for (const [i, w] of group.entries()) {
    const row = rows.find((r) => r.n === i);
    if (row) w.resolve({ status: row.status, balance: row.balance, bet_id: row.bet_id, pending_bankroll: row.pending_bankroll });
    else w.reject(new Error(`settle_outcome_bets answered no row for bet ${i} of ${group.length}`));
  }
}

/** The most bets one statement settles: bounds a statement's time and its locks. */
export const MAX_GROUP = 64;
/** The most statements a server has in flight: a second starts only when a whole group is waiting. */
export const MAX_IN_FLIGHT = 4;

export interface SettleGroups {
  /** Settle one bet, sharing a statement with the bets that arrive meanwhile. */
  settle(pool: pg.Pool, bet: OutcomeSettlement): Promise<SettleRow>;
  /** Read one bet's state, in one query with the other bets' reads waiting at the time. */
  readState: BetStateReads;
}

/** Per server (like its chain queue): two servers in one process share nothing. */
export function createSettleGroups(maxGroup = MAX_GROUP): SettleGroups {
  const queue: (Waiting & { pool: pg.Pool })[] = [];
  let inFlight = 0;
  function pump(): void {
    while (queue.length > 0 && (inFlight === 0 || (queue.length >= maxGroup && inFlight < MAX_IN_FLIGHT))) {
      const group = queue.splice(0, maxGroup);
      inFlight++;
      void settleGroup(group[0]!.pool, group)
        .catch((error: unknown) => {
          for (const w of group) w.reject(error);
        })
        .finally(() => {
          inFlight--;
          pump();
        });
    }
  }
  return {
    readState: createBetStateReads(),
    settle: (pool, bet) =>
      new Promise<SettleRow>((resolve, reject) => {
        queue.push({ bet, resolve, reject, pool });
        pump();
      }),
  };
}
