/**
 * What hubMakeOutcomeBet reads before it draws: the currency, the bankroll,
 * the chain's position and the balance, as last committed (no lock; the
 * settlement checks again under its locks). Read alone, one query a bet; read
 * through createBetStateReads, the bets that arrive while a read is in flight
 * wait for it and are then read together, one query for all of them, so a
 * crowd of bets costs a few round trips instead of one each. A lone bet's
 * read goes at once.
 */
import type pg from "pg";

export interface BetState {
  display_unit_name: string;
  display_unit_scale: number;
  bankroll: number | null;
  current_iteration: number | null;
  max_iteration: number | null;
  balance: number | null;
}

/** Whose bet, in which currency and on which chain. */
export interface BetStateKey {
  currency: string;
  casinoId: string;
  hashChainId: string;
  userId: string;
  experienceId: string;
}

type Queryable = Pick<pg.ClientBase, "query">;

/** Many bets' states in one query: each bet's by its position in `keys`, undefined where the casino has no such currency. */
async function readBetStates(db: Queryable, keys: BetStateKey[]): Promise<(BetState | undefined)[]> {
  const { rows } = await db.query<BetState & { n: number }>({
    name: "hub-outcome-bet-states",
    text: `select q.n::int as n, c.display_unit_name, c.display_unit_scale, r.amount as bankroll, hc.current_iteration, hc.max_iteration, b.amount as balance
             from unnest($1::text[], $2::uuid[], $3::uuid[], $4::uuid[], $5::uuid[]) with ordinality as q(currency_key, casino_id, hash_chain_id, user_id, experience_id, n)
             join hub.currency c on c.key = q.currency_key and c.casino_id = q.casino_id
             left join hub.bankroll r on r.casino_id = c.casino_id and r.currency_key = c.key
             left join hub.hash_chain hc on hc.id = q.hash_chain_id and hc.user_id = q.user_id and hc.experience_id = q.experience_id and hc.casino_id = c.casino_id and hc.active
             left join hub.balance b on b.user_id = q.user_id and b.experience_id = q.experience_id and b.currency_key = c.key and b.casino_id = c.casino_id`,
    values: [keys.map((k) => k.currency), keys.map((k) => k.casinoId), keys.map((k) => k.hashChainId), keys.map((k) => k.userId), keys.map((k) => k.experienceId)],
  });
  const states: (BetState | undefined)[] = keys.map(() => undefined);
  for (const { n, ...state } of rows) states[n - 1] = state;
  return states;
}

/** One bet's state (the same query, for one key); undefined when the casino has no such currency. */
export async function readBetState(db: Queryable, key: BetStateKey): Promise<BetState | undefined> {
  return (await readBetStates(db, [key]))[0];
}

/** The most bets one query reads. */
export const MAX_STATE_READS = 256;

interface Waiting {
  key: BetStateKey;
  resolve: (state: BetState | undefined) => void;
  reject: (error: unknown) => void;
}

export type BetStateReads = (pool: pg.Pool, key: BetStateKey) => Promise<BetState | undefined>;

/** Per server, like its settle groups: one query in flight, the bets arriving meanwhile read together next. */
export function createBetStateReads(maxBatch = MAX_STATE_READS): BetStateReads {
  let waiting: Waiting[] = [];
  let inFlight = false;

  async function drain(pool: pg.Pool): Promise<void> {
    inFlight = true;
    try {
      while (waiting.length > 0) {
        const batch = waiting.slice(0, maxBatch);
        waiting = waiting.slice(batch.length);
        try {
          const states = await readBetStates(pool, batch.map((w) => w.key));
          batch.forEach((w, i) => w.resolve(states[i]));
        } catch (error) {
          // One bad key (a chain id that is not a UUID) fails the whole query: read each alone,
          // so the error reaches only the bet that caused it.
          if (batch.length === 1) batch[0]!.reject(error);
          else await Promise.all(batch.map((w) => readBetState(pool, w.key).then(w.resolve, w.reject)));
        }
      }
    } finally {
      inFlight = false;
    }
  }

  return (pool, key) =>
    new Promise<BetState | undefined>((resolve, reject) => {
      waiting.push({ key, resolve, reject });
      if (!inFlight) void drain(pool);
    });
}
