/**
 * What the library itself must add to a runtime older than the ones it
 * supports (Node 22 and 24) for the Graphile packages to work on it. Node 20
 * is kept working as legacy through this and nothing more: grafast and
 * grafserv call Promise.withResolvers (ES2024), which Node 20 lacks, and
 * without it every database-backed field fails with a masked error.
 *
 * Pure, so the decision can be tested for any runtime: `nodeVersion` as in
 * process.versions.node, `promise` the runtime's Promise constructor.
 */
export type LegacyPatch = "Promise.withResolvers";

export function legacyPatchesNeeded(runtime: { nodeVersion: string; promise: object }): LegacyPatch[] {
  const major = Number.parseInt(runtime.nodeVersion, 10);
  // A supported runtime has all of it: importing the library changes nothing there.
  if (major >= 22) return [];
  return typeof (runtime.promise as { withResolvers?: unknown }).withResolvers === "function" ? [] : ["Promise.withResolvers"];
}

type Resolvers<T> = {
  promise: Promise<T>;
  resolve: (value: T | PromiseLike<T>) => void;
  reject: (reason?: unknown) => void;
};

/** The standard semantics, installed where the runtime has none. */
export function installPromiseWithResolvers(): void {
  Object.defineProperty(Promise, "withResolvers", {
    configurable: true,
    writable: true,
    enumerable: false,
    value: function withResolvers<T>(this: PromiseConstructor): Resolvers<T> {
      let resolve!: Resolvers<T>["resolve"];
      let reject!: Resolvers<T>["reject"];
      const promise = new this<T>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      return { promise, resolve, reject };
    },
  });
}
