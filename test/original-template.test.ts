import "./helpers/env.js";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";
import { defaultPlugins, type RiskPolicyArgs } from "@hubpkg/hub";
import { dbLockPlayerBalance, withPgPoolTransaction } from "@hubpkg/hub/db";
import { riskLimitsOf } from "@hubpkg/hub/hash-chain";
import { gql } from "@hubpkg/hub/graphile";
import {
  startTestServer,
  createPlayer,
  createExperience,
  createPlayerBalance,
  createHashChain,
  createHouseBankroll,
  getHouseBankroll,
  getNextHash,
  getPlayerBalance,
  type HubTestServer,
} from "@hubpkg/hub/test";
import { TowerPlugin, safeDoorOf, towerMultiplier } from "./fixtures/original-template/tower-plugin.js";

/*
 * The other revision's controller template, replayed: a tower plugin written
 * its way (test/fixtures/original-template/), loaded with defaultPlugins only
 * (no HubGameConfigPlugin), and the test kit called as its tests call it:
 * createHouseBankroll again and again on one casino, createHashChain with
 * maxIterations, hub.authenticate(userId, experienceId).graphqlClient.
 * Where the template leaves the outcome to chance and retries, these tests
 * read the chain's next hash (getNextHash) and pick the door they want.
 */

const migrations = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures/original-template/migrations");
const riskPolicy = ({ bankroll }: { bankroll: number }) => ({ maxPayout: bankroll * 0.1 });
const MAX_FLOOR = 3;

const START = gql`
  mutation StartGame($input: StartTowerGameInput!) {
    startTowerGame(input: $input) {
      result {
        __typename
        ... on StartTowerGameSuccess { game { id status wager doors currentLevel } }
        ... on HubRiskError { message riskLimits { maxPayout } }
        ... on HubBadHashChainError { message }
      }
    }
  }
`;
const CLIMB = gql`
  mutation Climb($input: ClimbTowerInput!) {
    climbTower(input: $input) {
      result {
        __typename
        ... on ClimbTowerSuccess { game { status currentLevel } safe safeDoor autoCashout payout }
        ... on HubBadHashChainError { message }
      }
    }
  }
`;
const CASHOUT = gql`
  mutation Cashout($input: CashoutTowerInput!) {
    cashoutTower(input: $input) { game { status } payout }
  }
`;

interface StartResult {
  startTowerGame: {
    result: {
      __typename: string;
      game?: { id: string; status: string; wager: string; doors: number; currentLevel: number };
      message?: string;
      riskLimits?: { maxPayout: number };
    };
  };
}
interface ClimbResult {
  climbTower: {
    result: {
      __typename: string;
      game?: { status: string; currentLevel: number };
      safe?: boolean;
      safeDoor?: number;
      autoCashout?: boolean | null;
      payout?: string | null;
      message?: string;
    };
  };
}

let hub: HubTestServer;
let players = 0;

t.before(async () => {
  hub = await startTestServer({
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    plugins: [...defaultPlugins, TowerPlugin({ maxFloor: MAX_FLOOR, riskPolicy })],
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: migrations,
  });
});
t.teardown(() => hub?.stop());

