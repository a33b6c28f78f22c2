import "./helpers/env.js";
import path from "node:path";
import { randomUUID } from "node:crypto";
import pg from "pg";
import t from "tap";
import { defaultPlugins, HubGameConfigPlugin, startAndListen, type RunningServer } from "@hubpkg/hub";
import {
  createCasino,
  createCurrency,
  createExperience,
  clientSeedForOutcome,
  createGraphQLClient,
  createHashChain,
  createHouseBankroll,
  createPlayer,
  createPlayerBalance,
  getPlayerBalance,
  startTestServer,
  type GraphQLClient,
  type TestServer,
} from "@hubpkg/hub/test";
import { injectClient } from "./helpers/inject.js";
import { CoinflipBetPlugin } from "../dist/plugins/coinflip-bet.js";
import { TowerPlugin } from "../dist/plugins/tower.js";
import { CoinflipResolverPlugin } from "../dist/plugins/coinflip-resolver.js";
import { CoinflipPlanPlugin } from "../dist/plugins/coinflip-plan.js";
import { DiceOncePlugin } from "./fixtures/games/dice-once.js";
import { ROOT } from "./helpers/process.js";
import { errorOf } from "./helpers/graphql-error.js";

/*
 * Idempotency keys of the money mutations, against two hubs on one database:
 * a replay answers the first result and moves nothing, another input with the
 * same key is refused, 20 simultaneous identical requests make one effect,
 * and a failure to read back a committed bet is OUTCOME_COMMITTED (never a
 * retryable code), after which a retry with the key answers the same bet.
 */

const COIN = [{ weight: 1, profit: 0.98 }, { weight: 1, profit: -1 }];
const BALANCE = 1_000_000;

let hubA: TestServer;
let hubB: RunningServer;
let db: pg.Pool;
let casinoId: string;
let experienceId: string;

t.before(async () => {
  const common = {
    port: 0,
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    handleSignals: false,
    extraPgSchemas: ["app"] as string[],
    userDatabaseMigrationsPath: path.join(ROOT, "plugins/migrations"),
    plugins: [
      ...defaultPlugins,
      HubGameConfigPlugin({ outcomeBetConfigs: { COIN: { houseEdge: 0.01, saveOutcomes: true } }, customGameConfigs: { TOWER: {} }, hashChainLength: 1000 }),
      CoinflipBetPlugin,
      TowerPlugin({ maxFloor: 3 }),
      DiceOncePlugin,
    ],
  } as const;
  // makeCoinflip's two variants share a field name: one per hub.
  hubA = await startTestServer({ ...common, plugins: [...common.plugins, CoinflipResolverPlugin] });
  hubB = await startAndListen({ ...common, plugins: [...common.plugins, CoinflipPlanPlugin], databaseUrl: hubA.databaseUrl, superuserDatabaseUrl: hubA.superuserDatabaseUrl });
  db = new pg.Pool({ connectionString: hubA.superuserDatabaseUrl, max: 4 });
  casinoId = (await createCasino(db, { name: "idem" })).id;
  await createCurrency(db, { casinoId, key: "BTC", displayUnitName: "bits", displayUnitScale: 100 });
  experienceId = (await createExperience(db, { casinoId })).id;
  await createHouseBankroll(db, { casinoId, currencyKey: "BTC", amount: 100_000_000 });
  // Terminates the connection that calls it: in a policy, the GraphQL pool's read-back dies after the commit.
  await db.query(`create function public.hub_test_kill() returns boolean language plpgsql security definer as $$
    begin perform pg_terminate_backend(pg_backend_pid()); return true; end $$`);
  // The dice game's own table (a game author's migration).
  await db.query("create table app.dice_roll (id uuid primary key, roll int not null)");
});
t.teardown(async () => {
  await db?.end();
  await hubB?.stop();
  await hubA?.stop();
});

