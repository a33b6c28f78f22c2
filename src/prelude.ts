/**
 * Imported first by every entry point, before grafast or grafserv load.
 *
 * 1. grafast and grafserv call Promise.withResolvers (ES2024), which Node 20
 *    lacks; without it every database-backed field fails with a masked error.
 *    We install the standard semantics only where the runtime has none.
 * 2. grafast reads GRAPHILE_ENV once, at import: derive it from NODE_ENV so
 *    production runs the fast planner and development the checked one.
 * 3. grafast aborts a fresh AbortController after every request. abort()
 *    without a reason builds a DOMException and captures its stack, a sizeable
 *    share of a `{__typename}` request (bench/README.md). We give the same reason (an
 *    AbortError DOMException, as the spec says) built without a stack trace.
 *    An explicit reason is passed through untouched.
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

const nativeAbort = AbortController.prototype.abort;
if (!(nativeAbort as { hubPatched?: boolean }).hubPatched) {
  const abort = function abort(this: AbortController, reason?: unknown): void {
    if (reason === undefined) {
      const limit = Error.stackTraceLimit;
      Error.stackTraceLimit = 0;
      try {
        reason = new DOMException("This operation was aborted", "AbortError");
      } finally {
        Error.stackTraceLimit = limit;
      }
    }
    nativeAbort.call(this, reason);
  };
  Object.defineProperty(abort, "hubPatched", { value: true });
  AbortController.prototype.abort = abort;
}

if (!process.env.GRAPHILE_ENV) {
  process.env.GRAPHILE_ENV = process.env.NODE_ENV === "production" ? "production" : "development";
}

export {};
