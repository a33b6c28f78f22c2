/**
 * How much of a run the database's backends spend waiting for row locks:
 * pg_stat_activity sampled every 50 ms while autocannon runs. A bet waits on
 * a row lock (wait_event_type 'Lock': the transaction holding the player's
 * chain, balance or the house bankroll) or works; the mean number waiting
 * next to the mean number active says how far a shared row serialises them.
 */
import type pg from "pg";

export interface LockStats {
  samples: number;
  /** Mean client backends of the database running a statement (waiting ones included). */
  meanActive: number;
  /** Mean client backends waiting for a lock. */
  meanWaiting: number;
  maxWaiting: number;
}

export function sampleLocks(pool: pg.Pool, everyMs = 50): { stop(): Promise<LockStats> } {
  let samples = 0;
  let active = 0;
  let waiting = 0;
  let maxWaiting = 0;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const { rows } = await pool.query<{ active: number; waiting: number }>(
        `select count(*) filter (where state = 'active')::int as active,
                count(*) filter (where wait_event_type = 'Lock')::int as waiting
           from pg_stat_activity
          where backend_type = 'client backend' and datname = current_database() and pid <> pg_backend_pid()`,
      );
      samples++;
      active += rows[0]!.active;
      waiting += rows[0]!.waiting;
      maxWaiting = Math.max(maxWaiting, rows[0]!.waiting);
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return { samples, meanActive: samples ? active / samples : Number.NaN, meanWaiting: samples ? waiting / samples : Number.NaN, maxWaiting };
    },
  };
}
