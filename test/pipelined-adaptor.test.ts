import "./helpers/env.js";
import t from "tap";
import pg from "pg";
import { startTestServer, type TestServer } from "@hubpkg/hub/test";
// Internal: the GraphQL pool's withPgClient (src/db/pipelined-adaptor.ts).
import { makePipelinedWithPgClient } from "../dist/src/db/pipelined-adaptor.js";

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

type Raw = { _sentQueryQueue: unknown[]; _queryQueue: unknown[]; activeQuery: unknown };

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
    const prepared = await client.query<{ name: string }>({ text: "select name from pg_prepared_statements where statement like '%set_config%'" });
    return { ...rows[0]!, sameTransaction: again.rows[0]!.tx === rows[0]!.tx, prepared: prepared.rows.map((r) => r.name) };
  });
  t.same(inside.prepared, ["hub_set_config"], "the set_config is a prepared statement of the connection (parsed and planned once)");
  t.equal(inside.who, "app_postgraphile");
  t.equal(inside.uid, settings["session.user_id"]);
  t.equal(inside.timeout, "5s");
  t.equal(inside.sameTransaction, true, "the callback's statements share one transaction");
  const after = await pool.query<{ who: string; uid: string | null }>("select current_user as who, current_setting('session.user_id', true) as uid");
  t.not(after.rows[0]!.who, "app_postgraphile", "the role was local to the transaction");
  t.notOk(after.rows[0]!.uid, "so was the setting");
});

t.test("begin, set_config and the first query leave before the first answer comes back", async (t) => {
  let inFlightWhenCallbackQueried = -1;
  await withPgClient(settings, async (client) => {
    const raw = (client as unknown as { rawClient: Raw }).rawClient;
    const result = client.query({ text: "select 1" });
    // Nothing has been answered yet: begin, set_config and this query are all sent or queued.
    inFlightWhenCallbackQueried = raw._sentQueryQueue.length + raw._queryQueue.length + (raw.activeQuery ? 1 : 0);
    await result;
  });
  t.equal(inFlightWhenCallbackQueried, 3);
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
  let callbackError: unknown;
  await t.rejects(
    withPgClient({ role: "no_such_role_here" }, async (client) => {
      try {
        await client.query({ text: "insert into public.pipeline_probe values (99)" });
      } catch (error) {
        callbackError = error;
        throw error;
      }
    }),
    { message: /role "no_such_role_here" does not exist/ },
  );
  t.equal((callbackError as { code?: string }).code, "25P02", "the callback's query was refused (transaction aborted), never run without the settings");
  t.same((await server.dbPool.query("select n from public.pipeline_probe where n = 99")).rows, []);
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
