/**
 * The hub as a Fastify plugin (docs/fastify-plugin.md): registered on a
 * user's own instance beside the user's routes and hooks, answering both
 * through inject() and over a real socket (a WebSocket subscription
 * included); buildHub's instance; two hubs in one process on two databases;
 * everything released at close().
 */
import "./helpers/env.js";
import t from "tap";
import type * as Tap from "tap";
import Fastify, { type FastifyInstance } from "fastify";
import pg from "pg";
import hub, { buildHub } from "@hubpkg/hub";
import { createExperience, createPlayer, createPlayerBalance, startTestServer } from "@hubpkg/hub/test";
import { superuserPool } from "../dist/src/exports/db.js";
import { makePlayer, type Player } from "./helpers/credentials.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
import { connected, feed, until, wsClient } from "./helpers/ws.js";

const quiet = { logLevel: "silent" as const, drainMs: 0, socketRebalance: false, identityCacheTtlMs: 60_000 };
const CURRENT_USER = "{ hubCurrentUser { id } }";

async function database(t: Tap.Test) {
  const db = await sharedClusterDatabase(t);
  return { databaseUrl: db.DATABASE_URL, superuserDatabaseUrl: db.SUPERUSER_DATABASE_URL };
}

const databaseName = (url: string) => new URL(url).pathname.slice(1);

/** A user's app with its own hook and routes, the hub registered in the middle. */
async function userApp(db: { databaseUrl: string; superuserDatabaseUrl: string }): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });
  app.addHook("onSend", async (_request, reply, payload) => {
    void reply.header("x-user-hook", "seen");
    return payload;
  });
  app.get("/mine/before", async (request) => ({ identity: request.identity ?? null }));
  await app.register(hub, {
    ...quiet,
    ...db,
    configureApp: ({ app: express }) => {
      express.get("/express/identity", (req, res) => {
        res.json({ kind: req.identity?.kind ?? null });
      });
    },
  });
  app.get("/mine/after", async (request) => ({ userId: request.identity?.kind === "user" ? request.identity.user.id : null }));
  return app;
}

t.test("a hub inside a user's app: its routes and hooks beside the hub's, through inject() and over a socket, a subscription included; close() releases it", async (t) => {
  const db = await database(t);
  const app = await userApp(db);
  let closed = false;
  t.teardown(() => (closed ? undefined : app.close()));
  const player = await makePlayer(db.superuserDatabaseUrl, "plugin-alice");
  const auth = player.header;

  // inject(): no socket.
  const before = await app.inject({ url: "/mine/before", headers: auth });
  t.equal(before.statusCode, 200);
  t.equal(before.headers["x-user-hook"], "seen", "the user's hook runs on the user's route");
  t.match(before.json(), { identity: { kind: "user", user: { id: player.userId } } }, "request.identity on a route registered before the hub");
  const after = await app.inject({ url: "/mine/after", headers: auth });
  t.same(after.json(), { userId: player.userId }, "request.identity on a route registered after the hub");
  t.same((await app.inject({ url: "/mine/after" })).json(), { userId: null }, "no header: no identity");
  const graphql = await app.inject({ method: "POST", url: "/graphql", headers: { ...auth, "content-type": "application/json" }, payload: { query: CURRENT_USER } });
  t.equal(graphql.statusCode, 200);
  t.same(graphql.json(), { data: { hubCurrentUser: { id: player.userId } } }, "GraphQL POST answers through inject()");
  t.equal(graphql.headers["x-user-hook"], "seen", "the user's hook runs on the hub's routes too");
  const get = await app.inject({ url: `/graphql?query=${encodeURIComponent("{ __typename }")}` });
  t.same(get.json(), { data: { __typename: "Query" } }, "GraphQL GET");
  const health = await app.inject({ url: "/readyz" });
  t.equal(health.statusCode, 200, "readiness");

  // The façades follow the hub registered as a plugin.
  const { rows } = await superuserPool.query<{ db: string }>("select current_database() as db");
  t.equal(rows[0]!.db, databaseName(db.superuserDatabaseUrl), "superuserPool is this hub's");

  // A real socket: the user's route, GraphQL, the Express app, and a WebSocket subscription.
  await app.listen({ port: 0, host: "127.0.0.1" });
  const address = app.server.address();
  const url = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
  const mine = await fetch(`${url}/mine/after`, { headers: auth });
  t.same(await mine.json(), { userId: player.userId }, "the user's route over HTTP");
  const express = await fetch(`${url}/express/identity`, { headers: auth });
  t.equal(express.status, 200);
  t.same(await express.json(), { kind: "user" }, "configureApp's Express route over HTTP, req.identity set");
  const overHttp = await fetch(`${url}/graphql`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ query: CURRENT_USER }) });
  t.same(await overHttp.json(), { data: { hubCurrentUser: { id: player.userId } } }, "GraphQL over HTTP");
  await subscriptionDelivers(t, url, player, db.superuserDatabaseUrl);

  const pools = app.hubServer.pools;
  await app.close();
  closed = true;
  t.ok(pools.graphql.ending && pools.superuser.ending && pools.credentials.ending, "close() ended the hub's pools");
});