interface P { userId: string; a: GraphQLClient; b: GraphQLClient; chainId: string }
let players = 0;
async function player(): Promise<P> {
  const userId = (await createPlayer(db, { casinoId, uname: `idem${++players}` })).id;
  await createPlayerBalance(db, { userId, experienceId, currencyKey: "BTC", amount: BALANCE });
  const { token } = await hubA.authenticate(userId, experienceId);
  const chain = await createHashChain(db, { userId, casinoId, experienceId, maxIteration: 1000 });
  // A through inject(), B over HTTP: what is tested is the keys across hubs, not the socket.
  return { userId, a: injectClient(hubA, { authorization: `session:${token}` }), b: createGraphQLClient(hubB.url, { authorization: `session:${token}` }), chainId: chain.id };
}

const BET = `mutation Bet($input: HubMakeOutcomeBetInput!) {
  hubMakeOutcomeBet(input: $input) { result { __typename ... on HubMakeOutcomeBetSuccess { bet { id net wager } } } }
}`;
const betInput = (p: P, idempotencyKey?: string, wager = 100) => ({ kind: "COIN", wager, currency: "BTC", outcomes: COIN, hashChainId: p.chainId, clientSeed: "seed", idempotencyKey });
const betOf = (data: any) => data.hubMakeOutcomeBet.result.bet as { id: string; net: number; wager: number };

const balanceOf = async (p: P) => (await getPlayerBalance(db, { userId: p.userId, experienceId, currencyKey: "BTC" }))!.amount;
const betCount = async (p: P) => Number((await db.query("select count(*) from hub.outcome_bet where user_id = $1", [p.userId])).rows[0].count);
const chainPosition = async (p: P) => (await db.query("select current_iteration from hub.hash_chain where id = $1", [p.chainId])).rows[0].current_iteration as number;

t.test("hubMakeOutcomeBet: a retry with the same key answers the first bet and takes no hash; other input with it is refused", async (t) => {
  const p = await player();
  const key = randomUUID();
  const first = betOf(await p.a.request(BET, { input: betInput(p, key) }));
  const balance = await balanceOf(p);
  const position = await chainPosition(p);
  // Through the other hub too: keys are the player's, not a server's. An explicit null is an omitted field.
  for (const client of [p.a, p.b]) t.same(betOf(await client.request(BET, { input: betInput(p, key) })), first);
  t.same(betOf(await p.a.request(BET, { input: { ...betInput(p, key), metadata: null } })), first);
  t.equal(await balanceOf(p), balance, "the balance moved once");
  t.equal(await betCount(p), 1);
  t.equal(await chainPosition(p), position, "no hash was used by the replays");
  t.equal(balance, BALANCE + first.net);

  const reused = await errorOf(p.a.request(BET, { input: betInput(p, key, 200) }));
  t.equal(reused.extensions?.code, "IDEMPOTENCY_KEY_REUSED");
  t.match(reused.message, key);
  t.match(reused.message, /the same operation with other input/);
  t.equal(await betCount(p), 1, "nothing was done");

  // Another operation with the key: refused the same way, naming it.
  await db.query("insert into hub.faucet_currency (casino_id, currency_key, amount, cooldown_seconds) values ($1, 'BTC', 5, 60) on conflict do nothing", [casinoId]);
  const other = await errorOf(p.a.request(`mutation($k: String) { hubClaimFaucet(input: { currency: "BTC", idempotencyKey: $k }) { faucetClaim { id } } }`, { k: key }));
  t.equal(other.extensions?.code, "IDEMPOTENCY_KEY_REUSED");
  t.match(other.message, /another operation \(hubMakeOutcomeBet\)/);

  // A bet without a key is an ordinary bet, each time.
  await p.a.request(BET, { input: betInput(p) });
  await p.a.request(BET, { input: betInput(p) });
  t.equal(await betCount(p), 3);
});

t.test("a key must be 1 to 255 characters without NUL: BAD_USER_INPUT, nothing done", async (t) => {
  const p = await player();
  for (const key of ["", "k".repeat(256), "a\u0000b"]) {
    const error = await errorOf(p.a.request(BET, { input: betInput(p, key) }));
    t.equal(error.extensions?.code, "BAD_USER_INPUT", `key of ${key.length} characters`);
  }
  betOf(await p.a.request(BET, { input: betInput(p, "k".repeat(255)) }));
  t.equal(await betCount(p), 1);
});

