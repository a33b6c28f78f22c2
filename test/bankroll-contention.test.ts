import "./helpers/env.js";
import t, { type Test } from "tap";
import { defaultPlugins, HubGameConfigPlugin } from "@hubpkg/hub";
import {
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
import { dbSettleBet, withPgPoolTransaction } from "@hubpkg/hub/db";
import pg from "pg";
import { pino } from "pino";
import { createSettleGroups, type OutcomeSettlement } from "../dist/src/fair/outcome-settlement.js";
// Internal: a server's folds, made here on pools of the test's own so their log can be read.
import { attachBankrollFolds, createBankrollFolds, foldBankroll } from "../dist/src/money/fold.js";

/*
 * Every bet settles through hub_hidden.settle_bet (core migration
 * 0032-one-settlement): while the bankroll row is in demand, against cover
 * set aside in slots, its house side folded into the bankroll after its
 * commit. Many players betting at once in one currency, hubMakeOutcomeBet
 * over HTTP or dbSettleBet in a game's own transaction, must leave books
 * that reconcile to the unit; at the edge of the bankroll no bet may be
 * accepted that the bankroll, as the bets before it left it, could not
 * cover; and no money is lost or doubled when a bet's transaction dies or
 * its fold never runs.
 */

let hub: TestServer;
let casinoId: string;
let experienceId: string;
/** Enough connections for bets to truly run at once (the test kit's pool has 5). */
let wide: pg.Pool;

t.before(async () => {
  hub = await startTestServer({
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    plugins: [...defaultPlugins, HubGameConfigPlugin({ outcomeBetConfigs: { GENERAL: { houseEdge: 0.01, saveOutcomes: false } }, hashChainLength: 1000 })],
  });
  casinoId = (await createCasino(hub.dbPool, { name: "contention" })).id;
  experienceId = (await createExperience(hub.dbPool, { casinoId })).id;
  wide = new pg.Pool({ connectionString: hub.superuserDatabaseUrl, max: 40 });
});
t.teardown(async () => {
  await wide?.end();
  await hub?.stop();
});

interface P { userId: string; client: GraphQLClient; chainId: string }
let made = 0;
async function players(n: number, currencyKey: string, amount: number): Promise<P[]> {
  const out: P[] = [];
  for (let i = 0; i < n; i++) {
    const userId = (await createPlayer(hub.dbPool, { casinoId, uname: `c${++made}` })).id;
    await createPlayerBalance(hub.dbPool, { userId, experienceId, currencyKey, amount });
    const chainId = (await createHashChain(hub.dbPool, { userId, casinoId, experienceId, maxIteration: 1000 })).id;
    out.push({ userId, chainId, client: (await hub.authenticate(userId, experienceId)).graphqlClient });
  }
  return out;
}

const BET = `mutation($i: HubMakeOutcomeBetInput!) { hubMakeOutcomeBet(input: $i) { result { __typename
  ... on HubMakeOutcomeBetSuccess { bet { id net wager } }
  ... on HubRiskError { message } ... on HubBadHashChainError { message } } } }`;
type Answer = { __typename: string; bet?: { id: string; net: number; wager: number }; message?: string };
const bet = (p: P, currency: string, wager: number, outcomes: { weight: number; profit: number }[], seed: string) =>
  p.client.request<{ hubMakeOutcomeBet: { result: Answer } }>(BET, { i: { kind: "GENERAL", currency, wager, outcomes, hashChainId: p.chainId, clientSeed: seed } }).then((r) => r.hubMakeOutcomeBet.result);

/** Every request at once; fails, saying so, if they do not all answer within a generous bound. */
async function all<T>(work: Promise<T>[], what: string): Promise<T[]> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    Promise.all(work),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: not every request answered within 120 s (a deadlock or a lost group?)`)), 120_000);
    }),
  ]).finally(() => clearTimeout(timer));
}

interface LedgerRow { account: string; user_id: string | null; amount_delta: number; balance_after: number; bet_id: string | null; id: string }
const ledgerOf = async (currency: string) =>
  (await hub.dbPool.query<LedgerRow>("select id, account, user_id, amount_delta, balance_after, bet_id from hub.ledger where casino_id = $1 and currency_key = $2 order by id", [casinoId, currency])).rows;
const bankrollOf = async (currency: string) =>
  (await hub.dbPool.query<{ amount: number; bets: string }>("select amount, bets from hub.bankroll where casino_id = $1 and currency_key = $2", [casinoId, currency])).rows[0]!;
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/**
 * The house rows in the order they happened: each row's amount before
 * (balance_after − amount_delta) is the previous row's balance_after, from
 * 0. Returns null when they cannot be put in one serial history (a lost update).
 */
function serialHistory(rows: LedgerRow[]): LedgerRow[] | null {
  // Each row is an edge from its amount before to its amount after: a serial history is a trail
  // from 0 through every edge (Hierholzer's algorithm; a greedy walk can dead-end when amounts recur).
  const out = new Map<number, LedgerRow[]>();
  for (const r of rows) out.set(r.balance_after - r.amount_delta, [...(out.get(r.balance_after - r.amount_delta) ?? []), r]);
  const stack: { at: number; row?: LedgerRow }[] = [{ at: 0 }];
  const trail: LedgerRow[] = [];
  while (stack.length) {
    const top = stack[stack.length - 1]!;
    const next = out.get(top.at)?.pop();
    if (next) stack.push({ at: next.balance_after, row: next });
    else {
      stack.pop();
      if (top.row) trail.push(top.row);
    }
  }
  trail.reverse();
  if (trail.length !== rows.length) return null;
  let at = 0;
  for (const r of trail) {
    if (r.balance_after - r.amount_delta !== at) return null;
    at = r.balance_after;
  }
  return trail;
}

function checkBooks(t: Test, ledger: LedgerRow[], bankroll: number, balances: Map<string, number>) {
  const house = ledger.filter((r) => r.account === "house");
  t.equal(sum(house.map((r) => r.amount_delta)), bankroll, `the house's ${house.length} ledger rows sum to the bankroll ${bankroll}`);
  t.ok(serialHistory(house), "the house's rows replay as one serial history (no lost update)");
  for (const [userId, amount] of balances) {
    const rows = ledger.filter((r) => r.account === "player" && r.user_id === userId);
    if (sum(rows.map((r) => r.amount_delta)) !== amount || !serialHistory(rows)) t.fail(`player ${userId}: the ledger does not replay to the balance ${amount}`);
  }
  t.pass(`${balances.size} players: each one's ledger rows replay serially to its balance`);
  const byBet = new Map<string, number>();
  for (const r of ledger) if (r.bet_id) byBet.set(r.bet_id, (byBet.get(r.bet_id) ?? 0) + r.amount_delta);
  t.same([...byBet].filter(([, s]) => s !== 0), [], `each of ${byBet.size} bets' player and house rows cancel`);
}

