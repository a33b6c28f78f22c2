import "./helpers/env.js";
import fs from "node:fs";
import path from "node:path";
import t from "tap";
import pg from "pg";
import { startAndListen, defaultPlugins, type RunningServer } from "@hubpkg/hub";
import { CoinflipBetPlugin, referenceMigrationsPath } from "@hubpkg/hub/plugins";
import { gql } from "./helpers/http.js";
import { makeOperator, makePlayer, type Player } from "./helpers/credentials.js";
import { tmpDir } from "./helpers/tmp.js";
import { rng } from "./helpers/rng.js";

/*
 * Money under concurrency: 4 players × 100 requests, all sent at once, on one
 * casino's house bankroll and on each player's balance — makeCoinflipBet by the
 * players mixed with the operator's hubCreditBalance/hubDebitBalance and
 * hubCreditBankroll/hubDebitBankroll. Then the books are audited:
 *  - every answer is a success or a refusal that says why (never a 5xx, an
 *    internal error, a deadlock or a serialization failure);
 *  - no balance or bankroll is ever negative (final amounts, every ledger row's
 *    balance_after, every answer);
 *  - no update is lost: final = initial + accepted credits − accepted debits ± bet nets;
 *  - the ledger sums to every balance and bankroll and replays as one serial
 *    history per account;
 *  - per bet, the player's and the house's ledger rows (linked by bet_id) sum to 0.
 */

const PLAYERS = 4;
const REQUESTS_PER_PLAYER = 100;
const CURRENCY = "CHIPS";
const INITIAL_BALANCE = 200;
const INITIAL_BANKROLL = 2000;
/** Liveness bound for the burst (a deadlock would hang here), far above the few seconds it takes. */
const BURST_LIMIT_MS = 50_000;

const BET = "mutation($i: MakeCoinflipBetInput!) { makeCoinflipBet(input: $i) { bet { id wager net balanceAfter } outcome balance } }";
const CREDIT_BALANCE = "mutation($i: HubBalanceChangeInput!) { hubCreditBalance(input: $i) { balanceId amount } }";
const DEBIT_BALANCE = "mutation($i: HubBalanceChangeInput!) { hubDebitBalance(input: $i) { balanceId amount } }";
const CREDIT_BANKROLL = "mutation($i: HubBankrollChangeInput!) { hubCreditBankroll(input: $i) { bankrollId amount } }";
const DEBIT_BANKROLL = "mutation($i: HubBankrollChangeInput!) { hubDebitBankroll(input: $i) { bankrollId amount } }";

/** The refusals each kind of request may answer; anything else is a defect. */
const REFUSALS: Record<Op["kind"], RegExp | null> = {
  bet: /^makeCoinflipBet: (the wager is \d+ CHIPS but the balance is \d+ CHIPS|the house bankroll cannot cover)/,
  creditBalance: null,
  debitBalance: /^debit_balance: insufficient funds/,
  creditBankroll: null,
  debitBankroll: /^adjust_bankroll: insufficient funds/,
};

type Op =
  | { kind: "bet"; player: number; wager: number; side: "HEADS" | "TAILS" }
  | { kind: "creditBalance" | "debitBalance"; player: number; amount: number }
  | { kind: "creditBankroll" | "debitBankroll"; player: number; amount: number };

interface Outcome {
  op: Op;
  accepted: boolean;
  /** The bet as answered (accepted bets). */
  bet?: { id: string; wager: number; net: number; balanceAfter: number };
  /** The amount after the change, as answered. */
  amount?: number;
  refusal?: string;
}

let hub: RunningServer;
let db: pg.Pool;
let dataDir: string;
let operatorHeader: { authorization: string };
let operatorActor: string;
const players: Player[] = [];
let casinoId: string;

