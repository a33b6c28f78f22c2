import "./helpers/env.js";
import t from "tap";
import { defaultPlugins, HubGameConfigPlugin, type RiskPolicy } from "@hubpkg/hub";
import { ClientError, createGraphQLClient, createCurrency, createPlayerBalance, createHouseBankroll, clientSeedForOutcome, createHashChain, startTestServer, type TestServer } from "@hubpkg/hub/test";
import { TowerPlugin, referenceMigrationsPath, towerPayout } from "@hubpkg/hub/plugins";
import { verifyOutcomeBet, verifyHashChain } from "@hubpkg/hub/hash-chain";
import { makeOperator, makePlayer, type Player } from "./helpers/credentials.js";
import { errorOf } from "./helpers/graphql-error.js";
import { shownLimit } from "./helpers/risk.js";

/*
 * The tower game over HTTP: a climb and cash-out, a climb to the top that
 * cashes out by itself, a bust, every refusal, what each identity sees, the
 * books (ledger, player + house = 0), and every floor verified from the
 * revealed preimage with the shipped verifier.
 */

const CURRENCY = "CHIPS";
const BALANCE = 1_000_000;
const BANKROLL = 10_000_000;
const MAX_FLOOR = 3;
const THREE_TILES = [{ weight: 1, profit: 0 }, { weight: 1, profit: 0 }, { weight: 1, profit: 0 }];
// At most 1% of the bankroll per climb.
const riskPolicy: RiskPolicy = ({ bankroll }) => ({ maxPayout: bankroll * 0.01 });

let hub: TestServer;
let alice: Player;
let bob: Player;
let operator: { header: { authorization: string } };

t.before(async () => {
  hub = await startTestServer({
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: referenceMigrationsPath,
    plugins: [
      ...defaultPlugins,
      TowerPlugin({ maxFloor: MAX_FLOOR, riskPolicy }),
      HubGameConfigPlugin({ outcomeBetConfigs: { GENERAL: { houseEdge: 0.01, saveOutcomes: false, riskPolicy } }, customGameConfigs: { TOWER: { riskPolicy } } }),
    ],
  });
  alice = await makePlayer(hub.superuserDatabaseUrl, "tower-alice", { casinoName: "tower" });
  bob = await makePlayer(hub.superuserDatabaseUrl, "tower-bob", { casinoName: "tower" });
  operator = await makeOperator(hub.superuserDatabaseUrl);
  await createCurrency(hub.dbPool, { casinoId: alice.casinoId, key: CURRENCY, displayUnitName: "chips", displayUnitScale: 1 });
  await createHouseBankroll(hub.dbPool, { casinoId: alice.casinoId, currencyKey: CURRENCY, amount: BANKROLL });
  for (const p of [alice, bob]) await createPlayerBalance(hub.dbPool, { userId: p.userId, experienceId: p.experienceId, currencyKey: CURRENCY, amount: BALANCE });
});
t.teardown(() => hub?.stop());

const client = (who: { header: Record<string, string> } | null) => createGraphQLClient(hub.url, who?.header ?? {});
const b64 = (s: string) => new Uint8Array(Buffer.from(s, "base64"));

const GAME = "id wager net currencyKey userId status floor maxFloor payout";
const START = `mutation($i: StartTowerInput!) { startTower(input: $i) { result { __typename
  ... on StartTowerSuccess { balance game { ${GAME} } }
  ... on HubRiskError { message riskLimits { maxPayout } } } } }`;
const MOVE = `mutation($i: MoveTowerInput!) { moveTower(input: $i) { result { __typename
  ... on MoveTowerSuccess { survived balance game { ${GAME} } move { id floor tile trapTile hashId } }
  ... on HubBadHashChainError { message } } } }`;
const CASH_OUT = `mutation($i: CashOutTowerInput!) { cashOutTower(input: $i) { balance game { ${GAME} } } }`;