t.test("hubMakeOutcomeBet: 50 players betting at once in one currency: the books reconcile to the unit and bets share commits", async (t) => {
  const CURRENCY = "ONE";
  const BANKROLL = 10_000_000;
  const BALANCE = 100_000;
  await createCurrency(hub.dbPool, { casinoId, key: CURRENCY, displayUnitName: "one", displayUnitScale: 1 });
  await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: CURRENCY, amount: BANKROLL });
  const crowd = await players(50, CURRENCY, BALANCE);
  const coin = [{ weight: 1, profit: 0.98 }, { weight: 1, profit: -1 }];
  // Each player bets 8 times in a row, all players at once.
  const answers = (await all(crowd.map(async (p, i) => {
    const mine: Answer[] = [];
    for (let k = 0; k < 8; k++) mine.push(await bet(p, CURRENCY, 1 + ((i * 8 + k) % 97), coin, `s${i}-${k}`));
    return mine.map((a) => ({ p, a }));
  }), "50 players × 8 bets")).flat();
  const odd = answers.filter(({ a }) => a.__typename !== "HubMakeOutcomeBetSuccess");
  t.same(odd.map(({ a }) => a), [], "every bet is accepted (the bankroll covers them all)");

  const netOf = new Map<string, number>();
  for (const { p, a } of answers) netOf.set(p.userId, (netOf.get(p.userId) ?? 0) + a.bet!.net);
  const playersNet = sum([...netOf.values()]);
  const { rows: balances } = await hub.dbPool.query<{ user_id: string; amount: number }>("select user_id, amount from hub.balance where casino_id = $1 and currency_key = $2", [casinoId, CURRENCY]);
  const balance = new Map(balances.map((b) => [b.user_id, b.amount]));
  t.same(crowd.filter((p) => balance.get(p.userId) !== BALANCE + netOf.get(p.userId)!).map((p) => p.userId), [], "each balance = its opening + its bets' nets, to the unit");
  const bankroll = await bankrollOf(CURRENCY);
  t.equal(bankroll.amount - BANKROLL, -playersNet, `the bankroll moved by exactly minus the players' net (${-playersNet})`);
  t.equal(Number(bankroll.bets), answers.length, "the bankroll counted every bet");
  const ledger = await ledgerOf(CURRENCY);
  t.equal(sum(ledger.map((r) => r.amount_delta)), sum(balances.map((b) => b.amount)) + bankroll.amount, "the ledger = the balances + the bankroll");
  checkBooks(t, ledger, bankroll.amount, balance);

  t.same(await pendingOf(CURRENCY), { n: 0, sum: 0 }, "nothing left pending");

  // A commit carried more than one bet (the rows of one transaction share its xmin).
  const { rows: commits } = await hub.dbPool.query<{ bets: number; commits: number; largest: number }>(
    `select count(*)::int as bets, count(distinct xmin::text)::int as commits, max(n)::int as largest
       from (select xmin, count(*) over (partition by xmin::text) as n from hub.outcome_bet where casino_id = $1 and currency_key = $2) x`,
    [casinoId, CURRENCY],
  );
  t.comment(`${commits[0]!.bets} bets in ${commits[0]!.commits} commits, at most ${commits[0]!.largest} in one`);
  t.ok(commits[0]!.largest > 1, "bets of one currency shared a commit");
});