t.before(async () => {
  dataDir = tmpDir(t);
  hub = await startAndListen({
    port: 0,
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    handleSignals: false,
    dataDir,
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: referenceMigrationsPath,
    plugins: [...defaultPlugins, CoinflipBetPlugin],
  });
  db = new pg.Pool({ connectionString: hub.superuserDatabaseUrl, max: 4 });
  const op = await makeOperator(hub.superuserDatabaseUrl);
  operatorHeader = op.header;
  operatorActor = `api_key:${op.id}`;
  for (let i = 0; i < PLAYERS; i++) players.push(await makePlayer(hub.superuserDatabaseUrl, `gambler-${i}`, { casinoName: "money-casino" }));
  casinoId = players[0]!.casinoId;
  await db.query("insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale) values ($1, $2, 'chips', 1)", [CURRENCY, casinoId]);
  await db.query("select hub_hidden.ensure_bankroll($1, $2, $3, 'opening bankroll', 'seed')", [casinoId, CURRENCY, INITIAL_BANKROLL]);
  for (const p of players) {
    await db.query("select hub_hidden.credit_balance($1, $2, $3, $4, $5, 'seed', 'opening balance')", [p.userId, p.casinoId, p.experienceId, CURRENCY, INITIAL_BALANCE]);
  }
});
t.teardown(async () => {
  await db?.end();
  await hub?.stop();
});

function workload(seed: number): Op[] {
  const random = rng(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1));
  const ops: Op[] = [];
  for (let player = 0; player < PLAYERS; player++) {
    for (let i = 0; i < REQUESTS_PER_PLAYER; i++) {
      // 55 bets, 15 credits, 15 debits (large: many refused once the balance runs low),
      // 8 bankroll credits and 7 large bankroll debits per player.
      if (i < 55) ops.push({ kind: "bet", player, wager: int(2, 40), side: random() < 0.5 ? "HEADS" : "TAILS" });
      else if (i < 70) ops.push({ kind: "creditBalance", player, amount: int(1, 30) });
      else if (i < 85) ops.push({ kind: "debitBalance", player, amount: int(10, 120) });
      else if (i < 93) ops.push({ kind: "creditBankroll", player, amount: int(1, 100) });
      else ops.push({ kind: "debitBankroll", player, amount: int(100, 600) });
    }
  }
  for (let i = ops.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [ops[i], ops[j]] = [ops[j]!, ops[i]!];
  }
  return ops;
}

/** Send one request; an answer that is neither a success nor an expected refusal is pushed to `defects`. */
async function send(op: Op, defects: string[], currency = CURRENCY, refusals = REFUSALS): Promise<Outcome> {
  const p = players[op.player]!;
  let doc: string;
  let variables: Record<string, unknown>;
  let headers: Record<string, string> = operatorHeader;
  let field: string;
  switch (op.kind) {
    case "bet":
      doc = BET;
      variables = { i: { wager: op.wager, currency, side: op.side } };
      headers = p.header;
      field = "makeCoinflipBet";
      break;
    case "creditBalance":
    case "debitBalance":
      doc = op.kind === "creditBalance" ? CREDIT_BALANCE : DEBIT_BALANCE;
      variables = { i: { userId: p.userId, experienceId: p.experienceId, currencyKey: currency, amount: op.amount, reason: `concurrency ${op.kind}` } };
      field = op.kind === "creditBalance" ? "hubCreditBalance" : "hubDebitBalance";
      break;
    default:
      doc = op.kind === "creditBankroll" ? CREDIT_BANKROLL : DEBIT_BANKROLL;
      variables = { i: { casinoId, currencyKey: currency, amount: op.amount, reason: `concurrency ${op.kind}` } };
      field = op.kind === "creditBankroll" ? "hubCreditBankroll" : "hubDebitBankroll";
  }
  let res;
  try {
    res = await gql(hub.url, doc, variables, headers);
  } catch (error) {
    defects.push(`${op.kind}: no GraphQL answer: ${(error as Error).message}`);
    return { op, accepted: false };
  }
  if (res.status !== 200) defects.push(`${op.kind}: HTTP ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
  const errors = res.body.errors ?? [];
  const data = res.body.data?.[field];
  if (errors.length === 0 && data) {
    if (op.kind === "bet") return { op, accepted: true, bet: data.bet, amount: data.balance };
    return { op, accepted: true, amount: data.amount };
  }
  const message = errors[0]?.message ?? "(no error and no data)";
  const expected = refusals[op.kind];
  if (errors.length !== 1 || !expected || !expected.test(message)) {
    defects.push(`${op.kind}: unexpected answer ${res.status}: ${JSON.stringify(errors).slice(0, 400)}`);
  }
  return { op, accepted: false, refusal: message };
}

/** Send every request at once; fails (instead of hanging) if they do not all finish within BURST_LIMIT_MS. */
async function burst(ops: Op[], defects: string[], currency = CURRENCY, refusals = REFUSALS): Promise<Outcome[]> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    Promise.all(ops.map((op) => send(op, defects, currency, refusals))),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the ${ops.length} requests did not all finish within ${BURST_LIMIT_MS} ms: a deadlock or a hung pool?`)), BURST_LIMIT_MS);
    }),
  ]).finally(() => clearTimeout(timer));
}

