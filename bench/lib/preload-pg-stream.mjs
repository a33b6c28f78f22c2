// What src/bin/process-setup.ts did until 2026-11-29, for bench/start-ab.ts: on a runtime without a
// `navigator` global (Node 20), load node-postgres's lib/stream.js with one that says Node, so that its
// Cloudflare probe does not construct a Response (which loads Node's fetch implementation, undici).
import { createRequire } from "node:module";

if (!("navigator" in globalThis)) {
  Object.defineProperty(globalThis, "navigator", { configurable: true, value: { userAgent: `Node.js/${process.versions.node}` } });
  try {
    createRequire(new URL("../../package.json", import.meta.url))("pg/lib/stream.js");
  } finally {
    delete globalThis.navigator;
  }
}
