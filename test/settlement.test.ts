import "./helpers/env.js";
import t, { type Test } from "tap";
import { defaultPlugins, HubGameConfigPlugin, startAndListen } from "@hubpkg/hub";
import { dbSettleBet, exactNet, withPgPoolTransaction, type SettleBetInput } from "@hubpkg/hub/db";
import { CoinflipBetPlugin, TowerPlugin, referenceMigrationsPath } from "@hubpkg/hub/plugins";
import {
  clientSeedForOutcome,
  createCasino,
  createCurrency,
  createExperience,
  createHashChain,
  createHouseBankroll,
  createPlayer,
  createPlayerBalance,
  startTestServer,
  type GraphQLClient,
  type TestServer,
} from "@hubpkg/hub/test";
import { injectClient } from "./helpers/inject.js";
import { DicePlugin } from "./fixtures/games/dice.js";
import { errorOf } from "./helpers/graphql-error.js";
import { feed, wsClient } from "./helpers/ws.js";

/*
 * Every game settles through one primitive, dbSettleBet (hub_hidden.settle_bet):
 * the reference games and a game written by a controller (test/fixtures/games/dice.ts)
 * answer with the catalogue's codes, a bet whose net is 0 is a bet like any
 * other (ledger, alerts, history), nets are exact at the extremes, a bet that
 * would poison the bankroll's statistics is refused before any lock, and the
 * books balance to the unit after thousands of concurrent bets of every game.
 */

const MAX = Number.MAX_SAFE_INTEGER;
const BANKROLL = 1_000_000_000;

let hub: TestServer;
let casinoId: string;
let experienceId: string;
let operator: GraphQLClient;

t.before(async () => {
  hub = await startTestServer({
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: referenceMigrationsPath,
    plugins: [
      ...defaultPlugins,
      HubGameConfigPlugin({ outcomeBetConfigs: { GENERAL: { houseEdge: 0.01, saveOutcomes: true } }, customGameConfigs: { TOWER: {} }, hashChainLength: 10_000 }),
      CoinflipBetPlugin,
      TowerPlugin({ maxFloor: 3 }),
      DicePlugin,
    ],
  });
  casinoId = (await createCasino(hub.dbPool, { name: "settlement" })).id;
  experienceId = (await createExperience(hub.dbPool, { casinoId })).id;
  for (const key of ["CHIPS", "BIG"]) await createCurrency(hub.dbPool, { casinoId, key, displayUnitName: key.toLowerCase(), displayUnitScale: 1 });
  await createCurrency(hub.dbPool, { casinoId, key: "NOHOUSE", displayUnitName: "nohouse", displayUnitScale: 1 });
  await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: "CHIPS", amount: BANKROLL });
  await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: "BIG", amount: 0 });
  operator = injectClient(hub, { authorization: `apikey:${(await hub.authenticateOperator()).apiKey}` });
});
t.teardown(() => hub?.stop());

interface P { userId: string; client: GraphQLClient; chainId: string }
let players = 0;
async function player(balances: Record<string, number> = { CHIPS: 100_000 }): Promise<P> {
  const userId = (await createPlayer(hub.dbPool, { casinoId, uname: `s${++players}` })).id;
  for (const [currencyKey, amount] of Object.entries(balances)) await createPlayerBalance(hub.dbPool, { userId, experienceId, currencyKey, amount });
  const chainId = (await createHashChain(hub.dbPool, { userId, casinoId, experienceId, maxIteration: 10_000 })).id;
  // Through inject(): what is tested is the settlement, not the socket.
  return { userId, chainId, client: injectClient(hub, { authorization: `session:${(await hub.authenticate(userId, experienceId)).token}` }) };
}

const OUTCOME_BET = `mutation($i: HubMakeOutcomeBetInput!) { hubMakeOutcomeBet(input: $i) { result { __typename
  ... on HubMakeOutcomeBetSuccess { bet { id net wager } }
  ... on HubRiskError { message } ... on HubBadHashChainError { message } } } }`;