t.test("200 bets at once at the edge of the bankroll, three times: no accepted bet was beyond what the bankroll covered", async (t) => {
  const CURRENCY = "EDGE";
  const WAGER = 10;
  const MAX_WIN = 90; // a win pays 10 × the wager: the bankroll must hold 90 before each bet
  // A little more than one win, and a figure the risk limits a player is held to keep exactly
  // (they are rounded down to 1, 2 or 5 × a power of ten: 100 stays 100).
  const OPENING = 100;
  await createCurrency(hub.dbPool, { casinoId, key: CURRENCY, displayUnitName: "edge", displayUnitScale: 1 });
  await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: CURRENCY, amount: OPENING });
  const crowd = await players(100, CURRENCY, 1000);
  // Win 1 time in 31 (net +90), else lose the wager: the house's edge is in the weights.
  const outcomes = [{ weight: 1, profit: 9 }, { weight: 30, profit: -1 }];
  const accepted: Answer[] = [];
  let refused = 0;
  let refusedUnderLock = 0;
  let topUps = 0;
  for (let round = 0; round < 3; round++) {
    // The operator brings the bankroll back to the edge: a little more than one win.
    const delta = OPENING - (await bankrollOf(CURRENCY)).amount;
    if (delta !== 0) {
      await hub.dbPool.query("select hub_hidden.adjust_bankroll($1, $2, $3, 'test', 'back to the edge')", [casinoId, CURRENCY, delta]);
      topUps += delta;
    }
    const answers = await all(crowd.flatMap((p, i) => [0, 1].map((k) => bet(p, CURRENCY, WAGER, outcomes, `e${round}-${i}-${k}`))), `round ${round + 1}: 200 bets`);
    const odd = answers.filter((a) => a.__typename !== "HubMakeOutcomeBetSuccess" && a.__typename !== "HubRiskError");
    t.same(odd, [], `round ${round + 1}: every answer is a settled bet or a risk refusal`);
    accepted.push(...answers.filter((a) => a.__typename === "HubMakeOutcomeBetSuccess"));
    const risk = answers.filter((a) => a.__typename === "HubRiskError");
    refused += risk.length;
    // The refusal of the settlement's own cover check (under the bankroll's lock), not the check before it.
    refusedUnderLock += risk.filter((a) => /cannot cover this bet's largest win/.test(a.message ?? "")).length;
  }
  t.comment(`${accepted.length} accepted (${accepted.filter((a) => a.bet!.net > 0).length} won), ${refused} refused, ${refusedUnderLock} of them by the cover check under the lock`);
  t.ok(accepted.length > 0, "some bets were accepted");

  const ledger = await ledgerOf(CURRENCY);
  const house = ledger.filter((r) => r.account === "house");
  const history = serialHistory(house);
  t.ok(history, "the bankroll's history is one serial sequence");
  const betRows = (history ?? []).filter((r) => r.bet_id);
  t.equal(betRows.length, accepted.length, "one house row per accepted bet; refused bets wrote nothing");
  const short = betRows.filter((r) => r.balance_after - r.amount_delta < MAX_WIN);
  t.same(short, [], `before every accepted bet the bankroll held at least its largest win (${MAX_WIN})`);
  // (Never negative is hub.ledger's CHECK on balance_after, not something a read here could find: the
  // serial history and the cover before each bet above are what can fail.)
  const bankroll = await bankrollOf(CURRENCY);
  t.equal(bankroll.amount, OPENING + topUps - sum(accepted.map((a) => a.bet!.net)), "the bankroll = its opening + the operator's changes − the accepted bets' nets");
  const { rows: balances } = await hub.dbPool.query<{ user_id: string; amount: number }>("select user_id, amount from hub.balance where casino_id = $1 and currency_key = $2", [casinoId, CURRENCY]);
  t.equal(sum(ledger.map((r) => r.amount_delta)), sum(balances.map((b) => b.amount)) + bankroll.amount, "the ledger = the balances + the bankroll");
  checkBooks(t, ledger, bankroll.amount, new Map(balances.map((b) => [b.user_id, b.amount])));
});

t.test("a group whose statement fails settles its bets one by one: the failure reaches only the bet that caused it", async (t) => {
  const CURRENCY = "GRP";
  await createCurrency(hub.dbPool, { casinoId, key: CURRENCY, displayUnitName: "grp", displayUnitScale: 1 });
  await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: CURRENCY, amount: 1_000_000 });
  const crowd = await players(6, CURRENCY, 1000);
  const groups = createSettleGroups();
  // A losing bet of 10 on the chain's next hash.
  const betOf = async (p: P, metadata: unknown): Promise<OutcomeSettlement> => {
    const { rows } = await hub.dbPool.query<{ current_iteration: number }>("select current_iteration from hub.hash_chain where id = $1", [p.chainId]);
    return {
      userId: p.userId, casinoId, experienceId, currencyKey: CURRENCY, betId: null, wager: 10, payout: 0, maxPayout: 20, expectedValue: 0.5, actor: "test", reason: "grouped bet",
      hashChainId: p.chainId, iteration: rows[0]!.current_iteration - 1, digest: Buffer.alloc(32, 7), clientSeed: "seed", kind: "GENERAL", profit: -1, outcomeIdx: 1,
      weights: [1, 1], profits: [1, -1], metadata, idempotency: null,
    };
  };
  // JSON can carry a NUL character, Postgres's jsonb cannot.
  const args = await Promise.all(crowd.map((p, i) => betOf(p, i === 3 ? { note: "\u0000" } : null)));
  const settled = await Promise.allSettled(args.map((a) => groups.settle(hub.dbPool, a)));
  t.match(settled[3], { status: "rejected", reason: { code: "22P05" } }, "the bet whose metadata jsonb cannot hold fails with Postgres's own error");
  const others = settled.filter((_, i) => i !== 3);
  t.ok(others.every((r) => r.status === "fulfilled" && r.value.status === "settled"), "every other bet of the group settled");
  const { rows } = await hub.dbPool.query<{ n: number }>("select count(*)::int as n from hub.outcome_bet where casino_id = $1 and currency_key = $2", [casinoId, CURRENCY]);
  t.equal(rows[0]!.n, 5, "five bets stored, none for the failed one");
  t.same(await pendingOf(CURRENCY), { n: 0, sum: 0 }, "nothing left pending");
  const bankroll = await bankrollOf(CURRENCY);
  t.equal(bankroll.amount, 1_000_000 + 5 * 10, "the bankroll took the five wagers");
  checkBooks(t, await ledgerOf(CURRENCY), bankroll.amount, new Map(crowd.map((p, i) => [p.userId, i === 3 ? 1000 : 990])));
});

