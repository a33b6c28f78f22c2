/**
 * A controller written for the original system, as its template writes it:
 * the names it imports, the reset script it runs, the environment it starts
 * the server with. Real Postgres (the test kit's cluster), real HTTP.
 */
import "./helpers/env.js";
import t from "tap";
import fs from "node:fs";
import path from "node:path";
import pg from "pg";
import { runMigrations } from "@hubpkg/hub";
import { withPgClientTransaction, withPgPoolTransaction } from "@hubpkg/hub/db";
import {
  startTestServer,
  createPlayer,
  createExperience,
  createPlayerBalance,
  getPlayerBalance,
  createHouseBankroll,
  type HubTestServer,
  type TestServer,
} from "@hubpkg/hub/test";
import { runServerExpectingFailure, startServerProcess } from "./helpers/process.js";
import { tmpDir, writeFiles } from "./helpers/tmp.js";

const count = async (server: HubTestServer, sql: string): Promise<number> => Number((await server.dbPool.query<{ n: string }>(sql)).rows[0]!.n);

t.test("@hubpkg/hub/test: HubTestServer is TestServer, and the template's helpers exist under its names", async (t) => {
  const server: HubTestServer = await startTestServer();
  const same: TestServer = server;
  t.teardown(() => same.stop());
  const casinoId = server.playgroundCasinoId;
  const player = await createPlayer(server.dbPool, { casinoId, uname: "template-alice" });
  const experience = await createExperience(server.dbPool, { casinoId });
  await createPlayerBalance(server.dbPool, { userId: player.id, experienceId: experience.id, currencyKey: "HOUSE", amount: 70 });
  await createHouseBankroll(server.dbPool, { casinoId, currencyKey: "HOUSE", amount: 1000 });
  const balance = await getPlayerBalance(server.dbPool, { userId: player.id, experienceId: experience.id, currencyKey: "HOUSE" });
  t.equal(balance?.amount, 70);
});

t.test("withPgClientTransaction: commit, rollback and refused nesting on a client the caller holds", async (t) => {
  const server = await startTestServer();
  t.teardown(() => server.stop());
  await server.dbPool.query("create table public.tx_log (n int not null)");
  const client = await server.dbPool.connect();
  t.teardown(() => client.release());

  // Commit: the row is visible from another connection, fn's value is returned.
  const value = await withPgClientTransaction(client, async (pgClient) => {
    t.equal(pgClient, client, "fn gets the same client");
    await pgClient.query("insert into public.tx_log values (1)");
    return "committed";
  });
  t.equal(value, "committed");
  t.equal(await count(server, "select count(*) as n from public.tx_log where n = 1"), 1, "committed row seen by another connection");

  // Rollback: fn's error comes back as it was thrown, nothing of fn is kept.
  const boom = new Error("boom");
  await t.rejects(
    withPgClientTransaction(client, async (pgClient) => {
      await pgClient.query("insert into public.tx_log values (2)");
      throw boom;
    }),
    boom,
  );
  t.equal(await count(server, "select count(*) as n from public.tx_log where n = 2"), 0, "rolled back");

  // Nesting on the same client is refused with a clear error; the outer transaction then rolls back as a whole.
  let nestedError: (Error & { code?: string }) | undefined;
  await t.rejects(
    withPgClientTransaction(client, async (pgClient) => {
      await pgClient.query("insert into public.tx_log values (3)");
      try {
        await withPgClientTransaction(pgClient, async (inner) => inner.query("insert into public.tx_log values (4)"));
      } catch (error) {
        nestedError = error as Error & { code?: string };
        throw error;
      }
    }),
    { code: "HUB_NESTED_TRANSACTION" },
  );
  t.equal(nestedError?.code, "HUB_NESTED_TRANSACTION");
  t.match(nestedError?.message, /already inside a transaction/);
  t.equal(await count(server, "select count(*) as n from public.tx_log where n in (3, 4)"), 0, "neither the outer nor the inner insert was kept");

  // The refusal happens before any statement: an outer transaction that catches it still commits its own work.
  await withPgClientTransaction(client, async (pgClient) => {
    await pgClient.query("insert into public.tx_log values (5)");
    await t.rejects(withPgClientTransaction(pgClient, async () => "never"), { code: "HUB_NESTED_TRANSACTION" });
  });
  t.equal(await count(server, "select count(*) as n from public.tx_log where n = 5"), 1, "outer work committed");

  // Two different clients are independent, and withPgPoolTransaction still rolls back.
  const other = await server.dbPool.connect();
  t.teardown(() => other.release());
  await withPgClientTransaction(client, async (a) => {
    await withPgClientTransaction(other, async (b) => {
      await a.query("insert into public.tx_log values (6)");
      await b.query("insert into public.tx_log values (7)");
    });
  });
  t.equal(await count(server, "select count(*) as n from public.tx_log where n in (6, 7)"), 2);
  await t.rejects(
    withPgPoolTransaction(server.dbPool, async (pgClient) => {
      await pgClient.query("insert into public.tx_log values (8)");
      throw new Error("pool boom");
    }),
    /pool boom/,
  );
  t.equal(await count(server, "select count(*) as n from public.tx_log where n = 8"), 0);
});

