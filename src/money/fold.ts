/**
 * Folding: moving the house sides of bets settled against a bankroll slot
 * (hub_hidden.bankroll_pending; core migration 0032's header) into
 * hub.bankroll and the house ledger. A bet that left its house side pending
 * (dbSettleBet in a game's transaction, or an outcome bet's statement) asks
 * for a fold right after its commit, before the game answers, so a bet's
 * answer comes after its house side is in the bankroll. The bets of one bankroll that commit
 * while a fold is in flight share the next one: one bankroll lock and one
 * commit for many bets.
 *
 * Everything here belongs to one server (startBankrollSweep): its queue per
 * bankroll, the retries of failed folds and the sweep. The server's superuser
 * pool marks each client it hands out with them, so dbSettleBet, which gets
 * only a game's client, finds its server's queue; two servers in one process
 * share nothing. A fold that fails is logged (warn, with the bankroll id) and
 * retried with backoff until it succeeds (logged too), the sweep behind it;
 * the game's answer does not wait for the retries. The sweep folds what no
 * answer waited for (a game that commits its transaction itself, a client of
 * a pool no server opened, a server that died between a bet's commit and its
 * fold) and releases slots idle for 2 s.
 */
import type pg from "pg";
import type { Logger } from "../logger.js";
import { sweepIdempotencyKeys } from "./idempotency.js";

type Queryable = Pick<pg.ClientBase, "query">;

interface Waiter {
  client: Queryable;
  resolve: () => void;
}

// Each fold is a statement of its own, committed without waiting for its flush (hub_hidden.fold_bankroll_alone).
const FOLD = "select hub_hidden.fold_bankroll_alone($1) as n";

/** The first retry's delay; each next one doubles, up to RETRY_MAX_MS. */
export const RETRY_FIRST_MS = 50;
export const RETRY_MAX_MS = 5000;

/** One server's folds after bets' commits. */
export interface BankrollFolds {
  /** Fold the bankroll's committed pending bets, sharing the fold with the other callers of the moment. Never rejects. */
  fold(client: Queryable, bankrollId: string): Promise<void>;
  /** Stop retrying (what is left pending, the next sweep folds) and wait for the retries in flight. */
  close(): Promise<void>;
}

/** Folds whose failures are logged on log and retried on pool. */
export function createBankrollFolds(pool: Pick<pg.Pool, "query">, log: Logger): BankrollFolds {
  // Only keys with folds waiting or in flight have an entry.
  const queues = new Map<string, Waiter[]>();
  // Bankrolls whose fold failed, until a retry succeeds: the next retry's timer.
  const retries = new Map<string, NodeJS.Timeout>();
  const inFlight = new Set<Promise<void>>();
  let closed = false;

  function retry(bankrollId: string, attempt: number): void {
    if (closed) {
      log.warn({ bankrollId }, "bankroll fold not retried: the server is stopping; the next start's sweep folds the bets left pending");
      return;
    }
    const delay = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** (attempt - 1));
    const timer = setTimeout(() => {
      const run = pool.query({ text: FOLD, values: [bankrollId] }).then(
        () => {
          retries.delete(bankrollId);
          log.info({ bankrollId, attempts: attempt + 1 }, "bankroll fold succeeded on retry: the bankroll now includes the bets it had pending");
        },
        (error: unknown) => {
          log.warn({ bankrollId, err: error, attempt: attempt + 1, retryInMs: Math.min(RETRY_MAX_MS, delay * 2) }, "bankroll fold failed again; retrying");
          retry(bankrollId, attempt + 1);
        },
      );
      inFlight.add(run);
      void run.finally(() => inFlight.delete(run));
    }, delay);
    timer.unref();
    retries.set(bankrollId, timer);
  }

  function failed(bankrollId: string, error: unknown): void {
    // One retry chain per bankroll: a fold folds every committed pending bet of it.
    if (retries.has(bankrollId)) return;
    log.warn({ bankrollId, err: error, retryInMs: RETRY_FIRST_MS }, "bankroll fold failed after a bet's commit; the bankroll includes the bet once a retry succeeds");
    retry(bankrollId, 1);
  }

  async function drain(bankrollId: string, queue: Waiter[]): Promise<void> {
    try {
      while (queue.length) {
        const batch = queue.splice(0);
        // The fold runs on a client its waiter still holds.
        await batch[0]!.client.query({ name: "hub-fold-bankroll", text: FOLD, values: [bankrollId] }).catch((error: unknown) => failed(bankrollId, error));
        for (const w of batch) w.resolve();
      }
    } finally {
      queues.delete(bankrollId);
    }
  }

  return {
    fold(client, bankrollId) {
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
    },
    async close() {
      closed = true;
      for (const timer of retries.values()) clearTimeout(timer);
      retries.clear();
      await Promise.all(inFlight);
    },
  };
}