/** One dbSettleBet bet in its own transaction, as a game settles; the answer, or the error's code and account. */
async function gameBet(p: { userId: string }, currencyKey: string, wager: number, payout: number, maxPayout: number) {
  try {
    return await withPgPoolTransaction(wide, (c) =>
      dbSettleBet(c, { userId: p.userId, casinoId, experienceId, currencyKey, kind: "contention", wager, payout, maxPayout, expectedValue: wager * 0.01 }));
  } catch (error) {
    const e = error as { extensions?: { code?: string; account?: string } };
    return { refused: `${e.extensions?.code ?? String(error)}/${e.extensions?.account ?? ""}` };
  }
}
const pendingOf = async (currency: string) =>
  (await hub.dbPool.query<{ n: number; sum: number }>(
    "select count(*)::int as n, coalesce(sum(p.delta), 0)::float8 as sum from hub_hidden.bankroll_pending p join hub.bankroll r on r.id = p.bankroll_id where r.casino_id = $1 and r.currency_key = $2",
    [casinoId, currency],
  )).rows[0]!;
const slotsOf = async (currency: string) =>
  (await hub.dbPool.query<{ n: number; cover: number }>(
    "select count(*)::int as n, coalesce(sum(s.cover), 0)::float8 as cover from hub_hidden.bankroll_slot s join hub.bankroll r on r.id = s.bankroll_id where r.casino_id = $1 and r.currency_key = $2",
    [casinoId, currency],
  )).rows[0]!;

t.test("dbSettleBet: 50 players betting at once in one currency reconcile to the unit, sharing the bankroll row's commits", async (t) => {
  const CURRENCY = "GAME";
  const BANKROLL = 10_000_000;
  const BALANCE = 100_000;
  await createCurrency(hub.dbPool, { casinoId, key: CURRENCY, displayUnitName: "game", displayUnitScale: 1 });
  await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: CURRENCY, amount: BANKROLL });
  const crowd = await players(50, CURRENCY, BALANCE);
  const answers = (await all(crowd.map(async (p, i) => {
    const mine: { p: P; net: number }[] = [];
    for (let k = 0; k < 8; k++) {
      const wager = 1 + ((i * 8 + k) % 97);
      // Every third bet wins twice the wager less 1; the others lose it.
      const settled = await gameBet(p, CURRENCY, wager, (i + k) % 3 === 0 ? 2 * wager - 1 : 0, 2 * wager);
      if ("refused" in settled) throw new Error(`bet ${i}/${k} refused: ${settled.refused}`);
      mine.push({ p, net: settled.net });
    }
    return mine;
  }), "50 players × 8 dbSettleBet bets")).flat();
  t.equal(answers.length, 400, "every bet settled");
  t.same(await pendingOf(CURRENCY), { n: 0, sum: 0 }, "every bet's house side was folded before its answer");

  const netOf = new Map<string, number>();
  for (const { p, net } of answers) netOf.set(p.userId, (netOf.get(p.userId) ?? 0) + net);
  const { rows: balances } = await hub.dbPool.query<{ user_id: string; amount: number }>("select user_id, amount from hub.balance where casino_id = $1 and currency_key = $2", [casinoId, CURRENCY]);
  const balance = new Map(balances.map((b) => [b.user_id, b.amount]));
  t.same(crowd.filter((p) => balance.get(p.userId) !== BALANCE + netOf.get(p.userId)!).map((p) => p.userId), [], "each balance = its opening + its bets' nets, to the unit");
  const bankroll = await bankrollOf(CURRENCY);
  t.equal(bankroll.amount - BANKROLL, -sum([...netOf.values()]), "the bankroll moved by exactly minus the players' net");
  t.equal(Number(bankroll.bets), 400, "the bankroll counted every bet");
  const ledger = await ledgerOf(CURRENCY);
  t.equal(sum(ledger.map((r) => r.amount_delta)), sum(balances.map((b) => b.amount)) + bankroll.amount, "the ledger = the balances + the bankroll");
  checkBooks(t, ledger, bankroll.amount, balance);

  // The point of slots: bets did not each take the bankroll row (house rows folded together share a commit).
  const { rows: commits } = await hub.dbPool.query<{ rows: number; commits: number; largest: number }>(
    `select count(*)::int as rows, count(distinct xmin::text)::int as commits, max(n)::int as largest
       from (select xmin, count(*) over (partition by xmin::text) as n from hub.ledger where casino_id = $1 and currency_key = $2 and account = 'house' and bet_id is not null) x`,
    [casinoId, CURRENCY],
  );
  const slots = await slotsOf(CURRENCY);
  t.comment(`400 house rows in ${commits[0]!.commits} bankroll commits, at most ${commits[0]!.largest} in one; ${slots.n} slots`);
  t.ok(slots.n > 0 && commits[0]!.largest > 1, "bets settled against slots and were folded into the bankroll together");
});

