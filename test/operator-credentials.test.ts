import "./helpers/env.js";
import t from "tap";
import { defaultPlugins } from "@hubpkg/hub";
import { createHouseBankroll, createPlayerBalance, startTestServer, type TestServer } from "@hubpkg/hub/test";
import { CoinflipBetPlugin, referenceMigrationsPath } from "@hubpkg/hub/plugins";
import { gql } from "./helpers/http.js";
import { makeOperator, makePlayer } from "./helpers/credentials.js";

/*
 * What the dashboard needs beyond the generated schema, over real HTTP:
 * hubRevokeSession, hubCreateApiKey / hubRevokeApiKey (operator only), and the
 * read-only SQL functions of migration 0016, hubBankrollHourly and hubUserSearch.
 */

let hub: TestServer;
t.before(async () => {
  hub = await startTestServer({
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: referenceMigrationsPath,
    plugins: [...defaultPlugins, CoinflipBetPlugin],
  });
});
t.teardown(() => hub?.stop());

const BET = 'mutation { makeCoinflipBet(input: { currency: "HOUSE", wager: 10, side: HEADS }) { bet { id } } }';
const codeOf = (res: { body: { errors?: { extensions?: Record<string, unknown> }[] } }) => res.body.errors?.[0]?.extensions?.code;

t.test("hubRevokeSession: an operator revokes a player's session, whose next request is refused", async (t) => {
  const op = await makeOperator(hub.superuserDatabaseUrl);
  const player = await makePlayer(hub.superuserDatabaseUrl, "revoked-by-operator");
  const me = await gql(hub.url, "{ hubCurrentUser { uname } }", {}, player.header);
  t.same(me.body.data, { hubCurrentUser: { uname: "revoked-by-operator" } }, "the session works before");

  const byPlayer = await gql(hub.url, "mutation($id: UUID!) { hubRevokeSession(input: { sessionId: $id }) { id } }", { id: player.sessionId }, player.header);
  t.equal(codeOf(byPlayer), "FORBIDDEN", "a player cannot use it");
  const anonymous = await gql(hub.url, "mutation($id: UUID!) { hubRevokeSession(input: { sessionId: $id }) { id } }", { id: player.sessionId });
  t.equal(codeOf(anonymous), "UNAUTHENTICATED", "nor an anonymous request");

  const revoked = await gql(hub.url, "mutation($id: UUID!) { hubRevokeSession(input: { sessionId: $id }) { id revokedAt changed } }", { id: player.sessionId }, op.header);
  t.equal(revoked.body.errors, undefined);
  t.equal(revoked.body.data?.hubRevokeSession.id, player.sessionId);
  t.equal(revoked.body.data?.hubRevokeSession.changed, true);

  const bet = await gql(hub.url, BET, {}, player.header);
  t.equal(codeOf(bet), "UNAUTHENTICATED", "the revoked session's next request is refused at once");
  const after = await gql(hub.url, "{ hubCurrentUser { uname } }", {}, player.header);
  t.same(after.body.data, { hubCurrentUser: null });

  const again = await gql(hub.url, "mutation($id: UUID!) { hubRevokeSession(input: { sessionId: $id }) { revokedAt changed } }", { id: player.sessionId }, op.header);
  t.equal(again.body.data?.hubRevokeSession.changed, false, "a second revocation changes nothing");
  t.equal(again.body.data?.hubRevokeSession.revokedAt, revoked.body.data?.hubRevokeSession.revokedAt, "and reports the first time");

  const unknown = await gql(hub.url, "mutation($id: UUID!) { hubRevokeSession(input: { sessionId: $id }) { id } }", { id: "0190f3a0-0000-7000-8000-000000000000" }, op.header);
  t.equal(codeOf(unknown), "BAD_USER_INPUT");
  t.match(unknown.body.errors?.[0]?.message, /No session has the id 0190f3a0-0000-7000-8000-000000000000/);
});

