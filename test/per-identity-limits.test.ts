import "./helpers/env.js";
import http from "node:http";
import t from "tap";
import { defaultPlugins, type PluginContext } from "@hubpkg/hub";
import { makeExtendSchemaPlugin, gql as graphql } from "@hubpkg/hub/graphile";
import { withPgPoolTransaction } from "@hubpkg/hub/db";
import { startTestServer, createExperience, createPlayer } from "@hubpkg/hub/test";
import { gql, timedRequest as request } from "./helpers/http.js";

/*
 * Each player's share of the database: at most perIdentityConnections
 * connections at once and perIdentityQueue requests waiting, the rest refused
 * at once with TOO_MANY_REQUESTS, and a pool busy to saturation answering
 * SERVER_BUSY rather than DATABASE_UNAVAILABLE. The holds below last long
 * against a request's own time (a second), so the counts hold on a loaded
 * machine; test/burst.test.ts, run alone, checks the flood as a whole.
 */

// The busy-pool test waits out the pools' 10 s connection timeout, its hub sleeping in Postgres: it runs
// beside the per-identity test (each on a hub of its own) instead of after it.
t.jobs = 2;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** How long alice's requests hold a connection: every one of her six arrives while the first holds. */
const HOLD_MS = 1000;

/*
 * The bound itself, with small limits so it is exact: a test plugin holds a
 * superuser-pool connection for a while, through each way a plugin reaches the
 * pool (withPgPoolTransaction, pool.query, pool.connect with a callback), and
 * counts how many connections each caller holds at once.
 */
const holding = new Map<string, { now: number; max: number }>();
const HoldPlugin = makeExtendSchemaPlugin(() => ({
  typeDefs: graphql`
    extend type Mutation {
      "Hold a superuser-pool connection for ms milliseconds; via: transaction, query or callback."
      holdConnection(ms: Int!, via: String!): Int
    }
  `,
  resolvers: {
    Mutation: {
      async holdConnection(_parent: unknown, args: { ms: number; via: string }, ctx: PluginContext) {
        const who = ctx.identity?.kind === "user" ? ctx.identity.user.uname : ctx.identity?.kind ?? "anonymous";
        const count = (delta: number) => {
          const entry = holding.get(who) ?? { now: 0, max: 0 };
          entry.now += delta;
          entry.max = Math.max(entry.max, entry.now);
          holding.set(who, entry);
        };
        const sleepSql = "select pg_sleep($1::int / 1000.0)";
        if (args.via === "parallel") {
          // Four connections at once from one request: the pool-level bound itself.
          const settled = await Promise.allSettled(Array.from({ length: 4 }, () => ctx.superuserPool.query(sleepSql, [args.ms])));
          const refused = settled.find((r) => r.status === "rejected");
          if (refused) throw (refused as PromiseRejectedResult).reason;
          return args.ms;
        }
        if (args.via === "query") {
          await ctx.superuserPool.query(sleepSql, [args.ms]);
          return args.ms;
        }
        if (args.via === "callback") {
          return new Promise<number>((resolve, reject) => {
            ctx.superuserPool.connect((err, client, done) => {
              if (err || !client) return reject(err);
              count(1);
              client.query(sleepSql, [args.ms], (queryError: Error | undefined) => {
                count(-1);
                done?.();
                if (queryError) reject(queryError);
                else resolve(args.ms);
              });
            });
          });
        }
        return withPgPoolTransaction(ctx.superuserPool, async (client) => {
          count(1);
          try {
            await client.query(sleepSql, [args.ms]);
          } finally {
            count(-1);
          }
          return args.ms;
        });
      },
    },
  },
}), "BurstTestHoldPlugin");

const HOLD = "mutation($ms: Int!, $via: String!) { holdConnection(ms: $ms, via: $via) }";

async function timedHold(url: string, headers: Record<string, string>, ms: number, via: string) {
  const res = await gql(url, HOLD, { ms, via }, headers);
  return { doneAt: performance.now(), status: res.status, data: res.body.data?.holdConnection, error: res.body.errors?.[0] };
}