t.test("dbSettleBet: 200 bets at once at the edge of the bankroll, three times: the cover is never overdrawn", async (t) => {
  const CURRENCY = "GEDGE";
  const WAGER = 10;
  const MAX_WIN = 90;
  const OPENING = 100;
  await createCurrency(hub.dbPool, { casinoId, key: CURRENCY, displayUnitName: "gedge", displayUnitScale: 1 });
  await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: CURRENCY, amount: OPENING });
  const crowd = await players(100, CURRENCY, 1000);
  const nets: number[] = [];
  const refusals = new Map<string, number>();
  let topUps = 0;
  for (let round = 0; round < 3; round++) {
    const delta = OPENING - (await bankrollOf(CURRENCY)).amount;
    if (delta !== 0) {
      await hub.dbPool.query("select hub_hidden.adjust_bankroll($1, $2, $3, 'test', 'back to the edge')", [casinoId, CURRENCY, delta]);
      topUps += delta;
    }
    // One bet in 31 wins 10 × the wager (the house pays 90); the others lose the wager.
    const answers = await all(crowd.flatMap((p, i) => [0, 1].map((k) => gameBet(p, CURRENCY, WAGER, (i * 2 + k + round) % 31 === 0 ? WAGER + MAX_WIN : 0, WAGER + MAX_WIN))), `round ${round + 1}: 200 bets`);
    for (const a of answers) {
      if ("refused" in a) refusals.set(a.refused, (refusals.get(a.refused) ?? 0) + 1);
      else nets.push(a.net);
    }
    const { negative } = (await hub.dbPool.query<{ negative: number }>(
      "select count(*)::int as negative from hub_hidden.bankroll_slot s join hub.bankroll r on r.id = s.bankroll_id where r.casino_id = $1 and r.currency_key = $2 and (s.cover < 0 or s.room < 0)", [casinoId, CURRENCY])).rows[0]!;
    t.equal(negative, 0, `round ${round + 1}: no slot below 0`);
  }
  t.comment(`${nets.length} accepted (${nets.filter((n) => n > 0).length} won), refused: ${JSON.stringify(Object.fromEntries(refusals))}`);
  t.same([...refusals.keys()].filter((k) => k !== "INSUFFICIENT_FUNDS/house"), [], "every refusal is the house's cover");
  t.ok(nets.length > 0, "some bets were accepted");
  t.same(await pendingOf(CURRENCY), { n: 0, sum: 0 }, "nothing left pending");

  const ledger = await ledgerOf(CURRENCY);
  const house = ledger.filter((r) => r.account === "house");
  const history = serialHistory(house);
  t.ok(history, "the bankroll's history is one serial sequence");
  const betRows = (history ?? []).filter((r) => r.bet_id);
  t.equal(betRows.length, nets.length, "one house row per accepted bet; refused bets wrote nothing");
  t.same(betRows.filter((r) => r.balance_after - r.amount_delta < MAX_WIN), [], `before every accepted bet the bankroll held at least its largest win (${MAX_WIN})`);
  t.same(house.filter((r) => r.balance_after < 0), [], "the bankroll is never negative");
  const bankroll = await bankrollOf(CURRENCY);
  t.equal(bankroll.amount, OPENING + topUps - sum(nets), "the bankroll = its opening + the operator's changes − the accepted bets' nets");
  const { rows: balances } = await hub.dbPool.query<{ user_id: string; amount: number }>("select user_id, amount from hub.balance where casino_id = $1 and currency_key = $2", [casinoId, CURRENCY]);
  checkBooks(t, ledger, bankroll.amount, new Map(balances.map((b) => [b.user_id, b.amount])));
});

