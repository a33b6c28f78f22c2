/**
 * Every money path at once, on one hub: 14 players of one casino sharing its
 * bankroll place outcome bets (grouped by the hub into one statement, or
 * alone; some with idempotency keys), coinflip bets and tower climbs, while
 * deposits (pushed, and polled by the transfer worker), withdrawals and the
 * casino's take requests move their funds and the operator credits and debits
 * balances and the bankroll. The locks of all of them follow one global order
 * (core migration 0030), so Postgres detects no deadlock
 * (pg_stat_database.deadlocks does not move), no answer is an internal or
 * unexpected error, and afterwards the money is all there: every balance and
 * the bankroll equal their ledgers, every bet's ledger rows sum to 0, and the
 * total equals what came in minus what went out.
 */
import "./helpers/env.js";
import t from "tap";
import { defaultPlugins, HubGameConfigPlugin, type RiskPolicy } from "@hubpkg/hub";
import { createHashChain, createHouseBankroll, createPlayer, startTestServer, type TestServer } from "@hubpkg/hub/test";
import { CoinflipBetPlugin, TowerPlugin, referenceMigrationsPath } from "@hubpkg/hub/plugins";
import { gql } from "./helpers/http.js";
import { startSimCasino, type SimCasino } from "./helpers/sim-casino.js";
import { addSimCasino, FAST_TRANSFERS, ok, reconcile, sleep, waitFor } from "./helpers/transfers.js";
import { rng } from "./helpers/rng.js";

const PLAYERS = 14;
const OPERATIONS = Number(process.env.DEADLOCK_OPERATIONS ?? 3000);
/** Requests in flight at once. */
const CONCURRENCY = 48;
const FUNDS = 200_000;
const BANKROLL = 50_000_000;
const riskPolicy: RiskPolicy = ({ bankroll }) => ({ maxPayout: bankroll * 0.01 });

let server: TestServer;
let casino: SimCasino;
let casinoId: string;
let operator: Record<string, string>;
interface Player { uname: string; userId: string; experienceId: string; chainId: string; headers: Record<string, string> }
const players: Player[] = [];

t.before(async () => {
  casino = await startSimCasino();
  server = await startTestServer({
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: referenceMigrationsPath,
    transfers: FAST_TRANSFERS,
    plugins: [
      ...defaultPlugins,
      CoinflipBetPlugin,
      TowerPlugin({ maxFloor: 3, riskPolicy }),
      HubGameConfigPlugin({ outcomeBetConfigs: { GENERAL: { houseEdge: 0.01, saveOutcomes: false, riskPolicy } }, customGameConfigs: { TOWER: { riskPolicy } }, hashChainLength: 5000 }),
    ],
  });
  operator = { authorization: `apikey:${(await server.authenticateOperator()).apiKey}` };
  casinoId = await addSimCasino(server.url, operator, casino, { poll: true, takeRequests: true });
  await createHouseBankroll(server.dbPool, { casinoId, currencyKey: "BTC", amount: BANKROLL });
  const { rows } = await server.dbPool.query<{ id: string }>("insert into hub.experience (casino_id, name) values ($1, 'main') returning id", [casinoId]);
  const experienceId = rows[0]!.id;
  for (let i = 0; i < PLAYERS; i++) {
    const uname = `locker-${i}`;
    const userId = (await createPlayer(server.dbPool, { casinoId, uname })).id;
    await pushDeposit(uname, FUNDS);
    const chainId = (await createHashChain(server.dbPool, { userId, casinoId, experienceId, maxIteration: 5000 })).id;
    const { token } = await server.authenticate(userId, experienceId);
    players.push({ uname, userId, experienceId, chainId, headers: { authorization: `session:${token}` } });
  }
});
t.teardown(async () => {
  await server?.stop();
  await casino?.close();
});

