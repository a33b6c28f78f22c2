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
import { settleOne, type OutcomeSettlement } from "../dist/src/fair/settle-group.js";

/*
 * hubMakeOutcomeBet's settlement takes one named row per bet
 * (hub_hidden.outcome_settlement, core migration 0031-typed-settlement),
 * sent as named JSON: each field lands where its name says, a group answers
 * in its array's order, a missing field is refused before anything is
 * locked or written, and the positional functions are gone.
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
  const row = await settleOne(hub.dbPool, bet);
  t.same(row, { status: "settled", balance: 1019, bet_id: bet.betId }, "settled under the given id, the balance after");
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
  await t.rejects(settleOne(hub.dbPool, { ...bet, expectedValue: Number.NaN }), { code: "P0001", message: /every field of the bet/ });
  await t.rejects(settleOne(hub.dbPool, { ...bet, kind: undefined as unknown as string }), { code: "P0001" });
  t.equal(await balanceOf(bet.userId), 1000, "the balance did not move");
  const { rows } = await hub.dbPool.query<{ n: number }>("select count(*)::int as n from hub.outcome_bet where user_id = $1", [bet.userId]);
  t.equal(rows[0]!.n, 0, "no bet stored");
  t.same(await settleOne(hub.dbPool, bet), { status: "settled", balance: 1019, bet_id: bet.betId }, "the same bet with every field settles");
});

t.test("a group answers each bet at its index, a moved chain's included", async (t) => {
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
  await t.rejects(hub.dbPool.query("select * from hub_hidden.settle_outcome_bets(hub_hidden.outcome_settlements_of('{}'::jsonb))"), { code: "P0001", message: /JSON array/ });
});

t.test("the typed functions, and the positional ones kept for the previous version's instances during a rolling restart", async (t) => {
  const { rows } = await hub.dbPool.query<{ signature: string }>(
    "select p.oid::regprocedure::text as signature from pg_proc p where p.pronamespace = 'hub_hidden'::regnamespace and p.proname like 'settle_outcome_bet%' order by 1",
  );
  t.same(rows.map((r) => r.signature), [
    "hub_hidden.settle_outcome_bet(hub_hidden.outcome_settlement)",
    "hub_hidden.settle_outcome_bet(uuid,uuid,uuid,text,uuid,double precision,double precision,double precision,double precision,text,text,uuid,integer,bytea,text,text,double precision,integer,double precision[],double precision[],jsonb)",
    "hub_hidden.settle_outcome_bet_once(hub_hidden.outcome_settlement)",
    "hub_hidden.settle_outcome_bet_once(uuid,uuid,uuid,text,uuid,double precision,double precision,double precision,double precision,text,text,uuid,integer,bytea,text,text,double precision,integer,double precision[],double precision[],jsonb,text,text,text,jsonb)",
    "hub_hidden.settle_outcome_bets(hub_hidden.outcome_settlement[])",
    "hub_hidden.settle_outcome_bets(jsonb)",
    "hub_hidden.settle_outcome_bets_once(hub_hidden.outcome_settlement[])",
    "hub_hidden.settle_outcome_bets_once(jsonb)",
  ]);
});
