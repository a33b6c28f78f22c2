import "./helpers/env.js";
import net from "node:net";
import t from "tap";
import type * as Tap from "tap";
import createDebug from "debug";
import pg from "pg";
import {
  createCasino,
  createCurrency,
  createExperience,
  createHashChain,
  createHouseBankroll,
  createPlayer,
  createPlayerBalance,
  startTestServer,
  type TestServer,
} from "@hubpkg/hub/test";
import { createWithPgClient } from "postgraphile/adaptors/pg";
import type { WithPgClient } from "postgraphile/@dataplan/pg";
import { defaultPlugins, HubGameConfigPlugin, startAndListen } from "@hubpkg/hub";
import { CoinflipBetPlugin, referenceMigrationsPath } from "@hubpkg/hub/plugins";
// Internal: the GraphQL pool's withPgClient (src/db/pipelined-adaptor.ts).
import { makePipelinedWithPgClient } from "../dist/src/db/pipelined-adaptor.js";
import { markOneStatement } from "../dist/src/db/one-statement-executor.js";
import { makePreset } from "../dist/src/graphql/preset.js";
import { DEFAULT_QUERY_LIMITS } from "../dist/src/graphql/query-limits.js";
import { createLogger } from "../dist/src/logger.js";

let server: TestServer;
let pool: pg.Pool;
let withPgClient: ReturnType<typeof makePipelinedWithPgClient>;
const settings = { role: "app_postgraphile", "session.user_id": "5a9c1e8e-0000-7000-8000-000000000001", statement_timeout: "5000" };

t.before(async () => {
  server = await startTestServer({ logLevel: "silent" });
  // As src/db/pools.ts opens the GraphQL pool: the authenticator, in pipeline mode.
  pool = new pg.Pool({ connectionString: server.databaseUrl, max: 1, pipeline: true });
  withPgClient = makePipelinedWithPgClient(pool);
  await server.dbPool.query("create table public.pipeline_probe (n int primary key)");
  await server.dbPool.query("grant insert, select on public.pipeline_probe to app_postgraphile");
});
t.teardown(async () => {
  await pool?.end();
  await server?.stop();
});

/** The pipelined withPgClient with the callback marked as sending one statement, as @dataplan/pg's executor calls it. */
const oneStatement: WithPgClient = (pgSettings, callback) => withPgClient(pgSettings, markOneStatement(callback));
/** The backend of the test pool's one connection: the same pid before and after means the connection was kept. */
const backendPid = async () => (await pool.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]!.pid;

/** A role Postgres refuses: the caller gets that error, and the callback's statement is refused, never run without the settings. */
async function refusedSetting(t: Tap.Test, via: WithPgClient, probe: number): Promise<void> {
  let statementError: unknown;
  await t.rejects(
    via({ role: "no_such_role_here" }, async (client) => {
      try {
        await client.query({ text: "insert into public.pipeline_probe values ($1)", values: [probe] });
      } catch (error) {
        statementError = error;
        throw error;
      }
    }),
    { message: /role "no_such_role_here" does not exist/ },
  );
  t.equal((statementError as { code?: string }).code, "25P02", "the statement was refused (transaction aborted), never run without the settings");
  t.same((await server.dbPool.query("select n from public.pipeline_probe where n = $1", [probe])).rows, []);
}

/**
 * A TCP hop between a client and Postgres that counts round trips: the times
 * the client sends after having received something since it last sent. It
 * holds Postgres's answers back for a few milliseconds, far longer than the
 * gap between writes the client makes in one go, so what the client sends
 * before reading an answer always counts as one.
 */