const FOLDS = Symbol("hub.bankrollFolds");
type Marked = { [FOLDS]?: BankrollFolds };

/** Mark every client pool hands out with folds, so dbSettleBet on it uses them. Returns the undo. */
export function attachBankrollFolds(pool: pg.Pool, folds: BankrollFolds): () => void {
  const mark = (client: pg.PoolClient) => {
    (client as Marked)[FOLDS] = folds;
  };
  pool.on("acquire", mark);
  return () => pool.off("acquire", mark);
}

/**
 * Fold the bankroll's committed pending bets after a commit, on a client the
 * caller holds until this resolves: through the folds of the server whose
 * pool lent the client; on a client of another pool, alone, a failure left to
 * the sweep (of every server on the database), which logs and retries it.
 * Never rejects.
 */
export function foldBankroll(client: Queryable, bankrollId: string): Promise<void> {
  const folds = (client as Marked)[FOLDS];
  if (folds) return folds.fold(client, bankrollId);
  return client.query({ name: "hub-fold-bankroll", text: FOLD, values: [bankrollId] }).then(
    () => undefined,
    () => undefined,
  );
}

/** Every bankroll with pending bets or cover in a slot, folded (and its idle slots released) one transaction each; a failure is reported with its bankroll and the others still folded. */
export async function sweepBankrolls(pool: Pick<pg.Pool, "query">, onError: (error: unknown, bankrollId?: string) => void = () => undefined): Promise<number> {
  const { rows } = await pool.query<{ bankroll_id: string }>(
    `select bankroll_id from hub_hidden.bankroll_pending
      union select bankroll_id from hub_hidden.bankroll_slot where cover > 0 or room > 0`,
  );
  let folded = 0;
  for (const { bankroll_id } of rows) {
    try {
      const { rows: [row] } = await pool.query<{ n: number }>({ text: FOLD, values: [bankroll_id] });
      folded += row?.n ?? 0;
    } catch (error) {
      onError(error, bankroll_id);
    }
  }
  return folded;
}

export interface BankrollSweep {
  /** The first sweep (the server's start): what an earlier run left pending. */
  first: Promise<void>;
  /** This server's folds after bets' commits (attached to the pool). */
  folds: BankrollFolds;
  stop(): Promise<void>;
}

/**
 * A server's bankroll folds: the queue and retries after bets' commits, on
 * every client pool hands out, and a sweep now and then every intervalMs.
 * Failures are logged (warn) with the bankroll and retried.
 */
export function startBankrollSweep(pool: pg.Pool, log: Logger, intervalMs = 1000): BankrollSweep {
  const folds = createBankrollFolds(pool, log);
  const detach = attachBankrollFolds(pool, folds);
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  let keysSweptAt = 0;
  const onError = (error: unknown, bankrollId?: string) =>
    log.warn({ err: error, bankrollId }, `folding pending bets into the bankroll failed; retrying in ${intervalMs} ms`);
  const sweepKeys = () => {
    // Expired idempotency keys answer nothing already (a claim takes them over): deleting them is housekeeping, once a minute.
    if (Date.now() - keysSweptAt < 60_000) return undefined;
    keysSweptAt = Date.now();
    return sweepIdempotencyKeys(pool).then(() => undefined);
  };
  const sweep = () => {
    running = running.then(() => (stopped ? undefined : sweepBankrolls(pool, onError).then(sweepKeys).then(() => undefined, onError)));
    return running;
  };
  const first = sweep();
  const timer = setInterval(sweep, intervalMs);
  timer.unref();
  return {
    first,
    folds,
    async stop() {
      stopped = true;
      clearInterval(timer);
      detach();
      await Promise.all([running, folds.close()]);
    },
  };
}
