/**
 * Two servers in one process share nothing mutable: each has its own pools,
 * logger, stats, identity resolver and cache, hash-chain work, casino keys and
 * transfer runtime (src/server-state.ts), and stopping one leaves the other
 * serving. Real servers from the test kit, over real HTTP.
 */
import "./helpers/env.js";
import t from "tap";
import { pino } from "pino";
import { startTestServer, type TestServer } from "../dist/src/exports/test.js";
import { superuserPool } from "../dist/src/exports/db.js";
import { logger } from "../dist/src/exports/logger.js";
import { defaultPlugins, HubGameConfigPlugin, serverStats, startAndListen } from "../dist/src/index.js";
import { createCasino, createCurrency, createExperience, createHouseBankroll, createPlayer, createPlayerBalance } from "../dist/src/exports/test.js";
import { SERVER_STATE } from "../dist/src/start.js";
import { TowerPlugin, referenceMigrationsPath } from "../dist/plugins/index.js";
import type { ServerState } from "../dist/src/server-state.js";
import { gql } from "./helpers/http.js";
import { makePlayer, withPool } from "./helpers/credentials.js";

const stateOf = (server: object): ServerState => {
  const state = (server as { [SERVER_STATE]?: ServerState })[SERVER_STATE];
  if (!state) throw new Error("the server carries no state");
  return state;
};

/** Every line the server's logger writes, from now on (instead of stdout). */
function captureLog(state: ServerState): string[] {
  const lines: string[] = [];
  const stream = (state.log as unknown as Record<symbol, { write(line: string): unknown }>)[pino.symbols.streamSym]!;
  stream.write = (line: string) => lines.push(line);
  return lines;
}

/** A configureApp route that tells which server answered, and its own request count (serverStats(req)). */
const whoAmI = (name: string) => ({
  // Outcome bets, on chains short enough to be computed without a worker thread.
  plugins: [...defaultPlugins, HubGameConfigPlugin({ outcomeBetConfigs: { GENERAL: { houseEdge: 0.01, saveOutcomes: false } }, hashChainLength: 1000 })],
  configureApp: ({ app }: { app: import("express").Express }) => {
    app.get("/who", (req, res) => {
      res.json({ name, requests: serverStats(req).requests.total });
    });
  },
});

const sameDatabase = (pool: { options: { connectionString?: string } }) => new URL(pool.options.connectionString!).pathname;

let a: TestServer;
let b: TestServer;
t.before(async () => {
  // a also runs the reference tower, a plugin written as a user writes one.
  const tower = { extraPgSchemas: ["app"], userDatabaseMigrationsPath: referenceMigrationsPath, plugins: [...whoAmI("a").plugins, TowerPlugin({ maxFloor: 3 })] };
  a = await startTestServer({ logLevel: "info", identityCacheTtlMs: 60_000, transfers: { clockSkewMs: 1111 }, ...whoAmI("a"), ...tower });
  b = await startTestServer({ logLevel: "info", identityCacheTtlMs: 60_000, transfers: { clockSkewMs: 2222 }, ...whoAmI("b") });
});
t.teardown(async () => {
  await b?.stop();
  await a?.stop();
});

t.test("each server has its own state: pools, logger, stats, resolver, chain work, casino keys, transfer runtime", async (t) => {
  const [sa, sb] = [stateOf(a), stateOf(b)];
  t.not(sa, sb);
  for (const pool of ["graphql", "superuser", "credentials"] as const) t.not(sa.pools![pool], sb.pools![pool], `${pool} pool`);
  t.not(sameDatabase(sa.pools!.superuser), sameDatabase(sb.pools!.superuser), "on their own databases");
  t.not(sa.log, sb.log, "logger");
  t.not(sa.stats, sb.stats, "stats");
  t.not(sa.resolver, sb.resolver, "identity resolver");
  t.not(sa.chains, sb.chains, "hash-chain work");
  t.not(sa.chains.segments, sb.chains.segments, "derived segment cache");
  t.not(sa.casinoKeys.remoteSets, sb.casinoKeys.remoteSets, "JWKS fetchers");
  t.not(sa.transfers, sb.transfers, "transfer runtime");
  t.equal(sa.transfers.options.clockSkewMs, 1111, "a's transfer worker runs on a's options");
  t.equal(sb.transfers.options.clockSkewMs, 2222, "b's on b's");
});

