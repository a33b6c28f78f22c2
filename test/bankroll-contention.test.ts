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
import { createSettleGroups } from "../dist/src/fair/settle-group.js";

/*
 * Bets of one currency share commits (hub_hidden.settle_outcome_bets): many
 * players betting at once in one currency, over HTTP, must leave books that
 * reconcile to the unit, and at the edge of the bankroll no bet may be
 * accepted that the bankroll, as the bets before it left it, could not cover.
 */

let hub: TestServer;
let casinoId: string;
let experienceId: string;

t.before(async () => {
  hub = await startTestServer({
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    plugins: [...defaultPlugins, HubGameConfigPlugin({ outcomeBetConfigs: { GENERAL: { houseEdge: 0.01, saveOutcomes: false } }, hashChainLength: 1000 })],
  });
  casinoId = (await createCasino(hub.dbPool, { name: "contention" })).id;
  experienceId = (await createExperience(hub.dbPool, { casinoId })).id;
});
t.teardown(() => hub?.stop());

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
  const byBefore = new Map<number, LedgerRow[]>();
  for (const r of rows) byBefore.set(r.balance_after - r.amount_delta, [...(byBefore.get(r.balance_after - r.amount_delta) ?? []), r]);
  const out: LedgerRow[] = [];
  let at = 0;
  // Rows of net 0 leave the amount unchanged: any order among them is serial.
  while (out.length < rows.length) {
    const next = byBefore.get(at);
    if (!next?.length) return null;
    const zero = next.findIndex((r) => r.amount_delta === 0);
    const r = next.splice(zero >= 0 ? zero : 0, 1)[0]!;
    out.push(r);
    at = r.balance_after;
  }
  return out;
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

t.test("50 players betting at once in one currency: the books reconcile to the unit and bets share commits", async (t) => {
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

  // The point of the change: a commit carried more than one bet (the rows of one transaction share its xmin).
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
  // The arguments of hub_hidden.settle_outcome_bet for a losing bet of 10 on the chain's next hash.
  const argsOf = async (p: P, metadata: string | null) => {
    const { rows } = await hub.dbPool.query<{ current_iteration: number }>("select current_iteration from hub.hash_chain where id = $1", [p.chainId]);
    return [
      p.userId, casinoId, experienceId, CURRENCY, null, 10, 0, 20, 0.5, "test", "grouped bet",
      p.chainId, rows[0]!.current_iteration - 1, Buffer.alloc(32, 7), "seed", "GENERAL", -1, 1, [1, 1], [1, -1], metadata,
    ];
  };
  const args = await Promise.all(crowd.map((p, i) => argsOf(p, i === 3 ? "{not json" : null)));
  const settled = await Promise.allSettled(args.map((a) => groups.settle(hub.dbPool, `${casinoId} ${CURRENCY}`, a)));
  t.match(settled[3], { status: "rejected", reason: { code: "22P02" } }, "the bet with malformed metadata fails with Postgres's own error");
  const others = settled.filter((_, i) => i !== 3);
  t.ok(others.every((r) => r.status === "fulfilled" && r.value.status === "settled"), "every other bet of the group settled");
  const { rows } = await hub.dbPool.query<{ n: number }>("select count(*)::int as n from hub.outcome_bet where casino_id = $1 and currency_key = $2", [casinoId, CURRENCY]);
  t.equal(rows[0]!.n, 5, "five bets stored, none for the failed one");
  const bankroll = await bankrollOf(CURRENCY);
  t.equal(bankroll.amount, 1_000_000 + 5 * 10, "the bankroll took the five wagers");
  checkBooks(t, await ledgerOf(CURRENCY), bankroll.amount, new Map(crowd.map((p, i) => [p.userId, i === 3 ? 1000 : 990])));
});