t.test("20 simultaneous identical bets on two hubs: one bet, every answer names it", async (t) => {
  const p = await player();
  const key = randomUUID();
  const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? p.b : p.a).request(BET, { input: betInput(p, key) })));
  const ids = new Set(answers.map((data) => betOf(data).id));
  t.equal(ids.size, 1, "one bet id in all 20 answers");
  t.equal(await betCount(p), 1, "one bet stored");
  t.equal(await balanceOf(p), BALANCE + betOf(answers[0]).net, "the balance moved once");
  t.equal(await chainPosition(p), 999, "one hash used");
});

t.test("simultaneous keyed bets of many players settle in shared commits, each once", async (t) => {
  const ps = await Promise.all(Array.from({ length: 6 }, () => player()));
  const keys = ps.map(() => randomUUID());
  // Bets without a key among them: a group may mix both.
  const rounds = await Promise.all(
    [0, 1, 2, 3].flatMap((r) => ps.map((p, i) => p.a.request(BET, { input: betInput(p, r === 3 ? undefined : keys[i]) }))),
  );
  for (const [i, p] of ps.entries()) {
    const ids = new Set([0, 1, 2].map((r) => betOf(rounds[r * ps.length + i]).id));
    t.equal(ids.size, 1);
    t.equal(await betCount(p), 2, "the keyed bet once, and the bet without a key");
  }
});

t.test("a committed bet whose read-back fails is OUTCOME_COMMITTED; the retry with its key answers the same bet", async (t) => {
  const p = await player();
  // The GraphQL role's read of this player's bets kills its own connection (public.hub_test_kill): the read
  // after the commit fails exactly as when Postgres stops between the two.
  await db.query(`create policy hub_test_kill on hub.outcome_bet as restrictive for select to app_postgraphile using (user_id <> '${p.userId}' or public.hub_test_kill())`);
  const key = randomUUID();
  const failed = await errorOf(p.a.request(BET, { input: betInput(p, key) }));
  await db.query("drop policy hub_test_kill on hub.outcome_bet");
  t.equal(failed.extensions?.code, "OUTCOME_COMMITTED", failed.message);
  t.equal(failed.extensions?.cause, "DATABASE_UNAVAILABLE");
  t.equal(failed.extensions?.idempotencyKey, key);
  t.equal(await betCount(p), 1, "exactly one bet stored");
  const stored = (await db.query("select id from hub.outcome_bet where user_id = $1", [p.userId])).rows[0].id;
  t.equal(failed.extensions?.betId, stored);
  t.match(failed.message, /committed/);

  const retried = betOf(await p.b.request(BET, { input: betInput(p, key) }));
  t.equal(retried.id, stored, "the retry answers the committed bet");
  t.equal(await betCount(p), 1);

  // Without a key the code says the same, so a client does not bet twice.
  await db.query(`create policy hub_test_kill on hub.outcome_bet as restrictive for select to app_postgraphile using (user_id <> '${p.userId}' or public.hub_test_kill())`);
  const bare = await errorOf(p.a.request(BET, { input: betInput(p) }));
  await db.query("drop policy hub_test_kill on hub.outcome_bet");
  t.equal(bare.extensions?.code, "OUTCOME_COMMITTED");
  t.notOk("idempotencyKey" in (bare.extensions ?? {}));
  t.equal(await betCount(p), 2);
});