const outcomeBet = (p: P, input: Record<string, unknown>) =>
  p.client.request<any>(OUTCOME_BET, { i: { kind: "GENERAL", currency: "CHIPS", hashChainId: p.chainId, clientSeed: "s", ...input } }).then((r) => r.hubMakeOutcomeBet.result);
const COINFLIP = "mutation($i: MakeCoinflipBetInput!) { makeCoinflipBet(input: $i) { bet { id net } outcome balance } }";
const DICE = "mutation($w: Int!, $c: String!, $t: Int!) { rollDice(wager: $w, currency: $c, target: $t) { betId roll net balance } }";

async function seedFor(p: P, outcomes: { weight: number }[], outcomeIdx: number) {
  return clientSeedForOutcome(hub.dbPool, { hashChainId: p.chainId, outcomes, outcomeIdx });
}

const ledgerCount = async () => Number((await hub.dbPool.query("select count(*) from hub.ledger where casino_id = $1", [casinoId])).rows[0].count);

/** Per account the ledger sums to the amount; per bet the player's and the house's rows cancel. */
async function checkBooks(t: Test) {
  const { rows } = await hub.dbPool.query<{ balances: number; bankrolls: number; bets: number }>(
    `select
       (select count(*) from hub.balance b where b.casino_id = $1 and b.amount <> (select coalesce(sum(amount_delta), 0) from hub.ledger l
          where l.account = 'player' and l.user_id = b.user_id and l.experience_id = b.experience_id and l.currency_key = b.currency_key))::int as balances,
       (select count(*) from hub.bankroll r where r.casino_id = $1 and r.amount <> (select coalesce(sum(amount_delta), 0) from hub.ledger l
          where l.account = 'house' and l.casino_id = r.casino_id and l.currency_key = r.currency_key))::int as bankrolls,
       (select count(*) from (select bet_id from hub.ledger where casino_id = $1 and bet_id is not null group by bet_id, currency_key having sum(amount_delta) <> 0) x)::int as bets`,
    [casinoId],
  );
  t.same(rows[0], { balances: 0, bankrolls: 0, bets: 0 }, "every balance and bankroll equals its ledger; every bet's rows cancel");
  if (rows[0]!.bets > 0) {
    const odd = await hub.dbPool.query(
      "select bet_id, account, amount_delta, reason from hub.ledger where bet_id in (select bet_id from hub.ledger where casino_id = $1 and bet_id is not null group by bet_id, currency_key having sum(amount_delta) <> 0) limit 10",
      [casinoId],
    );
    t.comment(JSON.stringify(odd.rows));
  }
}

t.test("a bet that would make the expected value NaN is refused before any lock; the operator's bankroll queries answer", async (t) => {
  const p = await player();
  const before = await ledgerCount();
  const poisoned = await errorOf(outcomeBet(p, { wager: 2, outcomes: [{ weight: 0, profit: 1e308 }, { weight: 1, profit: -0.5 }, { weight: 1, profit: -0.5 }] }));
  t.match(poisoned, { extensions: { code: "INVALID_OUTCOMES" }, message: /outcome 0 has profit 1e\+308; a wager of 2 would pay more than 9007199254740991 base units/ });
  t.equal(await ledgerCount(), before, "nothing moved");

  const evBefore = (await hub.dbPool.query("select expected_value from hub.bankroll where casino_id = $1 and currency_key = 'CHIPS'", [casinoId])).rows[0].expected_value;
  const played = await outcomeBet(p, { wager: 2, outcomes: [{ weight: 0, profit: 1000 }, { weight: 1, profit: -0.5 }, { weight: 1, profit: -0.5 }] });
  t.match(played, { __typename: "HubMakeOutcomeBetSuccess", bet: { net: -1 } }, "an undrawable outcome that can be paid is accepted");
  const evAfter = (await hub.dbPool.query("select expected_value from hub.bankroll where casino_id = $1 and currency_key = 'CHIPS'", [casinoId])).rows[0].expected_value;
  t.equal(evAfter - evBefore, 1, "the expected value counts only the outcomes that can be drawn");

  const bankrolls = await operator.request<any>(`{ allHubBankrolls { nodes { currencyKey amount expectedValue } }
    hubBankrollByCasinoIdAndCurrencyKey(casinoId: "${casinoId}", currencyKey: "CHIPS") { amount expectedValue } }`);
  t.ok(bankrolls.allHubBankrolls.nodes.every((b: { expectedValue: number }) => Number.isFinite(b.expectedValue)), "allHubBankrolls answers, every expected value finite");
  t.equal(bankrolls.hubBankrollByCasinoIdAndCurrencyKey.expectedValue, evAfter);
});

