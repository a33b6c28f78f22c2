import "./helpers/env.js";
import t from "tap";
import { defaultPlugins, HubGameConfigPlugin } from "@hubpkg/hub";
import { createGraphQLClient, createCurrency, createPlayerBalance, createHouseBankroll, clientSeedForOutcome, createHashChain, startTestServer, type TestServer } from "@hubpkg/hub/test";
import { TowerPlugin, referenceMigrationsPath, towerPayout } from "@hubpkg/hub/plugins";
import { makePlayer, type Player } from "./helpers/credentials.js";

/*
 * A hub whose only game is a custom one: HubGameConfigPlugin with
 * customGameConfigs alone still defines the result types the custom game
 * answers with (HubBadHashChainError, HubRiskError), so the server starts
 * and the game plays, refusals included.
 */

const CURRENCY = "CHIPS";
const THREE_TILES = [{ weight: 1, profit: 0 }, { weight: 1, profit: 0 }, { weight: 1, profit: 0 }];

let hub: TestServer;
let alice: Player;

t.before(async () => {
  hub = await startTestServer({
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: referenceMigrationsPath,
    plugins: [...defaultPlugins, TowerPlugin({ maxFloor: 2 }), HubGameConfigPlugin({ customGameConfigs: { TOWER: {} } })],
  });
  alice = await makePlayer(hub.superuserDatabaseUrl, "tower-only-alice", { casinoName: "tower-only" });
  await createCurrency(hub.dbPool, { casinoId: alice.casinoId, key: CURRENCY, displayUnitName: "chips", displayUnitScale: 1 });
  await createHouseBankroll(hub.dbPool, { casinoId: alice.casinoId, currencyKey: CURRENCY, amount: 10_000 });
  await createPlayerBalance(hub.dbPool, { userId: alice.userId, experienceId: alice.experienceId, currencyKey: CURRENCY, amount: 1_000_000 });
});
t.teardown(() => hub?.stop());

const START = `mutation($i: StartTowerInput!) { startTower(input: $i) { result { __typename
  ... on StartTowerSuccess { balance game { id status } }
  ... on HubRiskError { message riskLimits { maxPayout } } } } }`;
const MOVE = `mutation($i: MoveTowerInput!) { moveTower(input: $i) { result { __typename
  ... on MoveTowerSuccess { survived balance game { status floor payout } }
  ... on HubBadHashChainError { message } } } }`;

t.test("the schema: the shared result types and hubRiskLimits, no hubMakeOutcomeBet", async (t) => {
  const schema = await createGraphQLClient(hub.url, alice.header).request<any>(`{
    bad: __type(name: "HubBadHashChainError") { name } risk: __type(name: "HubRiskError") { name }
    limit: __type(name: "HubRiskLimit") { name } __schema { mutationType { fields { name } } } }`);
  t.same([schema.bad?.name, schema.risk?.name, schema.limit?.name], ["HubBadHashChainError", "HubRiskError", "HubRiskLimit"]);
  const mutations = schema.__schema.mutationType.fields.map((f: { name: string }) => f.name);
  t.ok(mutations.includes("startTower"));
  t.notOk(mutations.includes("hubMakeOutcomeBet"), "no outcome bet kind, no hubMakeOutcomeBet");
  const limits = await createGraphQLClient(hub.url, alice.header).request<any>(`{ hubRiskLimits(gameKinds: [TOWER]) { currency gameKind maxPayout } }`);
  t.same(limits.hubRiskLimits, [{ currency: CURRENCY, gameKind: "TOWER", maxPayout: 10_000 }]);
});

t.test("a climb to the top, a bad chain and a risk refusal", async (t) => {
  const gql = createGraphQLClient(hub.url, alice.header);
  const refused = (await gql.request<any>(START, { i: { wager: 100_000, currency: CURRENCY } })).startTower.result;
  t.match(refused, { __typename: "HubRiskError", riskLimits: { maxPayout: 10_000 } }, "a climb the bankroll cannot cover");

  const started = (await gql.request<any>(START, { i: { wager: 1000, currency: CURRENCY } })).startTower.result;
  t.equal(started.__typename, "StartTowerSuccess");
  const gameId = started.game.id;
  const bad = (await gql.request<any>(MOVE, { i: { gameId, tile: 0, hashChainId: "00000000-0000-7000-8000-000000000000", clientSeed: "x" } })).moveTower.result;
  t.match(bad, { __typename: "HubBadHashChainError", message: /is not an active chain of this player/ });

  const chain = await createHashChain(hub.dbPool, { userId: alice.userId, casinoId: alice.casinoId, experienceId: alice.experienceId, maxIteration: 100 });
  let last: any;
  for (let floor = 1; floor <= 2; floor++) {
    const clientSeed = await clientSeedForOutcome(hub.dbPool, { hashChainId: chain.id, outcomes: THREE_TILES, outcomeIdx: 2 });
    last = (await gql.request<any>(MOVE, { i: { gameId, tile: 0, hashChainId: chain.id, clientSeed } })).moveTower.result;
    t.match(last, { __typename: "MoveTowerSuccess", survived: true, game: { floor } });
  }
  t.match(last, { game: { status: "CASHED_OUT", payout: towerPayout(1000, 2) }, balance: 1_000_000 - 1000 + towerPayout(1000, 2) }, "the top floor cashes out by itself");
});
