/**
 * Folding: moving the house sides of bets settled against a bankroll slot
 * (hub_hidden.bankroll_pending, core migration 0023) into hub.bankroll and
 * the house ledger. dbSettleBet asks for a fold right after the game's
 * transaction commits, before the game answers, so a bet's answer comes after
 * its house side is in the bankroll. The bets of one bankroll that commit
 * while a fold is in flight share the next one: one bankroll lock and one
 * commit for many bets. A sweep per server folds what no answer waited for (a
 * game that commits its transaction itself, a server that died between a
 * bet's commit and its fold) and releases slots idle for 2 s.
 */
import { sweepIdempotencyKeys } from "./idempotency.js";
import type pg from "pg";

type Queryable = Pick<pg.ClientBase, "query">;

interface Waiter {
  client: Queryable;
  resolve: () => void;
}

// Each fold is a statement of its own, committed without waiting for its flush (core migration 0024).
const FOLD = "select hub_hidden.fold_bankroll_alone($1) as n";

/** Per bankroll id (unique across databases: UUIDv7): only keys with folds waiting or in flight have an entry. */
const queues = new Map<string, Waiter[]>();

async function drain(bankrollId: string, queue: Waiter[]): Promise<void> {
  try {
    while (queue.length) {
      const batch = queue.splice(0);
      // The fold runs on a client its waiter still holds; a failure leaves the rows for the sweep.
      await batch[0]!.client.query({ name: "hub-fold-bankroll", text: FOLD, values: [bankrollId] }).catch(() => undefined);
      for (const w of batch) w.resolve();
    }
  } finally {
    queues.delete(bankrollId);
  }
}

/**
 * Fold the bankroll's committed pending bets, sharing the fold with the other
 * callers of the moment. Call after the commit, on a client the caller holds
 * until this resolves. Never rejects: what a fold leaves, the sweep folds.
 */
export function foldBankroll(client: Queryable, bankrollId: string): Promise<void> {
  return new Promise<void>((resolve) => {
    const queue = queues.get(bankrollId);
    if (queue) {
      queue.push({ client, resolve });
      return;
    }
    const fresh: Waiter[] = [{ client, resolve }];
    queues.set(bankrollId, fresh);
    void drain(bankrollId, fresh);
  });
}

/** Every bankroll with pending bets or cover in a slot, folded (and its idle slots released) one transaction each. */
export async function sweepBankrolls(pool: Pick<pg.Pool, "query">): Promise<number> {
  const { rows } = await pool.query<{ bankroll_id: string }>(
    `select bankroll_id from hub_hidden.bankroll_pending
      union select bankroll_id from hub_hidden.bankroll_slot where cover > 0 or room > 0`,
  );
  let folded = 0;
  for (const { bankroll_id } of rows) {
    const { rows: [row] } = await pool.query<{ n: number }>({ text: FOLD, values: [bankroll_id] });
    folded += row?.n ?? 0;
  }
  return folded;
}

export interface BankrollSweep {
  /** The first sweep (the server's start): what an earlier run left pending. */
  first: Promise<void>;
  stop(): Promise<void>;
}

/** Sweep now and then every intervalMs; failures are reported to onError and retried at the next tick. */
export function startBankrollSweep(pool: Pick<pg.Pool, "query">, onError: (error: unknown) => void, intervalMs = 1000): BankrollSweep {
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  let keysSweptAt = 0;
  const sweepKeys = () => {
    // Expired idempotency keys answer nothing already (a claim takes them over): deleting them is housekeeping, once a minute.
    if (Date.now() - keysSweptAt < 60_000) return undefined;
    keysSweptAt = Date.now();
    return sweepIdempotencyKeys(pool).then(() => undefined);
  };
  const sweep = () => {
    running = running.then(() => (stopped ? undefined : sweepBankrolls(pool).then(sweepKeys).then(() => undefined, onError)));
    return running;
  };
  const first = sweep();
  const timer = setInterval(sweep, intervalMs);
  timer.unref();
  return {
    first,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