async function pushDeposit(uname: string, amount: number): Promise<void> {
  casino.fund(uname, "BTC", amount);
  const id = casino.deposit(uname, "BTC", amount);
  await ok(server.url, operator, "mutation($i: HubRecordDepositInput!) { hubRecordDeposit(input: $i) { created } }", {
    i: { casinoId, mpTransferId: id, uname, experience: "main", currencyKey: "BTC", amount },
  });
}

const OUTCOME_BET = `mutation($i: HubMakeOutcomeBetInput!) { hubMakeOutcomeBet(input: $i) { result { __typename ... on HubMakeOutcomeBetSuccess { bet { id } } } } }`;
const COINFLIP = "mutation($i: MakeCoinflipBetInput!) { makeCoinflipBet(input: $i) { bet { id } } }";
const START_TOWER = "mutation($i: StartTowerInput!) { startTower(input: $i) { result { __typename ... on StartTowerSuccess { game { id } } } } }";
const MOVE_TOWER = "mutation($i: MoveTowerInput!) { moveTower(input: $i) { result { __typename ... on MoveTowerSuccess { survived game { status } } } } }";
const CASH_OUT_TOWER = "mutation($i: CashOutTowerInput!) { cashOutTower(input: $i) { balance } }";
const WITHDRAW = "mutation($a: Float!) { hubWithdraw(input: { currencyKey: \"BTC\", amount: $a }) { withdrawalRequest { id } } }";
const RECORD_DEPOSIT = "mutation($i: HubRecordDepositInput!) { hubRecordDeposit(input: $i) { created } }";
const CHANGE_BALANCE = (kind: string) => `mutation($i: HubBalanceChangeInput!) { ${kind}(input: $i) { amount } }`;
const CHANGE_BANKROLL = (kind: string) => `mutation($i: HubBankrollChangeInput!) { ${kind}(input: $i) { amount } }`;

/** Refusals a request may answer under this load: a short balance or bankroll. Anything else is a defect. */
const EXPECTED_CODES = new Set(["INSUFFICIENT_FUNDS"]);

interface Tally {
  requests: number;
  refused: Map<string, number>;
  defects: string[];
  /** What the operator's accepted changes added to the books (credits − debits). */
  operatorNet: number;
}

/** One request; its answer's data, or undefined when refused (counted) or failed (a defect). */
async function send(tally: Tally, what: string, headers: Record<string, string>, doc: string, variables: Record<string, unknown>): Promise<any> {
  tally.requests++;
  let res;
  try {
    res = await gql<any>(server.url, doc, variables, headers);
  } catch (error) {
    tally.defects.push(`${what}: no answer: ${(error as Error).message}`);
    return undefined;
  }
  const error = res.body.errors?.[0];
  if (!error && res.body.data) return res.body.data;
  const code = String(error?.extensions?.code ?? `HTTP ${res.status}`);
  if (EXPECTED_CODES.has(code)) tally.refused.set(`${what} ${code}`, (tally.refused.get(`${what} ${code}`) ?? 0) + 1);
  else tally.defects.push(`${what}: ${code}: ${String(error?.message ?? JSON.stringify(res.body)).slice(0, 300)}`);
  return undefined;
}

async function towerClimb(tally: Tally, p: Player, n: number, wager: number, random: () => number): Promise<void> {
  const started = await send(tally, "startTower", p.headers, START_TOWER, { i: { wager, currency: "BTC" } });
  const gameId = started?.startTower.result.game?.id as string | undefined;
  if (!gameId) return;
  const floors = 1 + Math.floor(random() * 2);
  for (let floor = 0; floor < floors; floor++) {
    const moved = await send(tally, "moveTower", p.headers, MOVE_TOWER, { i: { gameId, tile: floor % 3, hashChainId: p.chainId, clientSeed: `climb ${n} ${floor}` } });
    const result = moved?.moveTower.result;
    if (result?.__typename !== "MoveTowerSuccess") {
      if (moved) tally.defects.push(`moveTower: ${JSON.stringify(result)}`);
      return;
    }
    if (!result.survived || result.game.status !== "ACTIVE") return;
  }
  await send(tally, "cashOutTower", p.headers, CASH_OUT_TOWER, { i: { gameId } });
}