t.test("dbSettleBet on a slot: a transaction that dies writes nothing; a committed bet never folded is folded exactly once by the sweep", async (t) => {
  const CURRENCY = "CRASH";
  const OPENING = 1_000_000;
  await createCurrency(hub.dbPool, { casinoId, key: CURRENCY, displayUnitName: "crash", displayUnitScale: 1 });
  await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: CURRENCY, amount: OPENING });
  const [p] = await players(1, CURRENCY, 1000);
  const total = async () => {
    const { rows } = await hub.dbPool.query<{ t: number }>(
      "select (select sum(amount) from hub.balance where casino_id = $1 and currency_key = $2) + (select amount from hub.bankroll where casino_id = $1 and currency_key = $2) as t", [casinoId, CURRENCY]);
    return rows[0]!.t + (await pendingOf(CURRENCY)).sum;
  };
  const input = { userId: p!.userId, casinoId, experienceId, currencyKey: CURRENCY, kind: "crash", wager: 100, payout: 0, maxPayout: 200 };

  // The bankroll row busy: the bet waits for it, then sets cover aside in a slot and settles against it.
  const holder = await wide.connect();
  const bettor = await wide.connect();
  await holder.query("begin");
  await holder.query("select 1 from hub.bankroll where casino_id = $1 and currency_key = $2 for update", [casinoId, CURRENCY]);
  await bettor.query("begin");
  const settling = dbSettleBet(bettor, input);
  // The bet waiting on the bankroll row's lock, before the holder lets go.
  for (const by = Date.now() + 30_000; ; await new Promise((r) => setTimeout(r, 20))) {
    const { rows } = await hub.dbPool.query<{ n: number }>("select count(*)::int as n from pg_locks where pid = $1 and not granted", [(bettor as unknown as { processID: number }).processID]);
    if (rows[0]!.n > 0) break;
    if (Date.now() > by) throw new Error("the bet is not waiting on a lock 30 s after it started");
  }
  await holder.query("commit");
  holder.release();
  const first = await settling;
  // Committed by hand: no fold after it, as when the server dies between the commit and the fold.
  await bettor.query("commit");
  bettor.release();
  t.equal(await total(), OPENING + 1000, "after the commit: balances + bankroll + pending = what there was, to the unit");

  // A second bet on the slot whose connection dies before its commit.
  const doomed = new pg.Client({ connectionString: hub.superuserDatabaseUrl });
  await doomed.connect();
  await doomed.query("begin");
  const lost = await dbSettleBet(doomed, { ...input, wager: 50, maxPayout: 100 });
  t.equal(lost.balance, 1000 - 100 - 50, "the dying transaction saw its bet settled");
  const { rows: [mine] } = await doomed.query<{ n: number }>("select count(*)::int as n from hub_hidden.bankroll_pending where bet_id = $1", [lost.betId]);
  t.equal(mine!.n, 1, "it settled against a slot (its house side is pending)");
  await doomed.end();
  t.equal(await total(), OPENING + 1000, "the dead transaction moved nothing");
  const { rows: [ghost] } = await hub.dbPool.query<{ n: number }>("select count(*)::int as n from hub.ledger where bet_id = $1", [lost.betId]);
  t.equal(ghost!.n, 0, "and left no ledger row");

  // The server's sweep (every second, and at every start) folds the committed bet.
  const deadline = Date.now() + 30_000;
  while ((await pendingOf(CURRENCY)).n > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  t.same(await pendingOf(CURRENCY), { n: 0, sum: 0 }, "the sweep folded the pending bet (waited up to 30 s)");
  const { rows: [again] } = await hub.dbPool.query<{ n: number }>("select hub_hidden.fold_bankroll(id) as n from hub.bankroll where casino_id = $1 and currency_key = $2", [casinoId, CURRENCY]);
  t.equal(again!.n, 0, "folding again folds nothing");
  // The hub's own folds commit without waiting for their flush: only as a statement of their own, never
  // inside a transaction whose money would then commit that way too.
  const inside = await hub.dbPool.connect();
  try {
    await inside.query("begin");
    await inside.query("select pg_current_xact_id()"); // as a write would: the transaction has an id
    await t.rejects(
      inside.query("select hub_hidden.fold_bankroll_alone(id) from hub.bankroll where casino_id = $1 and currency_key = $2", [casinoId, CURRENCY]),
      /fold_bankroll_alone: must be its own transaction/,
      "fold_bankroll_alone refuses to run inside a transaction",
    );
  } finally {
    await inside.query("rollback");
    inside.release();
  }
  const { rows: [alone] } = await hub.dbPool.query<{ n: number }>("select hub_hidden.fold_bankroll_alone(id) as n from hub.bankroll where casino_id = $1 and currency_key = $2", [casinoId, CURRENCY]);
  t.equal(alone!.n, 0, "and folds as a statement of its own");
  const bankroll = await bankrollOf(CURRENCY);
  t.equal(bankroll.amount, OPENING + 100, "the bankroll took the wager once");
  const { rows: houseRows } = await hub.dbPool.query<{ n: number }>("select count(*)::int as n from hub.ledger where bet_id = $1 and account = 'house'", [first.betId]);
  t.equal(houseRows[0]!.n, 1, "one house ledger row for the bet");
  const { rows: balances } = await hub.dbPool.query<{ user_id: string; amount: number }>("select user_id, amount from hub.balance where casino_id = $1 and currency_key = $2", [casinoId, CURRENCY]);
  checkBooks(t, await ledgerOf(CURRENCY), bankroll.amount, new Map(balances.map((b) => [b.user_id, b.amount])));
  // Idle slots are given back: the operator can take the whole bankroll again.
  await hub.dbPool.query("select hub_hidden.adjust_bankroll($1, $2, $3, 'test', 'take it all')", [casinoId, CURRENCY, -bankroll.amount]);
  t.same(await slotsOf(CURRENCY), { n: 1, cover: 0 }, "the operator's debit released the idle slot's cover and took the whole bankroll");
});

