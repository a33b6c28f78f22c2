import "./helpers/env.js";
import t, { type Test } from "tap";
import { defaultPlugins } from "@hubpkg/hub";
import { startTestServer, type TestServer } from "@hubpkg/hub/test";
import { CoinflipBetPlugin, CoinflipPlanPlugin, referenceMigrationsPath } from "@hubpkg/hub/plugins";
import { gql } from "./helpers/http.js";
import { makeOperator, makePlayer, type Player } from "./helpers/credentials.js";
import { cliOn } from "./helpers/cli.js";

/*
 * Amounts are whole base units of the currency (display_unit_scale of them
 * make one display unit). Whatever moves money — a wager, an operator's credit
 * or debit of a balance or bankroll, the CLI's balance credit, the ledger
 * functions — takes a whole number from 1 to 2^53 - 1 and refuses anything
 * else with a stable code, moving nothing. Everything over real HTTP (the CLI
 * as a process) against the test kit's Postgres.
 */

const MAX = Number.MAX_SAFE_INTEGER; // 9007199254740991
let hub: TestServer;
let player: Player;
let operatorHeader: { authorization: string };
const CURRENCY = "CENTS";

t.before(async () => {
  hub = await startTestServer({
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: referenceMigrationsPath,
    plugins: [...defaultPlugins, CoinflipPlanPlugin, CoinflipBetPlugin],
  });
  player = await makePlayer(hub.superuserDatabaseUrl, "whole-player", { casinoName: "whole" });
  operatorHeader = (await makeOperator(hub.superuserDatabaseUrl)).header;
  await hub.dbPool.query("insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale) values ($1, $2, 'dollars', 100)", [CURRENCY, player.casinoId]);
  await hub.dbPool.query("select hub_hidden.ensure_bankroll($1, $2, 1000000, 'test')", [player.casinoId, CURRENCY]);
  await hub.dbPool.query("select hub_hidden.credit_balance($1, $2, $3, $4, 1000, 'test', 'test')", [player.userId, player.casinoId, player.experienceId, CURRENCY]);
});
t.teardown(() => hub?.stop());

/** Everything a refused request must leave as it was. */
async function books() {
  const { rows } = await hub.dbPool.query(
    `select (select amount from hub.balance where user_id = $1 and experience_id = $2 and currency_key = $4) as balance,
            (select row(amount, bets, wagered, expected_value)::text from hub.bankroll where casino_id = $3 and currency_key = $4) as bankroll,
            (select count(*)::int from app.coinflip_bet where casino_id = $3) as bets,
            (select count(*)::int from hub.ledger where casino_id = $3) as ledger`,
    [player.userId, player.experienceId, player.casinoId, CURRENCY],
  );
  return rows[0];
}

