import "./helpers/env.js";
import t from "tap";
import { startTestServer, createPlayer, createExperience, createPlayerBalance, createHouseBankroll } from "@hubpkg/hub/test";
import { gql } from "./helpers/http.js";
import { startServerProcess } from "./helpers/process.js";
import { feed, sleep, until, wsClient } from "./helpers/ws.js";

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
  const balanceOnA = feed(onA, "subscription { hubBalanceAlert { currencyKey } }");
  const betsOnA = feed(opOnA, "subscription { hubBetAlert { betId userId amountDelta } }");
  // Subscribed on B; the change made through A.
  const closesOnB: { code: number; reason: string }[] = [];
  const onB = wsClient(b.url, { authorization: `session:${token}` }, { closes: closesOnB });
  t.teardown(() => onB.dispose());
  const balanceOnB = feed(onB, "subscription { hubBalanceAlert { currencyKey } }");
  await sleep(500);

  const bet = await gql(b.url, "mutation { makeCoinflipBet(input: { wager: 10, currency: \"HOUSE\", side: HEADS }) { bet { id } } }", {}, { authorization: `session:${token}` });
  t.notOk(bet.body.errors, "the bet through B succeeded");
  const betId = (bet.body.data as { makeCoinflipBet: { bet: { id: string } } }).makeCoinflipBet.bet.id;
  await balanceOnA.waitFor(1);
  t.same(balanceOnA.events, [{ data: { hubBalanceAlert: { currencyKey: "HOUSE" } } }], "A's subscriber heard of the bet placed through B, once");
  const bets = await betsOnA.waitFor(1);
  t.match(bets[0], { data: { hubBetAlert: { betId, userId: user.id } } }, "and A's operator got the bet row");
  await balanceOnB.waitFor(1);
  t.equal(balanceOnB.events.length, 1, "B's subscriber heard of it too");

  await op.graphqlClient.request("mutation($i: HubBalanceChangeInput!) { hubCreditBalance(input: $i) { amount } }", {
    i: { userId: user.id, experienceId: exp.id, currencyKey: "HOUSE", amount: 5, reason: "credit through A" },
  });
  await balanceOnB.waitFor(2);
  t.pass("B's subscriber heard of the credit made through A");
  await sleep(300);
  t.equal(balanceOnA.events.length, 2, "and no alert was duplicated");
  t.equal(balanceOnB.events.length, 2);

  b.child.kill("SIGTERM");
  await until(() => closesOnB.length > 0, 30_000, () => "B's socket is still open");
  t.match(closesOnB[0], { code: 1001, reason: /shutting down/ }, "B closed its socket with 1001 (going away)");
  t.equal(await b.exited, 0, "and exited 0 with nothing left open");
});