t.test("a fold that fails after a bet's commit is logged with its bankroll and retried until it succeeds; each server's folds are its own", async (t) => {
  const CURRENCY = "RETRY";
  await createCurrency(hub.dbPool, { casinoId, key: CURRENCY, displayUnitName: "retry", displayUnitScale: 1 });
  await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: CURRENCY, amount: 1_000_000 });
  const [p] = await players(1, CURRENCY, 1000);
  const bankrollId = (await hub.dbPool.query<{ id: string }>("select id from hub.bankroll where casino_id = $1 and currency_key = $2", [casinoId, CURRENCY])).rows[0]!.id;

  // Two servers' folds, each on its pool with its log; a fold waits at most 100 ms for the bankroll's lock.
  const server = (name: string) => {
    const lines: { level: number; msg: string; bankrollId?: string; err?: { message: string } }[] = [];
    const pool = new pg.Pool({ connectionString: hub.superuserDatabaseUrl, max: 2, options: "-c lock_timeout=100" });
    const log = pino({ name, level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const folds = createBankrollFolds(pool, log);
    const detach = attachBankrollFolds(pool, folds);
    t.teardown(async () => {
      detach();
      await folds.close();
      await pool.end();
    });
    return { lines, pool };
  };
  const a = server("a");
  const b = server("b");

  // A bet settled against a slot and committed by hand (no fold after it): the bankroll row was busy.
  const holder = await wide.connect();
  const bettor = await wide.connect();
  await holder.query("begin");
  await holder.query("select 1 from hub.bankroll where id = $1 for update", [bankrollId]);
  await bettor.query("begin");
  const settling = dbSettleBet(bettor, { userId: p!.userId, casinoId, experienceId, currencyKey: CURRENCY, kind: "retry", wager: 100, payout: 0, maxPayout: 200 });
  await new Promise((r) => setTimeout(r, 200));
  await holder.query("commit");
  await settling;
  await bettor.query("commit");
  bettor.release();
  t.equal((await pendingOf(CURRENCY)).n, 1, "the bet's house side is pending");

  // The bankroll locked again: server a's fold after the commit times out, and the answer does not wait for its retries.
  await holder.query("begin");
  await holder.query("select 1 from hub.bankroll where id = $1 for update", [bankrollId]);
  const client = await a.pool.connect();
  await foldBankroll(client, bankrollId);
  client.release();
  const warned = a.lines.find((l) => l.level === 40 && l.bankrollId === bankrollId);
  t.match(warned, { msg: /bankroll fold failed/, err: { message: /lock timeout/ } }, "the failure is logged (warn) with the bankroll and the error");
  t.equal((await pendingOf(CURRENCY)).n, 1, "the bet is still pending while the bankroll is locked");
  t.same(b.lines, [], "the other server's folds saw nothing of it");
  await new Promise((r) => setTimeout(r, 300));
  t.ok(a.lines.filter((l) => l.level === 40 && l.bankrollId === bankrollId).length >= 2, "it was retried, and each failure logged");
  await holder.query("commit");
  holder.release();

  const deadline = Date.now() + 15_000;
  while (!a.lines.some((l) => l.level === 30 && l.bankrollId === bankrollId) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  t.match(a.lines.find((l) => l.level === 30 && l.bankrollId === bankrollId), { msg: /succeeded on retry/ }, "the retry that succeeded is logged");
  t.same(await pendingOf(CURRENCY), { n: 0, sum: 0 }, "and the bankroll includes the bet");
  t.same(b.lines, [], "server b logged nothing");
});

t.test("two servers' groups spanning eight bankrolls, and games settling on them at once: no deadlock, books to the unit, commits shared across currencies", async (t) => {
  const CURRENCIES = ["M0", "M1", "M2", "M3", "M4", "M5", "M6", "M7"];
  const OPENING = 10_000_000;
  for (const key of CURRENCIES) {
    await createCurrency(hub.dbPool, { casinoId, key, displayUnitName: key, displayUnitScale: 1 });
    await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: key, amount: OPENING });
  }
  const bettors = (await Promise.all(CURRENCIES.map((key) => players(5, key, 100_000)))).map((ps, c) => ps.map((p) => ({ p, key: CURRENCIES[c]! }))).flat();
  const gamers = (await Promise.all(CURRENCIES.map((key) => players(2, key, 100_000)))).map((ps, c) => ps.map((p) => ({ p, key: CURRENCIES[c]! }))).flat();
  // Two servers' groups (their statements take the same bankroll rows), and the games' transactions on the same bankrolls.
  const servers = [createSettleGroups(), createSettleGroups()];
  const deadlocks = async () => (await hub.dbPool.query<{ n: number }>("select deadlocks::int as n from pg_stat_database where datname = current_database()")).rows[0]!.n;
  const before = await deadlocks();
  const nets = new Map<string, number>();
  const add = (userId: string, net: number) => nets.set(userId, (nets.get(userId) ?? 0) + net);
  const outcomeBet = async (p: P, key: string, k: number) => {
    const { rows } = await hub.dbPool.query<{ current_iteration: number }>("select current_iteration from hub.hash_chain where id = $1", [p.chainId]);
    const win = k % 3 === 0;
    const bet: OutcomeSettlement = {
      userId: p.userId, casinoId, experienceId, currencyKey: key, betId: null, wager: 10, payout: win ? 20 : 0, maxPayout: 20, expectedValue: 0.5,
      actor: "test", reason: "spanning group", hashChainId: p.chainId, iteration: rows[0]!.current_iteration - 1, digest: Buffer.alloc(32, k),
      clientSeed: `m${k}`, kind: "GENERAL", profit: win ? 1 : -1, outcomeIdx: win ? 0 : 1, weights: [1, 2], profits: [1, -1], metadata: null, idempotency: null,
    };
    const row = await servers[k % 2]!.settle(wide, bet);
    if (row.status !== "settled") throw new Error(`outcome bet ${k} of ${p.userId}: ${row.status}`);
    add(p.userId, win ? 10 : -10);
  };
  await all([
    ...bettors.map(async ({ p, key }) => {
      for (let k = 0; k < 6; k++) await outcomeBet(p, key, k);
    }),
    ...gamers.map(async ({ p, key }, i) => {
      for (let k = 0; k < 8; k++) {
        const settled = await gameBet(p, key, 7, (i + k) % 4 === 0 ? 20 : 0, 20);
        if ("refused" in settled) throw new Error(`game bet ${k}: ${settled.refused}`);
        add(p.userId, settled.net);
      }
    }),
  ], "outcome groups and games on eight bankrolls");
  t.equal((await deadlocks()) - before, 0, "pg_stat_database.deadlocks did not move");
  for (const key of CURRENCIES) {
    t.same(await pendingOf(key), { n: 0, sum: 0 }, `${key}: nothing left pending`);
    const { rows: balances } = await hub.dbPool.query<{ user_id: string; amount: number }>("select user_id, amount from hub.balance where casino_id = $1 and currency_key = $2", [casinoId, key]);
    const wrong = balances.filter((b) => b.amount !== 100_000 + (nets.get(b.user_id) ?? 0));
    t.same(wrong, [], `${key}: each balance = its opening + its bets' nets`);
    const bankroll = await bankrollOf(key);
    t.equal(bankroll.amount, OPENING - sum(balances.map((b) => nets.get(b.user_id) ?? 0)), `${key}: the bankroll moved by exactly minus the players' net`);
    checkBooks(t, await ledgerOf(key), bankroll.amount, new Map(balances.map((b) => [b.user_id, b.amount])));
  }
  const { rows: [spanning] } = await hub.dbPool.query<{ largest: number }>(
    `select coalesce(max(n), 0)::int as largest from (select count(distinct currency_key) as n from hub.outcome_bet where casino_id = $1 and currency_key = any($2) group by xmin::text) x`,
    [casinoId, CURRENCIES],
  );
  t.ok(spanning!.largest > 1, `one commit carried bets of ${spanning!.largest} currencies`);
});