// Amounts are whole base units, so every sum below is exact: no tolerance.
const close = (a: number, b: number) => Number.isInteger(a) && a === b;
const sum = (xs: number[]) => xs.reduce((s, x) => s + x, 0);

/**
 * The rows of one account can be put in a serial order: each row's amount
 * before (balance_after − amount_delta) is the previous row's balance_after.
 * Equivalently the multiset of "befores" is {0} plus the multiset of "afters"
 * without the final amount. A lost update shows as two rows with the same before.
 */
function replaysSerially(rows: { amount_delta: number; balance_after: number }[], final: number): boolean {
  const befores = rows.map((r) => r.balance_after - r.amount_delta).sort((a, b) => a - b);
  const afters = rows.map((r) => r.balance_after);
  const last = afters.findIndex((x) => close(x, final));
  if (last < 0) return false;
  afters.splice(last, 1);
  afters.push(0);
  afters.sort((a, b) => a - b);
  return befores.length === afters.length && befores.every((b, k) => close(b, afters[k]!));
}

t.test(`${PLAYERS} players × ${REQUESTS_PER_PLAYER} requests at once: bets and operator credits/debits on one balance and bankroll each`, async (t) => {
  const seed = Number(process.env.MONEY_SEED ?? Date.now() % 2 ** 31);
  t.comment(`workload seed ${seed} (replay with MONEY_SEED=${seed})`);
  const ops = workload(seed);
  const defects: string[] = [];

  const outcomes = await burst(ops, defects);

  // Every answer: a success or a refusal that says why.
  t.same(defects.slice(0, 20), [], `every answer is a success or a clear refusal (${defects.length} others)`);
  const tally = new Map<string, { accepted: number; refused: number }>();
  for (const o of outcomes) {
    const entry = tally.get(o.op.kind) ?? { accepted: 0, refused: 0 };
    if (o.accepted) entry.accepted++;
    else entry.refused++;
    tally.set(o.op.kind, entry);
  }
  t.comment(`answers: ${[...tally].map(([k, v]) => `${k} ${v.accepted} accepted / ${v.refused} refused`).join(", ")}`);
  const reasons = new Map<string, number>();
  for (const o of outcomes) if (o.refusal) {
    const reason = o.refusal.replace(/[:;,] .*$|\d.*$/, "").slice(0, 60) + (/cannot cover/.test(o.refusal) ? " (house cannot cover)" : /but the balance is/.test(o.refusal) ? " (insufficient balance)" : "");
    reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
  }
  t.comment(`refusals: ${[...reasons].map(([k, v]) => `${v}× ${k}`).join(", ")}`);
  t.ok((tally.get("bet")?.accepted ?? 0) > 0 && (tally.get("debitBalance")?.refused ?? 0) > 0, "the mix both succeeds and refuses (not vacuous)");

  // Never negative, in any answer.
  const negativeAnswers = outcomes.filter((o) => o.accepted && (o.amount! < 0 || (o.bet && o.bet.balanceAfter < 0)));
  t.same(negativeAnswers, [], "no answer reports a negative amount");
  const betAnswers = outcomes.filter((o) => o.accepted && o.op.kind === "bet");
  t.same(betAnswers.filter((o) => o.bet!.balanceAfter !== o.amount), [], "each bet's payload balance is the stored bet's balanceAfter");

  // No update lost: final = initial + accepted credits − accepted debits + bet nets.
  const { rows: balances } = await db.query<{ user_id: string; amount: number }>(
    "select user_id, amount from hub.balance where casino_id = $1 and currency_key = $2",
    [casinoId, CURRENCY],
  );
  const accepted = (kind: Op["kind"], player?: number) =>
    outcomes.filter((o) => o.accepted && o.op.kind === kind && (player === undefined || o.op.player === player));
  let allNets = 0;
  players.forEach((p, i) => {
    const nets = sum(accepted("bet", i).map((o) => o.bet!.net));
    allNets += nets;
    const credits = sum(accepted("creditBalance", i).map((o) => (o.op as { amount: number }).amount));
    const debits = sum(accepted("debitBalance", i).map((o) => (o.op as { amount: number }).amount));
    const expected = INITIAL_BALANCE + credits - debits + nets;
    const actual = balances.find((b) => b.user_id === p.userId)?.amount;
    t.ok(actual !== undefined && close(actual, expected), `player ${i}: balance ${actual} = ${INITIAL_BALANCE} + ${credits} credited − ${debits} debited + ${nets.toFixed(4)} won/lost (${expected})`);
  });
  const { rows: bankrolls } = await db.query<{ amount: number; bets: string; wagered: number }>(
    "select amount, bets, wagered from hub.bankroll where casino_id = $1 and currency_key = $2",
    [casinoId, CURRENCY],
  );
  const bankroll = bankrolls[0]!;
  const bankrollCredits = sum(accepted("creditBankroll").map((o) => (o.op as { amount: number }).amount));
  const bankrollDebits = sum(accepted("debitBankroll").map((o) => (o.op as { amount: number }).amount));
  const expectedBankroll = INITIAL_BANKROLL + bankrollCredits - bankrollDebits - allNets;
  t.ok(close(bankroll.amount, expectedBankroll), `bankroll ${bankroll.amount} = ${INITIAL_BANKROLL} + ${bankrollCredits} − ${bankrollDebits} − ${allNets.toFixed(4)} paid to players (${expectedBankroll})`);
  t.equal(Number(bankroll.bets), betAnswers.length, "bankroll.bets counts every accepted bet");
  t.ok(close(bankroll.wagered, sum(betAnswers.map((o) => o.bet!.wager))), "bankroll.wagered sums their wagers");

  // The stored bets are exactly the accepted ones.
  const { rows: stored } = await db.query<{ id: string; net: number; wager: number; balance_after: number; user_id: string }>(
    "select id, net, wager, balance_after, user_id from app.coinflip_bet where casino_id = $1",
    [casinoId],
  );
  t.same(stored.map((b) => b.id).sort(), betAnswers.map((o) => o.bet!.id).sort(), `the ${stored.length} stored bets are exactly the accepted ones (no refused or failed bet left a row)`);

  // The ledger: sums to every amount, never below 0, one serial history per account.
  const { rows: ledger } = await db.query<{
    account: string; user_id: string | null; amount_delta: number; balance_after: number; actor: string; reason: string; bet_id: string | null;
  }>("select account, user_id, amount_delta, balance_after, actor, reason, bet_id from hub.ledger where casino_id = $1 and currency_key = $2", [casinoId, CURRENCY]);
  for (const [i, p] of players.entries()) {
    const rows = ledger.filter((r) => r.account === "player" && r.user_id === p.userId);
    const amount = balances.find((b) => b.user_id === p.userId)!.amount;
    t.ok(close(sum(rows.map((r) => r.amount_delta)), amount), `player ${i}: the ledger (${rows.length} rows) sums to the balance ${amount}`);
    t.ok(replaysSerially(rows, amount), `player ${i}: the ledger replays as one serial history ending at the balance`);
    const movements = accepted("creditBalance", i).length + accepted("debitBalance", i).length + accepted("bet", i).length;
    t.equal(rows.length, 1 + movements, `player ${i}: one ledger row per accepted credit, debit and bet (plus the opening)`);
  }
  const house = ledger.filter((r) => r.account === "house");
  t.ok(close(sum(house.map((r) => r.amount_delta)), bankroll.amount), `house: the ledger (${house.length} rows) sums to the bankroll ${bankroll.amount}`);
  t.ok(replaysSerially(house, bankroll.amount), "house: the ledger replays as one serial history ending at the bankroll");
  t.equal(house.length, 1 + accepted("creditBankroll").length + accepted("debitBankroll").length + betAnswers.length, "house: one row per accepted bankroll change and bet (plus the opening)");

  // Operator movements are attributed to the API key, with the reason given.
  const operatorRows = ledger.filter((r) => r.actor === operatorActor);
  const operatorAccepted = accepted("creditBalance").length + accepted("debitBalance").length + accepted("creditBankroll").length + accepted("debitBankroll").length;
  t.equal(operatorRows.length, operatorAccepted, "every accepted operator change has its ledger row, attributed to the API key");
  t.ok(operatorRows.every((r) => /^concurrency /.test(r.reason)), "with the reason the operator gave");

  // Player + house conserved by each bet, overall…
  const betRows = ledger.filter((r) => r.actor !== operatorActor && r.actor !== "seed");
  const sumNets = sum(stored.map((b) => b.net));
  t.ok(close(sum(betRows.filter((r) => r.account === "player").map((r) => r.amount_delta)), sumNets), "the players' ledger rows of bets sum to the bets' nets");
  t.ok(close(sum(betRows.filter((r) => r.account === "house").map((r) => r.amount_delta)), -sumNets), "the house's ledger rows of bets sum to minus the bets' nets");
  // …and bet by bet: the ledger rows carrying the bet's id are +net for the player and −net for the house.
  const byBet = new Map<string, typeof ledger>();
  for (const r of ledger) if (r.bet_id) byBet.set(r.bet_id, [...(byBet.get(r.bet_id) ?? []), r]);
  const unbalanced = stored.filter((b) => {
    const rows = byBet.get(b.id) ?? [];
    const player = rows.filter((r) => r.account === "player");
    const houseRows = rows.filter((r) => r.account === "house");
    return !(player.length === 1 && houseRows.length === 1 && close(player[0]!.amount_delta, b.net) && close(houseRows[0]!.amount_delta, -b.net) && close(player[0]!.balance_after, b.balance_after));
  });
  t.equal(unbalanced.length, 0, `each stored bet has a player and a house ledger row (linked by bet_id) summing to 0: ${unbalanced.length} of ${stored.length} do not` +
    (unbalanced.length ? `; e.g. bet ${unbalanced[0]!.id} has ${(byBet.get(unbalanced[0]!.id) ?? []).length} linked rows; its rows say actor ${JSON.stringify(betRows[0]?.actor)}, reason ${JSON.stringify(betRows[0]?.reason)}` : ""));

  t.same(
    ledger.filter((r) => /^sql:/.test(r.actor) || / without a reason$/.test(r.reason)).slice(0, 5),
    [],
    "every ledger row says who moved the money and why (no sql:<role> / 'without a reason' defaults)",
  );

  // Postgres itself saw no deadlock and no serialization failure.
  const log = fs.existsSync(path.join(dataDir, "postgres.log")) ? fs.readFileSync(path.join(dataDir, "postgres.log"), "utf8") : "";
  if ((tally.get("debitBalance")?.refused ?? 0) > 0) t.match(log, /insufficient funds/, "postgres.log records failed statements (so it would show a deadlock)");
  t.notMatch(log, /deadlock detected|could not serialize/, "postgres.log: no deadlock, no serialization failure");
});

