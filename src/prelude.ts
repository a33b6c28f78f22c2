/**
 * Imported first by every entry point of the library, before grafast or
 * grafserv load. On a supported runtime (Node ≥ 22) it changes nothing; on
 * Node 20 it adds only what the Graphile packages need to run there
 * (src/legacy-runtime.ts). Process tuning (V8 flags, GRAPHILE_ENV, the
 * cheaper abort reason) belongs to the process's owner: `node dist/server.js`
 * applies it (src/bin/process-setup.ts), an application of its own may too.
 */
import { installPromiseWithResolvers, legacyPatchesNeeded } from "./legacy-runtime.js";

for (const patch of legacyPatchesNeeded({ nodeVersion: process.versions.node, promise: Promise })) {
  if (patch === "Promise.withResolvers") installPromiseWithResolvers();
}

export {};