t.test("a bet whose settlement loses its connection in flight is OUTCOME_UNKNOWN, never DATABASE_UNAVAILABLE; the retry with its key bets once", async (t) => {
  const p = await player();
  // The settlement statement's own backend dies while it runs (a trigger on its insert): the hub cannot
  // know whether it committed, as when Postgres stops with the statement in flight.
  await db.query(`create function public.hub_test_kill_row() returns trigger language plpgsql as $$
    begin perform public.hub_test_kill(); return new; end $$`);
  t.teardown(() => db.query("drop function if exists public.hub_test_kill_row() cascade"));
  const kill = () => db.query(`create trigger hub_test_kill after insert on hub.outcome_bet for each row when (new.user_id = '${p.userId}') execute function public.hub_test_kill_row()`);
  const spare = () => db.query("drop trigger hub_test_kill on hub.outcome_bet");
  await kill();
  const key = randomUUID();
  const lost = await errorOf(p.a.request(BET, { input: betInput(p, key) }));
  const bare = await errorOf(p.a.request(BET, { input: betInput(p) }));
  await spare();
  t.equal(lost.extensions?.code, "OUTCOME_UNKNOWN", lost.message);
  t.equal(lost.extensions?.idempotencyKey, key);
  t.equal(lost.extensions?.cause, "DATABASE_UNAVAILABLE");
  t.match(lost.message, /same idempotency key/);
  t.equal(bare.extensions?.code, "OUTCOME_UNKNOWN", "without a key too");
  t.notOk("idempotencyKey" in (bare.extensions ?? {}));
  t.equal(await betCount(p), 0, "the killed statements rolled back");
  const retried = betOf(await p.b.request(BET, { input: betInput(p, key) }));
  t.equal(await betCount(p), 1, "the retry with the key bet once");
  t.equal(betOf(await p.a.request(BET, { input: betInput(p, key) })).id, retried.id, "and answers that bet again");
});

t.test("a game whose COMMIT loses its connection (dbSettleBet in withPgPoolTransaction) is OUTCOME_UNKNOWN", async (t) => {
  const p = await player();
  // A deferred constraint trigger runs at COMMIT: the backend dies while committing.
  await db.query(`create function public.hub_test_kill_at_commit() returns trigger language plpgsql as $$
    begin perform public.hub_test_kill(); return null; end $$`);
  t.teardown(() => db.query("drop function if exists public.hub_test_kill_at_commit() cascade"));
  await db.query(`create constraint trigger hub_test_kill after insert on app.coinflip_bet deferrable initially deferred
    for each row when (new.user_id = '${p.userId}') execute function public.hub_test_kill_at_commit()`);
  const key = randomUUID();
  const input = { wager: 10, currency: "BTC", side: "HEADS", idempotencyKey: key };
  const lost = await errorOf(p.a.request(FLIP, { input }));
  await db.query("drop trigger hub_test_kill on app.coinflip_bet");
  t.equal(lost.extensions?.code, "OUTCOME_UNKNOWN", lost.message);
  t.equal(lost.extensions?.operation, "makeCoinflipBet");
  const count = async () => Number((await db.query("select count(*) from app.coinflip_bet where user_id = $1", [p.userId])).rows[0].count);
  t.equal(await count(), 0, "the commit did not happen");
  t.equal(await balanceOf(p), BALANCE, "nothing moved");
  await p.b.request(FLIP, { input });
  await p.a.request(FLIP, { input });
  t.equal(await count(), 1, "the retries with the key bet once");
});

const FLIP = `mutation($input: MakeCoinflipBetInput!) { makeCoinflipBet(input: $input) { bet { id net } outcome balance } }`;

t.test("makeCoinflipBet (dbSettleBet's idempotencyKey): a replay answers the first bet, even once the balance is spent", async (t) => {
  const p = await player();
  const key = randomUUID();
  const wager = BALANCE;
  const first = (await p.a.request(FLIP, { input: { wager, currency: "BTC", side: "HEADS", idempotencyKey: key } })).makeCoinflipBet;
  const again = await Promise.all([p.a, p.b, p.a].map((c) => c.request(FLIP, { input: { wager, currency: "BTC", side: "HEADS", idempotencyKey: key } })));
  for (const data of again) t.same(data.makeCoinflipBet, first);
  t.equal(Number((await db.query("select count(*) from app.coinflip_bet where user_id = $1", [p.userId])).rows[0].count), 1);
  t.equal(await balanceOf(p), first.balance);
  const reused = await errorOf(p.a.request(FLIP, { input: { wager, currency: "BTC", side: "TAILS", idempotencyKey: key } }));
  t.equal(reused.extensions?.code, "IDEMPOTENCY_KEY_REUSED");
});

