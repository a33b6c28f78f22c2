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
 * 4. V8's allocation-site pretenuring is turned off. Once most objects from
 *    one allocation site have survived a collection (as everything does while
 *    the schema is built at start-up), V8 allocates that site's objects
 *    straight into the old generation. Short-lived request objects from such
 *    sites then leave garbage that only a full collection frees, and whatever
 *    they point to survives the young-generation collections and is copied
 *    into the old generation too: measured on `{__typename}`, about 5 KiB of
 *    every request promoted, 9–10 µs of collector pauses per request and a
 *    full collection every few thousand requests; without it 3 µs and none
 *    (bench/README.md). V8 reads the flag at every collection, so setting it
 *    here works; a process started with `--allocation-site-pretenuring` (or
 *    `--no-…`) on its command line keeps its own choice (Node refuses the
 *    flag in NODE_OPTIONS).
 * 5. node-postgres decides once, when it is loaded, whether it runs in a
 *    Cloudflare Worker: without a `navigator` global (Node 20 has none) it
 *    constructs a `Response`, and that loads Node's whole fetch
 *    implementation (undici), about 17 ms of every start, for nothing the hub
 *    uses. We load that part of node-postgres here with a `navigator` that
 *    says Node, then take the global away again, so nothing else sees it.
 */
import { createRequire } from "node:module";
import { setFlagsFromString } from "node:v8";

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

const pretenuringChosen = process.execArgv.some((arg) => /^--(no[-_])?allocation[-_]site[-_]pretenuring\b/.test(arg));
if (!pretenuringChosen) setFlagsFromString("--no-allocation-site-pretenuring");

if (!("navigator" in globalThis)) {
  Object.defineProperty(globalThis, "navigator", { configurable: true, value: { userAgent: `Node.js/${process.versions.node}` } });
  try {
    createRequire(import.meta.url)("pg/lib/stream.js");
  } catch {
    // Only a saving: should a later node-postgres move that file, it loads as it always did.
  } finally {
    delete (globalThis as { navigator?: unknown }).navigator;
  }
}

if (!process.env.GRAPHILE_ENV) {
  process.env.GRAPHILE_ENV = process.env.NODE_ENV === "production" ? "production" : "development";
}

export {};
