/**
 * One connection budget per instance (docs/deployment.md, "Connections: the
 * budget per instance"): how it is split across the pools, refused when too
 * small to run, never exceeded under concurrent load over real HTTP (counted
 * in pg_stat_activity by application_name), and compared at start with the
 * server's max_connections.
 */
import "./helpers/env.js";
import t from "tap";
import pg from "pg";
import { startAndListen } from "@hubpkg/hub";
import { startTestServer, createCasino, createCurrency, createExperience, createHouseBankroll, createPlayer, createPlayerBalance } from "../dist/src/exports/test.js";
import { defaultPlugins, HubGameConfigPlugin } from "../dist/src/index.js";
import { planConnections } from "../dist/src/db/connection-budget.js";
import { gql } from "./helpers/http.js";
import { startServerProcess } from "./helpers/process.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
import { tmpDir } from "./helpers/tmp.js";

const plan = (maxConnections: number | undefined, extra: Partial<Parameters<typeof planConnections>[0]> = {}) =>
  planConnections({ maxConnections, maxConnectionsFrom: "option", pools: undefined, transferWorker: 5, ...extra });

t.test("the split: today's sizes when nothing is set, shares of the budget otherwise", async (t) => {
  t.same(plan(undefined), { graphql: 20, superuser: 10, credentials: 3, transferWorker: 5, listen: 1, total: 39 }, "nothing set: today's pools, 39 in all");
  t.same(plan(undefined, { transferWorker: 0 }).total, 34, "without the transfer worker, 34");
  t.same(plan(39), plan(undefined), "a budget of 39 gives the same sizes");
  t.same(plan(12), { graphql: 6, superuser: 2, credentials: 1, transferWorker: 2, listen: 1, total: 12 });
  t.same(plan(8), { graphql: 2, superuser: 2, credentials: 1, transferWorker: 2, listen: 1, total: 8 }, "8 is the least with the worker");
  t.same(plan(6, { transferWorker: 0 }), { graphql: 2, superuser: 2, credentials: 1, transferWorker: 0, listen: 1, total: 6 }, "6 without it");
  t.same(plan(25, { pools: { superuser: 4 } }), { graphql: 15, superuser: 4, credentials: 2, transferWorker: 3, listen: 1, total: 25 }, "a pool given keeps its size, the others share the rest");
  t.same(plan(undefined, { pools: { graphql: 5 } }).total, 24, "pools without a budget: today's sizes for the others");
  for (const n of [10, 20, 25, 50, 100, 200]) t.equal(plan(n).total, n, `a budget of ${n} is used whole`);
});

t.test("a budget too small to run is refused, naming what each pool needs", async (t) => {
  const dataDir = tmpDir(t);
  await t.rejects(startAndListen({ port: 0, handleSignals: false, logLevel: "silent", dataDir, maxConnections: 7 }), {
    code: "HUB_OPTION_INVALID",
    message: /^Server option "maxConnections" is invalid: received 7, expected an integer >= 8: an instance needs at least LISTEN 1, GraphQL 2, superuser 2, credentials 1, transfer worker 2/,
  });
  await t.rejects(startAndListen({ port: 0, handleSignals: false, logLevel: "silent", dataDir, maxConnections: 10, pools: { graphql: 8 } }), {
    code: "HUB_OPTION_INVALID",
    message: /expected an integer >= 14: .*GraphQL 8.*\(with the sizes the pools option gives\)/,
  });
  await t.rejects(startAndListen({ port: 0, handleSignals: false, logLevel: "silent", dataDir, pools: { graphql: 0 } }), { code: "HUB_OPTION_INVALID", message: /"pools" is invalid at pools\.graphql: received 0, expected an integer >= 1/ });
  await t.rejects(startAndListen({ port: 0, handleSignals: false, logLevel: "silent", dataDir, pools: { listen: 2 } } as never), { code: "HUB_OPTION_INVALID", message: /pools\.listen/ });
});

/** The most connections of one database per application_name seen while `during` runs, sampled as fast as one connection can ask. */
async function peakConnections(url: string, during: Promise<unknown>): Promise<{ total: number; byName: Record<string, number> }> {
  const client = new pg.Client({ connectionString: url, application_name: "budget-test-observer" });
  await client.connect();
  const peak = { total: 0, byName: {} as Record<string, number> };
  let done = false;
  void during.finally(() => (done = true));
  try {
    do {
      const { rows } = await client.query<{ name: string; n: number }>(
        "select application_name as name, count(*)::int as n from pg_stat_activity where datname = current_database() and application_name like 'hub:%' and application_name <> 'hub:test-kit' group by 1",
      );
      const total = rows.reduce((sum, r) => sum + r.n, 0);
      peak.total = Math.max(peak.total, total);
      for (const r of rows) peak.byName[r.name] = Math.max(peak.byName[r.name] ?? 0, r.n);
    } while (!done);
  } finally {
    await client.end();
  }
  return peak;
}