t.test("a reset script: drop the schemas, then runMigrations on a client it holds", async (t) => {
  const dir = writeFiles(path.join(tmpDir(t), "migrations"), {
    "001-app.sql": "create schema app; create table app.game (id int primary key);",
    "skip-002-coinflip.sql": "this file is a disabled example and is not sql;",
  });
  const server = await startTestServer({ userDatabaseMigrationsPath: dir });
  t.teardown(() => server.stop());
  await createPlayer(server.dbPool, { casinoId: server.playgroundCasinoId, uname: "before-reset" });
  await server.dbPool.query("insert into app.game values (1)");

  const pgClient = new pg.Client({ connectionString: server.superuserDatabaseUrl });
  await pgClient.connect();
  t.teardown(() => pgClient.end());
  await pgClient.query("drop schema app, hub, hub_hidden, hub_secret cascade");
  const { applied } = await runMigrations({ pgClient, userDatabaseMigrationsPath: dir });
  t.ok(applied.length > 1, `applied ${applied.join(", ")}`);
  t.equal(applied.at(-1), "001-app.sql", "the user's migrations after the core ones");
  t.notOk(applied.some((name) => name.startsWith("skip-")), "the skip- file is not a migration");
  t.equal(await count(server, "select count(*) as n from hub.user where uname = 'before-reset'"), 0, "the old data is gone");
  t.equal(await count(server, "select count(*) as n from app.game"), 0, "the user's schema is back, empty");
  t.equal(await count(server, "select count(*) as n from hub.casino"), 1, "the core migrations ran again (the playground casino)");

  // Once each: a second run applies nothing; the advisory lock was released on the client.
  t.same((await runMigrations({ pgClient, userDatabaseMigrationsPath: dir })).applied, []);
  t.same((await pgClient.query("select count(*)::int as n from pg_locks where locktype = 'advisory' and pid = pg_backend_pid()")).rows[0].n, 0, "no advisory lock left on the client");

  // Each migration commits on its own: inside a transaction of the caller it is refused before any statement.
  await t.rejects(
    withPgClientTransaction(pgClient, () => runMigrations({ pgClient, userDatabaseMigrationsPath: dir })),
    { code: "HUB_INVALID_ARGUMENT", message: /inside a withPgClientTransaction transaction/ },
  );
  await t.rejects(runMigrations({ pgClient: undefined as never }), { code: "HUB_INVALID_ARGUMENT" });
});

t.test("the newest template's start: POSTGRAPHILE_DATABASE_URL with SUPERUSER_DATABASE_URL, a skip- migration, LOG_PRETTY=true", async (t) => {
  // A database of the test kit's cluster, and its two URLs as the template's .env names them.
  const db = await startTestServer();
  t.teardown(() => db.stop());
  const dir = tmpDir(t);
  const migrations = writeFiles(path.join(dir, "migrations"), {
    "001-note.sql": "create schema app; create table app.note (id int primary key, body text not null);",
    // The template's disabled example: it would fail if it ran.
    "skip-002-coinflip.sql": "this is a disabled example, not sql;",
  });
  const config = path.join(dir, "hub.config.mjs");
  fs.writeFileSync(config, `export default { userDatabaseMigrationsPath: ${JSON.stringify(migrations)} };\n`);
  const server = await startServerProcess({
    POSTGRAPHILE_DATABASE_URL: db.databaseUrl,
    SUPERUSER_DATABASE_URL: db.superuserDatabaseUrl,
    DATABASE_URL: "",
    HUB_CONFIG: config,
    // Pretty whatever NODE_ENV is: production would otherwise log JSON.
    NODE_ENV: "production",
    HOST: "127.0.0.1",
    LOG_PRETTY: "true",
  });
  t.teardown(() => server.child.kill("SIGKILL"));

  const res = await fetch(`${server.url}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ query: "{ hubCurrentUser { id } }" }),
  });
  t.same(await res.json(), { data: { hubCurrentUser: null } }, "GraphQL served over the POSTGRAPHILE_DATABASE_URL connection");
  const recorded = await db.dbPool.query<{ name: string }>("select name from hub_secret.migration where kind = 'user' order by name");
  t.same(recorded.rows.map((r) => r.name), ["001-note.sql"], "the numbered file applied, the skip- file not");

  server.child.kill("SIGTERM");
  t.equal(await server.exited, 0, "stops cleanly");
  const output = server.output();
  t.equal(output.match(/skipped a migration file whose name does not start with a number/g)?.length, 1, "one line about the skipped file");
  t.match(output, /skip-002-coinflip\.sql/, "naming it");
  t.match(output, /INFO.*hub listening on/, "human-readable lines (pino-pretty)");
  t.notMatch(output, /^\{"level"/m, "no JSON lines");
});

t.test("a GraphQL connection named POSTGRAPHILE_DATABASE_URL is named so when it fails", async (t) => {
  const db = await startTestServer();
  t.teardown(() => db.stop());
  const { code, stderr } = await runServerExpectingFailure({
    POSTGRAPHILE_DATABASE_URL: "postgres://someone:secretpw@127.0.0.1:1/db",
    SUPERUSER_DATABASE_URL: db.superuserDatabaseUrl,
    DATABASE_URL: "",
    HUB_EXAMPLES: "off",
  });
  t.equal(code, 1);
  t.match(stderr, /Cannot connect to POSTGRAPHILE_DATABASE_URL \(postgres:\/\/someone:\*\*\*@127\.0\.0\.1:1\/db\)/);
  t.match(stderr, /HUB_DB_CONNECT/);
  t.notMatch(stderr, /secretpw/);
});