const START = `mutation($input: StartTowerInput!) { startTower(input: $input) { result { __typename ... on StartTowerSuccess { game { id } balance } } } }`;
const MOVE = `mutation($input: MoveTowerInput!) { moveTower(input: $input) { result { __typename ... on MoveTowerSuccess { move { id } survived } } } }`;
const CASH = `mutation($input: CashOutTowerInput!) { cashOutTower(input: $input) { game { id status } balance } }`;

t.test("the tower's steps: start, move and cash out replay their first answer", async (t) => {
  const p = await player();
  const startKey = randomUUID();
  const start = (await p.a.request(START, { input: { wager: 1000, currency: "BTC", idempotencyKey: startKey } })).startTower.result;
  t.same((await p.b.request(START, { input: { wager: 1000, currency: "BTC", idempotencyKey: startKey } })).startTower.result, start);
  t.equal(await balanceOf(p), BALANCE - 1000, "one wager taken");
  const gameId = start.game.id;
  // A seed that hides the trap under tile 2, so stepping on tile 0 survives.
  const clientSeed = await clientSeedForOutcome(db, { hashChainId: p.chainId, outcomes: [{ weight: 1 }, { weight: 1 }, { weight: 1 }], outcomeIdx: 2 });
  const input = { gameId, tile: 0, hashChainId: p.chainId, clientSeed, idempotencyKey: randomUUID() };
  const move = (await p.a.request(MOVE, { input })).moveTower.result;
  t.equal(move.survived, true);
  const position = await chainPosition(p);
  t.same((await p.b.request(MOVE, { input })).moveTower.result, move, "the move replays");
  t.equal(await chainPosition(p), position, "no hash used by the replay");
  t.equal(Number((await db.query("select count(*) from app.tower_move where game_id = $1", [gameId])).rows[0].count), 1);
  const cashKey = randomUUID();
  const cash = (await p.a.request(CASH, { input: { gameId, idempotencyKey: cashKey } })).cashOutTower;
  t.same((await p.a.request(CASH, { input: { gameId, idempotencyKey: cashKey } })).cashOutTower, cash);
  t.equal(await balanceOf(p), cash.balance, "paid once");
});

t.test("hubClaimFaucet: a replay answers the first claim rather than FAUCET_TOO_SOON", async (t) => {
  const p = await player();
  await db.query("insert into hub.faucet_currency (casino_id, currency_key, amount, cooldown_seconds) values ($1, 'BTC', 5, 3600) on conflict do nothing", [casinoId]);
  const CLAIM = `mutation($k: String) { hubClaimFaucet(input: { currency: "BTC", idempotencyKey: $k }) { faucetClaim { id } balance { amount } } }`;
  const key = randomUUID();
  const first = (await p.a.request(CLAIM, { k: key })).hubClaimFaucet;
  const again = await Promise.all([p.a, p.b].map((c) => c.request(CLAIM, { k: key })));
  for (const data of again) t.equal(data.hubClaimFaucet.faucetClaim.id, first.faucetClaim.id);
  t.equal(await balanceOf(p), BALANCE + 5);
  const soon = await errorOf(p.a.request(CLAIM, { k: randomUUID() }));
  t.equal(soon.extensions?.code, "FAUCET_TOO_SOON", "a new key is a new claim");
});

t.test("hubWithdraw: a replay answers the first withdrawal and debits once", async (t) => {
  const p = await player();
  await db.query("update hub.casino set base_url = 'http://127.0.0.1:9' where id = $1", [casinoId]);
  const WITHDRAW = `mutation($k: String) { hubWithdraw(input: { currencyKey: "BTC", amount: 700, idempotencyKey: $k }) { withdrawalRequest { id amount } } }`;
  const key = randomUUID();
  const answers = await Promise.all([p.a, p.b, p.a, p.b].map((c) => c.request(WITHDRAW, { k: key })));
  t.equal(new Set(answers.map((d) => d.hubWithdraw.withdrawalRequest.id)).size, 1);
  t.equal(await balanceOf(p), BALANCE - 700);
  const reused = await errorOf(p.a.request(`mutation($k: String) { hubWithdraw(input: { currencyKey: "BTC", amount: 701, idempotencyKey: $k }) { withdrawalRequest { id } } }`, { k: key }));
  t.equal(reused.extensions?.code, "IDEMPOTENCY_KEY_REUSED");
});