t.test("nets are floor(wager × profit), exact at the extremes", async (t) => {
  const p = await player({ CHIPS: 5_000_000_000 });
  const half = [{ weight: 1, profit: -0.5 }, { weight: 1, profit: -0.5 }];
  t.match(await outcomeBet(p, { wager: 2_000_000_001, outcomes: half }), { bet: { net: -1_000_000_001 } }, "2,000,000,001 × −0.5 nets −1,000,000,001");
  const decimal = [{ weight: 1, profit: 0.29 }, { weight: 1, profit: -1 }];
  t.match(await outcomeBet(p, { wager: 100, outcomes: decimal, clientSeed: await seedFor(p, decimal, 0) }), { bet: { net: 29 } }, "100 × 0.29 pays 29 (the profit as the client wrote it)");
  const third = [{ weight: 3, profit: 1 / 3 - 0.5 }, { weight: 1, profit: -1 }];
  // The profit arrives as -0.16666666666666669: the product is -183333333.333333359, floored to -183333334.
  // (A payout of 0.83 × 1.1e9 stays within the risk limit a player is held to: the bankroll, about
  // 2e9 here, rounded down to 1, 2 or 5 × a power of ten.)
  const thirdBet = await outcomeBet(p, { wager: 1_100_000_000, outcomes: third, clientSeed: await seedFor(p, third, 0) });
  t.match(thirdBet, { bet: { net: -183_333_334 } }, `1.1e9 × (1/3 − 0.5) floored exactly: ${JSON.stringify(thirdBet)}`);

  // hubMakeOutcomeBet's wager is an Int (the original's shape); dbSettleBet and exactNet go to 2^53 − 1.
  t.equal(exactNet(MAX, -0.5), -4503599627370496, "(2^53 − 1) × −0.5, rounded down");
  t.equal(exactNet(MAX, 0.99), Number((BigInt(MAX) * 99n) / 100n), "(2^53 − 1) × 0.99");
  t.equal(exactNet(MAX, 1.5), undefined, "a net past 2^53 − 1 cannot be paid exactly");
  const big = await player({ BIG: MAX });
  await hub.dbPool.query("select hub_hidden.adjust_bankroll($1, 'BIG', 1000, 'test', 'test')", [casinoId]);
  const settled = await withPgPoolTransaction(hub.dbPool, (c) =>
    dbSettleBet(c, { userId: big.userId, casinoId, experienceId, currencyKey: "BIG", kind: "max", wager: MAX, payout: MAX + exactNet(MAX, -0.5)! }),
  );
  t.same({ net: settled.net, balance: settled.balance }, { net: -4503599627370496, balance: MAX - 4503599627370496 }, "a wager of 2^53 − 1 settles exactly");
  await checkBooks(t);
});