/** One operation of the mix, by weight. */
async function operation(tally: Tally, n: number, random: () => number): Promise<void> {
  const p = players[Math.floor(random() * PLAYERS)]!;
  const wager = 2 + Math.floor(random() * 400);
  const amount = 1 + Math.floor(random() * 2000);
  const roll = random();
  if (roll < 0.4) {
    const outcomes = random() < 0.5 ? [{ weight: 1, profit: 0.9 }, { weight: 1, profit: -1 }] : [{ weight: 1, profit: 9 }, { weight: 30, profit: -1 }];
    const idempotencyKey = random() < 0.5 ? `bet-${n}` : undefined;
    const data = await send(tally, "hubMakeOutcomeBet", p.headers, OUTCOME_BET, { i: { kind: "GENERAL", currency: "BTC", wager, outcomes, hashChainId: p.chainId, clientSeed: `mix ${n}`, idempotencyKey } });
    const typename = data?.hubMakeOutcomeBet.result.__typename;
    if (data && typename !== "HubMakeOutcomeBetSuccess") tally.defects.push(`hubMakeOutcomeBet: ${typename}`);
  } else if (roll < 0.6) {
    await send(tally, "makeCoinflipBet", p.headers, COINFLIP, { i: { wager, currency: "BTC", side: random() < 0.5 ? "HEADS" : "TAILS", idempotencyKey: random() < 0.3 ? `flip-${n}` : undefined } });
  } else if (roll < 0.68) {
    await towerClimb(tally, p, n, wager, random);
  } else if (roll < 0.72) {
    casino.fund(p.uname, "BTC", amount);
    const id = casino.deposit(p.uname, "BTC", amount);
    await send(tally, "hubRecordDeposit", operator, RECORD_DEPOSIT, { i: { casinoId, mpTransferId: id, uname: p.uname, experience: "main", currencyKey: "BTC", amount } });
  } else if (roll < 0.75) {
    // Polled by the transfer worker.
    casino.fund(p.uname, "BTC", amount);
    casino.deposit(p.uname, "BTC", amount);
  } else if (roll < 0.8) {
    await send(tally, "hubWithdraw", p.headers, WITHDRAW, { a: amount });
  } else if (roll < 0.83) {
    casino.requestTake(p.uname, "BTC", amount);
  } else {
    const kinds = ["hubCreditBalance", "hubDebitBalance", "hubCreditBankroll", "hubDebitBankroll"] as const;
    const kind = kinds[Math.floor(random() * kinds.length)]!;
    const big = kind === "hubDebitBankroll" ? amount * 100 : amount;
    const input = kind.endsWith("Balance")
      ? { userId: p.userId, experienceId: p.experienceId, currencyKey: "BTC", amount: big, reason: `mix ${n}` }
      : { casinoId, currencyKey: "BTC", amount: big, reason: `mix ${n}` };
    const data = await send(tally, kind, operator, kind.endsWith("Balance") ? CHANGE_BALANCE(kind) : CHANGE_BANKROLL(kind), { i: input });
    if (data) tally.operatorNet += kind.startsWith("hubCredit") ? big : -big;
  }
}

/** reconcile's checks but the one that assumes no bets: every balance equals its ledger, the casino's net equals the hub's transfers. */
async function books() {
  const r = await reconcile(server.superuserDatabaseUrl, casinoId, casino);
  return { ...r, problems: r.problems.filter((p) => !/ ≠ deposits /.test(p)) };
}

const one = async <T>(sql: string, values: unknown[] = []): Promise<T> => (await server.dbPool.query(sql, values)).rows[0] as T;
const deadlocks = () => one<{ n: number }>("select deadlocks::int as n from pg_stat_database where datname = current_database()").then((r) => r.n);

