/**
 * Fields the original's frontends and controllers read: HubUser.hubBalanceByCurrency,
 * HubCasino.baseUrl / graphqlUrl, and hubAddCasino with the original's input.
 * Real Postgres (the test kit's cluster), real HTTP.
 */
import "./helpers/env.js";
import t from "tap";
import { startTestServer, createPlayer, createExperience, createCurrency, createPlayerBalance, type TestServer } from "@hubpkg/hub/test";
import { gql } from "./helpers/http.js";

let server: TestServer;
t.before(async () => {
  server = await startTestServer();
});
t.teardown(() => server?.stop());

const BALANCE_QUERY = `query ($c: String!) { hubCurrentUser { id hubBalanceByCurrency(currency: $c) { amount currencyKey experienceId userId } } }`;

t.test("HubUser.hubBalanceByCurrency: the session's experience, the asked currency, null when none", async (t) => {
  const db = server.dbPool;
  const casinoId = server.playgroundCasinoId;
  await createCurrency(db, { casinoId, key: "BTC" });
  const alice = await createPlayer(db, { casinoId, uname: "fields-alice" });
  const bob = await createPlayer(db, { casinoId, uname: "fields-bob" });
  const exp1 = await createExperience(db, { casinoId });
  const exp2 = await createExperience(db, { casinoId });
  await createPlayerBalance(db, { userId: alice.id, experienceId: exp1.id, currencyKey: "HOUSE", amount: 11 });
  await createPlayerBalance(db, { userId: alice.id, experienceId: exp1.id, currencyKey: "BTC", amount: 12 });
  await createPlayerBalance(db, { userId: alice.id, experienceId: exp2.id, currencyKey: "HOUSE", amount: 21 });
  await createPlayerBalance(db, { userId: bob.id, experienceId: exp1.id, currencyKey: "HOUSE", amount: 31 });

  const a1 = await server.authenticate(alice.id, exp1.id);
  const a2 = await server.authenticate(alice.id, exp2.id);
  const b1 = await server.authenticate(bob.id, exp1.id);
  const h = (token: string) => ({ authorization: `session:${token}` });

  const read = async (token: string, currency: string) => {
    const res = await gql(server.url, BALANCE_QUERY, { c: currency }, h(token));
    t.same(res.body.errors, undefined, `no errors for ${currency}`);
    return res.body.data!.hubCurrentUser.hubBalanceByCurrency;
  };
  t.same(await read(a1.token, "HOUSE"), { amount: 11, currencyKey: "HOUSE", experienceId: exp1.id, userId: alice.id });
  t.same(await read(a1.token, "BTC"), { amount: 12, currencyKey: "BTC", experienceId: exp1.id, userId: alice.id });
  t.same(await read(a2.token, "HOUSE"), { amount: 21, currencyKey: "HOUSE", experienceId: exp2.id, userId: alice.id });
  t.equal(await read(a2.token, "BTC"), null, "no BTC balance in experience 2");
  t.equal(await read(a1.token, "NOPE"), null, "unknown currency");
  t.same(await read(b1.token, "HOUSE"), { amount: 31, currencyKey: "HOUSE", experienceId: exp1.id, userId: bob.id });

  // Another player's user row is not visible to alice at all, so neither is its balance.
  const other = await gql(server.url, `query ($id: UUID!) { hubUserById(id: $id) { id hubBalanceByCurrency(currency: "HOUSE") { amount } } }`, { id: bob.id }, h(a1.token));
  t.same(other.body.errors, undefined);
  t.equal(other.body.data!.hubUserById, null);

  // An operator has no session's experience: the field is null, the user row is visible.
  const op = await server.authenticateOperator();
  const asOp = await gql(server.url, `query ($id: UUID!) { hubUserById(id: $id) { id hubBalanceByCurrency(currency: "HOUSE") { amount } } }`, { id: alice.id }, { authorization: `apikey:${op.apiKey}` });
  t.same(asOp.body.errors, undefined);
  t.same(asOp.body.data!.hubUserById, { id: alice.id, hubBalanceByCurrency: null });

  // The argument is required and a String.
  const missing = await gql(server.url, `{ hubCurrentUser { hubBalanceByCurrency { amount } } }`, undefined, h(a1.token));
  t.ok(missing.body.errors?.length, "currency is required");
});
