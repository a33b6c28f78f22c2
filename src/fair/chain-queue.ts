/**
 * Bets on one hash chain, one at a time within a server. Each bet draws the
 * chain's next hash without a lock and settles only if that hash is still
 * next: two bets of one chain in flight together would make one of them try
 * again (two more round trips each time). Queued here, they never collide
 * within a server; across servers the settle statement's check still decides.
 */
export interface ChainQueue {
  run<T>(hashChainId: string, fn: () => Promise<T>): Promise<T>;
}

export function createChainQueue(): ChainQueue {
  // Only chains with a bet in flight have an entry: bounded by the requests in progress.
  const tails = new Map<string, Promise<void>>();
  return {
    run(hashChainId, fn) {
      const previous = tails.get(hashChainId) ?? Promise.resolve();
      const result = previous.then(fn);
      const tail = result.then(
        () => undefined,
        () => undefined,
      );
      tails.set(hashChainId, tail);
      void tail.then(() => {
        if (tails.get(hashChainId) === tail) tails.delete(hashChainId);
      });
      return result;
    },
  };
}
