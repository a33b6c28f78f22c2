import "./helpers/env.js";
import t from "tap";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const PRELUDE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../dist/src/prelude.js");

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

function probe(opts: { prelude: boolean; flags?: string[] }): number {
  const script = `${opts.prelude ? `import ${JSON.stringify(PRELUDE)};\n` : ""}${PROBE}`;
  const out = execFileSync(process.execPath, [...YOUNG_GENERATION, ...(opts.flags ?? []), "--input-type=module", "-e", script], { encoding: "utf8" });
  return (JSON.parse(out.trim().split("\n").pop()!) as { grewMiB: number }).grewMiB;
}

t.test("the prelude turns V8's allocation-site pretenuring off, unless the command line chose", async (t) => {
  const plain = probe({ prelude: false });
  t.ok(plain > 100, `without the prelude, V8 pretenures the site: the old generation grew by ${plain.toFixed(0)} MiB of garbage`);
  const withPrelude = probe({ prelude: true });
  t.ok(withPrelude < 50, `with the prelude it does not: ${withPrelude.toFixed(0)} MiB`);
  const chosen = probe({ prelude: true, flags: ["--allocation-site-pretenuring"] });
  t.ok(chosen > 100, `a process started with --allocation-site-pretenuring keeps it: ${chosen.toFixed(0)} MiB`);
});

t.test("the prelude keeps node-postgres from loading Node's fetch implementation, and leaves no navigator behind", async (t) => {
  const check = (prelude: boolean) =>
    JSON.parse(
      execFileSync(
        process.execPath,
        [
          "--input-type=module",
          "-e",
          `${prelude ? `import ${JSON.stringify(PRELUDE)};\n` : ""}import pg from "pg";
const pool = new pg.Pool();
console.log(JSON.stringify({ undici: process.moduleLoadList.some((m) => m.includes("undici")), navigator: typeof globalThis.navigator, pool: typeof pool.connect }));`,
        ],
        { encoding: "utf8", cwd: path.dirname(PRELUDE) },
      ).trim(),
    ) as { undici: boolean; navigator: string; pool: string };
  t.same(check(false), { undici: true, navigator: "undefined", pool: "function" }, "without it, loading pg loads undici (its Cloudflare probe)");
  t.same(check(true), { undici: false, navigator: "undefined", pool: "function" }, "with it, pg loads without undici, and no navigator global is left");
});
