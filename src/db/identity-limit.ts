import type pg from "pg";
import { GraphQLError } from "graphql";
import { identityKey, type Identity } from "../auth/identity.js";
import { ErrorCode } from "../errors.js";
import { boundProperty } from "../forwarding-proxy.js";

/**
 * A per-identity bound on the superuser pool.
 *
 * Money transactions of one player queue on that player's balance lock: when
 * one player sends a thousand bets at once, each of them takes a pooled
 * connection and then waits in Postgres for the lock, so the whole pool is
 * held by requests that can only run one after the other, and every other
 * request (another player's bet, /health) waits behind them. So each player
 * (by user id) and each API key may hold at most `connections` connections of
 * the superuser pool at once; up to `queue` more of its requests wait in memory
 * (not holding a connection) for one of those to be released, at most as long
 * as the pool's own connection timeout; anything beyond is refused at once with
 * TOO_MANY_REQUESTS. Anonymous requests are not bounded here: they carry no
 * identity to count, and have no balance of their own to queue on.
 *
 * The bound applies to the pool object a request receives (the GraphQL
 * context's `superuserPool`, an Express request's `req.superuserPool`): its
 * `connect()` (so `withPgPoolTransaction`) and `query()`. Everything else
 * forwards to the real pool. The same numbers bound the identity's requests in
 * progress (`admit`, used by the HTTP layer): at most connections + queue.
 */
export interface IdentityLimits {
  /** Most superuser-pool connections one identity holds at once. */
  connections: number;
  /** Most of its further requests waiting for one of them; beyond, TOO_MANY_REQUESTS. */
  queue: number;
  /** Longest wait in that queue, ms. */
  waitMs: number;
}

export const DEFAULT_IDENTITY_LIMITS = { connections: 3, queue: 256 } as const;

// Each bounded view's real pool, for work done on behalf of many identities at once.
const unbounded = new WeakMap<object, pg.Pool>();

/**
 * The real pool behind a per-identity view (the pool itself otherwise). For a
 * statement serving several players at once, such as the settlement of a
 * group of bets, which must not queue behind one of them's bound.
 */
export function unboundedPool(pool: pg.Pool): pg.Pool {
  return unbounded.get(pool) ?? pool;
}

interface Waiter {
  grant(): void;
  timer: NodeJS.Timeout;
}

interface Slot {
  active: number;
  waiting: Waiter[];
}

type Release = () => void;

/** A GraphQL error for GraphQL; in an Express route, an HTTP 429 with this message. */
export class TooManyRequestsError extends GraphQLError {
  readonly status = 429;
  readonly expose = true;
  constructor(message: string) {
    super(message, { extensions: { code: ErrorCode.TOO_MANY_REQUESTS } });
  }
}

export interface IdentityPoolLimiter {
  /** The pool this identity's request may use: the real pool for anonymous requests. */
  poolFor(identity: Identity | undefined): pg.Pool;
  /**
   * Admit one HTTP request of this identity: at most connections + queue of
   * its requests are in progress at once (whatever they do), so a burst is
   * refused on arrival, before any work is done for it, instead of being
   * parsed and planned only to be refused at the pool. Returns the function
   * to call when the request is over, or the refusal message.
   */
  admit(identity: Identity | undefined): (() => void) | string;
}

const describe = (key: string): string => (key.startsWith("user:") ? "this player" : "this API key");

/**
 * The connection slots of each identity key: `acquire` resolves with the
 * function that gives the slot back once one of `connections` is free, waits
 * in a queue of `queue` for at most `waitMs`, or refuses with TOO_MANY_REQUESTS.
 */
