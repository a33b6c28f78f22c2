/**
 * Credential lookups, batched only when the database is slow to answer: up to
 * `concurrency` queries run at once, each for whatever was waiting when it
 * started. A lone lookup goes at once, alone; while queries are in flight the
 * next ones wait and leave together, so a crowd of distinct credentials (a
 * hundred players arriving at once on a loaded machine) costs a few queries
 * instead of one each, and none waits out the pool's connection timeout behind
 * the others. A lookup still waiting after maxWaitMs (the queries in flight
 * are stuck, say behind a lock) is refused with tooLong(), as the pool refuses
 * a connection it could not give in time.
 */

/** Looks up many keys of one kind in one query: found values by the key's hex. */
export type LookupMany<T> = (kind: string, keys: Buffer[]) => Promise<Map<string, T>>;

interface Waiter<T> {
  kind: string;
  key: Buffer;
  resolve: (value: T | undefined) => void;
  reject: (error: unknown) => void;
  timer?: NodeJS.Timeout;
}

export interface LookupBatchOptions {
  /** Queries in flight at once (keep it below the pool's size: the pool serves other work too). */
  concurrency: number;
  /** The most keys one query looks up. */
  maxBatch: number;
  /** How long a lookup may wait for a query to carry it. */
  maxWaitMs: number;
  /** The error of a lookup that waited maxWaitMs. */
  tooLong: () => Error;
}

export function createLookupBatches<T>(lookupMany: LookupMany<T>, options: LookupBatchOptions): (kind: string, key: Buffer) => Promise<T | undefined> {
  let waiting: Waiter<T>[] = [];
  let running = 0;

  function start(): void {
    while (running < options.concurrency && waiting.length > 0) {
      // The kind of the longest waiter, and every waiter of that kind up to maxBatch, oldest first.
      const kind = waiting[0]!.kind;
      const batch: Waiter<T>[] = [];
      const rest: Waiter<T>[] = [];
      for (const w of waiting) (w.kind === kind && batch.length < options.maxBatch ? batch : rest).push(w);
      waiting = rest;
      for (const w of batch) clearTimeout(w.timer);
      running++;
      lookupMany(kind, batch.map((w) => w.key))
        .then(
          (found) => {
            for (const w of batch) w.resolve(found.get(w.key.toString("hex")));
          },
          (error: unknown) => {
            for (const w of batch) w.reject(error);
          },
        )
        .finally(() => {
          running--;
          start();
        });
    }
  }

  return (kind, key) =>
    new Promise<T | undefined>((resolve, reject) => {
      const waiter: Waiter<T> = { kind, key, resolve, reject };
      waiting.push(waiter);
      start();
      if (!waiting.includes(waiter)) return;
      waiter.timer = setTimeout(() => {
        waiting = waiting.filter((w) => w !== waiter);
        reject(options.tooLong());
      }, options.maxWaitMs);
    });
}
