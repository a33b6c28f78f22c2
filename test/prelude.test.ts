import "./helpers/env.js";
import t from "tap";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../dist/src");
/** The process tuning `node dist/server.js` applies to its own process. */
const PROCESS_SETUP = path.join(DIST, "bin/process-setup.js");
/** The library's prelude, which every entry point of the library imports first. */
const PRELUDE = path.join(DIST, "prelude.js");

// V8 only decides to pretenure after collecting a young generation grown to its largest size, and how that generation
// grows and shrinks depends on allocation rates V8 measures in time: on a busy machine about one probe in sixty never
// pretenured (seen here under two busy loops, and once in CI). With the young generation fixed at its default largest
// size (16 MiB semi-spaces), as it is in a server under load, none of 150 did under the same load.
const YOUNG_GENERATION = ["--min-semi-space-size=16", "--max-semi-space-size=16"];
// Objects from one allocation site first survive (kept), then the same site makes garbage. Where V8 pretenures the
// site, that garbage is allocated in the old generation; where it does not, the old generation barely moves. The
// growth is summed chunk by chunk: a full collection that frees the pretenured garbage half-way (its timing depends
// on the concurrent marker, so on how busy the machine is) must not hide what was allocated before it.
const PROBE = `
import v8 from "node:v8";
const old = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === "old_space").space_used_size;
function make(i) { return { a: i, b: [i] }; }
const keep = [];
for (let i = 0; i < 1e6; i++) keep.push(make(i));
let last = old(), grew = 0, sink;
for (let chunk = 0; chunk < 60; chunk++) {
  for (let i = 0; i < 5e4; i++) sink = make(i);
  const now = old();
  if (now > last) grew += now - last;
  last = now;
}
console.log(JSON.stringify({ grewMiB: grew / 1048576, kept: keep.length, sink: typeof sink }));
`;

function probe(opts: { importing?: string; flags?: string[] }): number {
  const script = `${opts.importing ? `import ${JSON.stringify(opts.importing)};\n` : ""}${PROBE}`;
  const out = execFileSync(process.execPath, [...YOUNG_GENERATION, ...(opts.flags ?? []), "--input-type=module", "-e", script], { encoding: "utf8" });
  return (JSON.parse(out.trim().split("\n").pop()!) as { grewMiB: number }).grewMiB;
}

t.test("the server's process setup turns V8's allocation-site pretenuring off, unless the command line chose; the library's prelude does not", async (t) => {
  const plain = probe({});
  t.ok(plain > 100, `without it, V8 pretenures the site: the old generation grew by ${plain.toFixed(0)} MiB of garbage`);
  const tuned = probe({ importing: PROCESS_SETUP });
  t.ok(tuned < 50, `with the server's process setup it does not: ${tuned.toFixed(0)} MiB`);
  const chosen = probe({ importing: PROCESS_SETUP, flags: ["--allocation-site-pretenuring"] });
  t.ok(chosen > 100, `a process started with --allocation-site-pretenuring keeps it: ${chosen.toFixed(0)} MiB`);
  const library = probe({ importing: PRELUDE });
  t.ok(library > 100, `importing the library's prelude leaves V8's default: ${library.toFixed(0)} MiB`);
});

/** What a process looks like after importing `script`'s modules, from a child with a clean environment. */
function processAfter(imports: string[], opts: { preload?: string } = {}) {
  const env = { ...process.env };
  delete env.GRAPHILE_ENV;
  const script = `
const before = { abort: AbortController.prototype.abort, withResolvers: Promise.withResolvers };
${imports.map((file) => `await import(${JSON.stringify(file)});`).join("\n")}
const reason = (() => { const c = new AbortController(); c.abort(); return c.signal.reason; })();
console.log(JSON.stringify({
  abortPatched: AbortController.prototype.abort !== before.abort,
  abortReason: { name: reason.name, stackless: !/\\n\\s+at /.test(reason.stack ?? "") },
  withResolvers: Promise.withResolvers === before.withResolvers ? "untouched" : typeof Promise.withResolvers,
  navigator: "navigator" in globalThis,
  graphileEnv: process.env.GRAPHILE_ENV ?? null,
}));`;
  const out = execFileSync(process.execPath, [...(opts.preload ? ["--import", opts.preload] : []), "--input-type=module", "-e", script], { encoding: "utf8", env, cwd: DIST });
  return JSON.parse(out.trim().split("\n").pop()!) as {
    abortPatched: boolean;
    abortReason: { name: string; stackless: boolean };
    withResolvers: string;
    navigator: boolean;
    graphileEnv: string | null;
  };
}