t.test("each server's logger receives only its own requests' lines", async (t) => {
  const [linesA, linesB] = [captureLog(stateOf(a)), captureLog(stateOf(b))];
  const [onlyA, onlyB] = [`/only-on-a-${Date.now()}`, `/only-on-b-${Date.now()}`];
  t.equal((await fetch(`${a.url}${onlyA}`)).status, 404);
  t.equal((await fetch(`${b.url}${onlyB}`)).status, 404);
  t.ok(linesA.some((line) => line.includes(onlyA)), "a logged its request");
  t.ok(linesB.some((line) => line.includes(onlyB)), "b logged its request");
  t.notOk(linesA.some((line) => line.includes(onlyB)), "a has no line of b's request");
  t.notOk(linesB.some((line) => line.includes(onlyA)), "b has no line of a's request");
});

t.test("requests are counted by the server that answered them", async (t) => {
  const who = async (server: TestServer) => (await (await fetch(`${server.url}/who`)).json()) as { name: string; requests: number };
  const startA = (await who(a)).requests;
  const startB = (await who(b)).requests;
  for (let i = 0; i < 3; i++) await who(a);
  const nowA = await who(a);
  const nowB = await who(b);
  t.equal(nowA.name, "a");
  t.equal(nowA.requests - startA, 4, "a counted its own four requests since");
  t.equal(nowB.requests - startB, 1, "b counted only its own one");
  t.equal(stateOf(a).stats.snapshot().requests.total, nowA.requests + 1, "the same counter as the state's (plus the answer just counted)");
});

t.test("forgetting a session in one server's resolver cache leaves another server's cache alone", async (t) => {
  // A third server on a's database: the same sessions are valid on both.
  const c = await startAndListen({ port: 0, handleSignals: false, logLevel: "warn", identityCacheTtlMs: 60_000, databaseUrl: a.databaseUrl, superuserDatabaseUrl: a.superuserDatabaseUrl });
  t.teardown(() => c.stop());
  const player = await makePlayer(a.superuserDatabaseUrl, `two-servers-${Date.now()}`);
  const me = "{ hubCurrentUser { id } }";
  for (const url of [a.url, c.url]) t.same((await gql(url, me, {}, player.header)).body.data, { hubCurrentUser: { id: player.userId } }, `valid on ${url}, now cached there`);
  // Revoked without the notification (triggers off for this statement), so only what each server does itself counts.
  await withPool(a.superuserDatabaseUrl, async (pool) => {
    const client = await pool.connect();
    try {
      await client.query("set session_replication_role = replica");
      await client.query("update hub.session set revoked_at = now() where id = $1", [player.sessionId]);
    } finally {
      client.release(true);
    }
  });
  // What hubLogout does on the server that revoked: forget the session in its own cache.
  stateOf(a).resolver!.forgetSession(player.sessionId);
  t.same((await gql(a.url, me, {}, player.header)).body.data, { hubCurrentUser: null }, "a refuses it at once");
  t.same((await gql(c.url, me, {}, player.header)).body.data, { hubCurrentUser: { id: player.userId } }, "c still answers from its own cache (until its TTL or the notification)");
});

t.test("a bet's hash is derived in the cache of the server that took the bet", async (t) => {
  const casinoId = (await createCasino(a.dbPool, { name: "two-servers" })).id;
  await createCurrency(a.dbPool, { casinoId, key: "BTC", displayUnitName: "bits", displayUnitScale: 100 });
  const experienceId = (await createExperience(a.dbPool, { casinoId })).id;
  await createHouseBankroll(a.dbPool, { casinoId, currencyKey: "BTC", amount: 10_000_000 });
  const userId = (await createPlayer(a.dbPool, { casinoId, uname: "bettor" })).id;
  await createPlayerBalance(a.dbPool, { userId, experienceId, currencyKey: "BTC", amount: 10_000 });
  const { graphqlClient } = await a.authenticate(userId, experienceId);
  const chain = await graphqlClient.request<{ hubCreateHashChain: { hashChain: { id: string } } }>("mutation { hubCreateHashChain { hashChain { id } } }");
  const hashChainId = chain.hubCreateHashChain.hashChain.id;
  const [sa, sb] = [stateOf(a), stateOf(b)];
  const sizeOfB = sb.chains.segments.size;
  // b was started last: the module-level hash-chain functions would use b's cache; a's bet must not.
  const bet = await graphqlClient.request<{ hubMakeOutcomeBet: { result: { __typename: string } } }>(
    `mutation($input: HubMakeOutcomeBetInput!) { hubMakeOutcomeBet(input: $input) { result { __typename } } }`,
    { input: { kind: "GENERAL", wager: 100, currency: "BTC", hashChainId, clientSeed: "seed", outcomes: [{ weight: 1, profit: 0.98 }, { weight: 1, profit: -1 }] } },
  );
  t.equal(bet.hubMakeOutcomeBet.result.__typename, "HubMakeOutcomeBetSuccess", "a took the bet");
  t.ok([...sa.chains.segments.keys()].some((key) => key.startsWith(`${hashChainId}:`)), "a's cache holds the chain's derived segment");
  t.notOk([...sb.chains.segments.keys()].some((key) => key.startsWith(`${hashChainId}:`)), "b's cache has nothing of it");
  t.equal(sb.chains.segments.size, sizeOfB, "b's cache did not change");
});