/** A balance subscription over the user's server receives the change made in the database. */
async function subscriptionDelivers(t: Tap.Test, url: string, player: Player, superuserUrl: string): Promise<void> {
  const pool = new pg.Pool({ connectionString: superuserUrl, max: 1 });
  pool.on("error", () => undefined);
  t.teardown(() => pool.end());
  await createPlayerBalance(pool, { userId: player.userId, experienceId: player.experienceId, currencyKey: "HOUSE", amount: 100 });
  const client = wsClient(url, { authorization: player.header.authorization });
  t.teardown(() => client.dispose());
  const ready = connected(client);
  const alerts = feed<{ hubBalanceAlert: { currencyKey: string } }>(client, "subscription { hubBalanceAlert { currencyKey } }");
  await ready;
  // The subscription is in place once a change reaches it.
  for (let n = 1; alerts.events.length === 0; n++) {
    if (n > 50) throw new Error("no balance alert reached the subscription");
    await pool.query("update hub.balance set amount = amount + 1 where user_id = $1", [player.userId]);
    await until(() => alerts.events.length > 0, 300, () => "").catch(() => undefined);
  }
  t.same(alerts.events[0]!.data, { hubBalanceAlert: { currencyKey: "HOUSE" } }, "a WebSocket subscription over the user's server");
}

t.test("buildHub: the hub's own instance, not listening; routes added before it listens; request ids; the façades follow it", async (t) => {
  const db = await database(t);
  const app = await buildHub({ ...quiet, ...db });
  t.teardown(() => app.close());
  app.get("/added", async (request) => ({ identity: request.identity ?? null, id: request.id }));
  t.equal(app.server.listening, false, "not listening");
  const added = await app.inject({ url: "/added" });
  t.equal(added.statusCode, 200);
  t.match(added.json(), { identity: null, id: /^[0-9a-f-]{36}$/ }, "the hub's request ids (a UUID)");
  const missing = await app.inject({ url: "/nothing-here" });
  t.match(missing.json(), { statusCode: 404, message: "No route for GET /nothing-here" }, "the hub's JSON 404");
  const graphql = await app.inject({ method: "POST", url: "/graphql", payload: { query: "{ __typename }" } });
  t.same(graphql.json(), { data: { __typename: "Query" } });
  const big = await app.inject({ method: "POST", url: "/graphql", headers: { "content-type": "application/json" }, payload: JSON.stringify({ query: `{ __typename } #${"x".repeat(1024 * 1024)}` }) });
  t.equal(big.statusCode, 413, "the body limit (1 MiB)");
  const { rows } = await superuserPool.query<{ db: string }>("select current_database() as db");
  t.equal(rows[0]!.db, databaseName(db.superuserDatabaseUrl), "superuserPool is this hub's");
  const url = await app.listen({ port: 0, host: "127.0.0.1" });
  const overHttp = await fetch(`${url}/added`);
  t.equal(overHttp.headers.get("x-request-id"), ((await overHttp.json()) as { id: string }).id, "over HTTP the request id is echoed in x-request-id");
});

t.test("two hubs in one process on two databases: each knows its own players only", async (t) => {
  const [dbA, dbB] = await Promise.all([database(t), database(t)]);
  const a = Fastify({ logger: false });
  await a.register(hub, { ...quiet, ...dbA });
  t.teardown(() => a.close());
  const b = await buildHub({ ...quiet, ...dbB });
  t.teardown(() => b.close());
  t.not(a.hubServer, b.hubServer, "each has its own state");
  const alice = await makePlayer(dbA.superuserDatabaseUrl, "two-hubs-alice");
  const ask = (app: FastifyInstance) =>
    app.inject({ method: "POST", url: "/graphql", headers: alice.header, payload: { query: CURRENT_USER } }).then((r) => r.json() as { data: { hubCurrentUser: unknown } });
  t.same((await ask(a)).data.hubCurrentUser, { id: alice.userId }, "a knows alice");
  t.equal((await ask(b)).data.hubCurrentUser, null, "b, on another database, does not");
});

t.test("the plugin checks its options like startAndListen, before opening anything", async (t) => {
  const app = Fastify({ logger: false });
  await t.rejects(async () => app.register(hub, { plugin: [] } as never).ready(), { code: "HUB_OPTION_UNKNOWN", message: /Unknown server option "plugin"/ });
  const other = Fastify({ logger: false });
  await t.rejects(async () => other.register(hub, { ...quiet, maxQueryDepth: 0 }).ready(), { code: "HUB_OPTION_INVALID", message: /"maxQueryDepth"/ });
});

t.test("the test kit's server exposes its instance: app and inject()", async (t) => {
  const server = await startTestServer();
  t.teardown(() => server.stop());
  t.equal(server.app.server.listening, true, "app is the listening instance");
  const { token } = await server.authenticate((await createPlayer(server.dbPool, { casinoId: server.playgroundCasinoId, uname: "kit-inject" })).id, (await createExperience(server.dbPool, { casinoId: server.playgroundCasinoId })).id);
  const answer = await server.inject({ method: "POST", url: "/graphql", headers: { authorization: `session:${token}` }, payload: { query: "{ hubCurrentUser { uname } }" } });
  t.same(answer.json(), { data: { hubCurrentUser: { uname: "kit-inject" } } }, "inject() answers as HTTP does, with the identity");
});