const LIBRARY = [path.join(DIST, "index.js"), path.join(DIST, "exports/db.js"), path.join(DIST, "exports/logger.js"), path.join(DIST, "exports/graphile.js")];

t.test("the decision: only a runtime older than Node 22 that lacks Promise.withResolvers gets it", async (t) => {
  const { legacyPatchesNeeded } = await import("../dist/src/legacy-runtime.js");
  t.same(legacyPatchesNeeded({ nodeVersion: "22.0.0", promise: {} }), [], "Node 22: nothing, whatever it looks like");
  t.same(legacyPatchesNeeded({ nodeVersion: "24.11.1", promise: Promise }), [], "Node 24: nothing");
  t.same(legacyPatchesNeeded({ nodeVersion: "20.10.0", promise: {} }), ["Promise.withResolvers"], "Node 20 without it: the polyfill");
  t.same(legacyPatchesNeeded({ nodeVersion: "20.19.0", promise: { withResolvers() {} } }), [], "Node 20 that has it: nothing");
});

t.test("importing the library changes nothing process-wide on a runtime that needs no patch", async (t) => {
  // This runtime with Promise.withResolvers already there, as on Node ≥ 22: the prelude has nothing to add.
  const preload = `data:text/javascript,${encodeURIComponent(
    "if (!Promise.withResolvers) Object.defineProperty(Promise, 'withResolvers', { configurable: true, writable: true, value() { let resolve, reject; const promise = new Promise((a, b) => { resolve = a; reject = b; }); return { promise, resolve, reject }; } });",
  )}`;
  const { abortReason, ...after } = processAfter(LIBRARY, { preload });
  t.same(after, {
    abortPatched: false,
    withResolvers: "untouched",
    navigator: "navigator" in globalThis,
    graphileEnv: null,
  }, "AbortController, Promise, navigator and GRAPHILE_ENV as they were");
  t.equal(abortReason.name, "AbortError", "abort() gives the runtime's own reason");
});

t.test("on this runtime, importing the library adds only what it lacks", async (t) => {
  const native = typeof (Promise as { withResolvers?: unknown }).withResolvers === "function";
  const after = processAfter(LIBRARY);
  t.equal(after.withResolvers, native ? "untouched" : "function", native ? "Promise.withResolvers is the runtime's own" : "Promise.withResolvers is added (Node 20)");
  t.equal(after.abortPatched, false, "AbortController.prototype.abort untouched");
  t.equal(after.graphileEnv, null, "GRAPHILE_ENV not written");
  t.equal(after.navigator, "navigator" in globalThis, "no navigator global added or left");
});

t.test("the server's process setup applies the tuning: a stackless abort reason and GRAPHILE_ENV from NODE_ENV", async (t) => {
  const after = processAfter([PROCESS_SETUP, ...LIBRARY]);
  t.equal(after.abortPatched, true, "AbortController.prototype.abort is the hub's");
  t.same(after.abortReason, { name: "AbortError", stackless: true }, "abort() without a reason still gives an AbortError, built without a stack");
  t.equal(after.graphileEnv, process.env.NODE_ENV === "production" ? "production" : "development", `GRAPHILE_ENV derived from NODE_ENV=${process.env.NODE_ENV}`);
});
