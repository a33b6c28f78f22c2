/**
 * Process tuning, applied by `node dist/server.js` to its own process (the
 * process is the server's alone) and never by importing the library. Imported
 * first, before anything loads grafast or node-postgres. bench/README.md has
 * the measurements behind each step.
 *
 * 1. GRAPHILE_ENV from NODE_ENV (./graphile-env.ts).
 * 2. AbortController's abort() given a stackless default reason
 *    (adapters/node-abort-controller.ts).
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
 */
import "./graphile-env.js";
import { setFlagsFromString } from "node:v8";
import { installStacklessAbort } from "../../adapters/node-abort-controller.js";

installStacklessAbort();

const pretenuringChosen = process.execArgv.some((arg) => /^--(no[-_])?allocation[-_]site[-_]pretenuring\b/.test(arg));
if (!pretenuringChosen) setFlagsFromString("--no-allocation-site-pretenuring");

export {};