t.test("a tower move's hash is derived in the cache of the server that took it (the plugin passes context.hashChains)", async (t) => {
  const casinoId = (await createCasino(a.dbPool, { name: "two-servers-tower" })).id;
  await createCurrency(a.dbPool, { casinoId, key: "BTC", displayUnitName: "bits", displayUnitScale: 100 });
  const experienceId = (await createExperience(a.dbPool, { casinoId })).id;
  await createHouseBankroll(a.dbPool, { casinoId, currencyKey: "BTC", amount: 10_000_000 });
  const userId = (await createPlayer(a.dbPool, { casinoId, uname: "climber" })).id;
  await createPlayerBalance(a.dbPool, { userId, experienceId, currencyKey: "BTC", amount: 10_000 });
  const { graphqlClient } = await a.authenticate(userId, experienceId);
  const chain = await graphqlClient.request<{ hubCreateHashChain: { hashChain: { id: string } } }>("mutation { hubCreateHashChain { hashChain { id } } }");
  const hashChainId = chain.hubCreateHashChain.hashChain.id;
  const started = await graphqlClient.request<{ startTower: { result: { __typename: string; game?: { id: string } } } }>(
    `mutation { startTower(input: { wager: 100, currency: "BTC" }) { result { __typename ... on StartTowerSuccess { game { id } } } } }`,
  );
  t.equal(started.startTower.result.__typename, "StartTowerSuccess", "a started the climb");
  const [sa, sb] = [stateOf(a), stateOf(b)];
  const sizeOfB = sb.chains.segments.size;
  // b was started last: the module-level getIntermediateHash would use b's cache; a's move must not.
  const moved = await graphqlClient.request<{ moveTower: { result: { __typename: string } } }>(
    `mutation($input: MoveTowerInput!) { moveTower(input: $input) { result { __typename } } }`,
    { input: { gameId: started.startTower.result.game!.id, tile: 0, hashChainId, clientSeed: "seed" } },
  );
  t.equal(moved.moveTower.result.__typename, "MoveTowerSuccess", "a took the move");
  t.ok([...sa.chains.segments.keys()].some((key) => key.startsWith(`${hashChainId}:`)), "a's cache holds the chain's derived segment");
  t.notOk([...sb.chains.segments.keys()].some((key) => key.startsWith(`${hashChainId}:`)), "b's cache has nothing of it");
  t.equal(sb.chains.segments.size, sizeOfB, "b's cache did not change");
});

t.test("the module-level exports follow the server started last; once it stops, the one before; the other keeps serving", async (t) => {
  const [sa, sb] = [stateOf(a), stateOf(b)];
  t.equal(sameDatabase(superuserPool as never), sameDatabase(sb.pools!.superuser), "superuserPool is b's");
  const streamOf = (log: object) => (log as Record<symbol, unknown>)[pino.symbols.streamSym];
  t.equal(streamOf(logger), streamOf(sb.log), "logger is b's");
  await b.stop();
  await t.rejects(fetch(`${b.url}/who`), "b no longer answers");
  t.equal(sameDatabase(superuserPool as never), sameDatabase(sa.pools!.superuser), "superuserPool is a's again");
  t.equal(streamOf(logger), streamOf(sa.log), "logger is a's again");
  t.same(((await (await fetch(`${a.url}/who`)).json()) as { name: string }).name, "a", "a still serves its routes");
  t.same((await gql(a.url, "{ __typename }")).body.data, { __typename: "Query" }, "and GraphQL");
  const { rows } = await superuserPool.query<{ one: number }>("select 1 as one");
  t.same(rows, [{ one: 1 }], "a's pool answers through the façade");
});