t.test("a bet whose net is 0 is stored, ledgered, alerted and in the history", async (t) => {
  const p = await player();
  const ws = wsClient(hub.url, { authorization: `apikey:${(await hub.authenticateOperator()).apiKey}` });
  t.teardown(() => ws.dispose());
  const alerts = feed(ws, "subscription { hubBetAlert { betId amountDelta reason } }");
  // The subscription is live once a first alert arrives: a bet of another player primes it.
  const primer = await player();
  for (let i = 0; alerts.events.length === 0 && i < 50; i++) {
    await primer.client.request(COINFLIP, { i: { wager: 2, currency: "CHIPS", side: "HEADS" } });
    await new Promise((r) => setTimeout(r, 100));
  }
  await alerts.waitFor(1, 10_000);

  const even = [{ weight: 1, profit: 0 }, { weight: 1, profit: -1 }];
  const zero = await outcomeBet(p, { wager: 50, outcomes: even, clientSeed: await seedFor(p, even, 0) });
  t.match(zero, { __typename: "HubMakeOutcomeBetSuccess", bet: { net: 0 } });
  const betId = zero.bet.id;
  const direct = await withPgPoolTransaction(hub.dbPool, (c) =>
    dbSettleBet(c, { userId: p.userId, casinoId, experienceId, currencyKey: "CHIPS", kind: "push", wager: 7, payout: 7 }),
  );
  t.equal(direct.net, 0, "dbSettleBet with payout = wager");

  for (const id of [betId, direct.betId]) {
    const { rows } = await hub.dbPool.query("select account, amount_delta from hub.ledger where bet_id = $1 order by account", [id]);
    t.same(rows, [{ account: "house", amount_delta: 0 }, { account: "player", amount_delta: 0 }], "a ledger row of 0 per account");
  }
  await new Promise<void>((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error(`no alert for ${betId} and ${direct.betId}: ${JSON.stringify(alerts.events.slice(-5))}`)), 10_000);
    const poll = setInterval(() => {
      const ids = alerts.events.map((e) => (e.data as any)?.hubBetAlert?.betId);
      if (ids.includes(betId) && ids.includes(direct.betId)) (clearTimeout(deadline), clearInterval(poll), resolve());
    }, 50);
  });
  const alert = alerts.events.map((e) => (e.data as any).hubBetAlert).find((a) => a.betId === betId);
  t.match(alert, { amountDelta: 0, reason: "outcome bet GENERAL" }, "hubBetAlert carries the zero bet");

  const history = await p.client.request<any>("{ allHubOutcomeBets { nodes { id net } } }");
  t.ok(history.allHubOutcomeBets.nodes.some((b: { id: string; net: number }) => b.id === betId && b.net === 0), "in the player's history");
  const operatorView = await operator.request<any>(`{ hubOutcomeBetById(id: "${betId}") { net } }`);
  t.same(operatorView.hubOutcomeBetById, { net: 0 }, "and the operator's");
  await checkBooks(t);
});

t.test("refusals carry the catalogue's codes, in every game and in dbSettleBet; nothing is written", async (t) => {
  const p = await player({ CHIPS: 100, NOHOUSE: 100 });
  const poor = await player({});
  const before = await ledgerCount();
  const coin = (who: P, input: Record<string, unknown>) => errorOf(who.client.request(COINFLIP, { i: { wager: 10, currency: "CHIPS", side: "HEADS", ...input } }));
  t.match(await coin(p, { currency: "DOGE" }), { extensions: { code: "UNKNOWN_CURRENCY" } }, "makeCoinflipBet: an unknown currency");
  t.match(await coin(p, { wager: 101 }), { extensions: { code: "INSUFFICIENT_FUNDS", account: "player" } }, "makeCoinflipBet: more than the balance");
  t.match(await coin(poor, {}), { extensions: { code: "INSUFFICIENT_FUNDS" } }, "makeCoinflipBet: no balance");
  t.match(await coin(p, { currency: "NOHOUSE" }), { extensions: { code: "UNKNOWN_CURRENCY" }, message: /no bankroll in NOHOUSE/ }, "makeCoinflipBet: no bankroll");
  t.match(await errorOf(p.client.request(DICE, { w: 101, c: "CHIPS", t: 50 })), { extensions: { code: "INSUFFICIENT_FUNDS" } }, "a controller's game: the same codes");
  t.match(await errorOf(p.client.request(DICE, { w: 0, c: "CHIPS", t: 50 })), { extensions: { code: "INVALID_AMOUNT" } }, "a bet that moves nothing (wager 0, payout 0)");
  const metadata = { notes: "x".repeat(9000) };
  t.match(await errorOf(outcomeBet(p, { wager: 1, outcomes: [{ weight: 1, profit: -1 }, { weight: 1, profit: 0.9 }], metadata })), { extensions: { code: "METADATA_TOO_LARGE", limit: 8192 } }, "metadata over 8192 bytes");

  const settle = (input: Partial<SettleBetInput>) =>
    withPgPoolTransaction(hub.dbPool, (c) => dbSettleBet(c, { userId: p.userId, casinoId, experienceId, currencyKey: "CHIPS", kind: "test", wager: 1, payout: 0, ...input })).then(
      () => undefined,
      (e) => e,
    );
  t.match(await settle({ wager: 0.5 }), { extensions: { code: "INVALID_AMOUNT" } }, "a fractional wager");
  t.match(await settle({ payout: MAX + 1 }), { extensions: { code: "INVALID_AMOUNT" } }, "a payout past 2^53 − 1");
  t.match(await settle({ maxPayout: BANKROLL * 10 }), { extensions: { code: "INSUFFICIENT_FUNDS", account: "house" } }, "a payout the bankroll cannot cover");
  t.match(await settle({ currencyKey: "DOGE" }), { extensions: { code: "UNKNOWN_CURRENCY" } }, "an unknown currency");
  t.match(await settle({ userId: poor.userId }), { extensions: { code: "INSUFFICIENT_FUNDS", account: "player" } }, "no balance");
  t.match(await settle({ metadata: { big: "y".repeat(8200) } }), { extensions: { code: "METADATA_TOO_LARGE" } }, "metadata over the bound");
  await createCurrency(hub.dbPool, { casinoId, key: "FULL", displayUnitName: "full", displayUnitScale: 1 });
  await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: "FULL", amount: MAX - 5 });
  await createPlayerBalance(hub.dbPool, { userId: p.userId, experienceId, currencyKey: "FULL", amount: 100 });
  t.match(await settle({ currencyKey: "FULL", wager: 10 }), { extensions: { code: "INVALID_AMOUNT", account: "house" }, message: /would take the house bankroll past 9007199254740991/ }, "a loss the bankroll cannot hold");
  const full = await ledgerCount();
  t.match(await settle({ currencyKey: "FULL", wager: 5 }), undefined, "a loss that fills it exactly");
  t.equal(await ledgerCount(), full + 2, "ledgered");
  t.equal(full, before + 2, "no refusal wrote a ledger row (the two rows are the bankroll's and the balance's openings)");
  await checkBooks(t);
});