t.test("a balance and a bankroll created by concurrent first credits, with bets racing them", async (t) => {
  // A currency nobody holds yet: the first credits insert the balance and the
  // bankroll (insert … on conflict), while bets find nothing to bet with.
  const currency = "FRESH";
  await db.query("insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale) values ($1, $2, 'fresh', 1)", [currency, casinoId]);
  const ops: Op[] = [];
  for (let player = 0; player < PLAYERS; player++) {
    for (let i = 0; i < 25; i++) ops.push({ kind: "creditBalance", player, amount: 1 + (i % 5) });
    for (let i = 0; i < 10; i++) ops.push({ kind: "bet", player, wager: 2, side: i % 2 ? "HEADS" : "TAILS" });
    for (let i = 0; i < 10; i++) ops.push({ kind: "creditBankroll", player, amount: 10 });
  }
  // Interleaved, so some bets arrive before any credit has created the balance.
  const random = rng(Number(process.env.MONEY_SEED ?? 7));
  for (let i = ops.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [ops[i], ops[j]] = [ops[j]!, ops[i]!];
  }
  const refusals = { ...REFUSALS, bet: /^makeCoinflipBet: (the wager is \d+ \w+ but the balance is \d+ \w+|the house bankroll cannot cover|the wager is \d+ \w+ but this player has no \w+ balance|the house has no bankroll in)/ };
  const defects: string[] = [];
  const outcomes = await burst(ops, defects, currency, refusals);
  t.same(defects.slice(0, 20), [], `every answer is a success or a clear refusal (${defects.length} others)`);
  t.same(outcomes.filter((o) => o.op.kind !== "bet" && !o.accepted).map((o) => o.refusal).slice(0, 5), [], "no credit is refused, however many race to create the row");

  const { rows: balances } = await db.query<{ user_id: string; amount: number }>("select user_id, amount from hub.balance where casino_id = $1 and currency_key = $2", [casinoId, currency]);
  t.equal(balances.length, PLAYERS, "one balance row per player (no duplicate from the race)");
  for (const [i, p] of players.entries()) {
    const credits = sum(outcomes.filter((o) => o.accepted && o.op.kind === "creditBalance" && o.op.player === i).map((o) => (o.op as { amount: number }).amount));
    const nets = sum(outcomes.filter((o) => o.accepted && o.op.kind === "bet" && o.op.player === i).map((o) => o.bet!.net));
    const actual = balances.find((b) => b.user_id === p.userId)?.amount ?? NaN;
    t.ok(close(actual, credits + nets), `player ${i}: balance ${actual} = ${credits} credited + ${nets.toFixed(2)} won/lost`);
  }
  const { rows: bankrolls } = await db.query<{ amount: number }>("select amount from hub.bankroll where casino_id = $1 and currency_key = $2", [casinoId, currency]);
  const allNets = sum(outcomes.filter((o) => o.accepted && o.op.kind === "bet").map((o) => o.bet!.net));
  t.equal(bankrolls.length, 1, "one bankroll row");
  t.ok(close(bankrolls[0]!.amount, PLAYERS * 10 * 10 - allNets), `bankroll ${bankrolls[0]!.amount} = ${PLAYERS * 100} credited − ${allNets.toFixed(2)} paid`);
  const { rows: sums } = await db.query<{ account: string; user_id: string | null; total: number; n: number }>(
    "select account, user_id, sum(amount_delta) as total, count(*)::int as n from hub.ledger where casino_id = $1 and currency_key = $2 group by 1, 2",
    [casinoId, currency],
  );
  for (const b of balances) t.ok(close(sums.find((s) => s.user_id === b.user_id)?.total ?? NaN, b.amount), "the ledger sums to the balance");
  t.ok(close(sums.find((s) => s.account === "house")?.total ?? NaN, bankrolls[0]!.amount), "the ledger sums to the bankroll");
  t.comment(`bets: ${outcomes.filter((o) => o.op.kind === "bet" && o.accepted).length} accepted, ${outcomes.filter((o) => o.op.kind === "bet" && !o.accepted).length} refused`);
});