async function balanceOf(p: Player): Promise<number> {
  const { rows } = await hub.dbPool.query("select amount from hub.balance where user_id = $1 and currency_key = $2", [p.userId, CURRENCY]);
  return rows[0].amount;
}
async function bankroll(): Promise<{ amount: number; bets: number; wagered: number; expected_value: number }> {
  const { rows } = await hub.dbPool.query("select amount, bets::float8 as bets, wagered, expected_value from hub.bankroll where casino_id = $1 and currency_key = $2", [alice.casinoId, CURRENCY]);
  return rows[0];
}
async function newChain(p: Player, maxIteration = 1000) {
  return createHashChain(hub.dbPool, { userId: p.userId, casinoId: p.casinoId, experienceId: p.experienceId, maxIteration });
}
async function start(p: Player, wager: number) {
  const result = (await client(p).request<any>(START, { i: { wager, currency: CURRENCY } })).startTower.result;
  return result;
}
/** A move whose trap the test chose in advance (the seed that draws it), stepping on `tile`. */
async function move(p: Player, gameId: string, hashChainId: string, tile: number, trapTile: number) {
  const clientSeed = await clientSeedForOutcome(hub.dbPool, { hashChainId, outcomes: THREE_TILES, outcomeIdx: trapTile });
  const result = (await client(p).request<any>(MOVE, { i: { gameId, tile, hashChainId, clientSeed } })).moveTower.result;
  return { result, clientSeed };
}

t.test("a climb of two floors and a cash-out: the payout, the books and the Bet interface", async (t) => {
  const chain = await newChain(alice);
  const balance0 = await balanceOf(alice);
  const bank0 = await bankroll();
  const started = await start(alice, 1000);
  t.equal(started.__typename, "StartTowerSuccess");
  const game = started.game;
  t.match(game, { wager: 1000, net: -1000, status: "ACTIVE", floor: 0, maxFloor: MAX_FLOOR, payout: 0, userId: alice.userId, currencyKey: CURRENCY });
  t.equal(started.balance, balance0 - 1000, "the wager leaves the balance at the start");
  const bank1 = await bankroll();
  t.equal(bank1.amount, bank0.amount + 1000);
  t.equal(bank1.bets, bank0.bets + 1);
  t.equal(bank1.wagered, bank0.wagered + 1000);
  t.ok(Math.abs(bank1.expected_value - bank0.expected_value - 10) < 1e-9, "the house expects 1% of the wager");

  const first = await move(alice, game.id, chain.id, 0, 2);
  t.equal(first.result.__typename, "MoveTowerSuccess");
  t.match(first.result, { survived: true, balance: null, game: { floor: 1, status: "ACTIVE" }, move: { floor: 1, tile: 0, trapTile: 2 } });
  const second = await move(alice, game.id, chain.id, 1, 0);
  t.match(second.result, { survived: true, game: { floor: 2, status: "ACTIVE" }, move: { floor: 2, tile: 1, trapTile: 0 } });

  const cashed = (await client(alice).request<any>(CASH_OUT, { i: { gameId: game.id } })).cashOutTower;
  const payout = towerPayout(1000, 2);
  t.equal(payout, 2227, "floor(1000 × 0.99 × 1.5²)");
  t.match(cashed.game, { status: "CASHED_OUT", floor: 2, payout, net: payout - 1000 });
  t.equal(cashed.balance, balance0 - 1000 + payout);
  t.equal(await balanceOf(alice), balance0 - 1000 + payout);
  t.equal((await bankroll()).amount, bank0.amount + 1000 - payout);

  // The ledger names the game on both sides: what the player gained the house lost.
  const ledger = await hub.dbPool.query("select account, sum(amount_delta)::float8 as sum from hub.ledger where bet_id = $1 group by account order by account", [game.id]);
  t.same(ledger.rows, [{ account: "house", sum: -(payout - 1000) }, { account: "player", sum: payout - 1000 }]);

  // The game is a Bet, readable by its player under row-level security, with its moves and their hashes.
  const read = await client(alice).request<any>(`{ towerGameById(id: "${game.id}") { ... on Bet { id wager net currencyKey userId casinoId experienceId }
    towerMovesByGameId(orderBy: FLOOR_ASC) { nodes { floor tile trapTile hubHashByHashId { kind iteration clientSeed metadata } } } } }`);
  t.match(read.towerGameById, { id: game.id, wager: 1000, net: payout - 1000, casinoId: alice.casinoId, experienceId: alice.experienceId });
  const moves = read.towerGameById.towerMovesByGameId.nodes;
  t.same(moves.map((m: any) => [m.floor, m.hubHashByHashId.kind, m.hubHashByHashId.iteration, m.hubHashByHashId.clientSeed]), [
    [1, "INTERMEDIATE", 999, first.clientSeed],
    [2, "INTERMEDIATE", 998, second.clientSeed],
  ], "each floor took the chain's next hash, downwards");
  t.match(moves[0].hubHashByHashId.metadata, { game: "TOWER", gameId: game.id, floor: 1, tile: 0, trapTile: 2 });
});