t.test("thousands of concurrent bets of every game: the books balance to the unit", async (t) => {
  const PLAYERS = 8;
  const OPS = 2000;
  const crowd = await Promise.all(Array.from({ length: PLAYERS }, () => player({ CHIPS: 50_000 })));
  const totals = async () => {
    const { rows } = await hub.dbPool.query<{ players: number; house: number }>(
      `select (select sum(amount) from hub.balance where casino_id = $1 and currency_key = 'CHIPS')::float8 as players,
              (select amount from hub.bankroll where casino_id = $1 and currency_key = 'CHIPS') as house`,
      [casinoId],
    );
    return rows[0]!;
  };
  const before = await totals();
  const coin = [{ weight: 1, profit: 0.98 }, { weight: 1, profit: -1 }];
  const unexpected: string[] = [];
  const tally: Record<string, number> = {};
  async function one(i: number) {
    const p = crowd[i % PLAYERS]!;
    const kind = ["coinflip", "outcome", "dice", "tower"][i % 4]!;
    try {
      if (kind === "coinflip") await p.client.request(COINFLIP, { i: { wager: 2 + (i % 40), currency: "CHIPS", side: i % 3 ? "HEADS" : "TAILS" } });
      else if (kind === "outcome") await outcomeBet(p, { wager: 1 + (i % 50), outcomes: coin, clientSeed: `c${i}` });
      else if (kind === "dice") await p.client.request(DICE, { w: 1 + (i % 30), c: "CHIPS", t: 2 + (i % 97) });
      else {
        const start = await p.client.request<any>("mutation($i: StartTowerInput!) { startTower(input: $i) { result { __typename ... on StartTowerSuccess { game { id } } } } }", { i: { wager: 10 + (i % 20), currency: "CHIPS" } });
        const gameId = start.startTower.result.game.id;
        const move = await p.client.request<any>("mutation($i: MoveTowerInput!) { moveTower(input: $i) { result { __typename ... on MoveTowerSuccess { survived } } } }", { i: { gameId, tile: i % 3, hashChainId: p.chainId, clientSeed: `t${i}` } });
        if (move.moveTower.result.survived) await p.client.request("mutation($i: CashOutTowerInput!) { cashOutTower(input: $i) { balance } }", { i: { gameId } });
      }
      tally[kind] = (tally[kind] ?? 0) + 1;
    } catch (error) {
      const code = (error as { response?: { errors?: { extensions?: { code?: string } }[] } }).response?.errors?.[0]?.extensions?.code;
      // A player may run dry; anything else is a defect.
      if (code !== "INSUFFICIENT_FUNDS") unexpected.push(`${kind}: ${(error as Error).message}`);
    }
  }
  let next = 0;
  await Promise.all(Array.from({ length: 32 }, async () => {
    while (next < OPS) await one(next++);
  }));
  t.same(unexpected.slice(0, 10), [], `every answer a success or a refusal for the money (${unexpected.length} others)`);
  t.ok(Object.values(tally).reduce((a, b) => a + b, 0) > OPS / 2, `most bets were played: ${JSON.stringify(tally)}`);
  const after = await totals();
  t.equal(after.house - before.house, -(after.players - before.players), "the bankroll moved by exactly minus the players' total net");
  await checkBooks(t);
});