function identitySlots(limits: IdentityLimits): { acquire(key: string): Promise<Release> } {
  const slots = new Map<string, Slot>();

  const refusal = (key: string) =>
    `Too many requests at once from ${describe(key)}: at most ${limits.connections} database transactions run at a time and ${limits.queue} more wait; this request was refused. Retry once earlier requests have been answered.`;

  function releaser(key: string, slot: Slot): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = slot.waiting.shift();
      if (next) {
        // The connection slot passes to the next waiter: active stays the same.
        clearTimeout(next.timer);
        next.grant();
        return;
      }
      slot.active--;
      if (slot.active === 0 && slots.get(key) === slot) slots.delete(key);
    };
  }

  function acquire(key: string): Promise<Release> {
    let slot = slots.get(key);
    if (!slot) {
      slot = { active: 0, waiting: [] };
      slots.set(key, slot);
    }
    if (slot.active < limits.connections) {
      slot.active++;
      return Promise.resolve(releaser(key, slot));
    }
    if (slot.waiting.length >= limits.queue) {
      return Promise.reject(new TooManyRequestsError(refusal(key)));
    }
    const owner = slot;
    return new Promise<Release>((resolve, reject) => {
      const waiter: Waiter = {
        grant: () => resolve(releaser(key, owner)),
        timer: setTimeout(() => {
          const index = owner.waiting.indexOf(waiter);
          if (index >= 0) owner.waiting.splice(index, 1);
          reject(
            new TooManyRequestsError(
              `Too many requests at once from ${describe(key)}: this request waited ${limits.waitMs} ms for one of its ${limits.connections} database transactions in progress to finish; retry shortly.`,
            ),
          );
        }, limits.waitMs),
      };
      waiter.timer.unref();
      owner.waiting.push(waiter);
    });
  }

  return { acquire };
}

/** The pool one identity sees: `connect()` and `query()` take one of its slots first; the rest forwards to the real pool. */
function limitedPool(pool: pg.Pool, key: string, acquire: (key: string) => Promise<Release>): pg.Pool {
  async function connect(): Promise<pg.PoolClient> {
    const release = await acquire(key);
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (error) {
      release();
      throw error;
    }
    // pg-pool gives the client a fresh `release` at every checkout, so this
    // wrapper lasts exactly as long as this checkout.
    const original = client.release;
    client.release = (err?: Error | boolean) => {
      release();
      return original.call(client, err);
    };
    return client;
  }

  async function query(args: unknown[]): Promise<unknown> {
    const release = await acquire(key);
    try {
      return await (pool.query as (...a: unknown[]) => Promise<unknown>).apply(pool, args);
    } finally {
      release();
    }
  }

  const view = new Proxy(pool, {
    get(target, prop) {
      if (prop === "connect") {
        return (callback?: (err: Error | undefined, client?: pg.PoolClient, done?: pg.PoolClient["release"]) => void) => {
          const pending = connect();
          if (typeof callback !== "function") return pending;
          pending.then(
            (client) => callback(undefined, client, client.release),
            (error: Error) => callback(error),
          );
          return undefined;
        };
      }
      if (prop === "query") {
        return (...args: unknown[]) => {
          const callback = typeof args[args.length - 1] === "function" ? (args.pop() as (err: Error | undefined, result?: unknown) => void) : undefined;
          // A Submittable (e.g. a cursor) is handed back synchronously by pg: not bounded.
          if (args[0] && typeof (args[0] as { submit?: unknown }).submit === "function") {
            return (target.query as (...a: unknown[]) => unknown).apply(target, callback ? [...args, callback] : args);
          }
          const pending = query(args);
          if (!callback) return pending;
          pending.then(
            (result) => callback(undefined, result),
            (error: Error) => callback(error),
          );
          return undefined;
        };
      }
      return boundProperty(target, prop);
    },
  });
  unbounded.set(view, pool);
  return view;
}

/** Counts each identity's requests in progress: see IdentityPoolLimiter.admit. */
function requestAdmission(limits: IdentityLimits): (key: string) => (() => void) | string {
  const requests = new Map<string, number>();
  const maxRequests = limits.connections + limits.queue;
  return (key) => {
    const n = requests.get(key) ?? 0;
    if (n >= maxRequests) {
      return `Too many requests at once from ${describe(key)}: at most ${maxRequests} of its requests are handled at a time (${limits.connections} database transactions running and ${limits.queue} more waiting); this request was refused. Retry once earlier requests have been answered.`;
    }
    requests.set(key, n + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const left = (requests.get(key) ?? 1) - 1;
      if (left > 0) requests.set(key, left);
      else requests.delete(key);
    };
  };
}

export function createIdentityPoolLimiter(pool: pg.Pool, limits: IdentityLimits): IdentityPoolLimiter {
  const { acquire } = identitySlots(limits);
  const admitKey = requestAdmission(limits);
  const noop = () => undefined;
  return {
    poolFor(identity) {
      const key = identityKey(identity);
      return key === undefined ? pool : limitedPool(pool, key, acquire);
    },
    admit(identity) {
      const key = identityKey(identity);
      return key === undefined ? noop : admitKey(key);
    },
  };
}