t.test("hubCreateApiKey / hubRevokeApiKey: a new key works until revoked", async (t) => {
  const op = await makeOperator(hub.superuserDatabaseUrl);
  const created = await gql(hub.url, "mutation { hubCreateApiKey { apiKeyId apiKey } }", {}, op.header);
  t.equal(created.body.errors, undefined);
  const { apiKeyId, apiKey } = created.body.data!.hubCreateApiKey as { apiKeyId: string; apiKey: string };
  const header = { authorization: `apikey:${apiKey}` };
  const seen = await gql(hub.url, "{ allHubApiKeys { nodes { id } } }", {}, header);
  t.ok((seen.body.data?.allHubApiKeys.nodes as { id: string }[]).some((k) => k.id === apiKeyId), "the new key is an operator key");

  const player = await makePlayer(hub.superuserDatabaseUrl, "not-an-operator");
  t.equal(codeOf(await gql(hub.url, "mutation { hubCreateApiKey { apiKey } }", {}, player.header)), "FORBIDDEN", "a player cannot create keys");

  const revoked = await gql(hub.url, "mutation($id: UUID!) { hubRevokeApiKey(input: { apiKeyId: $id }) { id changed } }", { id: apiKeyId }, op.header);
  t.same(revoked.body.data, { hubRevokeApiKey: { id: apiKeyId, changed: true } });
  // Other caches hear of it by NOTIFY; the bound is the identity cache's TTL (1 s).
  let refused = false;
  for (let i = 0; i < 40 && !refused; i++) {
    refused = codeOf(await gql(hub.url, "mutation { hubCreateApiKey { apiKey } }", {}, header)) === "UNAUTHENTICATED";
    if (!refused) await new Promise((r) => setTimeout(r, 100));
  }
  t.ok(refused, "the revoked key is refused");
});

t.test("hubBankrollHourly and hubUserSearch: operator figures from the ledger; a player sees none", async (t) => {
  const op = await makeOperator(hub.superuserDatabaseUrl);
  const player = await makePlayer(hub.superuserDatabaseUrl, "Hourly-Bettor");
  await createHouseBankroll(hub.dbPool, { casinoId: player.casinoId, currencyKey: "HOUSE", amount: 1_000_000 }).catch(() => undefined);
  await createPlayerBalance(hub.dbPool, { userId: player.userId, experienceId: player.experienceId, currencyKey: "HOUSE", amount: 1000 });
  const before = await gql(hub.url, "query($c: UUID!) { hubBankrollHourly(casinoId: $c, currencyKey: \"HOUSE\", hours: 3) { nodes { hour bets houseProfit realisedProfit bankroll } } }", { c: player.casinoId }, op.header);
  const nodesBefore = before.body.data!.hubBankrollHourly.nodes as { bets: string; houseProfit: number; realisedProfit: number; bankroll: number }[];
  t.equal(nodesBefore.length, 3, "one row per hour, the current one included");
  const lastBefore = nodesBefore[2]!;

  const nets: number[] = [];
  for (let i = 0; i < 4; i++) {
    const res = await gql(hub.url, 'mutation { makeCoinflipBet(input: { currency: "HOUSE", wager: 10, side: HEADS }) { bet { net } } }', {}, player.header);
    t.equal(res.body.errors, undefined);
    nets.push(res.body.data!.makeCoinflipBet.bet.net as number);
  }
  const houseGain = -nets.reduce((a, b) => a + b, 0);
  const after = await gql(hub.url, "query($c: UUID!) { hubBankrollHourly(casinoId: $c, currencyKey: \"HOUSE\", hours: 3) { nodes { hour bets houseProfit realisedProfit bankroll } } }", { c: player.casinoId }, op.header);
  const last = (after.body.data!.hubBankrollHourly.nodes as typeof nodesBefore)[2]!;
  t.equal(Number(last.bets) - Number(lastBefore.bets), 4, "four more bets this hour");
  t.equal(last.houseProfit - lastBefore.houseProfit, houseGain, "the house's profit is minus the players' nets");
  t.equal(last.realisedProfit - lastBefore.realisedProfit, houseGain);
  const { rows } = await hub.dbPool.query<{ amount: number }>("select amount from hub.bankroll where casino_id = $1 and currency_key = 'HOUSE'", [player.casinoId]);
  t.equal(last.bankroll, rows[0]!.amount, "the bankroll at the end of the hour is the bankroll now");

  const asPlayer = await gql(hub.url, "query($c: UUID!) { hubBankrollHourly(casinoId: $c, currencyKey: \"HOUSE\") { nodes { hour } } }", { c: player.casinoId }, player.header);
  t.same(asPlayer.body.data?.hubBankrollHourly.nodes, [], "a player gets no rows");

  const found = await gql(hub.url, '{ hubUserSearch(nameContains: "urly-bet") { nodes { uname } } }', {}, op.header);
  t.equal(found.body.errors, undefined);
  t.same(found.body.data?.hubUserSearch.nodes, [{ uname: "Hourly-Bettor" }], "part of the name, ignoring case");
  await makePlayer(hub.superuserDatabaseUrl, "hourly-other");
  const mine = await gql(hub.url, '{ hubUserSearch(nameContains: "hourly") { nodes { uname } } }', {}, player.header);
  t.same(mine.body.data?.hubUserSearch.nodes, [{ uname: "Hourly-Bettor" }], "a player finds only themself");
});
