import "./helpers/env.js";
import { createHash } from "node:crypto";
import t from "tap";
import { defaultPlugins } from "@hubpkg/hub";
import { createHashChain, startTestServer, type TestServer } from "@hubpkg/hub/test";
import { injectClient } from "./helpers/inject.js";
import { getIntermediateHash, CHECKPOINT_INTERVAL, verifyHashChain, sha256 } from "@hubpkg/hub/hash-chain";
import { makeOperator, makePlayer, type Player } from "./helpers/credentials.js";
import { errorOf } from "./helpers/graphql-error.js";

/*
 * Hash chains: creation through GraphQL (one active chain per player, casino
 * and experience), what each identity can read, the reveal, and the cost of
 * deriving h(i) on a chain of a million hashes.
 */

let hub: TestServer;
let alice: Player;
let bob: Player;
let operator: { header: { authorization: string } };

t.before(async () => {
  hub = await startTestServer({ logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent", plugins: [...defaultPlugins] });
  alice = await makePlayer(hub.superuserDatabaseUrl, "chain-alice", { casinoName: "chains" });
  bob = await makePlayer(hub.superuserDatabaseUrl, "chain-bob", { casinoName: "chains" });
  operator = await makeOperator(hub.superuserDatabaseUrl);
});
t.teardown(() => hub?.stop());

// Through inject(): what is tested is the chains and who may read them, not the socket.
const client = (who: { header: Record<string, string> } | null) => injectClient(hub, who?.header ?? {});
const b64 = (s: string) => new Uint8Array(Buffer.from(s, "base64"));

const CHAIN_FIELDS = `id active currentIteration maxIteration userId casinoId experienceId
  preimageHash { id }
  hubHashesByHashChainId { nodes { id kind digest iteration clientSeed metadata hashChainId } }`;


t.test("hubCreateHashChain: a new active chain with its terminal hash; a second one retires the first", async (t) => {
  const first = (await client(alice).request<any>(`mutation { hubCreateHashChain { hashChain { ${CHAIN_FIELDS} } } }`)).hubCreateHashChain.hashChain;
  t.equal(first.active, true);
  t.equal(first.currentIteration, first.maxIteration, "no hash used yet: the terminal hash is the last revealed");
  t.equal(first.maxIteration, 100_000, "the default length");
  t.equal(first.userId, alice.userId);
  t.equal(first.preimageHash, null, "no preimage before the reveal");
  t.same(first.hubHashesByHashChainId.nodes.map((h: any) => [h.kind, h.iteration]), [["TERMINAL", 100_000]]);
  t.equal(b64(first.hubHashesByHashChainId.nodes[0].digest).length, 32);

  const active = await client(alice).request<any>("{ hubCurrentUser { activeHashChain { id } } }");
  t.equal(active.hubCurrentUser.activeHashChain.id, first.id, "HubUser.activeHashChain");

  const second = (await client(alice).request<any>("mutation { hubCreateHashChain { hashChain { id active } } }")).hubCreateHashChain.hashChain;
  const again = await client(alice).request<any>(`{ hubHashChainById(id: "${first.id}") { active } hubCurrentUser { activeHashChain { id } } }`);
  t.equal(again.hubHashChainById.active, false, "the previous chain is retired");
  t.equal(again.hubCurrentUser.activeHashChain.id, second.id);
  const { rows } = await hub.dbPool.query("select count(*)::int as n from hub.hash_chain where user_id = $1 and active", [alice.userId]);
  t.equal(rows[0].n, 1, "exactly one active chain");

  // Ten creations at once still leave exactly one active chain; those beyond the per-player bound are refused.
  const settled = await Promise.allSettled(Array.from({ length: 10 }, () => client(alice).request("mutation { hubCreateHashChain { hashChain { id } } }")));
  const refusals = settled.filter((r): r is PromiseRejectedResult => r.status === "rejected").map((r) => (r.reason as { response?: { errors?: { extensions?: { code?: unknown } }[] } }).response?.errors?.[0]?.extensions?.code);
  t.ok(settled.length - refusals.length >= 2, `at least two were created at once (${settled.length - refusals.length})`);
  t.same([...new Set(refusals)].filter((code) => code !== "TOO_MANY_REQUESTS"), [], "the others were refused TOO_MANY_REQUESTS");
  const after = await hub.dbPool.query("select count(*)::int as n from hub.hash_chain where user_id = $1 and active", [alice.userId]);
  t.equal(after.rows[0].n, 1, "exactly one active chain after concurrent creations");
});

t.test("who sees what: the owner its chains and hashes, an operator all, another player nothing, nobody the seed", async (t) => {
  const chain = (await client(alice).request<any>("mutation { hubCreateHashChain { hashChain { id hubHashesByHashChainId { nodes { id } } } } }")).hubCreateHashChain.hashChain;
  const hashId = chain.hubHashesByHashChainId.nodes[0].id;
  const query = `{ hubHashChainById(id: "${chain.id}") { id } hubHashById(id: "${hashId}") { id } }`;
  t.same(await client(alice).request(query), { hubHashChainById: { id: chain.id }, hubHashById: { id: hashId } });
  t.same(await client(bob).request(query), { hubHashChainById: null, hubHashById: null }, "another player of the same casino");
  t.same(await client(null).request(query), { hubHashChainById: null, hubHashById: null }, "anonymous");
  t.same(await client(operator).request(query), { hubHashChainById: { id: chain.id }, hubHashById: { id: hashId } }, "an operator");

  // The GraphQL role cannot read the secret table, whatever the schema exposes.
  const c = await hub.dbPool.connect();
  try {
    await c.query("begin; set local role app_postgraphile");
    const denied = await c.query("select seed from hub_secret.hash_chain_secret").then(() => null, (e: { code: string }) => e.code);
    t.equal(denied, "42501", "permission denied on hub_secret");
  } finally {
    await c.query("rollback");
    c.release();
  }
  const schema = await client(operator).request<any>('{ __schema { types { name fields { name } } } }');
  const names = JSON.stringify(schema);
  t.notMatch(names, /"(seed|checkpoints?)"/i, "no field of the schema names the seed or the checkpoints");
});

t.test("hubRevealHashChain: publishes the seed, which hashes to the terminal hash; ends the chain", async (t) => {
  const chain = (await client(alice).request<any>(`mutation { hubCreateHashChain { hashChain { ${CHAIN_FIELDS} } } }`)).hubCreateHashChain.hashChain;
  t.equal((await errorOf(client(bob).request(`mutation { hubRevealHashChain(input: { hashChainId: "${chain.id}" }) { preimageHash { id } } }`))).extensions!.code, "HASH_CHAIN_NOT_FOUND", "not bob's chain");
  const reveal = `mutation { hubRevealHashChain(input: { hashChainId: "${chain.id}" }) { preimageHash { id kind iteration digest hashChainId } } }`;
  const preimage = (await client(alice).request<any>(reveal)).hubRevealHashChain.preimageHash;
  t.equal(preimage.kind, "PREIMAGE");
  t.equal(preimage.iteration, 0);
  const terminal = b64(chain.hubHashesByHashChainId.nodes[0].digest);
  t.same(verifyHashChain({ preimage: b64(preimage.digest), terminalHash: terminal, maxIteration: chain.maxIteration }), { ok: true });
  const again = (await client(alice).request<any>(reveal)).hubRevealHashChain.preimageHash;
  t.equal(again.id, preimage.id, "revealing again returns the same preimage");
  const after = await client(alice).request<any>(`{ hubHashChainById(id: "${chain.id}") { active preimageHash { id } } }`);
  t.same(after.hubHashChainById, { active: false, preimageHash: { id: preimage.id } });
  const secret = await hub.dbPool.query("select 1 from hub_secret.hash_chain_secret where hash_chain_id = $1", [chain.id]);
  t.equal(secret.rowCount, 0, "the hub no longer keeps the secret");
});

t.test("identity: no credential is UNAUTHENTICATED, an operator FORBIDDEN", async (t) => {
  t.equal((await errorOf(client(null).request("mutation { hubCreateHashChain { hashChain { id } } }"))).extensions!.code, "UNAUTHENTICATED");
  t.equal((await errorOf(client(operator).request("mutation { hubCreateHashChain { hashChain { id } } }"))).extensions!.code, "FORBIDDEN");
});

t.test("a chain of 1,000,000: created without blocking the event loop; h(i) derived within the cost bounds", async (t) => {
  const N = 1_000_000;
  // A timer that re-arms itself counts the event loop's turns while the chain is made: creating it in one
  // synchronous piece would let it fire once or twice; made on a worker thread (or in chunks) it fires
  // every millisecond or so, for as long as the million hashes take. Times are reported, not asserted.
  let turns = 0;
  let ticking = true;
  const tick = () => {
    turns++;
    if (ticking) setTimeout(tick, 1);
  };
  setTimeout(tick, 1);
  const started = performance.now();
  const cpu0 = process.cpuUsage();
  const chain = await createHashChain(hub.dbPool, { userId: bob.userId, casinoId: bob.casinoId, experienceId: bob.experienceId, maxIteration: N });
  const cpu = process.cpuUsage(cpu0);
  const wall = performance.now() - started;
  ticking = false;
  t.comment(`create N=${N}: ${wall.toFixed(0)} ms wall, ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms CPU, ${turns} timer turns`);
  t.ok(turns >= 100, `the event loop kept turning while the chain was created (${turns} turns of a 1 ms timer)`);

  const stored = await hub.dbPool.query<{ bytes: number }>(
    "select octet_length(seed) + octet_length(checkpoints) + 4 as bytes from hub_secret.hash_chain_secret where hash_chain_id = $1",
    [chain.id],
  );
  t.ok(stored.rows[0]!.bytes <= 64 * 1024, `at most 64 KiB stored for the chain's secret (${stored.rows[0]!.bytes} bytes)`);

  // Walk down 3 segments as bets do: h(N-1), h(N-2), … each one hash from its successor. The cost bound is
  // structural: the secret is read (and at most CHECKPOINT_INTERVAL - 1 hashes computed from its checkpoint)
  // only for the first bet of a segment; every other bet is served from the segment in memory. So the reads
  // are counted, on a client that passes every query on to the real pool.
  const bets = CHECKPOINT_INTERVAL * 3;
  const readAt: number[] = [];
  let current = 0;
  const countingClient = {
    query: (text: string, values: unknown[]) => {
      readAt.push(current);
      return hub.dbPool.query(text, values);
    },
  } as unknown as typeof hub.dbPool;
  let next = chain.terminalHash;
  const total0 = process.cpuUsage();
  for (let i = N - 1; i > N - 1 - bets; i--) {
    current = i;
    const r = await getIntermediateHash({ hashChainId: chain.id, iteration: i, pgClient: countingClient });
    if (r.type !== "success") throw new Error(r.reason);
    if (Buffer.compare(Buffer.from(sha256(r.hash)), Buffer.from(next)) !== 0) throw new Error(`h(${i}) does not hash to h(${i + 1})`);
    next = r.hash;
  }
  const totalCpu = process.cpuUsage(total0);
  t.comment(`derivation: ${((totalCpu.user + totalCpu.system) / bets).toFixed(1)} µs CPU per hash amortised over ${bets} (check included)`);
  const k = CHECKPOINT_INTERVAL;
  const topSegmentStart = Math.floor((N - 1) / k) * k;
  t.same(readAt, [N - 1, topSegmentStart - 1, topSegmentStart - 1 - k], `${bets} bets read the secret 3 times: at the first bet of each segment of ${k}, never in between`);

  // A hash deep in the chain agrees with the chain computed from the seed.
  const seed = (await hub.dbPool.query<{ seed: Buffer }>("select seed from hub_secret.hash_chain_secret where hash_chain_id = $1", [chain.id])).rows[0]!.seed;
  let h: Buffer = seed;
  for (let i = 1; i <= 1234; i++) h = createHash("sha256").update(h).digest();
  const r = await getIntermediateHash({ hashChainId: chain.id, iteration: 1234, pgClient: hub.dbPool });
  t.same(r.type === "success" && Buffer.from(r.hash), h, "h(1234) matches the chain computed from the seed");
  const beyond = await getIntermediateHash({ hashChainId: chain.id, iteration: N + 1, pgClient: hub.dbPool });
  t.equal(beyond.type, "error", "beyond the terminal hash is an error");
});
