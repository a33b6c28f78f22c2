/**
 * Fields the original's frontends and controllers read: HubUser.hubBalanceByCurrency,
 * HubCasino.baseUrl / graphqlUrl, and hubAddCasino with the original's input.
 * Real Postgres (the test kit's cluster), real HTTP.
 */
import "./helpers/env.js";
import t from "tap";
import { startTestServer, createPlayer, createExperience, createCurrency, createPlayerBalance, type TestServer } from "@hubpkg/hub/test";
import { gql } from "./helpers/http.js";
import { startServerProcess } from "./helpers/process.js";

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

const ADD_CASINO = `mutation ($input: HubAddCasinoInput!) { hubAddCasino(input: $input) { casinoId } }`;

t.test("hubAddCasino with the original's input { name, baseUrl, graphqlUrl, apiKey }: urls readable, the key nowhere", async (t) => {
  const op = await server.authenticateOperator();
  const opH = { authorization: `apikey:${op.apiKey}` };
  const apiKey = "3f2b1c4e-9d8a-4b7c-8e6f-5a4d3c2b1a09";
  const added = await gql(server.url, ADD_CASINO, {
    input: { name: "original-casino", baseUrl: "https://casino.example/", graphqlUrl: "https://casino.example/graphql", apiKey },
  }, opH);
  t.same(added.body.errors, undefined);
  const casinoId = added.body.data!.hubAddCasino.casinoId as string;

  const read = await gql(server.url, `query ($id: UUID!) { hubCasinoById(id: $id) { id name baseUrl graphqlUrl } }`, { id: casinoId }, opH);
  t.same(read.body.errors, undefined);
  t.same(read.body.data!.hubCasinoById, { id: casinoId, name: "original-casino", baseUrl: "https://casino.example/", graphqlUrl: "https://casino.example/graphql" });

  // Stored, in hub_secret only.
  const { rows } = await server.dbPool.query("select api_key from hub_secret.casino_api_key where casino_id = $1", [casinoId]);
  t.same(rows, [{ api_key: apiKey }]);
  // Only baseUrl given: the tokens' keys are looked up under it.
  const auth = await server.dbPool.query("select jwks_url, public_key from hub_secret.casino_auth where casino_id = $1", [casinoId]);
  t.same(auth.rows, [{ jwks_url: "https://casino.example/.well-known/jwks.json", public_key: null }]);

  // A jwksUrl given overrides that default; no apiKey: nothing stored.
  const other = await gql(server.url, ADD_CASINO, {
    input: { name: "original-casino-2", baseUrl: "https://c2.example", jwksUrl: "https://keys.example/jwks" },
  }, opH);
  t.same(other.body.errors, undefined);
  const otherId = other.body.data!.hubAddCasino.casinoId as string;
  t.same((await server.dbPool.query("select jwks_url from hub_secret.casino_auth where casino_id = $1", [otherId])).rows, [{ jwks_url: "https://keys.example/jwks" }]);
  t.same((await server.dbPool.query("select 1 from hub_secret.casino_api_key where casino_id = $1", [otherId])).rows, []);

  // The GraphQL role cannot select the key, whatever the schema says.
  const client = await server.dbPool.connect();
  try {
    await client.query("begin");
    await client.query("set local role app_postgraphile");
    await t.rejects(client.query("select api_key from hub_secret.casino_api_key"), { code: "42501" });
  } finally {
    await client.query("rollback");
    client.release();
  }

  // No output type of the schema has a field for it.
  const intro = await gql(server.url, `{ __schema { types { name kind fields { name } } } }`);
  const types = intro.body.data!.__schema.types as { name: string; kind: string; fields: { name: string }[] | null }[];
  const outputFields = types.filter((ty) => ty.kind === "OBJECT").flatMap((ty) => (ty.fields ?? []).map((f) => `${ty.name}.${f.name}`));
  t.ok(outputFields.includes("HubCasino.graphqlUrl") && outputFields.includes("HubCasino.baseUrl"), "HubCasino has baseUrl and graphqlUrl");
  t.same(outputFields.filter((f) => /\.apiKey$/i.test(f) || /casinoApiKey/i.test(f)), [], "no apiKey field on any output type");
  t.same(types.filter((ty) => /CasinoApiKey/i.test(ty.name)).map((ty) => ty.name), [], "no type for the casino's key");

  // Bad input: clear codes, the key never echoed.
  const badUrl = await gql(server.url, ADD_CASINO, { input: { name: "bad-url", graphqlUrl: "ftp://casino.example/graphql" } }, opH);
  t.equal(badUrl.body.errors?.[0]?.extensions?.code, "BAD_USER_INPUT");
  t.match(badUrl.body.errors?.[0]?.message, /graphqlUrl must be/);
  const emptyKey = await gql(server.url, ADD_CASINO, { input: { name: "empty-key", apiKey: "" } }, opH);
  t.equal(emptyKey.body.errors?.[0]?.extensions?.code, "BAD_USER_INPUT");
  t.match(emptyKey.body.errors?.[0]?.message, /apiKey must be/);
  // A player may not add casinos.
  const player = await createPlayer(server.dbPool, { casinoId: server.playgroundCasinoId, uname: "fields-carol" });
  const exp = await createExperience(server.dbPool, { casinoId: server.playgroundCasinoId });
  const p = await server.authenticate(player.id, exp.id);
  const refused = await gql(server.url, ADD_CASINO, { input: { name: "by-player", apiKey } }, { authorization: `session:${p.token}` });
  t.equal(refused.body.errors?.[0]?.extensions?.code, "FORBIDDEN");
});

t.test("the casino's apiKey is never logged, even at trace level and when the insert fails", async (t) => {
  const proc = await startServerProcess({ DATABASE_URL: server.databaseUrl, SUPERUSER_DATABASE_URL: server.superuserDatabaseUrl, LOG_LEVEL: "trace", HOST: "127.0.0.1" });
  t.teardown(() => proc.child.kill("SIGKILL"));
  const op = await server.authenticateOperator();
  const opH = { authorization: `apikey:${op.apiKey}` };
  const apiKey = "secret-controller-key-7d41e0c2";
  const ok = await gql(proc.url, ADD_CASINO, { input: { name: "logged-casino", baseUrl: "https://logged.example", graphqlUrl: "https://logged.example/graphql", apiKey } }, opH);
  t.same(ok.body.errors, undefined);
  // The same name again: refused by the database (unique), which is logged at info.
  const dup = await gql(proc.url, ADD_CASINO, { input: { name: "logged-casino", apiKey } }, opH);
  t.ok(dup.body.errors?.length, "duplicate name refused");
  t.not(dup.body.errors?.[0]?.extensions?.code, "INTERNAL_SERVER_ERROR");
  await new Promise((r) => setTimeout(r, 300));
  t.match(proc.output(), /request/i, "the server did log the requests");
  t.notOk(proc.output().includes(apiKey), "the key appears in no log line");
});
