/**
 * Process tuning, applied by `node dist/server.js` to its own process (the
 * process is the server's alone) and never by importing the library. Imported
 * first, before anything loads grafast or node-postgres. bench/README.md has
 * the measurements behind each step.
 *
 * 1. GRAPHILE_ENV from NODE_ENV (./graphile-env.ts).
 * 2. grafast aborts a fresh AbortController after every request. abort()
 *    without a reason builds a DOMException and captures its stack, a sizeable
 *    share of a `{__typename}` request. The same reason (an AbortError
 *    DOMException, as the spec says) is given, built without a stack trace.
 *    An explicit reason is passed through untouched.
 * 3. V8's allocation-site pretenuring is turned off. Once most objects from
 *    one allocation site have survived a collection (as everything does while
 *    the schema is built at start-up), V8 allocates that site's objects
 *    straight into the old generation. Short-lived request objects from such
 *    sites then leave garbage that only a full collection frees, and whatever
 *    they point to survives the young-generation collections and is copied
 *    into the old generation too: measured on `{__typename}`, about 5 KiB of
 *    every request promoted, 9–10 µs of collector pauses per request and a
 *    full collection every few thousand requests; without it 3 µs and none.
 *    V8 reads the flag at every collection, so setting it here works; a
 *    process started with `--allocation-site-pretenuring` (or `--no-…`) on its
 *    command line keeps its own choice (Node refuses the flag in NODE_OPTIONS).
 * 4. On a runtime without a `navigator` global (Node 20): node-postgres
 *    decides once, when it is loaded, whether it runs in a Cloudflare Worker,
 *    and without one it constructs a `Response`, which loads Node's whole
 *    fetch implementation (undici), about 17 ms of every start, for nothing
 *    the hub uses. That part of node-postgres is loaded here with a
 *    `navigator` that says Node, and the global is taken away again. Node ≥ 21
 *    has the global, and node-postgres reads it as Node.
 */
import "./graphile-env.js";
import { createRequire } from "node:module";
import { setFlagsFromString } from "node:v8";

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

export {};
