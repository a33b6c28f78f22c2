import "./helpers/env.js";
import t from "tap";
import { randomBytes, randomUUID } from "node:crypto";
import { defaultPlugins } from "@hubpkg/hub";
import {
  createCasino,
  createCurrency,
  createExperience,
  createHashChain,
  createHouseBankroll,
  createPlayer,
  createPlayerBalance,
  startTestServer,
  type TestServer,
} from "@hubpkg/hub/test";
import { settleOutcome, type OutcomeSettlement } from "../dist/src/fair/outcome-settlement.js";

/*
 * Every settlement takes one named row per bet, sent as named JSON:
 * hubMakeOutcomeBet's hub_hidden.outcome_settlement (core migration
 * 0031-typed-settlement) and dbSettleBet's hub_hidden.bet_settlement (0032).
 * Each field lands where its name says, a missing field is refused before
 * anything is locked or written, and the previous version's functions still
 * answer (its instances call them during a rolling restart).
 */

let hub: TestServer;
let casinoId: string;
let experienceId: string;
const CURRENCY = "TYP";

t.before(async () => {
  hub = await startTestServer({ logLevel: "silent", plugins: defaultPlugins });
  casinoId = (await createCasino(hub.dbPool, { name: "typed-settlement" })).id;
  experienceId = (await createExperience(hub.dbPool, { casinoId })).id;
  await createCurrency(hub.dbPool, { casinoId, key: CURRENCY, displayUnitName: "typ", displayUnitScale: 1 });
  await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: CURRENCY, amount: 1_000_000 });
});
t.teardown(() => hub?.stop());

let made = 0;
/** A player with 1000 units and a chain, and a bet of 10 on the chain's next hash that wins 19 on outcome 0 of two. */
async function playerBet(): Promise<OutcomeSettlement> {
  const userId = (await createPlayer(hub.dbPool, { casinoId, uname: `typed-${++made}` })).id;
  await createPlayerBalance(hub.dbPool, { userId, experienceId, currencyKey: CURRENCY, amount: 1000 });
  const chain = await createHashChain(hub.dbPool, { userId, casinoId, experienceId, maxIteration: 100 });
  const { rows } = await hub.dbPool.query<{ current_iteration: number }>("select current_iteration from hub.hash_chain where id = $1", [chain.id]);
  return {
    userId, casinoId, experienceId, currencyKey: CURRENCY, betId: randomUUID(), wager: 10, payout: 29, maxPayout: 29, expectedValue: 0.2,
    actor: "test:typed", reason: "typed bet", hashChainId: chain.id, iteration: rows[0]!.current_iteration - 1, digest: randomBytes(32),
    clientSeed: `seed-${made}`, kind: "TYPED", profit: 1.9, outcomeIdx: 0, weights: [1, 9], profits: [1.9, -1], metadata: { table: made }, idempotency: null,
  };
}

const balanceOf = async (userId: string) =>
  (await hub.dbPool.query<{ amount: number }>("select amount from hub.balance where user_id = $1 and currency_key = $2", [userId, CURRENCY])).rows[0]!.amount;

t.test("each field of a bet lands where its name says", async (t) => {
  const bet = await playerBet();
  const row = await settleOutcome(hub.dbPool, bet);
  t.same(row, { status: "settled", balance: 1019, bet_id: bet.betId, pending_bankroll: null }, "settled under the given id, the balance after");
  const { rows } = await hub.dbPool.query(
    `select b.kind, b.wager, b.profit, b.net, b.outcome_idx, b.metadata, b.outcomes::text as outcomes, h.iteration, h.client_seed, h.digest, c.current_iteration
       from hub.outcome_bet b join hub.hash h on h.id = b.hash_id join hub.hash_chain c on c.id = h.hash_chain_id where b.id = $1`,
    [bet.betId],
  );
  t.match(rows[0], {
    kind: "TYPED", wager: 10, profit: 1.9, net: 19, outcome_idx: 0, metadata: { table: made }, outcomes: '{"(1,1.9)","(9,-1)"}',
    iteration: bet.iteration, client_seed: bet.clientSeed, current_iteration: bet.iteration,
  });
  t.same(rows[0].digest, Buffer.from(bet.digest), "the revealed hash is the digest sent");
  const ledger = await hub.dbPool.query<{ actor: string; reason: string }>("select distinct actor, reason from hub.ledger where bet_id = $1", [bet.betId]);
  t.same(ledger.rows, [{ actor: "test:typed", reason: "typed bet" }], "the ledger rows carry the bet's actor and reason");
});