t.test("a group settles its bets bankroll by bankroll in (casino, currency) order, answering each at its index", async (t) => {
  const KEYS = ["ORDB", "ORDA"];
  for (const key of KEYS) {
    await createCurrency(hub.dbPool, { casinoId, key, displayUnitName: key, displayUnitScale: 1 });
    await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: key, amount: 1_000_000 });
  }
  const [b] = await players(1, "ORDB", 1000);
  const [a] = await players(1, "ORDA", 1000);
  const betOn = async (p: P, key: string): Promise<Record<string, unknown>> => {
    const { rows } = await hub.dbPool.query<{ current_iteration: number }>("select current_iteration from hub.hash_chain where id = $1", [p.chainId]);
    return { user_id: p.userId, casino_id: casinoId, experience_id: experienceId, currency_key: key, wager: 10, payout: 0, max_payout: 20, expected_value: 0.5,
      actor: "test", reason: "ordered", hash_chain_id: p.chainId, iteration: rows[0]!.current_iteration - 1, digest: `\\x${"07".repeat(32)}`, client_seed: "s",
      kind: "GENERAL", profit: -1, outcome_idx: 1, weights: [1, 1], profits: [1, -1] };
  };
  // ORDB's bet first in the array: it settles second (ORDA < ORDB), and is still answered at index 0.
  const group = [await betOn(b!, "ORDB"), await betOn(a!, "ORDA")];
  const { rows } = await hub.dbPool.query<{ n: number; status: string; bet_id: string; seq: number }>(
    "select n, status, bet_id, row_number() over ()::int as seq from hub_hidden.settle_outcome_bets(hub_hidden.outcome_settlements_of($1::jsonb)) order by n",
    [JSON.stringify(group)],
  );
  t.same(rows.map((r) => [r.n, r.status, r.seq]), [[0, "settled", 2], [1, "settled", 1]], "ORDA's bet settled first; each answered at its index");
  const { rows: owners } = await hub.dbPool.query<{ user_id: string }>("select user_id from hub.outcome_bet where id = $1", [rows[0]!.bet_id]);
  t.equal(owners[0]!.user_id, b!.userId, "index 0 is ORDB's bet");
});
