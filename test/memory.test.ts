import "./helpers/env.js";
import v8 from "node:v8";
import vm from "node:vm";
import t, { type Test } from "tap";
import { startTestServer, type TestServer } from "@hubpkg/hub/test";

// What a client can leave pinned in the server's memory once its requests are
// answered. The server runs in this process, so the test reads its heap
// directly, after full collections.

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;

const MiB = 1024 * 1024;
/** The /graphql body limit (docs/guarantees-and-limits.md). */
const BODY_LIMIT = MiB;
/**
 * The bound of docs/guarantees-and-limits.md: valid documents cached by query text take at most
 * 16 MiB (estimated), and nothing else outlives its request. The margin
 * covers what the estimate does not see (grafast's operation plans of the
 * cached documents) and allocator noise.
 */
const CACHE_BOUND = 16 * MiB;
const HEAP_BOUND = CACHE_BOUND + 16 * MiB;

/**
 * The heap after full collections: two for the baseline and the settled
 * figure (what the first leaves to finalizers is gone after the second); one
 * for the samples of a flood, which can only read higher, so their bound
 * check is no weaker (each full collection marks the whole heap).
 */
function heapUsed(collections = 2): number {
  for (let i = 0; i < collections; i++) gc();
  return process.memoryUsage().heapUsed;
}
const mib = (bytes: number) => `${(bytes / MiB).toFixed(1)} MiB`;

/** `head` + `unit` repeated + `tail`, as long as fits a body of just under the limit. */
function fill(head: string, unit: string, tail: string, limit = BODY_LIMIT - 64): string {
  const fixed = JSON.stringify({ query: head + tail }).length;
  const per = JSON.stringify(unit).length - 2;
  return head + unit.repeat(Math.floor((limit - fixed) / per)) + tail;
}

interface Kind {
  name: string;
  make(i: number): string;
  check(status: number, body: { data?: unknown; errors?: { message: string; extensions?: { code?: string } }[] }): string | undefined;
}

const refused = (code: string, message: RegExp) => (status: number, body: { errors?: { message: string; extensions?: { code?: string } }[] }) =>
  status === 400 && body.errors?.[0]?.extensions?.code === code && message.test(body.errors[0].message) ? undefined : `expected 400 ${code}, got ${status} ${JSON.stringify(body).slice(0, 300)}`;
const answered = (status: number, body: { data?: unknown }) =>
  status === 200 && JSON.stringify(body) === '{"data":{"__typename":"Query"}}' ? undefined : `expected the data, got ${status} ${JSON.stringify(body).slice(0, 300)}`;

// Every document is distinct (its number is in it), so no cache can answer
// one from another.
const COMMENT = "# a comment line of some length\n";
const invalid: Kind[] = [
  {
    // The repro: tens of thousands of anonymous operations.
    name: "many anonymous operations (over the token limit)",
    make: (i) => fill("", "{ __typename } ", `#${i}`),
    check: refused("QUERY_TOO_LARGE", /more than 20000 tokens/),
  },
  {
    // As many as the token limit lets through, padded with comments.
    name: "6000 anonymous operations and comments",
    make: (i) => fill(`${"{ __typename } ".repeat(6000)}#${i}\n`, COMMENT, ""),
    check: refused("GRAPHQL_VALIDATION_FAILED", /anonymous operation must be the only defined operation/),
  },
  {
    name: "too many fields, and comments",
    make: (i) => fill(`{ ${"__typename ".repeat(1001)} } #${i}\n`, COMMENT, ""),
    check: refused("QUERY_TOO_LARGE", /more than 1000 fields/),
  },
  {
    name: "an unknown field with a huge argument",
    make: (i) => fill(`{ nope${i}(a: "`, "x", `") }`),
    check: refused("GRAPHQL_VALIDATION_FAILED", /Cannot query field "nope\d+"/),
  },
  {
    name: "a syntax error after a huge comment",
    make: (i) => fill(`{ __typename #${i}\n`, COMMENT, ""),
    check: refused("GRAPHQL_PARSE_FAILED", /Syntax Error/),
  },
];
const largeValid: Kind[] = [
  {
    name: "a huge string literal in a skipped field",
    make: (i) => fill(`{ __typename s: allHubCasinos(condition: { name: "${i}`, "x", `" }) @skip(if: true) { totalCount } }`),
    check: answered,
  },
  {
    name: "a huge comment",
    make: (i) => fill(`{ __typename } #${i}\n`, COMMENT, ""),
    check: answered,
  },
];
// Small enough to be cached: enough of them to fill the cache several times over.
const cachedValid: Kind = {
  name: "a mid-size valid document",
  make: (i) => fill(`{ __typename s: allHubCasinos(condition: { name: "${i}`, "y", `" }) @skip(if: true) { totalCount } }`, 200 * 1024),
  check: answered,
};

