import "./helpers/env.js";
import t from "tap";
import { startTestServer, createPlayer, createExperience, createPlayerBalance, createHouseBankroll } from "@hubpkg/hub/test";
import { gql } from "./helpers/http.js";
import { startServerProcess } from "./helpers/process.js";
import { feed, live, until, wsClient } from "./helpers/ws.js";

t.test("two hub processes on one database: alerts cross processes; SIGTERM closes sockets with 1001", async (t) => {
  // A: this process; B: `node dist/server.js` (the demo, with makeCoinflipBet) on A's database.
  const a = await startTestServer();
  t.teardown(() => a.stop());
  const b = await startServerProcess({ DATABASE_URL: a.databaseUrl, SUPERUSER_DATABASE_URL: a.superuserDatabaseUrl, HUB_EXAMPLES: "on" });
  t.teardown(() => void b.child.kill("SIGKILL"));

  const casinoId = a.playgroundCasinoId;
  const user = await createPlayer(a.dbPool, { casinoId, uname: "frank" });
  const exp = await createExperience(a.dbPool, { casinoId, name: "two-hubs" });
  await createPlayerBalance(a.dbPool, { userId: user.id, experienceId: exp.id, currencyKey: "HOUSE", amount: 1000 });
  await createHouseBankroll(a.dbPool, { casinoId, currencyKey: "HOUSE", amount: 100_000 }).catch(() => undefined);
  const { token } = await a.authenticate(user.id, exp.id);
  const op = await a.authenticateOperator();

  // Subscribed on A; the bet placed through B.
  const onA = wsClient(a.url, { authorization: `session:${token}` });
  const opOnA = wsClient(a.url, { authorization: `apikey:${op.apiKey}` });
  t.teardown(() => Promise.all([onA.dispose(), opOnA.dispose()]));
  const balanceOnA = feed(onA, "subscription { hubBalanceAlert { currencyKey cursor } }");
  const betsOnA = feed(opOnA, "subscription { hubBetAlert { betId userId amountDelta } }");
  // Subscribed on B; the change made through A.
  const closesOnB: { code: number; reason: string }[] = [];
  const onB = wsClient(b.url, { authorization: `session:${token}` }, { closes: closesOnB });
  t.teardown(() => onB.dispose());
  const balanceOnB = feed(onB, "subscription { hubBalanceAlert { currencyKey cursor } }");
  // Live once each has announced a change made in the database (a credit; a bet row for the operator's).
  const credit = () => a.dbPool.query("update hub.balance set amount = amount + 1 where user_id = $1 and experience_id = $2 and currency_key = 'HOUSE'", [user.id, exp.id]);
  const ledgerBet = async () => {
    const client = await a.dbPool.connect();
    try {
      await client.query("begin");
      await client.query("select hub_hidden.ledger_begin('test', 'test:bets', 'probe bet', gen_random_uuid())");
      await client.query("update hub.balance set amount = amount + 1 where user_id = $1 and experience_id = $2 and currency_key = 'HOUSE'", [user.id, exp.id]);
      await client.query("commit");
    } finally {
      client.release();
    }
  };
  await live(betsOnA, ledgerBet, "the operator's bet alerts on A");
  await live(balanceOnA, credit, "the balance alerts on A");
  await live(balanceOnB, credit, "the balance alerts on B");
  // Each probe's change reaches both feeds, and a probe repeated after 5 s without an alert leaves one
  // still on its way: counted once both have the player's last balance alert so far (delivery is in order).
  await a.dbPool.query("select hub_hidden.live_alert_sequence()");
  const { rows } = await a.dbPool.query<{ seq: string }>("select max(seq)::text as seq from hub_hidden.live_alert where channel = 'balance' and user_id = $1", [user.id]);
  const lastProbe = Number(rows[0]!.seq);
  const cursorOf = (e: (typeof balanceOnA.events)[number]) => Number((e.data as { hubBalanceAlert: { cursor: string } }).hubBalanceAlert.cursor);
  for (const [name, f] of [["A", balanceOnA], ["B", balanceOnB]] as const) {
    await until(() => f.events.some((e) => cursorOf(e) >= lastProbe), 30_000, () => `${name}'s alert ${lastProbe} (got ${JSON.stringify(f.events)})`);
  }
  const a0 = balanceOnA.events.length;
  const b0 = balanceOnB.events.length;

  const bet = await gql(b.url, "mutation { makeCoinflipBet(input: { wager: 10, currency: \"HOUSE\", side: HEADS }) { bet { id } } }", {}, { authorization: `session:${token}` });
  t.notOk(bet.body.errors, "the bet through B succeeded");
  const betId = (bet.body.data as { makeCoinflipBet: { bet: { id: string } } }).makeCoinflipBet.bet.id;
  t.match((await balanceOnA.waitFor(a0 + 1))[a0], { data: { hubBalanceAlert: { currencyKey: "HOUSE" } } }, "A's subscriber heard of the bet placed through B");
  const betIdOf = (e: (typeof betsOnA.events)[number]) => (e.data as { hubBetAlert: { betId: string } }).hubBetAlert.betId;
  await until(() => betsOnA.events.some((e) => betIdOf(e) === betId), 30_000, () => `the alert of bet ${betId} on A (got ${JSON.stringify(betsOnA.events)})`);
  t.match(betsOnA.events.find((e) => betIdOf(e) === betId), { data: { hubBetAlert: { betId, userId: user.id } } }, "and A's operator got the bet row");
  await balanceOnB.waitFor(b0 + 1);
  t.pass("B's subscriber heard of it too");

  await op.graphqlClient.request("mutation($i: HubBalanceChangeInput!) { hubCreditBalance(input: $i) { amount } }", {
    i: { userId: user.id, experienceId: exp.id, currencyKey: "HOUSE", amount: 5, reason: "credit through A" },
  });
  await balanceOnB.waitFor(b0 + 2);
  t.pass("B's subscriber heard of the credit made through A");
  // A last change: alerts come in commit order, so a duplicate of an earlier one would have come before it.
  await credit();
  await Promise.all([balanceOnA.waitFor(a0 + 3), balanceOnB.waitFor(b0 + 3)]);
  t.equal(balanceOnA.events.length - a0, 3, "and no alert was duplicated: the bet, the credit, the last change");
  t.equal(balanceOnB.events.length - b0, 3);

  b.child.kill("SIGTERM");
  await until(() => closesOnB.length > 0, 30_000, () => "B's socket is still open");
  t.match(closesOnB[0], { code: 1001, reason: /shutting down/ }, "B closed its socket with 1001 (going away)");
  t.equal(await b.exited, 0, "and exited 0 with nothing left open");
});