t.test("every floor is verified from the revealed preimage with the shipped verifier", async (t) => {
  const chain = await newChain(alice, 50);
  const started = await start(alice, 100);
  // Three floors where the trap falls wherever the hash puts it: step on tile 0 and see.
  const gameIds = [started.game.id];
  let gameId = started.game.id;
  for (let i = 0; i < 12; i++) {
    const r = (await client(alice).request<any>(MOVE, { i: { gameId, tile: i % 3, hashChainId: chain.id, clientSeed: `floor ${i}` } })).moveTower.result;
    t.equal(r.__typename, "MoveTowerSuccess");
    if (r.game.status !== "ACTIVE") {
      gameId = (await start(alice, 100)).game.id;
      gameIds.push(gameId);
    }
  }
  const reveal = await client(alice).request<any>(`mutation { hubRevealHashChain(input: { hashChainId: "${chain.id}" }) { preimageHash { digest } } }`);
  const preimage = b64(reveal.hubRevealHashChain.preimageHash.digest);
  const hashes = await client(alice).request<any>(`{ hubHashChainById(id: "${chain.id}") { maxIteration hubHashesByHashChainId(orderBy: ITERATION_DESC) { nodes { kind digest iteration clientSeed } } } }`);
  const nodes = hashes.hubHashChainById.hubHashesByHashChainId.nodes;
  const terminal = nodes.find((h: any) => h.kind === "TERMINAL");
  t.same(
    verifyHashChain({ preimage, terminalHash: b64(terminal.digest), maxIteration: 50, hashes: nodes.map((h: any) => ({ iteration: h.iteration, digest: b64(h.digest) })) }),
    { ok: true },
    "every revealed hash lies on the chain the terminal hash committed to",
  );
  const byIteration = new Map(nodes.map((h: any) => [h.iteration, b64(h.digest)]));
  const moves = await client(alice).request<any>(`{ allTowerMoves(condition: { userId: "${alice.userId}" }) { nodes { gameId tile trapTile hubHashByHashId { digest iteration clientSeed hashChainId } } } }`);
  const onChain = moves.allTowerMoves.nodes.filter((m: any) => m.hubHashByHashId.hashChainId === chain.id);
  t.equal(onChain.length, 12);
  for (const m of onChain) {
    const h = m.hubHashByHashId;
    const verdict = verifyOutcomeBet({ hash: b64(h.digest), clientSeed: h.clientSeed, outcomes: THREE_TILES, outcomeIdx: m.trapTile, nextHash: byIteration.get(h.iteration + 1) as Uint8Array });
    t.same(verdict, { ok: true, expectedOutcomeIdx: m.trapTile }, `the trap of iteration ${h.iteration} is where the hash put it`);
  }
  // And the verifier catches a lie.
  const m = onChain[0];
  const lie = verifyOutcomeBet({ hash: b64(m.hubHashByHashId.digest), clientSeed: m.hubHashByHashId.clientSeed, outcomes: THREE_TILES, outcomeIdx: (m.trapTile + 1) % 3 });
  t.equal(lie.ok, false);
});

t.test("clearing the top floor cashes out by itself", async (t) => {
  const chain = await newChain(alice);
  const balance0 = await balanceOf(alice);
  const game = (await start(alice, 500)).game;
  let last: any;
  for (let floor = 1; floor <= MAX_FLOOR; floor++) last = (await move(alice, game.id, chain.id, 1, 2)).result;
  const payout = towerPayout(500, MAX_FLOOR);
  t.equal(payout, 1670, "floor(500 × 0.99 × 1.5³)");
  t.match(last, { survived: true, balance: balance0 - 500 + payout, game: { status: "CASHED_OUT", floor: MAX_FLOOR, payout, net: payout - 500 } });
  const over = await errorOf(client(alice).request(MOVE, { i: { gameId: game.id, tile: 0, hashChainId: chain.id, clientSeed: "x" } }));
  t.match(over, { message: /moveTower: tower game .* is over \(CASHED_OUT\)/, extensions: { code: "BAD_USER_INPUT" } });
});