t.test("the games' own tables refuse amounts that are not whole, even from the superuser", async (t) => {
  const p = await player();
  const bet = await outcomeBet(p, { wager: 10, outcomes: [{ weight: 1, profit: 0.98 }, { weight: 1, profit: -1 }] });
  const refusals: [string, unknown[], string][] = [
    ["update hub.outcome_bet set wager = 10.5 where id = $1", [bet.bet.id], "outcome_bet_wager_whole"],
    ["update hub.outcome_bet set net = 'NaN' where id = $1", [bet.bet.id], "outcome_bet_net_whole"],
    ["update hub.outcome_bet set profit = 'Infinity' where id = $1", [bet.bet.id], "outcome_bet_profit_finite"],
    ["update app.coinflip_bet set net = net + 0.5 where user_id = $1", [p.userId], "coinflip_bet_net_whole"],
    // Consistent with net = payout − wager, so only the whole-amount rule refuses it.
    ["update app.tower_game set wager = 10.5, net = -10.5 where user_id = $1", [p.userId], "tower_game_net_whole"],
  ];
  await p.client.request(COINFLIP, { i: { wager: 2, currency: "CHIPS", side: "HEADS" } });
  await p.client.request("mutation($i: StartTowerInput!) { startTower(input: $i) { result { __typename } } }", { i: { wager: 10, currency: "CHIPS" } });
  for (const [sql, params, constraint] of refusals) {
    const refused = await hub.dbPool.query(sql, params).then((r) => `${r.rowCount} rows changed`, (e: { code?: string; constraint?: string }) => e);
    t.match(refused, { code: "23514", constraint }, constraint);
  }
  // No withdrawal is made here; its constraint is in place.
  const defined = await hub.dbPool.query("select pg_get_constraintdef(oid) as def from pg_constraint where conname = 'withdrawal_amount_whole'");
  t.match(defined.rows[0]?.def, /is_whole_amount\(amount, \(?1/, "hub.withdrawal refuses the same");
});

t.test("a database holding a reference game's amount that 006-whole-amounts forbids refuses to migrate, naming the rows", async (t) => {
  const other = await startTestServer({ logLevel: "silent", extraPgSchemas: ["app"], userDatabaseMigrationsPath: referenceMigrationsPath });
  t.teardown(() => other.stop());
  const client = await other.dbPool.connect();
  const ids: Record<string, string> = {};
  try {
    const casino = (await createCasino(client, { name: "legacy-games" })).id;
    await createCurrency(client, { casinoId: casino, key: "OLD", displayUnitName: "old", displayUnitScale: 1 });
    const experience = (await createExperience(client, { casinoId: casino })).id;
    const user = (await createPlayer(client, { casinoId: casino, uname: "legacy-games" })).id;
    // Back to before 006, then what an earlier version let through: a fractional wager, a balance past
    // 2^53 − 1 (stored as 2^53), a NaN net and an infinite payout. The rows' other checks hold.
    await client.query(`alter table app.coinflip_bet drop constraint coinflip_bet_wager_whole, drop constraint coinflip_bet_net_whole, drop constraint coinflip_bet_balance_after_whole;
                        alter table app.tower_game drop constraint tower_game_wager_whole, drop constraint tower_game_net_whole, drop constraint tower_game_payout_whole`);
    const player = [user, casino, experience];
    const coinflip = (wager: string, net: string, balanceAfter: string) =>
      client.query<{ id: string }>(
        `insert into app.coinflip_bet (wager, net, balance_after, currency_key, user_id, casino_id, experience_id, side, outcome)
         values ($1::float8, $2::float8, $3::float8, 'OLD', $4, $5, $6, 'HEADS', 'TAILS') returning id`,
        [wager, net, balanceAfter, ...player],
      ).then((r) => r.rows[0]!.id);
    ids.fraction = await coinflip("2.5", "-2.5", "10");
    ids.past = await coinflip("3", "-3", "9007199254740993");
    ids.whole = await coinflip("4", "-4", "6");
    const tower = (wager: string, net: string, payout: string) =>
      client.query<{ id: string }>(
        `insert into app.tower_game (wager, net, payout, currency_key, user_id, casino_id, experience_id, status, floor, max_floor, finished_at)
         values ($1::float8, $2::float8, $3::float8, 'OLD', $4, $5, $6, 'CASHED_OUT', 1, 3, now()) returning id`,
        [wager, net, payout, ...player],
      ).then((r) => r.rows[0]!.id);
    ids.nan = await tower("5", "NaN", "NaN");
    ids.infinite = await tower("5", "Infinity", "Infinity");
    await client.query("delete from hub_secret.migration where kind = 'user' and name = '006-whole-amounts.sql'");
  } finally {
    client.release();
  }
  const snapshot = async () =>
    (await other.dbPool.query("select id, wager::text, net::text from app.coinflip_bet union all select id, wager::text, net::text from app.tower_game order by id")).rows;
  const before = await snapshot();
  const start = () => startAndListen({ port: 0, handleSignals: false, logLevel: "silent", extraPgSchemas: ["app"], userDatabaseMigrationsPath: referenceMigrationsPath, databaseUrl: other.databaseUrl, superuserDatabaseUrl: other.superuserDatabaseUrl });
  const refused = await start().then(async (h) => (await h.stop(), "started"), (e: { code?: string; message?: string }) => e);
  t.match(refused, { code: "HUB_MIGRATION_FAILED", message: /"006-whole-amounts\.sql".*006-whole-amounts: these stored amounts are not whole base units/s });
  const message = (refused as { message?: string }).message ?? "";
  t.comment(message);
  for (const line of [
    `app.coinflip_bet ${ids.fraction}: wager = 2.5`,
    `app.coinflip_bet ${ids.fraction}: net = -2.5`,
    `app.coinflip_bet ${ids.past}: balance_after = 9007199254740992`,
    `app.tower_game ${ids.nan}: net = NaN`,
    `app.tower_game ${ids.nan}: payout = NaN`,
    `app.tower_game ${ids.infinite}: net = Infinity`,
    `app.tower_game ${ids.infinite}: payout = Infinity`,
  ]) {
    t.ok(message.includes(line), `names ${line}`);
  }
  t.notOk(message.includes(ids.whole!), "a row within the rule is not named");
  t.same(await snapshot(), before, "nothing was converted");
  const constraints = await other.dbPool.query("select conname from pg_constraint where conname like '%\\_whole' and conrelid in ('app.coinflip_bet'::regclass, 'app.tower_game'::regclass)");
  t.same(constraints.rows, [], "nothing of 006 was applied");

  // Corrected, the same start applies 006 and records it.
  await other.dbPool.query("delete from app.coinflip_bet where id <> $1", [ids.whole]);
  await other.dbPool.query("delete from app.tower_game");
  const started = await start();
  await started.stop();
  const recorded = await other.dbPool.query("select checksum from hub_secret.migration where kind = 'user' and name = '006-whole-amounts.sql'");
  t.equal(recorded.rows.length, 1, "006 applied once the rows are corrected");
});