/** What each of the template's tests sets up: an experience, a player with a balance, a funded bankroll, a chain. */
async function setUp(opts: { balance?: number; bankroll?: number; maxIterations?: number } = {}) {
  const experience = await createExperience(hub.dbPool, { casinoId: hub.playgroundCasinoId });
  const player = await createPlayer(hub.dbPool, { casinoId: hub.playgroundCasinoId, uname: `climber-${++players}` });
  await createPlayerBalance(hub.dbPool, { userId: player.id, experienceId: experience.id, currencyKey: "HOUSE", amount: opts.balance ?? 1000 });
  await createHouseBankroll(hub.dbPool, { casinoId: hub.playgroundCasinoId, currencyKey: "HOUSE", amount: opts.bankroll ?? 1_000_000 });
  const hashChain = await createHashChain(hub.dbPool, {
    userId: player.id,
    experienceId: experience.id,
    casinoId: hub.playgroundCasinoId,
    ...(opts.maxIterations !== undefined ? { maxIterations: opts.maxIterations } : {}),
  });
  const { graphqlClient } = await hub.authenticate(player.id, experience.id);
  const balance = async () => (await getPlayerBalance(hub.dbPool, { userId: player.id, experienceId: experience.id, currencyKey: "HOUSE" }))?.amount;
  const start = (input: Record<string, unknown> = {}) =>
    graphqlClient.request<StartResult>(START, { input: { wager: 100, currency: "HOUSE", doors: 2, hashChainId: hashChain.id, clientSeed: "start", ...input } });
  /** Climb through the door that is (or is not) the safe one for this seed. */
  const climb = async (gameId: string, want: "safe" | "bust", clientSeed = "climb") => {
    const { hash } = await getNextHash(hub.dbPool, { hashChainId: hashChain.id });
    const safe = safeDoorOf(hash, clientSeed, 2);
    const door = want === "safe" ? safe : 1 - safe;
    return (await graphqlClient.request<ClimbResult>(CLIMB, { input: { gameId, door, clientSeed } })).climbTower.result;
  };
  return { experience, player, hashChain, graphqlClient, balance, start, climb };
}

t.test("the test kit as the template's basic test calls it", async (t) => {
  const experience = await createExperience(hub.dbPool, { casinoId: hub.playgroundCasinoId });
  const dbPlayer = await createPlayer(hub.dbPool, { casinoId: hub.playgroundCasinoId, uname: "player1" });
  await createPlayerBalance(hub.dbPool, { userId: dbPlayer.id, experienceId: experience.id, currencyKey: "HOUSE", amount: 100 });
  t.equal(dbPlayer.uname, "player1");
  t.equal((await getPlayerBalance(hub.dbPool, { userId: dbPlayer.id, experienceId: experience.id, currencyKey: "HOUSE" }))?.amount, 100);

  // Called again: the balance is set anew, and the ledger still sums to it.
  for (const amount of [250, 40, 40, 0]) {
    const balance = await createPlayerBalance(hub.dbPool, { userId: dbPlayer.id, experienceId: experience.id, currencyKey: "HOUSE", amount });
    t.equal(balance.amount, amount, `set to ${amount}`);
  }
  const ledger = await hub.dbPool.query<{ sum: number }>(
    "select coalesce(sum(amount_delta), 0)::float8 as sum from hub.ledger where account = 'player' and user_id = $1",
    [dbPlayer.id],
  );
  t.equal(ledger.rows[0]!.sum, 0, "every change went through the ledger");
});

t.test("createHouseBankroll again and again on one casino, as the template's tests do", async (t) => {
  const casinoId = hub.playgroundCasinoId;
  for (const amount of [1_000_000, 1_000_000, 1000, 1_000_000]) {
    const bankroll = await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: "HOUSE", amount });
    t.equal(bankroll.amount, amount, `set to ${amount}`);
  }
  t.equal((await getHouseBankroll(hub.dbPool, { casinoId, currencyKey: "HOUSE" }))?.amount, 1_000_000);
  const ledger = await hub.dbPool.query<{ sum: number }>(
    "select sum(amount_delta)::float8 as sum from hub.ledger where account = 'house' and casino_id = $1 and currency_key = 'HOUSE'",
    [casinoId],
  );
  t.equal(ledger.rows[0]!.sum, 1_000_000, "every change went through the ledger");
});

t.test("createHashChain: maxIterations (the template's name) and maxIteration (the hub's)", async (t) => {
  const { player, experience } = await setUp();
  const owner = { userId: player.id, experienceId: experience.id, casinoId: hub.playgroundCasinoId };
  t.equal((await createHashChain(hub.dbPool, { ...owner, maxIterations: 20 })).max_iteration, 20);
  t.equal((await createHashChain(hub.dbPool, { ...owner, maxIteration: 30 })).max_iteration, 30);
  t.equal((await createHashChain(hub.dbPool, { ...owner, maxIteration: 40, maxIterations: 40 })).max_iteration, 40);
  await t.rejects(createHashChain(hub.dbPool, { ...owner, maxIteration: 40, maxIterations: 50 }), { code: "INVALID_ARGUMENT", message: /two names of one length/ });
});

