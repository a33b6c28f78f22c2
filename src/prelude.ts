/**
 * Imported first by every entry point, before grafast or grafserv load.
 *
 * 1. grafast and grafserv call Promise.withResolvers (ES2024), which Node 20
 *    lacks; without it every database-backed field fails with a masked error.
 *    We install the standard semantics only where the runtime has none.
 * 2. grafast reads GRAPHILE_ENV once, at import: derive it from NODE_ENV so
 *    production runs the fast planner and development the checked one.
 */
type Resolvers<T> = {
  promise: Promise<T>;
  resolve: (value: T | PromiseLike<T>) => void;
  reject: (reason?: unknown) => void;
};

const P = Promise as unknown as { withResolvers?: <T>() => Resolvers<T> };
if (typeof P.withResolvers !== "function") {
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

if (!process.env.GRAPHILE_ENV) {
  process.env.GRAPHILE_ENV = process.env.NODE_ENV === "production" ? "production" : "development";
}

export {};