/** POST a raw body: JSON.stringify cannot write every literal a client can. */
async function postRaw(body: string, headers: Record<string, string>) {
  const res = await fetch(`${hub.url}/graphql`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  return { status: res.status, body: (await res.json()) as { data?: any; errors?: { message: string; extensions?: { code?: string } }[] } };
}

/** Values that reach the resolver as numbers, and how the message shows them. */
const BAD_NUMBERS: [string, string, string][] = [
  // [name, GraphQL literal, as received]
  ["smallest double", "5e-324", "5e-324"],
  ["tiny", "1e-300", "1e-300"],
  ["fraction", "0.5", "0.5"],
  ["fraction above 1", "20.5", "20.5"],
  ["zero", "0", "0"],
  ["negative zero", "-0", "0"],
  ["negative", "-5", "-5"],
  ["huge", "1e300", "1e+300"],
  ["2^53 (not exact)", "9007199254740992", "9007199254740992"],
  ["overflow literal (Infinity)", "1e999", "Infinity"],
  ["negative overflow (-Infinity)", "-1e999", "-Infinity"],
];
/** Inputs GraphQL itself refuses before any resolver: a clear error, never an internal one. */
const NOT_NUMBERS: [string, string][] = [
  ["NaN literal", "NaN"],
  ["Infinity literal", "Infinity"],
  ["NaN as a string", '"NaN"'],
  ["a numeric string", '"10"'],
  ["null", "null"],
];

function assertInvalidAmount(t: Test, body: { errors?: { message: string; extensions?: { code?: string } }[] }, received: string, label: string, min = 1) {
  const error = body.errors?.[0];
  t.equal(body.errors?.length, 1, `${label}: one error`);
  t.equal(error?.extensions?.code, "INVALID_AMOUNT", `${label}: code INVALID_AMOUNT`);
  t.match(error?.message, `whole number of base units from ${min} to ${MAX}; received ${received}.`, `${label}: says what was received and what is expected`);
}

function assertRefusedByGraphQL(t: Test, res: { status: number; body: { errors?: { message: string; extensions?: { code?: string } }[] } }, label: string) {
  t.ok(res.status === 200 || res.status === 400, `${label}: status ${res.status}`);
  t.ok((res.body.errors?.length ?? 0) > 0, `${label}: an error`);
  t.notOk(res.body.errors?.some((e) => e.extensions?.code === "INTERNAL_SERVER_ERROR" || /Internal error/.test(e.message)), `${label}: not an internal error`);
  t.match(res.body.errors?.map((e) => e.message).join(" "), /Float|null|NaN|Infinity/, `${label}: the message names the type or the value`);
}

t.test("makeCoinflipBet refuses any wager that is not a whole number from 2 to 2^53-1, and moves nothing", async (t) => {
  const before = await books();
  for (const [name, literal, received] of BAD_NUMBERS) {
    const res = await postRaw(JSON.stringify({ query: `mutation { makeCoinflipBet(input: { wager: ${literal}, currency: "${CURRENCY}", side: HEADS }) { balance } }` }), player.header);
    t.equal(res.status, 200, name);
    t.equal(res.body.data?.makeCoinflipBet, null, `${name}: no bet`);
    assertInvalidAmount(t, res.body, received, `wager ${name}`, 2);
    t.match(res.body.errors?.[0]?.message, /^makeCoinflipBet: the wager must be/, `${name}: names the mutation`);
  }
  // The same values as variables (a client's usual way).
  for (const wager of [5e-324, 1e-300, 0.5, 2.5, 1e300, 2 ** 53]) {
    const res = await gql(hub.url, "mutation($i: MakeCoinflipBetInput!) { makeCoinflipBet(input: $i) { balance } }", { i: { wager, currency: CURRENCY, side: "TAILS" } }, player.header);
    assertInvalidAmount(t, res.body, String(wager), `wager ${wager} as a variable`, 2);
  }
  for (const [name, literal] of NOT_NUMBERS) {
    const res = await postRaw(JSON.stringify({ query: `mutation { makeCoinflipBet(input: { wager: ${literal}, currency: "${CURRENCY}", side: HEADS }) { balance } }` }), player.header);
    assertRefusedByGraphQL(t, res, `wager ${name}`);
  }
  const raw = await postRaw(`{"query":"mutation($w: Float!) { makeCoinflipBet(input: { wager: $w, currency: \\"${CURRENCY}\\", side: HEADS }) { balance } }","variables":{"w":1e400}}`, player.header);
  assertRefusedByGraphQL(t, raw, "wager 1e400 in the JSON variables");

  // Wager 1 is a whole amount, but a win would pay floor(0.99) = 0: refused, naming the smallest wager.
  const one = await gql(hub.url, `mutation { makeCoinflipBet(input: { wager: 1, currency: "${CURRENCY}", side: HEADS }) { balance } }`, {}, player.header);
  t.equal(one.body.errors?.[0]?.extensions?.code, "INVALID_AMOUNT");
  t.equal(one.body.errors?.[0]?.message, "makeCoinflipBet: a wager of 1 would pay nothing on a win (a win pays floor(wager × 0.99)); the smallest wager is 2.");
  t.same(await books(), before, "balance, bankroll, bets and ledger unchanged");
});

t.test("makeCoinflipBet pays floor(wager × 0.99): balances stay whole and the books add up", async (t) => {
  const before = await books();
  const nets = new Map<number, Set<number>>();
  let expectedValue = 0;
  let sumNet = 0;
  for (let i = 0; i < 30; i++) {
    const wager = [2, 3, 10, 101][i % 4]!;
    const res = await gql(hub.url, `mutation { makeCoinflipBet(input: { wager: ${wager}, currency: "${CURRENCY}", side: ${i % 2 ? "HEADS" : "TAILS"} }) { balance bet { wager net balanceAfter } } }`, {}, player.header);
    t.same(res.body.errors, undefined, `bet ${i}`);
    const out = res.body.data!.makeCoinflipBet;
    const payout = Math.floor((wager * 99) / 100);
    t.ok(out.bet.net === payout || out.bet.net === -wager, `wager ${wager}: net ${out.bet.net} is ${payout} or ${-wager}`);
    t.ok(Number.isInteger(out.balance), `balance ${out.balance} is whole`);
    if (!nets.has(wager)) nets.set(wager, new Set());
    nets.get(wager)!.add(out.bet.net);
    expectedValue += (wager - payout) / 2;
    sumNet += out.bet.net;
  }
  t.same([...nets.get(2)!].every((n) => n === 1 || n === -2), true, "wager 2 wins 1 (the smallest win)");
  const after = await books();
  t.equal(after.balance, before.balance + sumNet, "balance moved by Σ net exactly");
  const [amount, bets, wagered, ev] = after.bankroll.slice(1, -1).split(",").map(Number);
  const [amount0, bets0, wagered0, ev0] = before.bankroll.slice(1, -1).split(",").map(Number);
  t.equal(amount, amount0 - sumNet, "bankroll moved by −Σ net exactly");
  t.equal(bets - bets0, 30);
  t.equal(wagered - wagered0, (2 + 3 + 10 + 101) * 7 + 2 + 3, "wagered");
  t.equal(ev - ev0, expectedValue, "expected_value adds (wager − payout) / 2 per bet: what a fair coin leaves the house");
  const ledger = await hub.dbPool.query("select amount_delta from hub.ledger where casino_id = $1 and bet_id is not null", [player.casinoId]);
  t.ok(ledger.rows.every((r: { amount_delta: number }) => Number.isInteger(r.amount_delta)), "every ledger delta of a bet is whole");
});

t.test("makeCoinflipBet is exact up to 2^53-1", async (t) => {
  const big = await makePlayer(hub.superuserDatabaseUrl, "whole-big", { casinoName: "whole-big" });
  await hub.dbPool.query("insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale) values ('BIG', $1, 'big', 1)", [big.casinoId]);
  const wager = 2 ** 52 + 1; // wager * 0.99 in doubles is not exact; the payout must be.
  const payout = Number((BigInt(wager) * 99n) / 100n);
  // Enough to pay the win, and room for the wager when the house wins (2^53 − 1 at most).
  await hub.dbPool.query("select hub_hidden.ensure_bankroll($1, 'BIG', $2, 'test')", [big.casinoId, payout + 1000]);
  await hub.dbPool.query("select hub_hidden.credit_balance($1, $2, $3, 'BIG', $4, 'test', 'test')", [big.userId, big.casinoId, big.experienceId, wager]);
  const res = await gql(hub.url, `mutation { makeCoinflipBet(input: { wager: ${wager}, currency: "BIG", side: HEADS }) { balance outcome bet { net } } }`, {}, big.header);
  t.same(res.body.errors, undefined);
  const out = res.body.data!.makeCoinflipBet;
  t.equal(out.bet.net, out.outcome === "HEADS" ? payout : -wager, `net ${out.bet.net}`);
  t.equal(out.balance, out.outcome === "HEADS" ? wager + payout : 0, "the balance is exact");
  const maxed = await gql(hub.url, `mutation { makeCoinflipBet(input: { wager: ${MAX}, currency: "BIG", side: HEADS }) { balance } }`, {}, big.header);
  t.match(maxed.body.errors?.[0], { extensions: { code: "INVALID_AMOUNT" }, message: /would pay \d+ on a win, more than the 9007199254740991 base units/ }, "a wager whose win cannot be paid exactly is refused before any lock");
  const largest = Math.floor((MAX * 100) / 199) - 1;
  const funded = await gql(hub.url, `mutation { makeCoinflipBet(input: { wager: ${largest}, currency: "BIG", side: HEADS }) { balance } }`, {}, big.header);
  // After a win the balance covers it, but a second win would pass 2^53-1; after a loss it is 0.
  const expected = out.balance >= largest ? { code: "INVALID_AMOUNT", message: /would take the balance past 9007199254740991/ } : { code: "INSUFFICIENT_FUNDS", message: /but the balance is 0/ };
  t.match(funded.body.errors?.[0], { extensions: { code: expected.code }, message: expected.message }, "the largest payable wager is refused only for the money");
});

const OPERATOR_MUTATIONS = [
  ["hubCreditBalance", "HubBalanceChangeInput"],
  ["hubDebitBalance", "HubBalanceChangeInput"],
  ["hubCreditBankroll", "HubBankrollChangeInput"],
  ["hubDebitBankroll", "HubBankrollChangeInput"],
] as const;

function operatorInput(field: string, amount: string): string {
  return field.includes("Balance")
    ? `{ userId: "${player.userId}", experienceId: "${player.experienceId}", currencyKey: "${CURRENCY}", amount: ${amount}, reason: "test" }`
    : `{ casinoId: "${player.casinoId}", currencyKey: "${CURRENCY}", amount: ${amount}, reason: "test" }`;
}

t.test("operator credits and debits refuse amounts that are not whole numbers from 1 to 2^53-1", async (t) => {
  const before = await books();
  for (const [field] of OPERATOR_MUTATIONS) {
    for (const [name, literal, received] of BAD_NUMBERS) {
      const res = await postRaw(JSON.stringify({ query: `mutation { ${field}(input: ${operatorInput(field, literal)}) { amount } }` }), operatorHeader);
      t.equal(res.status, 200, `${field} ${name}`);
      assertInvalidAmount(t, res.body, received, `${field} ${name}`);
    }
    for (const [name, literal] of NOT_NUMBERS) {
      const res = await postRaw(JSON.stringify({ query: `mutation { ${field}(input: ${operatorInput(field, literal)}) { amount } }` }), operatorHeader);
      assertRefusedByGraphQL(t, res, `${field} ${name}`);
    }
  }
  t.same(await books(), before, "nothing moved");

  // Whole amounts work, up to the limit; a total past 2^53-1 is refused by the ledger with the same code.
  const credit = await gql(hub.url, `mutation { hubCreditBalance(input: ${operatorInput("hubCreditBalance", "7")}) { amount } }`, {}, operatorHeader);
  t.same(credit.body, { data: { hubCreditBalance: { amount: before.balance + 7 } } });
  const debit = await gql(hub.url, `mutation { hubDebitBalance(input: ${operatorInput("hubDebitBalance", "7")}) { amount } }`, {}, operatorHeader);
  t.same(debit.body, { data: { hubDebitBalance: { amount: before.balance } } });
  const past = await gql(hub.url, `mutation { hubCreditBankroll(input: ${operatorInput("hubCreditBankroll", String(MAX))}) { amount } }`, {}, operatorHeader);
  t.equal(past.body.errors?.[0]?.extensions?.code, "INVALID_AMOUNT", "a bankroll past 2^53-1: INVALID_AMOUNT");
  t.match(past.body.errors?.[0]?.message, /^adjust_bankroll: the house bankroll would exceed 9007199254740991 base units/);
});

t.test("the ledger functions refuse the same amounts in SQL (P0001, constraint ledger_amount_whole)", async (t) => {
  const before = await books();
  const bad = ["5e-324", "1e-300", "0.5", "0", "-0", "1e300", "9007199254740992", "NaN", "Infinity", "-Infinity"];
  const calls: [string, (v: string) => [string, unknown[]]][] = [
    ["credit_balance", (v) => ["select hub_hidden.credit_balance($1, $2, $3, $4, $5::float8, 'test', 'test')", [player.userId, player.casinoId, player.experienceId, CURRENCY, v]]],
    ["debit_balance", (v) => ["select hub_hidden.debit_balance($1, $2, $3, $4, $5::float8, 'test', 'test')", [player.userId, player.casinoId, player.experienceId, CURRENCY, v]]],
    ["adjust_bankroll", (v) => ["select hub_hidden.adjust_bankroll($1, $2, $3::float8, 'test', 'test')", [player.casinoId, CURRENCY, v]]],
    ["adjust_bankroll (debit)", (v) => ["select hub_hidden.adjust_bankroll($1, $2, -($3::float8), 'test', 'test')", [player.casinoId, CURRENCY, v]]],
  ];
  for (const [fn, call] of calls) {
    for (const value of [...bad, null]) {
      const [sql, params] = call(value as string);
      const error = await hub.dbPool.query(sql, params).then(() => undefined, (e: { code?: string; constraint?: string; message?: string }) => e);
      t.match(error, { code: "P0001", constraint: "ledger_amount_whole", message: /whole number of base units/ }, `${fn}(${value})`);
    }
  }
  const exact = await hub.dbPool
    .query("select hub_hidden.credit_balance($1, $2, $3, $4, 9007199254740992, 'test', 'test')", [player.userId, player.casinoId, player.experienceId, CURRENCY])
    .catch((e) => e);
  t.equal(exact.message, "credit_balance: amount must be a whole number of base units from 1 to 9007199254740991; received 9007199254740992.", "the amount is printed digit by digit");
  const ensure = await hub.dbPool.query("select hub_hidden.ensure_bankroll($1, 'HOUSE', 0.5, 'test')", [player.casinoId]).catch((e) => e);
  t.match(ensure, { code: "P0001", constraint: "ledger_amount_whole" }, "ensure_bankroll(0.5)");
  t.same(await books(), before, "nothing moved");
});

t.test("the database itself refuses amounts that are not whole base units, even from the superuser", async (t) => {
  const legacy = await makePlayer(hub.superuserDatabaseUrl, "whole-legacy", { casinoName: "whole" });
  const bad = ["10.25", "9007199254740993", "NaN", "Infinity", "-1", "1e300"];
  for (const value of bad) {
    const refused = await hub.dbPool
      .query("insert into hub.balance (user_id, casino_id, experience_id, currency_key, amount) values ($1, $2, $3, $4, $5::float8)", [legacy.userId, legacy.casinoId, legacy.experienceId, CURRENCY, value])
      .then(() => undefined, (e: { code?: string; constraint?: string }) => e);
    t.match(refused, { code: "23514", constraint: "balance_amount_whole" }, `a new balance of ${value}`);
  }
  await hub.dbPool.query("select hub_hidden.credit_balance($1, $2, $3, $4, 10, 'test', 'test')", [legacy.userId, legacy.casinoId, legacy.experienceId, CURRENCY]);
  const updates: [string, string, string][] = [
    ["update hub.balance set amount = amount + 0.5 where user_id = $1", "balance_amount_whole", "half a unit on a balance"],
    ["update hub.balance set amount = 'NaN' where user_id = $1", "balance_amount_whole", "NaN on a balance"],
    ["update hub.bankroll set amount = amount + 0.5 where casino_id = (select casino_id from hub.user where id = $1)", "bankroll_amount_whole", "half a unit on a bankroll"],
    ["update hub.bankroll set wagered = 'NaN' where casino_id = (select casino_id from hub.user where id = $1)", "bankroll_wagered_whole", "NaN wagered"],
    ["update hub.bankroll set expected_value = 'NaN' where casino_id = (select casino_id from hub.user where id = $1)", "bankroll_expected_value_finite", "a NaN expected value"],
    ["update hub.bankroll set expected_value = '-Infinity' where casino_id = (select casino_id from hub.user where id = $1)", "bankroll_expected_value_finite", "an infinite expected value"],
  ];
  await hub.dbPool.query("select hub_hidden.ensure_bankroll(casino_id, $2, 100, 'test') from hub.user where id = $1", [legacy.userId, CURRENCY]);
  for (const [sql, constraint, name] of updates) {
    const refused = await hub.dbPool.query(sql, [legacy.userId]).then(() => undefined, (e: { code?: string; constraint?: string }) => e);
    t.match(refused, { code: "23514", constraint }, name);
  }
  const stored = await hub.dbPool.query<{ amount: number }>("select amount from hub.balance where user_id = $1", [legacy.userId]);
  t.same(stored.rows, [{ amount: 10 }], "the balance is as the ledger left it");
});

/*
 * Every amount column, as the superuser. The columns come from the catalogue:
 * every number column of the hub's schemas and the reference games' whose name
 * says money (AMOUNT_NAME). Each must be held by a check that makes it whole
 * base units within ±(2^53 − 1) (or, for a statistic or a multiplier, finite),
 * and must be in AMOUNT_COLUMNS below, which says how to refuse it: a new
 * amount column fails here until it has both.
 */
const AMOUNT_NAME = "(^|_)(amount|wager|wagered|payout|profit|net|balance|expected_value|cover|room|delta)(_|$)";
/** Whole: from 0 (or 1) to 2^53 − 1; signed: ±(2^53 − 1); finite: any finite number (a statistic, a multiplier). */
type Rule = "whole" | "signed" | "finite";
const AMOUNT_COLUMNS: [table: string, column: string, constraint: string, rule: Rule][] = [
  ["hub.balance", "amount", "balance_amount_whole", "whole"],
  ["hub.bankroll", "amount", "bankroll_amount_whole", "whole"],
  ["hub.bankroll", "wagered", "bankroll_wagered_whole", "whole"],
  ["hub.bankroll", "expected_value", "bankroll_expected_value_finite", "finite"],
  ["hub.ledger", "amount_delta", "ledger_amount_delta_whole", "signed"],
  ["hub.ledger", "balance_after", "ledger_balance_after_whole", "whole"],
  ["hub.deposit", "amount", "deposit_amount_check", "whole"],
  ["hub.withdrawal_request", "amount", "withdrawal_request_amount_check", "whole"],
  ["hub.withdrawal", "amount", "withdrawal_amount_whole", "whole"],
  ["hub.faucet_currency", "amount", "faucet_currency_amount_check", "whole"],
  ["hub.faucet_claim", "amount", "faucet_claim_amount_check", "whole"],
  ["hub.take_request", "amount", "take_request_amount_check", "whole"],
  ["hub.take_request", "reserved_amount", "take_request_reserved_amount_check", "whole"],
  ["hub.outcome_bet", "wager", "outcome_bet_wager_whole", "whole"],
  ["hub.outcome_bet", "net", "outcome_bet_net_whole", "signed"],
  ["hub.outcome_bet", "profit", "outcome_bet_profit_finite", "finite"],
  ["hub_hidden.bankroll_slot", "cover", "bankroll_slot_cover_check", "whole"],
  ["hub_hidden.bankroll_slot", "room", "bankroll_slot_room_check", "whole"],
  ["hub_hidden.bankroll_pending", "delta", "bankroll_pending_delta_check", "signed"],
  ["hub_hidden.bankroll_pending", "wagered", "bankroll_pending_wagered_check", "whole"],
  ["hub_hidden.bankroll_pending", "expected_value", "bankroll_pending_expected_value_check", "finite"],
  ["app.coinflip_bet", "wager", "coinflip_bet_wager_whole", "whole"],
  ["app.coinflip_bet", "net", "coinflip_bet_net_whole", "signed"],
  ["app.coinflip_bet", "balance_after", "coinflip_bet_balance_after_whole", "whole"],
  ["app.tower_game", "wager", "tower_game_wager_whole", "whole"],
  ["app.tower_game", "net", "tower_game_net_whole", "signed"],
  ["app.tower_game", "payout", "tower_game_payout_whole", "whole"],
];
/** Not money: makeCoinflip's flips move no balance (docs/guarantees-and-limits.md), so its net stays fractional. */
const NOT_MONEY = ["app.coinflip.net", "app.coinflip.wager"];

/** What each rule refuses: 10.25 is above every lower bound (only wholeness refuses it); 2^53 + 1 is stored as 2^53, one past the limit. */
const REFUSED: Record<Rule, string[]> = {
  whole: ["0.5", "10.25", "NaN", "9007199254740993", "Infinity"],
  signed: ["0.5", "10.25", "NaN", "9007199254740993", "Infinity", "-Infinity", "-9007199254740993"],
  finite: ["NaN", "Infinity", "-Infinity"],
};

/**
 * One row of the table to update, inside the caller's transaction (rolled back after), as its ctid:
 * an existing row of the test's player where there is one, else a valid row inserted for the case.
 */
function rowOf(table: string): [string, unknown[]] {
  const { userId: u, casinoId: c, experienceId: e } = player;
  const bankroll = "select id from hub.bankroll where casino_id = $1 and currency_key = $2";
  const rows: Record<string, [string, unknown[]]> = {
    "hub.balance": ["select ctid from hub.balance where user_id = $1 and experience_id = $2 and currency_key = $3 for update", [u, e, CURRENCY]],
    "hub.bankroll": ["select ctid from hub.bankroll where casino_id = $1 and currency_key = $2 for update", [c, CURRENCY]],
    "hub.ledger": ["select ctid from hub.ledger where user_id = $1 and currency_key = $2 and balance_after is not null order by id limit 1 for update", [u, CURRENCY]],
    "hub.deposit": ["insert into hub.deposit (casino_id, mp_transfer_id, user_id, experience_id, currency_key, amount) values ($1, 'whole-amounts', $2, $3, $4, 10) returning ctid", [c, u, e, CURRENCY]],
    "hub.withdrawal_request": ["insert into hub.withdrawal_request (casino_id, user_id, experience_id, currency_key, amount) values ($1, $2, $3, $4, 10) returning ctid", [c, u, e, CURRENCY]],
    "hub.withdrawal": [
      `with r as (insert into hub.withdrawal_request (casino_id, user_id, experience_id, currency_key, amount) values ($1, $2, $3, $4, 10) returning id)
       insert into hub.withdrawal (withdrawal_request_id, casino_id, user_id, experience_id, currency_key, amount) select r.id, $1, $2, $3, $4, 10 from r returning ctid`,
      [c, u, e, CURRENCY],
    ],
    "hub.faucet_currency": ["insert into hub.faucet_currency (casino_id, currency_key, amount) values ($1, $2, 10) returning ctid", [c, CURRENCY]],
    "hub.faucet_claim": ["insert into hub.faucet_claim (user_id, casino_id, experience_id, currency_key, amount) values ($1, $2, $3, $4, 10) returning ctid", [u, c, e, CURRENCY]],
    "hub.take_request": [
      `insert into hub.take_request (mp_take_request_id, casino_id, user_id, experience_id, currency_key, amount, reserved_amount, status)
       values (gen_random_uuid(), $1, $2, $3, $4, 10, 10, 'PROCESSING') returning ctid`,
      [c, u, e, CURRENCY],
    ],
    "hub.outcome_bet": [
      `with c as (insert into hub.hash_chain (user_id, casino_id, experience_id, active, max_iteration, current_iteration) values ($1, $2, $3, false, 2, 1) returning id),
            h as (insert into hub.hash (hash_chain_id, kind, digest, iteration) select id, 'INTERMEDIATE', decode(repeat('ab', 32), 'hex'), 1 from c returning id)
       insert into hub.outcome_bet (kind, wager, profit, net, outcome_idx, currency_key, hash_id, user_id, casino_id, experience_id)
       select 'WHOLE', 10, -1, -10, 0, $4, h.id, $1, $2, $3 from h returning ctid`,
      [u, c, e, CURRENCY],
    ],
    "hub_hidden.bankroll_slot": [`insert into hub_hidden.bankroll_slot (bankroll_id) ${bankroll} returning ctid`, [c, CURRENCY]],
    "hub_hidden.bankroll_pending": [
      `with s as (insert into hub_hidden.bankroll_slot (bankroll_id) ${bankroll} returning id, bankroll_id)
       insert into hub_hidden.bankroll_pending (bankroll_id, slot_id, bet_id, delta, counted, wagered, expected_value, actor, reason)
       select bankroll_id, id, gen_random_uuid(), 1, 1, 1, 0.5, 'test', 'test' from s returning ctid`,
      [c, CURRENCY],
    ],
    "app.coinflip_bet": [
      "insert into app.coinflip_bet (wager, net, balance_after, currency_key, user_id, casino_id, experience_id, side, outcome) values (2, -2, 0, $1, $2, $3, $4, 'HEADS', 'TAILS') returning ctid",
      [CURRENCY, u, c, e],
    ],
    "app.tower_game": ["insert into app.tower_game (wager, net, currency_key, user_id, casino_id, experience_id, max_floor) values (5, -5, $1, $2, $3, $4, 3) returning ctid", [CURRENCY, u, c, e]],
  };
  return rows[table]!;
}

/** The catalogue's amount columns: type, and the checks on it that make it whole or finite. */
async function amountColumnsInCatalogue() {
  const { rows } = await hub.dbPool.query<{ name: string; type: string; whole: string[]; finite: string[] }>(
    `select n.nspname || '.' || c.relname || '.' || a.attname as name, format_type(a.atttypid, a.atttypmod) as type,
            coalesce(array_agg(k.conname::text order by k.conname) filter (where k.def ~ 'is_whole_amount\\(' or (k.def ~ '9007199254740991' and k.def ~ 'trunc\\(')), '{}') as whole,
            coalesce(array_agg(k.conname::text order by k.conname) filter (where k.def ~ 'Infinity' and k.def !~ 'is_whole_amount'), '{}') as finite
       from pg_attribute a
       join pg_class c on c.oid = a.attrelid and c.relkind in ('r', 'p')
       join pg_namespace n on n.oid = c.relnamespace
       left join (select conrelid, conkey, conname, pg_get_constraintdef(oid) as def from pg_constraint where contype = 'c') k
              on k.conrelid = c.oid and a.attnum = any(k.conkey)
      where n.nspname in ('hub', 'hub_hidden', 'hub_secret', 'app') and a.attnum > 0 and not a.attisdropped
        and a.atttypid in ('float8'::regtype, 'float4'::regtype, 'numeric'::regtype, 'int8'::regtype, 'int4'::regtype, 'int2'::regtype)
        and a.attname ~ $1
      group by 1, 2 order by 1`,
    [AMOUNT_NAME],
  );
  return rows;
}

t.test("every amount column in the catalogue is held by a whole-amount (or finiteness) check, and has a case below", async (t) => {
  const columns = await amountColumnsInCatalogue();
  t.comment(columns.map((c) => `${c.name} ${c.type}: ${[...c.whole, ...c.finite].join(", ") || "no check"}`).join("\n"));
  const known = AMOUNT_COLUMNS.map(([table, column]) => `${table}.${column}`);
  t.same(columns.map((c) => c.name).filter((n) => !NOT_MONEY.includes(n)).sort(), [...known].sort(), "the catalogue's amount columns are exactly the known ones (and makeCoinflip's, which are not money)");
  for (const [table, column, constraint, rule] of AMOUNT_COLUMNS) {
    const found = columns.find((c) => c.name === `${table}.${column}`);
    // Checks, whatever the type: a bigint column would round 0.5 to 1 on assignment rather than refuse it.
    t.ok(found?.[rule === "finite" ? "finite" : "whole"].includes(constraint), `${table}.${column} (${found?.type}) is held by ${constraint}`);
  }
  for (const name of NOT_MONEY) t.same(columns.find((c) => c.name === name)?.whole, [], `${name} is not money and holds no whole-amount check`);
});

/**
 * Update `column` of one row of `table` to `value` in a transaction the caller rolls back, and say what
 * Postgres answered. Alone: the ledger's guard triggers and foreign keys off (replica role) and the
 * table's other checks dropped, so only `constraint` can refuse. The row as before is read back after.
 */
async function tryAmount(table: string, column: string, value: string, alone: boolean, constraint: string) {
  const client = await hub.dbPool.connect();
  try {
    await client.query("begin");
    if (alone) {
      await client.query("set local session_replication_role = replica");
      const others = await client.query<{ conname: string }>("select conname from pg_constraint where conrelid = $1::regclass and contype = 'c' and conname <> $2", [table, constraint]);
      if (others.rows.length) await client.query(`alter table ${table} ${others.rows.map((r) => `drop constraint ${r.conname}`).join(", ")}`);
    }
    const [sql, params] = rowOf(table);
    const ctid = (await client.query<{ ctid: string }>(sql, params)).rows[0]!.ctid;
    const read = async () => (await client.query<{ v: string }>(`select ${column}::text as v from ${table} where ctid = $1::tid`, [ctid])).rows[0]?.v;
    const before = await read();
    await client.query("savepoint attempt");
    const error = await client
      .query(`update ${table} set ${column} = $1::float8 where ctid = $2::tid`, [value, ctid])
      .then((r) => ({ code: "none", constraint: `${r.rowCount} row(s) updated` }), (e: { code?: string; constraint?: string }) => ({ code: e.code, constraint: e.constraint }));
    await client.query("rollback to savepoint attempt");
    return { ...error, before, after: await read() };
  } finally {
    await client.query("rollback").catch(() => undefined);
    client.release();
  }
}

t.test("as the superuser, every amount column refuses a fraction, NaN, 2^53 + 1 and ±Infinity by its own check (SQLSTATE 23514), the row unchanged", async (t) => {
  const before = await books();
  for (const [table, column, constraint, rule] of AMOUNT_COLUMNS) {
    for (const value of REFUSED[rule]) {
      const label = `${table}.${column} = ${value}`;
      // Its own check alone: it refuses, by name (each case fails if that check is missing or lets the value through).
      const alone = await tryAmount(table, column, value, true, constraint);
      t.same({ code: alone.code, constraint: alone.constraint }, { code: "23514", constraint }, `${label}: refused by ${constraint}`);
      t.equal(alone.after, alone.before, `${label}: the row unchanged (${alone.before})`);
      // Everything in place, as psql would meet it: refused (the ledger's append-only guard answers first).
      const all = await tryAmount(table, column, value, false, constraint);
      const expected = table === "hub.ledger" ? { code: "P0001", constraint: "ledger_append_only" } : { code: "23514" };
      t.match(all, expected, `${label}: refused with everything in place (${all.code} ${all.constraint})`);
      t.equal(all.after, all.before, `${label}: the row unchanged with everything in place`);
    }
  }
  t.same(await books(), before, "balance, bankroll, bets and ledger unchanged");
});

/**
 * Postgres prepares a table's checks again for every statement that writes it, and inlines a SQL
 * function in one by parsing its body each time: the tables a bet writes have their checks written out.
 */
const BET_TABLES = ["hub.balance", "hub.bankroll", "hub.ledger", "hub.hash", "hub.hash_chain", "hub.outcome_bet", "hub_hidden.bankroll_slot", "hub_hidden.bankroll_pending"];

t.test("no check of a table a bet writes calls a function of the hub's own", async (t) => {
  const { rows } = await hub.dbPool.query<{ constraint: string; fn: string }>(
    `select c.conrelid::regclass::text || '.' || c.conname as constraint, d.refobjid::regprocedure::text as fn
       from pg_constraint c
       join pg_depend d on d.classid = 'pg_constraint'::regclass and d.objid = c.oid and d.refclassid = 'pg_proc'::regclass
      where c.contype = 'c' and c.conrelid = any($1::regclass[])
      order by 1`,
    [BET_TABLES],
  );
  t.same(rows, [], "every check is written out (built-in functions only)");
  // The rule itself is held as before: the refusals above (each constraint alone, and with everything in place).
  const held = await hub.dbPool.query<{ conname: string }>(
    "select conname from pg_constraint where contype = 'c' and conrelid = any($1::regclass[]) and pg_get_constraintdef(oid) ~ '9007199254740991'",
    [BET_TABLES],
  );
  t.ok(held.rows.length >= 11, `${held.rows.length} whole-amount checks on those tables`);
});

/** `node dist/cli.js …` against this test server's database. */
const cli = (args: string[]) => cliOn(hub)(args);

t.test("hub balance credit takes whole base units only", async (t) => {
  const base = ["balance", "credit", "--uname", "whole-player", "--casino", "whole", "--currency", CURRENCY];
  const before = await books();
  const bad = ["0.5", "2.5", "5e-324", "1e-300", "1e300", "1e2", "9007199254740992", "99999999999999999", "NaN", "Infinity", "0", "-3", "1.0"];
  const runs = await Promise.all(bad.map((amount) => cli([...base, `--amount=${amount}`])));
  for (const [i, run] of runs.entries()) {
    t.equal(run.code, 2, `--amount ${bad[i]}: exit 2`);
    t.equal(run.stderr.trim().split("\n").length, 1, `--amount ${bad[i]}: one line`);
    t.match(run.stderr, `hub: --amount "${bad[i]}" is invalid: expected a whole number of base units from 1 to ${MAX}, such as 100 (amounts are whole base units of the currency).`, `--amount ${bad[i]}: the message`);
  }
  t.same(await books(), before, "nothing moved");
  const ok = await cli([...base, "--amount", "25"]);
  t.equal(ok.code, 0, ok.stderr);
  t.equal(ok.stdout.trim().split("\n").at(-1), String(before.balance + 25));
  const past = await cli([...base, "--amount", String(MAX)]);
  t.equal(past.code, 1, "a balance past 2^53-1 is refused by the ledger");
  t.match(past.stderr, /credit_balance: the balance would exceed 9007199254740991 base units/);
});