t.test("the top floor when the house cannot pay right then: the move stands, the cash-out waits for the bankroll", async (t) => {
  const LOW = "LOWROLL";
  await createCurrency(hub.dbPool, { casinoId: alice.casinoId, key: LOW, displayUnitName: "low", displayUnitScale: 1 });
  await createHouseBankroll(hub.dbPool, { casinoId: alice.casinoId, currencyKey: LOW, amount: 1_000_000 });
  await createPlayerBalance(hub.dbPool, { userId: alice.userId, experienceId: alice.experienceId, currencyKey: LOW, amount: 1000 });
  const chain = await newChain(alice);
  const game = (await client(alice).request<any>(START, { i: { wager: 100, currency: LOW } })).startTower.result.game;
  for (let floor = 1; floor < MAX_FLOOR; floor++) await move(alice, game.id, chain.id, 0, 1);
  // The operator takes the bankroll down to 100, below the top floor's payout.
  const { rows } = await hub.dbPool.query("select amount from hub.bankroll where casino_id = $1 and currency_key = $2", [alice.casinoId, LOW]);
  await hub.dbPool.query("select hub_hidden.adjust_bankroll($1, $2, $3, 'test', 'drain')", [alice.casinoId, LOW, 100 - rows[0].amount]);
  const last = (await move(alice, game.id, chain.id, 0, 1)).result;
  t.match(last, { survived: true, balance: null, game: { status: "ACTIVE", floor: MAX_FLOOR, payout: 0 }, move: { floor: MAX_FLOOR } }, "the floor is cleared and stays so");
  const more = await errorOf(client(alice).request(MOVE, { i: { gameId: game.id, tile: 0, hashChainId: chain.id, clientSeed: "x" } }));
  t.match(more, { message: /has cleared all its 3 floors; cash it out \(cashOutTower\)/, extensions: { code: "BAD_USER_INPUT" } });
  const payout = towerPayout(100, MAX_FLOOR);
  const refused = await errorOf(client(alice).request(CASH_OUT, { i: { gameId: game.id } }));
  t.match(refused, { message: `cashOutTower: the house bankroll cannot pay ${payout} ${LOW} now; the game stays active, cash out later.`, extensions: { code: "INSUFFICIENT_FUNDS" } });
  await hub.dbPool.query("select hub_hidden.adjust_bankroll($1, $2, 10000, 'test', 'refill')", [alice.casinoId, LOW]);
  const cashed = (await client(alice).request<any>(CASH_OUT, { i: { gameId: game.id } })).cashOutTower;
  t.match(cashed, { balance: 1000 - 100 + payout, game: { status: "CASHED_OUT", floor: MAX_FLOOR, payout } });
});

t.test("a bust: the wager is lost, nothing more moves, the game is over", async (t) => {
  const chain = await newChain(alice);
  const game = (await start(alice, 300)).game;
  await move(alice, game.id, chain.id, 0, 1);
  const afterFirst = await balanceOf(alice);
  const bank = (await bankroll()).amount;
  const { result } = await move(alice, game.id, chain.id, 2, 2);
  t.match(result, { survived: false, balance: null, game: { status: "BUSTED", floor: 1, payout: 0, net: -300 }, move: { floor: 2, tile: 2, trapTile: 2 } });
  t.equal(await balanceOf(alice), afterFirst, "a bust moves no money: the wager left at the start");
  t.equal((await bankroll()).amount, bank);
  const again = await errorOf(client(alice).request(MOVE, { i: { gameId: game.id, tile: 0, hashChainId: chain.id, clientSeed: "x" } }));
  t.match(again, { message: /is over \(BUSTED\); start a new one/, extensions: { code: "BAD_USER_INPUT" } });
  const cash = await errorOf(client(alice).request(CASH_OUT, { i: { gameId: game.id } }));
  t.match(cash, { message: /cashOutTower: tower game .* is over \(BUSTED\)/, extensions: { code: "BAD_USER_INPUT" } });
  const ledger = await hub.dbPool.query("select account, amount_delta from hub.ledger where bet_id = $1 order by account", [game.id]);
  t.same(ledger.rows, [{ account: "house", amount_delta: 300 }, { account: "player", amount_delta: -300 }]);
});

