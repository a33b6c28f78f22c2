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