t.test("dbLockPlayerBalance with casinoId, and the risk policy asked the template's way", async (t) => {
  const { player, experience } = await setUp({ balance: 700 });
  const input = { userId: player.id, experienceId: experience.id, currencyKey: "HOUSE" };
  const locked = await withPgPoolTransaction(hub.dbPool, async (pgClient) => ({
    without: await dbLockPlayerBalance(pgClient, input),
    same: await dbLockPlayerBalance(pgClient, { ...input, casinoId: hub.playgroundCasinoId }),
    other: await dbLockPlayerBalance(pgClient, { ...input, casinoId: "00000000-0000-7000-8000-000000000000" }),
  }));
  t.match(locked, { without: { amount: 700 }, same: { amount: 700, casino_id: hub.playgroundCasinoId }, other: undefined });

  const asked: RiskPolicyArgs[] = [];
  const policy = (args: RiskPolicyArgs) => (asked.push(args), { maxPayout: args.bankroll / 10 });
  t.same(policy({ type: "get-limits", currency: "HOUSE", bankroll: 1000 }), { maxPayout: 100 }, "called as the template calls it");
  t.same(riskLimitsOf(policy, { currency: "HOUSE", bankroll: 5000, displayUnitName: "house", displayUnitScale: 1 }), { maxPayout: 500 });
  t.same(asked[1], { type: "get-limits", currency: "HOUSE", bankroll: 5000, displayUnitName: "house", displayUnitScale: 1 }, "the hub passes every field");
});

t.test("the tower's mutations and the hub's result types are in the schema without HubGameConfigPlugin", async (t) => {
  const { graphqlClient } = await setUp();
  const schema = await graphqlClient.request<any>(gql`
    { __schema { mutationType { fields { name } } } risk: __type(name: "HubRiskError") { name } bad: __type(name: "HubBadHashChainError") { name } }
  `);
  const names = schema.__schema.mutationType.fields.map((f: { name: string }) => f.name);
  for (const name of ["startTowerGame", "climbTower", "cashoutTower"]) t.ok(names.includes(name), name);
  t.notOk(names.includes("hubMakeOutcomeBet"), "no game configuration, no outcome bets");
  t.same([schema.risk?.name, schema.bad?.name], ["HubRiskError", "HubBadHashChainError"]);
});

t.test("start, climb a floor, cash out: the template's flow, with its payouts", async (t) => {
  const { start, climb, balance, graphqlClient } = await setUp();
  const started = (await start()).startTowerGame.result;
  t.match(started, { __typename: "StartTowerGameSuccess", game: { status: "ACTIVE", wager: "100", doors: 2, currentLevel: 0 } });
  t.equal(await balance(), 900, "the wager left the balance");
  const gameId = started.game!.id;
  await t.rejects(start(), /You already have an active tower game/);

  const climbed = await climb(gameId, "safe");
  t.match(climbed, { __typename: "ClimbTowerSuccess", safe: true, game: { status: "ACTIVE", currentLevel: 1 }, autoCashout: null });
  const cashedOut = await graphqlClient.request<{ cashoutTower: { game: { status: string }; payout: string } }>(CASHOUT, { input: { gameId } });
  t.same(cashedOut.cashoutTower, { game: { status: "CASHOUT" }, payout: "198" }, "2 doors, 1% edge: 100 × 1.98");
  t.equal(await balance(), 900 + 198);
  await t.rejects(graphqlClient.request(CASHOUT, { input: { gameId } }), /Game is not active/);
  await t.rejects(climb(gameId, "safe"), /Game is not active/);
});

t.test("a wrong door busts the climb and the house keeps the wager", async (t) => {
  const { start, climb, balance, graphqlClient } = await setUp();
  const gameId = (await start()).startTowerGame.result.game!.id;
  const bankrollBefore = (await getHouseBankroll(hub.dbPool, { casinoId: hub.playgroundCasinoId, currencyKey: "HOUSE" }))!.amount;
  const busted = await climb(gameId, "bust");
  t.match(busted, { __typename: "ClimbTowerSuccess", safe: false, game: { status: "BUST", currentLevel: 0 } });
  t.equal(await balance(), 900);
  t.equal((await getHouseBankroll(hub.dbPool, { casinoId: hub.playgroundCasinoId, currencyKey: "HOUSE" }))!.amount, bankrollBefore + 100);
  await t.rejects(graphqlClient.request(CASHOUT, { input: { gameId } }), /Game is not active/);
});