t.test("perIdentityConnections and perIdentityQueue are checked", async (t) => {
  await t.rejects(startTestServer({ perIdentityConnections: 0 }), { message: 'Server option "perIdentityConnections" is invalid: received 0, expected an integer >= 1.' });
  await t.rejects(startTestServer({ perIdentityQueue: -1 }), { message: 'Server option "perIdentityQueue" is invalid: received -1, expected an integer >= 0.' });
  await t.rejects(startTestServer({ perIdentityQueue: 1.5 }), { message: /perIdentityQueue" is invalid: received 1\.5/ });
});

t.test("per identity: at most perIdentityConnections connections, perIdentityQueue waiting, the rest TOO_MANY_REQUESTS at once", async (t) => {
  const hub = await startTestServer({
    plugins: [...defaultPlugins, HoldPlugin],
    perIdentityConnections: 1,
    perIdentityQueue: 2,
    configureApp: ({ app }) => {
      app.get("/hold", async (req, res) => {
        await req.superuserPool.query("select pg_sleep($1::int / 1000.0)", [Number(req.query.ms)]);
        res.json({ held: Number(req.query.ms) });
      });
    },
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
  });
  t.teardown(() => hub.stop());
  const experience = await createExperience(hub.dbPool, { casinoId: hub.playgroundCasinoId });
  const alice = await createPlayer(hub.dbPool, { casinoId: hub.playgroundCasinoId, uname: "alice" });
  const bob = await createPlayer(hub.dbPool, { casinoId: hub.playgroundCasinoId, uname: "bob" });
  const aliceHeaders = { authorization: `session:${(await hub.authenticate(alice.id, experience.id)).token}` };
  const bobHeaders = { authorization: `session:${(await hub.authenticate(bob.id, experience.id)).token}` };
  const operatorHeaders = { authorization: `apikey:${(await hub.authenticateOperator()).apiKey}` };

  for (const via of ["transaction", "query", "callback"]) {
    holding.clear();
    // Six at once from alice: one runs, two wait, three are refused.
    const aliceAll = Promise.all(Array.from({ length: 6 }, () => timedHold(hub.url, aliceHeaders, HOLD_MS, via)));
    await sleep(HOLD_MS / 3);
    // Bob is not queued behind her: his short hold ends before her third one does.
    const bobResult = await timedHold(hub.url, bobHeaders, 10, via);
    const aliceResults = await aliceAll;
    const ok = aliceResults.filter((r) => r.data === HOLD_MS);
    const refused = aliceResults.filter((r) => r.error?.extensions?.code === "TOO_MANY_REQUESTS");
    t.equal(ok.length, 3, `${via}: 3 of alice's 6 run (1 at a time + 2 waiting)`);
    t.equal(refused.length, 3, `${via}: the other 3 are refused with TOO_MANY_REQUESTS`);
    t.ok(refused.every((r) => r.status === 200 || r.status === 429), `${via}: refusals are GraphQL errors (HTTP 200, or 429 when refused before any work)`);
    t.match(refused[0]?.error?.message, /^Too many requests at once from this player: at most (1 database transactions run at a time and 2 more wait|3 of its requests are handled at a time \(1 database transactions running and 2 more waiting\))/, `${via}: the refusal says the limit`);
    t.equal(bobResult.data, 10, `${via}: bob's request succeeds`);
    t.ok(bobResult.doneAt < Math.max(...ok.map((r) => r.doneAt)), `${via}: bob's request is answered before alice's queue is through`);
    if (via !== "query") t.equal(holding.get("alice")?.max, 1, `${via}: alice never held more than 1 connection at once`);
  }

  // While alice holds her connection and her queue is full, any request of hers
  // is refused on arrival (429, before any work), whatever it asks; bob's is not.
  const holds = Array.from({ length: 3 }, () => timedHold(hub.url, aliceHeaders, 1500, "transaction"));
  for (const deadline = Date.now() + 5000; Date.now() < deadline; await sleep(20)) {
    const { rows } = await hub.dbPool.query<{ n: number }>("select count(*)::int as n from pg_stat_activity where query like 'select pg_sleep%' and state = 'active'");
    if (rows[0]!.n >= 1) break;
  }
  await sleep(200);
  const shedGraphql = await gql(hub.url, "{ __typename }", {}, aliceHeaders);
  t.same(
    { status: shedGraphql.status, retryAfter: shedGraphql.headers.get("retry-after"), code: shedGraphql.body.errors?.[0]?.extensions?.code },
    { status: 429, retryAfter: "1", code: "TOO_MANY_REQUESTS" },
    "alice's { __typename } meanwhile: 429 with a GraphQL error TOO_MANY_REQUESTS",
  );
  // Fastify serves /graphql/ as /graphql, so its refusal has GraphQL's shape too.
  const shedSlash = await request(new http.Agent(), hub.url, "POST", "/graphql/", aliceHeaders, { query: "{ __typename }" });
  t.match(
    { status: shedSlash.status, body: shedSlash.body },
    { status: 429, body: { errors: [{ extensions: { code: "TOO_MANY_REQUESTS" } }] } },
    "alice's { __typename } on /graphql/ meanwhile: 429 with a GraphQL error TOO_MANY_REQUESTS",
  );
  const shedRoute = await request(new http.Agent(), hub.url, "GET", "/nowhere", aliceHeaders);
  t.match(shedRoute, { status: 429, body: { code: "TOO_MANY_REQUESTS", message: /^Too many requests at once from this player/ } }, "an Express path: 429 in the hub's JSON error shape");
  t.same((await gql(hub.url, "{ __typename }", {}, bobHeaders)).body, { data: { __typename: "Query" } }, "bob's request meanwhile is answered");
  t.same((await Promise.all(holds)).map((r) => r.data), [1500, 1500, 1500], "alice's three held requests all complete");
  t.same((await gql(hub.url, "{ __typename }", {}, aliceHeaders)).body, { data: { __typename: "Query" } }, "once they are done, alice is served again");

  // Express routes: req.superuserPool is bounded the same way; the excess is a 429.
  const agent = new http.Agent({ keepAlive: true });
  t.teardown(() => agent.destroy());
  const aliceRoutes = Promise.all(Array.from({ length: 6 }, () => request(agent, hub.url, "GET", `/hold?ms=${HOLD_MS}`, aliceHeaders)));
  await sleep(HOLD_MS / 3);
  const bobRoute = await request(agent, hub.url, "GET", "/hold?ms=10", bobHeaders);
  const routeResults = await aliceRoutes;
  t.same(routeResults.map((r) => r.status).sort(), [200, 200, 200, 429, 429, 429], "Express: 3 of alice's 6 answered 200, 3 answered 429");
  t.match(routeResults.find((r) => r.status === 429)?.body, { statusCode: 429, error: "Too Many Requests", message: /^Too many requests at once from this player: at most (1 database transactions run at a time and 2 more wait|3 of its requests are handled at a time \(1 database transactions running and 2 more waiting\))/ }, "the 429 says the limit");
  t.same([bobRoute.status, bobRoute.body], [200, { held: 10 }], "Express: bob's request succeeds meanwhile");

  // One request asking for more connections at once than one at a time + two waiting.
  const parallel = await timedHold(hub.url, aliceHeaders, 50, "parallel");
  t.same(
    { status: parallel.status, code: parallel.error?.extensions?.code },
    { status: 200, code: "TOO_MANY_REQUESTS" },
    "a fourth connection at once in one request: GraphQL error TOO_MANY_REQUESTS (HTTP 200)",
  );
  t.match(parallel.error?.message, /^Too many requests at once from this player: at most 1 database transactions run at a time and 2 more wait/);

  // An API key is bounded on its own; anonymous requests are not bounded per identity.
  const operatorResults = await Promise.all(Array.from({ length: 4 }, () => timedHold(hub.url, operatorHeaders, 200, "transaction")));
  t.same(operatorResults.map((r) => r.data ?? r.error?.extensions?.code).sort(), [200, 200, 200, "TOO_MANY_REQUESTS"].sort(), "an API key: 1 runs, 2 wait, 1 is refused");
  t.match(operatorResults.find((r) => r.error)?.error?.message, /^Too many requests at once from this API key/);
  holding.clear();
  const anonymous = await Promise.all(Array.from({ length: 4 }, () => timedHold(hub.url, {}, 200, "transaction")));
  t.same(anonymous.map((r) => r.data), [200, 200, 200, 200], "anonymous requests: all four run");
});

t.test("a pool busy to saturation answers SERVER_BUSY, not DATABASE_UNAVAILABLE (GraphQL and the credential check)", async (t) => {
  const hub = await startTestServer({
    plugins: [...defaultPlugins, HoldPlugin],
    // The player's identity is checked once, before the credential lookups are blocked below.
    identityCacheTtlMs: 120_000,
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
  });
  t.teardown(() => hub.stop());
  const experience = await createExperience(hub.dbPool, { casinoId: hub.playgroundCasinoId });
  const carol = await createPlayer(hub.dbPool, { casinoId: hub.playgroundCasinoId, uname: "carol" });
  const carolHeaders = { authorization: `session:${(await hub.authenticate(carol.id, experience.id)).token}` };
  t.equal((await timedHold(hub.url, carolHeaders, 1, "transaction")).data, 1, "carol's identity is checked and cached");
  const keys: string[] = [];
  for (let i = 0; i < 12; i++) keys.push((await hub.authenticateOperator()).apiKey);

  // Credential lookups blocked in Postgres by a lock on hub.api_key: more
  // distinct keys than connections, so the rest wait for a connection in vain.
  const locker = await hub.dbPool.connect();
  t.teardown(() => locker.release(true));
  await locker.query("begin");
  await locker.query("lock table hub.api_key in access exclusive mode");
  const lookups = keys.map((key) =>
    request(new http.Agent({ keepAlive: false }), hub.url, "POST", "/graphql", { authorization: `apikey:${key}` }, { query: "{ __typename }" }),
  );

  // The whole superuser pool held by anonymous requests (not bounded per identity).
  const hogs = Array.from({ length: 10 }, () => timedHold(hub.url, {}, 12_000, "transaction"));
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { rows } = await hub.dbPool.query<{ n: number }>(
      "select count(*)::int as n from pg_stat_activity where application_name = 'hub:superuser' and query like 'select pg_sleep%' and state = 'active'",
    );
    if (rows[0]!.n >= 10 || Date.now() > deadline) break;
    await sleep(50);
  }
  const busy = await timedHold(hub.url, carolHeaders, 1, "transaction");
  t.equal(busy.status, 200, "GraphQL: HTTP 200 …");
  t.equal(busy.error?.extensions?.code, "SERVER_BUSY", "… with the code SERVER_BUSY");
  t.match(busy.error?.message, /busy/, "… saying the server is busy");

  // By now every lookup without a connection has given up.
  await locker.query("commit");
  const answers = await Promise.all(lookups);
  const busyAnswers = answers.filter((a) => a.status === 503);
  t.comment(`credential lookups: ${JSON.stringify(answers.map((a) => a.status))}`);
  t.ok(busyAnswers.length > 0, `some lookups found no connection (${busyAnswers.length} of ${answers.length})`);
  t.same(
    busyAnswers.map((a) => [a.body?.code, /server is busy/.test(a.body?.message)]),
    busyAnswers.map(() => ["SERVER_BUSY", true]),
    "each is a 503 saying the server is busy (code SERVER_BUSY), not that the database is unavailable",
  );
  t.same(answers.filter((a) => a.status !== 503 && a.status !== 200), [], "the others were answered once the lock was gone");
  await Promise.all(hogs);
});