t.test("refusals", async (t) => {
  const aliceChain = await newChain(alice);
  const bobChain = await newChain(bob);
  const game = (await start(alice, 100)).game;
  const moveInput = { gameId: game.id, tile: 0, hashChainId: aliceChain.id, clientSeed: "s" };

  t.test("another player's game", async (t) => {
    const e = await errorOf(client(bob).request(MOVE, { i: { ...moveInput, hashChainId: bobChain.id } }));
    t.match(e, { message: `moveTower: no tower game ${game.id} of this player in this casino and experience.`, extensions: { code: "BAD_USER_INPUT" } });
    const c = await errorOf(client(bob).request(CASH_OUT, { i: { gameId: game.id } }));
    t.match(c, { message: /cashOutTower: no tower game/ });
    const seen = await client(bob).request<any>(`{ towerGameById(id: "${game.id}") { id } }`);
    t.equal(seen.towerGameById, null, "row-level security: bob does not see alice's game");
    const op = await client(operator).request<any>(`{ towerGameById(id: "${game.id}") { id } }`);
    t.equal(op.towerGameById.id, game.id, "an operator does");
  });

  t.test("a bad hash chain: another player's, a retired one, an exhausted one; the game goes on with a new chain", async (t) => {
    const notHers = (await client(alice).request<any>(MOVE, { i: { ...moveInput, hashChainId: bobChain.id } })).moveTower.result;
    t.match(notHers, { __typename: "HubBadHashChainError", message: `Hash chain ${bobChain.id} is not an active chain of this player in this casino and experience; create a new one (hubCreateHashChain) and retry.` });
    const short = await newChain(alice, 2); // retires aliceChain; one hash (h(1)) to use
    const retired = (await client(alice).request<any>(MOVE, { i: moveInput })).moveTower.result;
    t.equal(retired.__typename, "HubBadHashChainError", "the retired chain");
    const used = (await move(alice, game.id, short.id, 0, 1)).result;
    t.match(used, { __typename: "MoveTowerSuccess", survived: true, game: { floor: 1 } });
    const exhausted = (await client(alice).request<any>(MOVE, { i: { ...moveInput, hashChainId: short.id } })).moveTower.result;
    t.match(exhausted, { __typename: "HubBadHashChainError", message: /is exhausted \(all its 1 hashes are used\)/ });
    const fresh = await newChain(alice);
    const retried = (await move(alice, game.id, fresh.id, 0, 1)).result;
    t.match(retried, { __typename: "MoveTowerSuccess", game: { floor: 2, status: "ACTIVE" } }, "a new chain and the same game");
    moveInput.hashChainId = fresh.id;
  });

  t.test("the risk limit: a climb whose top floor pays over 1% of the bankroll", async (t) => {
    const bank = (await bankroll()).amount;
    const limit = shownLimit(Math.floor(bank * 0.01));
    // The largest wager whose top payout fits, and one more.
    let wager = Math.floor(limit / (0.99 * 1.5 ** MAX_FLOOR));
    while (towerPayout(wager + 1, MAX_FLOOR) <= limit) wager++;
    const balance = await balanceOf(alice);
    const refused = await start(alice, wager + 1);
    t.match(refused, { __typename: "HubRiskError", riskLimits: { maxPayout: limit }, message: /the most a bet in CHIPS may pay now is/ });
    t.equal(await balanceOf(alice), balance, "nothing moved");
    const accepted = await start(alice, wager);
    t.equal(accepted.__typename, "StartTowerSuccess");
    const limits = await client(alice).request<any>("{ hubRiskLimits(gameKinds: [TOWER]) { currency gameKind maxPayout } }");
    t.same(limits.hubRiskLimits.find((l: any) => l.currency === CURRENCY), { currency: CURRENCY, gameKind: "TOWER", maxPayout: shownLimit(Math.floor((await bankroll()).amount * 0.01)) }, "what hubRiskLimits shows a frontend");
  });

  t.test("input a game refuses", async (t) => {
    const cases: [string, Record<string, unknown>, string, RegExp][] = [
      [MOVE, { i: { ...moveInput, tile: 3 } }, "BAD_USER_INPUT", /moveTower: the tile must be 0, 1 or 2 \(left to right\); received 3\./],
      [MOVE, { i: { ...moveInput, tile: -1 } }, "BAD_USER_INPUT", /received -1/],
      [MOVE, { i: { ...moveInput, clientSeed: "x".repeat(33) } }, "INVALID_CLIENT_SEED", /at most 32 characters without control characters; received 33 characters\./],
      [MOVE, { i: { ...moveInput, clientSeed: "a\nb" } }, "INVALID_CLIENT_SEED", /with a control character/],
      [MOVE, { i: { ...moveInput, clientSeed: "🎲".repeat(33) } }, "INVALID_CLIENT_SEED", /received 33 characters\./],
      [START, { i: { wager: 0, currency: CURRENCY } }, "INVALID_AMOUNT", /startTower: the wager must be a whole number of base units of at least 1; received 0\./],
      [START, { i: { wager: 10, currency: "NOPE" } }, "UNKNOWN_CURRENCY", /unknown currency "NOPE"/],
      [START, { i: { wager: 2_000_000_000, currency: CURRENCY } }, "INSUFFICIENT_FUNDS", /startTower: the wager is 2000000000 CHIPS but the balance is \d+ CHIPS\./],
    ];
    for (const [doc, vars, code, message] of cases) {
      const e = await errorOf(client(alice).request(doc, vars));
      t.match(e, { message, extensions: { code } }, JSON.stringify(vars));
    }
    const fresh = (await start(alice, 10)).game;
    const early = await errorOf(client(alice).request(CASH_OUT, { i: { gameId: fresh.id } }));
    t.match(early, { message: /has cleared no floor yet/, extensions: { code: "BAD_USER_INPUT" } });
    const anon = await errorOf(client(null).request(START, { i: { wager: 10, currency: CURRENCY } }));
    t.match(anon, { extensions: { code: "UNAUTHENTICATED" } });
    const op = await errorOf(client(operator).request(START, { i: { wager: 10, currency: CURRENCY } }));
    t.match(op, { extensions: { code: "FORBIDDEN" } });
  });
});