t.test("the top floor cashes out by itself", async (t) => {
  const { start, climb, balance } = await setUp();
  const gameId = (await start()).startTowerGame.result.game!.id;
  for (let floor = 1; floor < MAX_FLOOR; floor++) t.match(await climb(gameId, "safe", `floor-${floor}`), { safe: true, game: { currentLevel: floor, status: "ACTIVE" } });
  const top = await climb(gameId, "safe", "top");
  const payout = Math.floor(100 * towerMultiplier(2, MAX_FLOOR));
  t.match(top, { safe: true, autoCashout: true, payout: String(payout), game: { status: "CASHOUT", currentLevel: MAX_FLOOR } });
  t.equal(await balance(), 900 + payout);
});

t.test("refusals: another player's game, too little balance, a bet the bankroll cannot cover", async (t) => {
  const alice = await setUp();
  const gameId = (await alice.start()).startTowerGame.result.game!.id;
  const bob = await setUp();
  await t.rejects(bob.graphqlClient.request(CLIMB, { input: { gameId, door: 0, clientSeed: "hack" } }), /Game not found/);

  const broke = await setUp({ balance: 50 });
  await t.rejects(broke.start(), /Insufficient balance/);

  // As the template's risk test: a small bankroll set after the others funded a large one.
  const highRoller = await setUp({ balance: 1_000_000, bankroll: 1000 });
  const refused = (await highRoller.start()).startTowerGame.result;
  t.match(refused, { __typename: "HubRiskError", message: String, riskLimits: { maxPayout: 100 } });
  t.equal(await highRoller.balance(), 1_000_000, "nothing was taken");
  await createHouseBankroll(hub.dbPool, { casinoId: hub.playgroundCasinoId, currencyKey: "HOUSE", amount: 1_000_000 });
  t.equal((await highRoller.start()).startTowerGame.result.__typename, "StartTowerGameSuccess", "funded again: accepted");

  await t.rejects(alice.start({ wager: 0 }), /Wager must be at least 1/);
  await t.rejects(alice.graphqlClient.request(START, { input: { wager: 1, currency: "HOUSE", doors: 2, hashChainId: alice.hashChain.id, clientSeed: "x" } }), /already have an active/);
});

t.test("HubBadHashChainError from a plan-based union: unknown, inactive and exhausted chains", async (t) => {
  const unknown = await setUp();
  const noChain = (await unknown.start({ hashChainId: "00000000-0000-0000-0000-000000000000" })).startTowerGame.result;
  t.match(noChain, { __typename: "HubBadHashChainError", message: /not found/ });

  const inactive = await setUp();
  await hub.dbPool.query("update hub.hash_chain set active = false where id = $1", [inactive.hashChain.id]);
  t.match((await inactive.start()).startTowerGame.result, { __typename: "HubBadHashChainError", message: /not found or inactive/ });

  const deactivated = await setUp();
  const gameId = (await deactivated.start()).startTowerGame.result.game!.id;
  await hub.dbPool.query("update hub.hash_chain set active = false where id = $1", [deactivated.hashChain.id]);
  const climbed = await deactivated.graphqlClient.request<ClimbResult>(CLIMB, { input: { gameId, door: 0, clientSeed: "climb" } });
  t.match(climbed.climbTower.result, { __typename: "HubBadHashChainError", message: "No active hash chain" });

  // Two iterations: iteration 1 is the only one a climb can use.
  const short = await setUp({ maxIterations: 2 });
  const shortGame = (await short.start()).startTowerGame.result.game!.id;
  t.match(await short.climb(shortGame, "safe"), { __typename: "ClimbTowerSuccess", safe: true });
  const exhausted = await short.graphqlClient.request<ClimbResult>(CLIMB, { input: { gameId: shortGame, door: 0, clientSeed: "again" } });
  t.match(exhausted.climbTower.result, { __typename: "HubBadHashChainError", message: "Hash chain exhausted" });
});