t.test("thousands of mixed money operations at once: no deadlock, no internal error, every unit accounted for", async (t) => {
  const seed = Number(process.env.DEADLOCK_SEED ?? 20261129);
  const random = rng(seed);
  const tally: Tally = { requests: 0, refused: new Map(), defects: [], operatorNet: 0 };
  const before = await deadlocks();

  let next = 0;
  const worker = async () => {
    while (next < OPERATIONS) await operation(tally, next++, random);
  };
  const started = Date.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  t.comment(`seed ${seed}: ${OPERATIONS} operations, ${tally.requests} requests in ${((Date.now() - started) / 1000).toFixed(1)} s; refused: ${JSON.stringify([...tally.refused])}`);

  // The transfer worker finishes the deposits polled, withdrawals and take requests; the sweep folds what bets left pending.
  const settled = await waitFor("every transfer and take request settled", 60_000, async () => {
    const r = await books();
    const takes = await one<{ n: number }>("select count(*)::int as n from hub.take_request where casino_id = $1 and status not in ('COMPLETED', 'REJECTED', 'FAILED')", [casinoId]);
    return r.pending === 0 && r.problems.length === 0 && takes.n === 0 && casino.takes.every((k) => k.status !== "PENDING") ? r : undefined;
  }).catch(async (error: Error) => {
    const takes = await server.dbPool.query("select status, count(*)::int as n from hub.take_request where casino_id = $1 group by status", [casinoId]);
    const jobs = await server.dbPool.query("select kind, status, last_error, count(*)::int as n from hub.transfer_job where casino_id = $1 group by 1, 2, 3", [casinoId]);
    t.comment(JSON.stringify({ books: await books(), takes: takes.rows, jobs: jobs.rows, casinoTakes: casino.takes.filter((k) => k.status === "PENDING").length }));
    throw error;
  });
  await waitFor("every bankroll fold done", 30_000, async () => (await one<{ n: number }>("select count(*)::int as n from hub_hidden.bankroll_pending")).n === 0);

  // Backends report their statistics once idle for a second.
  await sleep(2500);
  t.equal((await deadlocks()) - before, 0, "pg_stat_database.deadlocks did not move");
  t.same([...new Set(tally.defects)].slice(0, 20), [], `no internal or unexpected error (${tally.defects.length} in all)`);
  t.ok(tally.requests >= OPERATIONS, `${tally.requests} requests were sent`);

  t.same(settled.problems, [], "the casino's ledger and the hub's agree; every balance equals its ledger");
  const house = await one<{ amount: number; ledger: number }>(
    `select r.amount, (select sum(l.amount_delta) from hub.ledger l where l.account = 'house' and l.casino_id = r.casino_id and l.currency_key = r.currency_key)::float8 as ledger
       from hub.bankroll r where r.casino_id = $1 and r.currency_key = 'BTC'`,
    [casinoId],
  );
  t.equal(house.amount, house.ledger, "the bankroll equals its ledger");
  const unbalanced = await one<{ n: number }>("select count(*)::int as n from (select bet_id from hub.ledger where bet_id is not null group by bet_id having sum(amount_delta) <> 0) x");
  t.equal(unbalanced.n, 0, "every bet's ledger rows (player and house) sum to 0");
  const total = await one<{ balances: number; deposits: number; withdrawn: number; taken: number }>(
    `select (select coalesce(sum(amount), 0) from hub.balance where casino_id = $1 and currency_key = 'BTC')::float8 as balances,
            (select coalesce(sum(amount), 0) from hub.deposit where casino_id = $1)::float8 as deposits,
            (select coalesce(sum(amount), 0) from hub.withdrawal where casino_id = $1 and status <> 'CANCELED')::float8 as withdrawn,
            (select coalesce(sum(reserved_amount), 0) from hub.take_request where casino_id = $1 and refunded_at is null)::float8 as taken`,
    [casinoId],
  );
  t.equal(total.balances + house.amount, BANKROLL + total.deposits - total.withdrawn - total.taken + tally.operatorNet,
    "balances + bankroll = opening bankroll + deposits − withdrawals − take requests + the operator's changes");
});