t.test("a bet with a field missing is refused before anything is locked or written", async (t) => {
  const bet = await playerBet();
  // JSON writes NaN as null: the amounts' checks must not see an unknown.
  await t.rejects(settleOutcome(hub.dbPool, { ...bet, expectedValue: Number.NaN }), { code: "P0001", message: /every field of the bet/ });
  await t.rejects(settleOutcome(hub.dbPool, { ...bet, kind: undefined as unknown as string }), { code: "P0001" });
  t.equal(await balanceOf(bet.userId), 1000, "the balance did not move");
  const { rows } = await hub.dbPool.query<{ n: number }>("select count(*)::int as n from hub.outcome_bet where user_id = $1", [bet.userId]);
  t.equal(rows[0]!.n, 0, "no bet stored");
  t.same(await settleOutcome(hub.dbPool, bet), { status: "settled", balance: 1019, bet_id: bet.betId, pending_bankroll: null }, "the same bet with every field settles");
});

t.test("dbSettleBet's bet: each field by name; a missing one refused before anything is written", async (t) => {
  const { userId } = await playerBet();
  const bet = { user_id: userId, casino_id: casinoId, experience_id: experienceId, currency_key: CURRENCY, bet_id: randomUUID(),
    wager: 10, payout: 0, max_payout: 30, expected_value: 0.3, actor: "test:named", reason: "named bet" };
  const settle = (b: object) => hub.dbPool.query("select status, balance, bet_id, pending_bankroll from hub_hidden.settle_bet(hub_hidden.bet_settlement_of($1::jsonb))", [JSON.stringify(b)]);
  for (const field of ["user_id", "wager", "max_payout", "expected_value", "actor"] as const) {
    await t.rejects(settle({ ...bet, [field]: null }), { code: "P0001", message: /every field of the bet but bet_id/ }, `${field} null: refused`);
  }
  t.equal(await balanceOf(userId), 1000, "the balance did not move");
  const { rows } = await settle(bet);
  t.same(rows, [{ status: "settled", balance: 990, bet_id: bet.bet_id, pending_bankroll: null }], "with every field it settles (on the bankroll row: nothing else in flight)");
  const ledger = await hub.dbPool.query("select account, amount_delta, actor, reason from hub.ledger where bet_id = $1 order by account", [bet.bet_id]);
  t.same(ledger.rows, [
    { account: "house", amount_delta: 10, actor: "test:named", reason: "named bet" },
    { account: "player", amount_delta: -10, actor: "test:named", reason: "named bet" },
  ], "both sides in the ledger with the bet's id, actor and reason");
});

t.test("the previous version's group function still settles, each bet at its index (its instances call it during a rolling restart)", async (t) => {
  const bets = [await playerBet(), await playerBet(), await playerBet()];
  bets[1] = { ...bets[1]!, iteration: bets[1]!.iteration - 1 };
  const json = JSON.stringify(bets.map((b) => ({ user_id: b.userId, casino_id: b.casinoId, experience_id: b.experienceId, currency_key: b.currencyKey,
    bet_id: b.betId, wager: b.wager, payout: b.payout, max_payout: b.maxPayout, expected_value: b.expectedValue, actor: b.actor, reason: b.reason,
    hash_chain_id: b.hashChainId, iteration: b.iteration, digest: `\\x${Buffer.from(b.digest).toString("hex")}`, client_seed: b.clientSeed,
    kind: b.kind, profit: b.profit, outcome_idx: b.outcomeIdx, weights: b.weights, profits: b.profits, metadata: b.metadata })));
  const { rows } = await hub.dbPool.query("select n, status, bet_id from hub_hidden.settle_outcome_bets(hub_hidden.outcome_settlements_of($1::jsonb)) order by n", [json]);
  t.same(rows, [
    { n: 0, status: "settled", bet_id: bets[0]!.betId },
    { n: 1, status: "chain-moved", bet_id: null },
    { n: 2, status: "settled", bet_id: bets[2]!.betId },
  ]);
  const { rows: house } = await hub.dbPool.query<{ n: number }>("select count(*)::int as n from hub.ledger where account = 'house' and bet_id = any($1::uuid[])", [[bets[0]!.betId, bets[2]!.betId]]);
  t.equal(house[0]!.n, 2, "both settled bets' house sides are in the ledger");
});