let hub: TestServer;
t.before(async () => {
  hub = await startTestServer();
});
t.teardown(() => hub?.stop());

async function send(kind: Kind, i: number): Promise<string | undefined> {
  const body = JSON.stringify({ query: kind.make(i) });
  if (body.length > BODY_LIMIT) throw new Error(`${kind.name}: body of ${body.length} bytes is over the limit`);
  const res = await fetch(`${hub.url}/graphql`, { method: "POST", headers: { "content-type": "application/json", accept: "application/graphql-response+json" }, body });
  const text = await res.text();
  const problem = kind.check(res.status, JSON.parse(text));
  return problem && `${kind.name} #${i}: ${problem}`;
}

/**
 * Sends `count` documents round-robin over the kinds, two at a time; every
 * `every` answers, collects and fails at once if the heap grew past the bound
 * (so a leaking server fails the test instead of exhausting the process).
 */
async function flood(t: Test, kinds: Kind[], count: number, baseline: number, every = 10): Promise<number[]> {
  const samples: number[] = [];
  let next = 0;
  const problems: string[] = [];
  while (next < count) {
    const batch = Array.from({ length: Math.min(every, count - next) }, () => next++);
    for (let j = 0; j < batch.length; j += 2) {
      const pair = batch.slice(j, j + 2).map((i) => send(kinds[i % kinds.length]!, 1000 + i));
      for (const problem of await Promise.all(pair)) if (problem) problems.push(problem);
    }
    const grown = heapUsed(1) - baseline;
    samples.push(grown);
    if (grown > HEAP_BOUND) {
      t.fail(`after ${next} documents the heap grew by ${mib(grown)}, over the bound of ${mib(HEAP_BOUND)}`);
      break;
    }
  }
  t.same(problems.slice(0, 5), [], `every answer as expected (${problems.length} not)`);
  return samples;
}

t.test("distinct invalid documents of the largest accepted size leave nothing behind", async (t) => {
  for (const kind of invalid) t.equal(await send(kind, 0), undefined, `warm-up: ${kind.name}`);
  const baseline = heapUsed();
  const started = Date.now();
  const samples = await flood(t, invalid, 250, baseline);
  const settled = heapUsed() - baseline;
  t.comment(`baseline ${mib(baseline)}; growth sampled every 10 documents: max ${mib(Math.max(...samples))}; settled ${mib(settled)} after ${samples.length * 10} documents in ${Date.now() - started} ms`);
  t.ok(settled <= HEAP_BOUND, `heap settled ${mib(settled)} above where it started (bound ${mib(HEAP_BOUND)})`);
});

t.test("distinct large valid documents do not pin memory beyond the cache bound", async (t) => {
  for (const kind of [...largeValid, cachedValid]) t.equal(await send(kind, 0), undefined, `warm-up: ${kind.name}`);
  const baseline = heapUsed();
  const started = Date.now();
  const samples = [...(await flood(t, largeValid, 160, baseline)), ...(await flood(t, [cachedValid], 160, baseline))];
  const settled = heapUsed() - baseline;
  t.comment(`baseline ${mib(baseline)}; growth sampled every 10 documents: max ${mib(Math.max(...samples))}; settled ${mib(settled)} in ${Date.now() - started} ms`);
  t.ok(settled <= HEAP_BOUND, `heap settled ${mib(settled)} above where it started (bound ${mib(HEAP_BOUND)})`);
});
