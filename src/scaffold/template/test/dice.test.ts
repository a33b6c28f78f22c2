/**
 * rollDice against a real hub on a throw-away database (the hub's test kit):
 * `npm test`.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import {
  ClientError,
  createCasino,
  createCurrency,
  createExperience,
  createHouseBankroll,
  createPlayer,
  createPlayerBalance,
  getHouseBankroll,
  getPlayerBalance,
  startTestServer,
  type TestServer,
} from "@hubpkg/hub/test";
import { ErrorCode } from "@hubpkg/hub";
import { serverOptions } from "../src/options.js";
import { dicePayout } from "../src/dice.js";

const ROLL = `mutation ($input: RollDiceInput!) {
  rollDice(input: $input) { balance bet { id wager net target roll currencyKey } }
}`;

interface Rolled {
  rollDice: { balance: number; bet: { id: string; wager: number; net: number; target: number; roll: number; currencyKey: string } };
}

let server: TestServer;
let casinoId: string;
before(async () => {
  server = await startTestServer(serverOptions);
  // A casino of its own with a currency BTC and a house bankroll of 1,000,000 base units.
  casinoId = (await createCasino(server.dbPool, { name: "test casino" })).id;
  await createCurrency(server.dbPool, { casinoId, key: "BTC" });
  await createHouseBankroll(server.dbPool, { casinoId, currencyKey: "BTC", amount: 1_000_000 });
});
after(async () => {
  await server?.stop();
});

test("rollDice settles the bet: the balance and the bankroll move by its net, and the player sees the bet", async () => {
  const experience = await createExperience(server.dbPool, { casinoId, name: "dice" });
  const user = await createPlayer(server.dbPool, { casinoId, uname: "alice" });
  await createPlayerBalance(server.dbPool, { userId: user.id, experienceId: experience.id, currencyKey: "BTC", amount: 1000 });
  const { graphqlClient } = await server.authenticate(user.id, experience.id);

  const bankrollBefore = (await getHouseBankroll(server.dbPool, { casinoId, currencyKey: "BTC" }))!.amount;
  const { rollDice } = await graphqlClient.request<Rolled>(ROLL, { input: { wager: 100, currency: "BTC", target: 50 } });
  const { bet } = rollDice;
  assert.equal(bet.net, bet.roll < 50 ? dicePayout(100, 50) - 100 : -100);
  assert.equal(rollDice.balance, 1000 + bet.net);
  const balance = await getPlayerBalance(server.dbPool, { userId: user.id, experienceId: experience.id, currencyKey: "BTC" });
  assert.equal(balance?.amount, 1000 + bet.net);
  const bankroll = await getHouseBankroll(server.dbPool, { casinoId, currencyKey: "BTC" });
  assert.equal(bankroll?.amount, bankrollBefore - bet.net);

  // Another player's session does not see it (row-level security).
  const bob = await createPlayer(server.dbPool, { casinoId, uname: "bob" });
  const other = await server.authenticate(bob.id, experience.id);
  const seen = await other.graphqlClient.request<{ diceBetById: unknown }>(`query ($id: UUID!) { diceBetById(id: $id) { id } }`, { id: bet.id });
  assert.equal(seen.diceBetById, null);
});

test("rollDice refuses a wager above the balance, and moves nothing", async () => {
  const experience = await createExperience(server.dbPool, { casinoId, name: "dice-2" });
  const user = await createPlayer(server.dbPool, { casinoId, uname: "carol" });
  await createPlayerBalance(server.dbPool, { userId: user.id, experienceId: experience.id, currencyKey: "BTC", amount: 10 });
  const { graphqlClient } = await server.authenticate(user.id, experience.id);
  await assert.rejects(graphqlClient.request(ROLL, { input: { wager: 11, currency: "BTC", target: 50 } }), (error: unknown) => {
    assert.ok(error instanceof ClientError);
    assert.equal(error.response.errors?.[0]?.extensions?.code, ErrorCode.INSUFFICIENT_FUNDS);
    return true;
  });
  const balance = await getPlayerBalance(server.dbPool, { userId: user.id, experienceId: experience.id, currencyKey: "BTC" });
  assert.equal(balance?.amount, 10);
});