t.test("keys are kept 24 hours: an older one no longer answers, and the sweep deletes it", async (t) => {
  const p = await player();
  const key = randomUUID();
  const first = betOf(await p.a.request(BET, { input: betInput(p, key) }));
  await db.query("update hub_hidden.idempotency_key set created_at = now() - interval '23 hours' where key = $1", [key]);
  t.equal(betOf(await p.a.request(BET, { input: betInput(p, key) })).id, first.id, "still answered after 23 hours");
  await db.query("update hub_hidden.idempotency_key set created_at = now() - interval '25 hours' where key = $1", [key]);
  const second = betOf(await p.a.request(BET, { input: betInput(p, key, 300) }));
  t.not(second.id, first.id, "after 24 hours the key is free again");
  t.equal(await betCount(p), 2);
});

t.test("a game written with dbSettleBet's idempotencyKey (the documented dice): replays answer the first roll", async (t) => {
  const p = await player();
  const DICE = `mutation($k: String) { rollDiceOnce(wager: 100, currency: "BTC", target: 50, idempotencyKey: $k) { betId roll net balance } }`;
  const key = randomUUID();
  const answers = await Promise.all([p.a, p.b, p.a, p.b, p.a].map((c) => c.request(DICE, { k: key })));
  for (const data of answers) t.same(data.rollDiceOnce, answers[0].rollDiceOnce);
  t.equal(Number((await db.query("select count(*) from app.dice_roll")).rows[0].count), 1);
  t.equal(await balanceOf(p), answers[0].rollDiceOnce.balance);
  t.equal(await balanceOf(p), BALANCE + answers[0].rollDiceOnce.net, "settled once");
  const reused = await errorOf(p.a.request(`mutation($k: String) { rollDiceOnce(wager: 100, currency: "BTC", target: 60, idempotencyKey: $k) { betId } }`, { k: key }));
  t.equal(reused.extensions?.code, "IDEMPOTENCY_KEY_REUSED");
  const bare = await p.a.request(`mutation { a: rollDiceOnce(wager: 100, currency: "BTC", target: 50) { betId } b: rollDiceOnce(wager: 100, currency: "BTC", target: 50) { betId } }`);
  t.not(bare.a.betId, bare.b.betId, "without a key each roll is a bet");
});

t.test("makeCoinflip, resolver and plan style: a replay answers the first flip", async (t) => {
  const p = await player();
  const flips = async () => Number((await db.query("select count(*) from app.coinflip where user_id = $1", [p.userId])).rows[0].count);
  for (const [client, selection] of [[p.a, "id net"], [p.b, "id net wager"]] as const) {
    const FLIP1 = `mutation($k: String) { makeCoinflip(input: { currency: "BTC", wager: 10, idempotencyKey: $k }) { ${selection} } }`;
    const key = randomUUID();
    const before = await flips();
    const answers = await Promise.all([1, 2, 3].map(() => client.request(FLIP1, { k: key })));
    for (const data of answers) t.same(data.makeCoinflip, answers[0].makeCoinflip);
    t.equal(await flips(), before + 1);
    const reused = await errorOf(client.request(`mutation($k: String) { makeCoinflip(input: { currency: "BTC", wager: 11, idempotencyKey: $k }) { id } }`, { k: key }));
    t.equal(reused.extensions?.code, "IDEMPOTENCY_KEY_REUSED");
  }
});