async function roundTripCounter(target: URL): Promise<{ url: string; count(): number; reset(): void; close(): Promise<void> }> {
  let trips = 0;
  let answered = true;
  const sockets = new Set<net.Socket>();
  const proxy = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    client.on("data", (chunk) => {
      if (answered) trips++;
      answered = false;
      upstream.write(chunk);
    });
    upstream.on("data", (chunk) =>
      setTimeout(() => {
        client.write(chunk);
        answered = true;
      }, 25),
    );
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  const url = new URL(target);
  url.host = `127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
  return {
    url: url.toString(),
    count: () => trips,
    reset: () => {
      trips = 0;
      answered = true;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}

t.test("the GraphQL server's own pool is in pipeline mode", async (t) => {
  const hubPools = await import("../dist/src/db/pools.js");
  const pools = await hubPools.openPools({ databaseUrl: server.databaseUrl, superuserDatabaseUrl: server.superuserDatabaseUrl }, (await import("../dist/src/logger.js")).createLogger({ level: "silent", pretty: false }));
  t.teardown(() => Promise.all([pools.graphql.end(), pools.superuser.end()]));
  t.equal((pools.graphql.options as { pipeline?: boolean }).pipeline, true);
  t.not((pools.superuser.options as { pipeline?: boolean }).pipeline, true, "the superuser pool is not (plugins' own transactions)");
});

t.test("the settings apply to the callback's queries, in one transaction, and end with it", async (t) => {
  const inside = await withPgClient(settings, async (client) => {
    const { rows } = await client.query<{ who: string; uid: string; timeout: string; tx: string }>({
      text: "select current_user as who, current_setting('session.user_id') as uid, current_setting('statement_timeout') as timeout, txid_current()::text as tx",
    });
    const again = await client.query<{ tx: string }>({ text: "select txid_current()::text as tx" });
    return { ...rows[0]!, sameTransaction: again.rows[0]!.tx === rows[0]!.tx };
  });
  t.equal(inside.who, "app_postgraphile");
  t.equal(inside.uid, settings["session.user_id"]);
  t.equal(inside.timeout, "5s");
  t.equal(inside.sameTransaction, true, "the callback's statements share one transaction");
  const after = await pool.query<{ who: string; uid: string | null }>("select current_user as who, current_setting('session.user_id', true) as uid");
  t.not(after.rows[0]!.who, "app_postgraphile", "the role was local to the transaction");
  t.notOk(after.rows[0]!.uid, "so was the setting");
});

t.test("settings are serialised once per frozen object; a plain object is read afresh on every request", async (t) => {
  const read = (s: Record<string, string>) =>
    withPgClient(s, async (client) => (await client.query<{ uid: string }>({ text: "select current_setting('session.user_id') as uid" })).rows[0]!.uid);
  const frozen = Object.freeze({ ...settings });
  t.equal(await read(frozen), settings["session.user_id"]);
  t.equal(await read(frozen), settings["session.user_id"], "the same frozen object again");
  const plain: Record<string, string> = { ...settings };
  t.equal(await read(plain), settings["session.user_id"]);
  plain["session.user_id"] = "someone else";
  t.equal(await read(plain), "someone else", "a plain object changed between requests is not served from a cache");
});

t.test("the set_config is parsed and planned once per connection, not per request", async (t) => {
  // What Postgres holds prepared on this connection (the pool has one), whatever the client names it.
  const prepared = () =>
    withPgClient(settings, async (client) => {
      const { rows } = await client.query<{ statement: string; prepare_time: string }>({
        text: "select statement, prepare_time::text from pg_prepared_statements where statement like '%set_config(%' and statement not like '%pg_prepared_statements%'",
      });
      return rows;
    });
  const first = await prepared();
  await withPgClient(settings, async (client) => client.query({ text: "select 1" }));
  const later = await prepared();
  t.equal(first.length, 1, "one prepared set_config statement");
  t.same(later, first, "the same one, prepared at the same time, after more requests");
});

t.test("two round trips per request as Postgres sees them: begin, set_config and the first query go together", async (t) => {
  const counter = await roundTripCounter(new URL(server.databaseUrl));
  const pipelined = new pg.Pool({ connectionString: counter.url, max: 1, pipeline: true });
  // The stock adaptor on the same hop: the measurement's control.
  const stockPool = new pg.Pool({ connectionString: counter.url, max: 1 });
  t.teardown(async () => {
    await Promise.all([pipelined.end(), stockPool.end()]);
    await counter.close();
  });
  const viaPipeline = makePipelinedWithPgClient(pipelined);
  const viaStock: WithPgClient = createWithPgClient({ pool: stockPool });
  const oneQuery = (w: WithPgClient) => w(settings, async (client) => (await client.query<{ ok: number }>({ text: "select 1 as ok" })).rows[0]!.ok);
  const twoQueries = (w: WithPgClient) =>
    w(settings, async (client) => {
      await client.query({ text: "select 1" });
      return (await client.query<{ ok: number }>({ text: "select 2 as ok" })).rows[0]!.ok;
    });
  const measure = async (w: WithPgClient, request: typeof oneQuery) => {
    await request(w); // connection, authentication and per-connection setup out of the way
    counter.reset();
    await request(w);
    return counter.count();
  };
  t.equal(await measure(viaPipeline, oneQuery), 2, "one query: (begin, set_config, query), then commit");
  t.equal(await measure(viaPipeline, twoQueries), 3, "two queries: one more");
  t.equal(await measure(viaStock, oneQuery), 4, "control: the stock adaptor waits after begin and after set_config");
  const oneStatementRequest = (w: WithPgClient) => w(settings, markOneStatement(async (client) => (await client.query<{ ok: number }>({ text: "select 1 as ok" })).rows[0]!.ok));
  t.equal(await measure(viaPipeline, oneStatementRequest), 1, "a one-statement callback: begin, set_config, the statement and commit together");
  t.equal(await measure(viaStock, oneStatementRequest), 4, "the stock adaptor ignores the mark");
});
t.test("the preset's adaptor is the one its maker asks for, whatever mode the pool is in", async (t) => {
  const counter = await roundTripCounter(new URL(server.databaseUrl));
  // One pool in pipeline mode for both presets: only the pipelinedPg input differs.
  const graphqlPool = new pg.Pool({ connectionString: counter.url, max: 1, pipeline: true });
  t.teardown(async () => {
    await graphqlPool.end();
    await counter.close();
  });
  const withPgClientOf = async (pipelinedPg: boolean) => {
    const preset = makePreset({
      plugins: [],
      extraPgSchemas: [],
      graphqlPool,
      pipelinedPg,
      requestInfo: () => ({ identity: undefined, requestId: undefined }),
      superuserPool: server.dbPool,
      graphiql: false,
      log: createLogger({ level: "silent", pretty: false }),
      maxRequestLength: 1024,
      limits: { ...DEFAULT_QUERY_LIMITS, introspection: false },
      statementTimeoutMs: 0,
    });
    const service = preset.pgServices![0]!;
    return (await service.adaptor.createWithPgClient(service.adaptorSettings)) as WithPgClient;
  };
  const tripsOfOneQuery = async (w: WithPgClient) => {
    const request = () => w(settings, async (client) => (await client.query<{ ok: number }>({ text: "select 1 as ok" })).rows[0]!.ok);
    await request(); // connection and per-connection setup out of the way
    counter.reset();
    t.equal(await request(), 1);
    return counter.count();
  };
  t.equal(await tripsOfOneQuery(await withPgClientOf(true)), 2, "pipelinedPg: true: the pipelined adaptor");
  t.equal(await tripsOfOneQuery(await withPgClientOf(false)), 4, "pipelinedPg: false: the stock adaptor, on the same pipeline-mode pool");
});

t.test("a failing callback rolls back everything it did", async (t) => {
  await t.rejects(
    withPgClient(settings, async (client) => {
      await client.query({ text: "insert into public.pipeline_probe values (1)" });
      throw new Error("callback failed");
    }),
    { message: "callback failed" },
  );
  t.same((await server.dbPool.query("select n from public.pipeline_probe")).rows, []);
  // The connection is clean for the next user.
  const ok = await withPgClient(settings, async (client) => (await client.query<{ ok: number }>({ text: "select 1 as ok" })).rows[0]!.ok);
  t.equal(ok, 1);
});

t.test("nested transactions are savepoints of ours; a committed callback persists", async (t) => {
  await withPgClient(settings, async (client) => {
    await client.query({ text: "insert into public.pipeline_probe values (10)" });
    await t.rejects(
      client.withTransaction(async (inner) => {
        await inner.query({ text: "insert into public.pipeline_probe values (11)" });
        throw new Error("inner failed");
      }),
    );
    await client.withTransaction(async (inner) => {
      await inner.query({ text: "insert into public.pipeline_probe values (12)" });
    });
  });
  t.same((await server.dbPool.query("select n from public.pipeline_probe order by n")).rows, [{ n: 10 }, { n: 12 }]);
});

t.test("a setting Postgres refuses: the caller gets that error, and nothing of the callback runs unprotected", async (t) => {
  await refusedSetting(t, withPgClient, 99);
  const ok = await withPgClient(settings, async (client) => (await client.query<{ ok: number }>({ text: "select 1 as ok" })).rows[0]!.ok);
  t.equal(ok, 1, "the connection recovered");
});

t.test("without settings: no transaction, queries run as the connection's user", async (t) => {
  const row = await withPgClient(null, async (client) => {
    const first = await client.query<{ who: string; tx: string }>({ text: "select current_user as who, txid_current()::text as tx" });
    const second = await client.query<{ tx: string }>({ text: "select txid_current()::text as tx" });
    return { who: first.rows[0]!.who, sameTransaction: first.rows[0]!.tx === second.rows[0]!.tx };
  });
  t.not(row.who, "app_postgraphile");
  t.equal(row.sameTransaction, false, "each statement is its own transaction: no begin was sent");
});

t.test("a one-statement call: its statement commits, and only then is its result returned", async (t) => {
  const before = await backendPid();
  const returned = await oneStatement(settings, async (client) => (await client.query<{ n: number }>({ text: "insert into public.pipeline_probe values (20) returning n" })).rows[0]!.n);
  t.equal(returned, 20);
  t.same((await server.dbPool.query("select n from public.pipeline_probe where n = 20")).rows, [{ n: 20 }], "visible to another connection as soon as the call returned");
  const inside = await oneStatement(settings, async (client) => (await client.query<{ who: string; uid: string }>({ text: "select current_user as who, current_setting('session.user_id') as uid" })).rows[0]!);
  t.same(inside, { who: "app_postgraphile", uid: settings["session.user_id"] }, "the settings apply to the statement");
  const after = await pool.query<{ who: string; uid: string | null }>("select current_user as who, current_setting('session.user_id', true) as uid");
  t.not(after.rows[0]!.who, "app_postgraphile", "and end with the transaction");
  t.notOk(after.rows[0]!.uid);
  t.equal(await backendPid(), before, "the same connection served every call (the pool has one): none was dropped");
});

t.test("a one-statement call whose statement fails: the caller gets that error, nothing is kept, the connection is reused", async (t) => {
  await oneStatement(settings, async (client) => client.query({ text: "insert into public.pipeline_probe values (30)" }));
  const before = await backendPid();
  await t.rejects(
    oneStatement(settings, async (client) => client.query({ text: "insert into public.pipeline_probe values (31), (30)" })),
    { code: "23505" },
    "the duplicate key, not a transaction error",
  );
  t.same((await server.dbPool.query("select n from public.pipeline_probe where n in (30, 31) order by n")).rows, [{ n: 30 }], "31 was rolled back with it");
  t.equal(await backendPid(), before, "the connection was not dropped");
  t.equal((await oneStatement(settings, async (client) => (await client.query<{ ok: number }>({ text: "select 1 as ok" })).rows[0]!.ok)), 1, "and serves the next call");
});

t.test("a one-statement call with a setting Postgres refuses: that error, and the statement never ran", async (t) => {
  await refusedSetting(t, oneStatement, 98);
});

t.test("a one-statement call whose commit fails (a deferred constraint): the caller gets the commit's error, not the statement's result", async (t) => {
  await server.dbPool.query("create table public.deferred_probe (n int, constraint deferred_probe_n unique (n) deferrable initially deferred)");
  await server.dbPool.query("grant insert, select on public.deferred_probe to app_postgraphile");
  const before = await backendPid();
  await t.rejects(
    oneStatement(settings, async (client) => (await client.query<{ n: number }>({ text: "insert into public.deferred_probe values (1), (1) returning n" })).rows.length),
    { code: "23505", constraint: "deferred_probe_n" },
  );
  t.same((await server.dbPool.query("select n from public.deferred_probe")).rows, [], "nothing committed");
  t.equal(await backendPid(), before, "the connection was not dropped: the failed commit ended the transaction");
});

t.test("a one-statement call that sends a second statement: refused, since the commit already followed the first", async (t) => {
  await t.rejects(
    oneStatement(settings, async (client) => {
      await client.query({ text: "select 1" });
      await client.query({ text: "insert into public.pipeline_probe values (97)" });
    }),
    { message: /second|after the one statement/ },
  );
  t.same((await server.dbPool.query("select n from public.pipeline_probe where n = 97")).rows, [], "the second statement never ran");
  const ok = await withPgClient(settings, async (client) => (await client.query<{ ok: number }>({ text: "select 1 as ok" })).rows[0]!.ok);
  t.equal(ok, 1, "the connection serves the next call");
});

t.test("through the hub: @dataplan/pg's own statements take one round trip each, and a user plugin's several statements still share one transaction", async (t) => {
  await server.dbPool.query("create schema probe_schema");
  await server.dbPool.query("create table probe_schema.item (n int primary key)");
  await server.dbPool.query("grant usage on schema probe_schema to app_postgraphile");
  await server.dbPool.query("grant select, insert on probe_schema.item to app_postgraphile");
  const counter = await roundTripCounter(new URL(server.databaseUrl));
  const { extendSchema, gql } = await import("@hubpkg/hub/graphile");
  const { context, sideEffect } = await import("@hubpkg/hub/grafast");
  // As a user writes it: two statements with the request's GraphQL client, which must share one transaction.
  const TwoStatements = extendSchema(() => ({
    typeDefs: gql`
      extend type Query {
        twoStatementsSameTransaction: Boolean
      }
    `,
    objects: {
      Query: {
        plans: {
          twoStatementsSameTransaction() {
            const $withPgClient = context().get("withPgClient");
            const $pgSettings = context().get("pgSettings");
            return sideEffect([$withPgClient, $pgSettings], async ([withPg, pgSettings]) =>
              (withPg as WithPgClient)(pgSettings as Record<string, string>, async (client) => {
                const a = await client.query<{ tx: string }>({ text: "select txid_current()::text as tx" });
                const b = await client.query<{ tx: string }>({ text: "select txid_current()::text as tx" });
                return a.rows[0]!.tx === b.rows[0]!.tx;
              }),
            );
          },
        },
      },
    },
  }), "TwoStatementsProbe");
  const hub = await startAndListen({
    port: 0,
    host: "127.0.0.1",
    handleSignals: false,
    logLevel: "silent",
    databaseUrl: counter.url,
    superuserDatabaseUrl: server.superuserDatabaseUrl,
    extraPgSchemas: ["probe_schema"],
    plugins: [TwoStatements],
  });
  t.teardown(async () => {
    await hub.stop();
    await counter.close();
  });
  const post = async (query: string) => {
    const response = await fetch(`${hub.url}/graphql`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ query }) });
    return (await response.json()) as { data?: Record<string, unknown>; errors?: Array<{ message: string }> };
  };
  const trips = async (query: string) => {
    await post("{ __typename }");
    counter.reset();
    const body = await post(query);
    return { body, trips: counter.count() };
  };
  const read = await trips("{ allItems { nodes { n } } }");
  t.same(read.body, { data: { allItems: { nodes: [] } } });
  t.equal(read.trips, 1, "a query: one round trip");
  const write = await trips("mutation { createItem(input: { item: { n: 7 } }) { item { n } } }");
  t.same(write.body, { data: { createItem: { item: { n: 7 } } } });
  t.equal(write.trips, 1, "a mutation: one round trip");
  t.same((await server.dbPool.query("select n from probe_schema.item")).rows, [{ n: 7 }], "committed");
  const duplicate = await trips("mutation { createItem(input: { item: { n: 7 } }) { item { n } } }");
  t.match(duplicate.body.errors?.[0]?.message ?? "", /already exists/, "a failing mutation reports its error");
  t.same((await server.dbPool.query("select n from probe_schema.item")).rows, [{ n: 7 }]);
  // With @dataplan/pg's EXPLAIN debugging on, its callback sends an EXPLAIN after the statement: the general path.
  const previous = createDebug.disable();
  const log = createDebug.log;
  createDebug.log = () => undefined;
  createDebug.enable("@dataplan/pg:PgExecutor:explain");
  try {
    const explained = await trips("{ allItems { nodes { n } } }");
    t.same(explained.body, { data: { allItems: { nodes: [{ n: 7 }] } } }, "with EXPLAIN debugging on, a query still answers");
    t.equal(explained.trips, 3, "(begin, set_config, query), EXPLAIN, commit");
  } finally {
    createDebug.disable();
    if (previous) createDebug.enable(previous);
    createDebug.log = log;
  }
  const user = await trips("{ twoStatementsSameTransaction }");
  t.same(user.body, { data: { twoStatementsSameTransaction: true } }, "a user's callback with two statements keeps one transaction");
  t.equal(user.trips, 3, "(begin, set_config, first), second, commit");
});

t.test("a bet through the hub: hubMakeOutcomeBet in at most 3 round trips; makeCoinflipBet (dbSettleBet in its own transaction) counted", async (t) => {
  const counter = await roundTripCounter(new URL(server.databaseUrl));
  // Both pools through the hop: the bets settle on the superuser pool, the read-back goes through the GraphQL pool.
  const hop = new URL(counter.url).host;
  const viaHop = (u: string) => Object.assign(new URL(u), { host: hop }).toString();
  t.equal(new URL(server.superuserDatabaseUrl).host, new URL(server.databaseUrl).host, "both users on the one Postgres the hop forwards to");
  const hub = await startAndListen({
    port: 0,
    host: "127.0.0.1",
    handleSignals: false,
    logLevel: "silent",
    databaseUrl: viaHop(server.databaseUrl),
    superuserDatabaseUrl: viaHop(server.superuserDatabaseUrl),
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: referenceMigrationsPath,
    plugins: [...defaultPlugins, HubGameConfigPlugin({ outcomeBetConfigs: { GENERAL: { houseEdge: 0.01, saveOutcomes: true } } }), CoinflipBetPlugin],
    // The session's lookup, cached 1 s by default, is not the bet's: on a loaded machine a few bets take
    // longer than that, and each would then count the lookup's round trip too.
    identityCacheTtlMs: 600_000,
  });
  t.teardown(async () => {
    await hub.stop();
    await counter.close();
  });
  const casinoId = (await createCasino(server.dbPool, { name: "round-trips" })).id;
  const experienceId = (await createExperience(server.dbPool, { casinoId })).id;
  await createCurrency(server.dbPool, { casinoId, key: "CHIPS", displayUnitName: "chips", displayUnitScale: 1 });
  await createHouseBankroll(server.dbPool, { casinoId, currencyKey: "CHIPS", amount: 1_000_000 });
  const userId = (await createPlayer(server.dbPool, { casinoId, uname: "round-trips" })).id;
  await createPlayerBalance(server.dbPool, { userId, experienceId, currencyKey: "CHIPS", amount: 1_000_000 });
  const hashChainId = (await createHashChain(server.dbPool, { userId, casinoId, experienceId, maxIteration: 1000 })).id;
  const { token } = await server.authenticate(userId, experienceId);
  const post = async (query: string, variables: Record<string, unknown>) => {
    const response = await fetch(`${hub.url}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `session:${token}` },
      body: JSON.stringify({ query, variables }),
    });
    return (await response.json()) as { data?: Record<string, any>; errors?: Array<{ message: string }> };
  };
  const outcomeBet = () =>
    post(
      `mutation($i: HubMakeOutcomeBetInput!) { hubMakeOutcomeBet(input: $i) { result { __typename
         ... on HubMakeOutcomeBetSuccess { bet { id outcomeIdx net } } ... on HubRiskError { message } ... on HubBadHashChainError { message } } } }`,
      { i: { kind: "GENERAL", wager: 100, currency: "CHIPS", outcomes: [{ weight: 1, profit: 0.98 }, { weight: 1, profit: -1 }], hashChainId, clientSeed: "trips" } },
    );
  const coinflipBet = () => post("mutation($i: MakeCoinflipBetInput!) { makeCoinflipBet(input: $i) { bet { id net } balance } }", { i: { wager: 100, currency: "CHIPS", side: "HEADS" } });
  /**
   * Round trips of each of a few bets, after one that warms the caches (the session, prepared statements,
   * the chain's hashes). The hub's background work (the bankroll sweep, about once a second) goes through
   * the same hop and can only add to a bet's count: the fewest is the bet's own.
   */
  const tripsOf = async (bet: () => ReturnType<typeof post>, check: (body: Awaited<ReturnType<typeof post>>) => void) => {
    check(await bet());
    const counts: number[] = [];
    for (let i = 0; i < 5; i++) {
      counter.reset();
      const body = await bet();
      counts.push(counter.count());
      check(body);
    }
    return counts;
  };
  const outcomeTrips = await tripsOf(outcomeBet, (body) => {
    t.same(body.errors, undefined, "hubMakeOutcomeBet answers");
    t.equal(body.data?.hubMakeOutcomeBet?.result?.__typename, "HubMakeOutcomeBetSuccess", "the bet was played");
  });
  t.comment(`hubMakeOutcomeBet, the bet read back: ${outcomeTrips.join(", ")} round trips`);
  t.ok(Math.min(...outcomeTrips) <= 3, `hubMakeOutcomeBet takes at most 3 round trips (fewest of ${outcomeTrips.join(", ")})`);
  const coinflipTrips = await tripsOf(coinflipBet, (body) => {
    t.same(body.errors, undefined, "makeCoinflipBet answers");
    t.ok(typeof body.data?.makeCoinflipBet?.bet?.id === "string", "the bet was played");
  });
  t.comment(`makeCoinflipBet, the bet read back: ${coinflipTrips.join(", ")} round trips`);
  t.ok(Math.min(...coinflipTrips) > 0, "the hop saw makeCoinflipBet's statements");
});