t.test("the settlement functions: the typed ones, and the previous version's kept for a rolling restart", async (t) => {
  const { rows } = await hub.dbPool.query<{ signature: string }>(
    "select p.oid::regprocedure::text as signature from pg_proc p where p.pronamespace = 'hub_hidden'::regnamespace and p.proname like 'settle%' order by 1",
  );
  const DOUBLE = "double precision";
  t.same(rows.map((r) => r.signature), [
    "hub_hidden.settle_bet(hub_hidden.bet_settlement)",
    `hub_hidden.settle_bet(uuid,uuid,uuid,text,uuid,${DOUBLE},${DOUBLE},${DOUBLE},${DOUBLE},text,text)`,
    "hub_hidden.settle_bet_once(hub_hidden.bet_settlement,text,text,text,text,jsonb)",
    `hub_hidden.settle_bet_once(text,text,text,text,uuid,uuid,uuid,text,uuid,${DOUBLE},${DOUBLE},${DOUBLE},${DOUBLE},text,text,jsonb)`,
    `hub_hidden.settle_bet_shared(uuid,uuid,uuid,text,uuid,${DOUBLE},${DOUBLE},${DOUBLE},${DOUBLE},text,text,boolean)`,
    "hub_hidden.settle_outcome_bet(hub_hidden.outcome_settlement)",
    `hub_hidden.settle_outcome_bet(uuid,uuid,uuid,text,uuid,${DOUBLE},${DOUBLE},${DOUBLE},${DOUBLE},text,text,uuid,integer,bytea,text,text,${DOUBLE},integer,${DOUBLE}[],${DOUBLE}[],jsonb)`,
    "hub_hidden.settle_outcome_bet_once(hub_hidden.outcome_settlement)",
    `hub_hidden.settle_outcome_bet_once(uuid,uuid,uuid,text,uuid,${DOUBLE},${DOUBLE},${DOUBLE},${DOUBLE},text,text,uuid,integer,bytea,text,text,${DOUBLE},integer,${DOUBLE}[],${DOUBLE}[],jsonb,text,text,text,jsonb)`,
    "hub_hidden.settle_outcome_bets(hub_hidden.outcome_settlement[])",
    "hub_hidden.settle_outcome_bets(jsonb)",
    "hub_hidden.settle_outcome_bets_once(hub_hidden.outcome_settlement[])",
    "hub_hidden.settle_outcome_bets_once(jsonb)",
  ]);
  // What this version calls: nothing of the previous one.
  const calls = ["hub_hidden.settle_bet(hub_hidden.bet_settlement)", "hub_hidden.settle_bet_once(hub_hidden.bet_settlement,text,text,text,text,jsonb)",
    "hub_hidden.settle_outcome_bet(hub_hidden.outcome_settlement)", "hub_hidden.settle_outcome_bet_once(hub_hidden.outcome_settlement)"];
  const { rows: bodies } = await hub.dbPool.query<{ signature: string; src: string }>(
    "select p.oid::regprocedure::text as signature, p.prosrc as src from pg_proc p where p.oid::regprocedure::text = any($1)", [calls]);
  t.equal(bodies.length, calls.length, "each function this version calls exists");
  for (const b of bodies) t.notMatch(b.src, /settle_bet_shared|settle_outcome_bets/, `${b.signature} calls none of the previous version's`);
});