t.test("under 50 concurrent GraphQL requests and bets, one instance never holds more connections than its budget", async (t) => {
  const budget = 12;
  const server = await startTestServer({
    maxConnections: budget,
    plugins: [...defaultPlugins, HubGameConfigPlugin({ outcomeBetConfigs: { GENERAL: { houseEdge: 0.01, saveOutcomes: false } }, hashChainLength: 1000 })],
  });
  t.teardown(() => server.stop());
  const casinoId = (await createCasino(server.dbPool, { name: "budget" })).id;
  await createCurrency(server.dbPool, { casinoId, key: "BTC", displayUnitName: "bits", displayUnitScale: 100 });
  const experienceId = (await createExperience(server.dbPool, { casinoId })).id;
  await createHouseBankroll(server.dbPool, { casinoId, currencyKey: "BTC", amount: 1_000_000_000 });
  const players = await Promise.all(
    Array.from({ length: 10 }, async (_, i) => {
      const userId = (await createPlayer(server.dbPool, { casinoId, uname: `budget-${i}` })).id;
      await createPlayerBalance(server.dbPool, { userId, experienceId, currencyKey: "BTC", amount: 1_000_000 });
      const { token } = await server.authenticate(userId, experienceId);
      const header = { authorization: `session:${token}` };
      const chain = await gql(server.url, "mutation { hubCreateHashChain { hashChain { id } } }", {}, header);
      return { header, hashChainId: chain.body.data!.hubCreateHashChain.hashChain.id as string };
    }),
  );
  const BET = "mutation($input: HubMakeOutcomeBetInput!) { hubMakeOutcomeBet(input: $input) { result { __typename } } }";
  const READ = "{ hubCurrentUser { id } }";
  const round = () =>
    Promise.all(
      Array.from({ length: 50 }, (_, i) => {
        const p = players[i % players.length]!;
        return i % 2 === 0
          ? gql(server.url, BET, { input: { kind: "GENERAL", wager: 10, currency: "BTC", hashChainId: p.hashChainId, clientSeed: `s${i}`, outcomes: [{ weight: 1, profit: 0.98 }, { weight: 1, profit: -1 }] } }, p.header)
          : gql(server.url, READ, {}, p.header);
      }),
    );
  const load = (async () => {
    const answers = [];
    for (let r = 0; r < 4; r++) answers.push(...(await round()));
    return answers;
  })();
  const peak = await peakConnections(server.superuserDatabaseUrl, load);
  const answers = await load;
  const bets = answers.filter((a) => a.body.data?.hubMakeOutcomeBet);
  t.equal(bets.length, 100, "every bet was answered");
  t.ok(bets.every((a) => a.body.data!.hubMakeOutcomeBet.result.__typename === "HubMakeOutcomeBetSuccess"), "and every one succeeded");
  t.ok(answers.every((a) => !a.body.errors), "no request failed");
  t.ok(peak.total <= budget, `at most ${budget} connections at once (peak ${peak.total}: ${JSON.stringify(peak.byName)})`);
  t.equal(peak.byName["hub:graphql"], 6, "the GraphQL pool filled its share of the budget, and no more");
  t.ok((peak.byName["hub:superuser"] ?? 0) <= 2, "the superuser pool kept to its share");
  t.ok((peak.byName["hub:live-notifications"] ?? 0) === 1, "one LISTEN connection");
});

t.test("start-up compares the budget with the server's max_connections and warns, with the numbers, when it cannot fit", async (t) => {
  // The test kit's cluster runs with max_connections 300 (3 reserved for superusers): 297 usable.
  const database = await sharedClusterDatabase(t);
  const env = { ...database, HUB_DATA_DIR: tmpDir(t), HUB_EXAMPLES: "off", LOG_PRETTY: "false" };
  const over = await startServerProcess({ ...env, HUB_MAX_CONNECTIONS: "400" });
  over.child.kill("SIGTERM");
  await over.exited;
  const warning = over
    .output()
    .split("\n")
    .find((line) => line.includes("connection budget"));
  t.ok(warning, "a line about the budget");
  const parsed = JSON.parse(warning!) as Record<string, unknown>;
  t.equal(parsed.level, 40, "at warn");
  t.match(parsed, { budget: 400, serverLimit: 297, maxConnections: 300, superuserReservedConnections: 3, instancesThatFit: 0 });
  t.match(parsed.msg, /may open 400 connections, but the server accepts only 297 \(max_connections 300 - superuser_reserved_connections 3\).*HUB_MAX_CONNECTIONS/);

  const fits = await startServerProcess(env);
  fits.child.kill("SIGTERM");
  await fits.exited;
  const info = JSON.parse(fits.output().split("\n").find((line) => line.includes("connection budget"))!) as Record<string, unknown>;
  t.match(info, { level: 30, budget: 39, serverLimit: 297, instancesThatFit: 7 }, "within the limit: an info line, with how many instances fit");
});