t.test("towerRules: the multiplier of each floor", async (t) => {
  const rules = (await client(null).request<any>("{ towerRules { maxFloor tiles multipliers } }")).towerRules;
  t.equal(rules.maxFloor, MAX_FLOOR);
  t.equal(rules.tiles, 3);
  t.same(rules.multipliers.map((m: number) => m.toFixed(6)), ["1.485000", "2.227500", "3.341250"]);
});

t.test("concurrent moves on one game and one chain: each floor once, each hash once", async (t) => {
  const chain = await newChain(alice);
  const game = (await start(alice, 50)).game;
  const results = await Promise.all(
    Array.from({ length: 8 }, (_, i) => client(alice).request<any>(MOVE, { i: { gameId: game.id, tile: 0, hashChainId: chain.id, clientSeed: `c${i}` } }).then((r) => r.moveTower.result, (e: ClientError) => e.response.errors![0]!)),
  );
  const moved = results.filter((r) => r.__typename === "MoveTowerSuccess");
  const refused = results.filter((r) => r.__typename !== "MoveTowerSuccess");
  for (const r of refused) t.match(r, { message: /is over \((BUSTED|CASHED_OUT)\)/ });
  t.same(moved.map((r) => r.move.floor).sort(), Array.from({ length: moved.length }, (_, i) => i + 1), "floors 1, 2, … each once");
  const { rows } = await hub.dbPool.query("select count(distinct h.iteration)::int as n, count(*)::int as m from app.tower_move m join hub.hash h on h.id = m.hash_id where m.game_id = $1", [game.id]);
  t.same(rows[0], { n: moved.length, m: moved.length });
});

t.test("the books: player + house = 0 for every game, no balance negative", async (t) => {
  const { rows } = await hub.dbPool.query(
    `select g.id, g.net, g.status, coalesce(sum(l.amount_delta) filter (where l.account = 'player'), 0)::float8 as player,
            coalesce(sum(l.amount_delta) filter (where l.account = 'house'), 0)::float8 as house
       from app.tower_game g left join hub.ledger l on l.bet_id = g.id group by g.id`,
  );
  t.ok(rows.length > 10);
  for (const r of rows) {
    t.equal(r.player, r.net, `game ${r.id}: the player's ledger is the game's net`);
    t.equal(r.player + r.house, 0);
  }
  const negative = await hub.dbPool.query("select count(*)::int as n from hub.ledger where balance_after < 0");
  t.equal(negative.rows[0].n, 0);
  const sums = await hub.dbPool.query(
    `select b.amount, (select sum(amount_delta) from hub.ledger l where l.account = 'player' and l.user_id = b.user_id and l.currency_key = b.currency_key and l.experience_id = b.experience_id)::float8 as ledger
       from hub.balance b where b.currency_key = $1`,
    [CURRENCY],
  );
  for (const r of sums.rows) t.equal(r.amount, r.ledger, "each balance is the sum of its ledger");
});