t.test("afterwards, across the whole database: the ledger sums to every balance and every bankroll", async (t) => {
  const { rows } = await db.query<{ kind: string; id: string; amount: number; ledger: number | null; low: number | null }>(
    `select 'balance' as kind, b.id, b.amount,
            (select sum(l.amount_delta) from hub.ledger l where l.account = 'player' and l.user_id = b.user_id
                and l.experience_id = b.experience_id and l.currency_key = b.currency_key and l.casino_id = b.casino_id) as ledger,
            (select min(l.balance_after) from hub.ledger l where l.account = 'player' and l.user_id = b.user_id
                and l.experience_id = b.experience_id and l.currency_key = b.currency_key and l.casino_id = b.casino_id) as low
       from hub.balance b
     union all
     select 'bankroll', r.id, r.amount,
            (select sum(l.amount_delta) from hub.ledger l where l.account = 'house' and l.casino_id = r.casino_id and l.currency_key = r.currency_key),
            (select min(l.balance_after) from hub.ledger l where l.account = 'house' and l.casino_id = r.casino_id and l.currency_key = r.currency_key)
       from hub.bankroll r`,
  );
  t.ok(rows.length >= PLAYERS * 2 + 2, `${rows.length} balances and bankrolls`);
  t.same(rows.filter((r) => !close(Number(r.ledger ?? 0), r.amount)), [], "each amount equals the sum of its ledger rows");
  // Reading amounts for a negative one cannot fail while the database forbids them: check that it does.
  for (const [what, sql] of [
    ["a balance", "update hub.balance set amount = -1 where id = (select id from hub.balance limit 1)"],
    ["a bankroll", "update hub.bankroll set amount = -1 where id = (select id from hub.bankroll limit 1)"],
  ] as const) {
    const client = await db.connect();
    try {
      await client.query("begin");
      const error = await client.query(sql).then(() => undefined, (e: { code?: string }) => e);
      t.equal(error?.code, "23514", `the database refuses a negative amount for ${what} (check violation), so no amount is ever negative`);
    } finally {
      await client.query("rollback").catch(() => undefined);
      client.release();
    }
  }
});