t.test("operators' balance and bankroll changes: the key is the API key's", async (t) => {
  const p = await player();
  const operator = (await hubA.authenticateOperator()).graphqlClient;
  const other = (await hubA.authenticateOperator()).graphqlClient;
  const CREDIT = `mutation($u: UUID!, $e: UUID!, $k: String) { hubCreditBalance(input: { userId: $u, experienceId: $e, currencyKey: "BTC", amount: 50, reason: "bonus", idempotencyKey: $k }) { balanceId amount } }`;
  const key = randomUUID();
  const vars = { u: p.userId, e: experienceId, k: key };
  const answers = await Promise.all([1, 2, 3].map(() => operator.request(CREDIT, vars)));
  for (const data of answers) t.same(data.hubCreditBalance, answers[0].hubCreditBalance);
  t.equal(await balanceOf(p), BALANCE + 50, "credited once");
  // Another API key's keys are its own: the same key is a new request there.
  await other.request(CREDIT, vars);
  t.equal(await balanceOf(p), BALANCE + 100);
  const DEBIT = `mutation($k: String) { hubDebitBankroll(input: { casinoId: "${casinoId}", currencyKey: "BTC", amount: 1, reason: "r", idempotencyKey: $k }) { amount } }`;
  const reused = await errorOf(operator.request(DEBIT, { k: key }));
  t.equal(reused.extensions?.code, "IDEMPOTENCY_KEY_REUSED");
  t.match(reused.message, /another operation \(hubCreditBalance\)/);
});

t.test("a game's read-back failing after dbSettleBet committed is OUTCOME_COMMITTED too", async (t) => {
  const p = await player();
  await db.query(`create policy hub_test_kill on app.coinflip_bet as restrictive for select to app_postgraphile using (user_id <> '${p.userId}' or public.hub_test_kill())`);
  const key = randomUUID();
  const failed = await errorOf(p.a.request(FLIP, { input: { wager: 10, currency: "BTC", side: "HEADS", idempotencyKey: key } }));
  await db.query("drop policy hub_test_kill on app.coinflip_bet");
  t.equal(failed.extensions?.code, "OUTCOME_COMMITTED", failed.message);
  t.equal(failed.extensions?.operation, "makeCoinflipBet");
  t.equal(failed.extensions?.idempotencyKey, key);
  const rows = (await db.query("select id from app.coinflip_bet where user_id = $1", [p.userId])).rows;
  t.equal(rows.length, 1, "exactly one bet stored");
  t.equal(failed.extensions?.betId, rows[0].id);
  const retried = (await p.b.request(FLIP, { input: { wager: 10, currency: "BTC", side: "HEADS", idempotencyKey: key } })).makeCoinflipBet;
  t.equal(retried.bet.id, rows[0].id);
});

t.test("a tower move without a key whose read-back fails is OUTCOME_COMMITTED: repeating it would climb another floor", async (t) => {
  const p = await player();
  const start = (await p.a.request(START, { input: { wager: 1000, currency: "BTC" } })).startTower.result;
  const clientSeed = await clientSeedForOutcome(db, { hashChainId: p.chainId, outcomes: [{ weight: 1 }, { weight: 1 }, { weight: 1 }], outcomeIdx: 2 });
  await db.query(`create policy hub_test_kill on app.tower_move as restrictive for select to app_postgraphile using (user_id <> '${p.userId}' or public.hub_test_kill())`);
  const failed = await errorOf(p.a.request(MOVE, { input: { gameId: start.game.id, tile: 0, hashChainId: p.chainId, clientSeed } }));
  await db.query("drop policy hub_test_kill on app.tower_move");
  t.equal(failed.extensions?.code, "OUTCOME_COMMITTED", failed.message);
  t.equal(failed.extensions?.operation, "moveTower");
  t.equal(failed.extensions?.resultId, start.game.id);
  t.equal((await db.query("select floor from app.tower_game where id = $1", [start.game.id])).rows[0].floor, 1, "the move committed once");
});

t.test("a tower move refused as a value (HubBadHashChainError) leaves its key unused", async (t) => {
  const p = await player();
  const start = (await p.a.request(START, { input: { wager: 1000, currency: "BTC" } })).startTower.result;
  const key = randomUUID();
  const input = { gameId: start.game.id, tile: 0, hashChainId: randomUUID(), clientSeed: "s", idempotencyKey: key };
  t.equal((await p.a.request(MOVE, { input })).moveTower.result.__typename, "HubBadHashChainError");
  // The same key, now with the player's chain: a new request, not a reuse.
  t.equal((await p.a.request(MOVE, { input: { ...input, hashChainId: p.chainId } })).moveTower.result.__typename, "MoveTowerSuccess");
  t.equal(Number((await db.query("select count(*) from app.tower_move where game_id = $1", [start.game.id])).rows[0].count), 1);
});
