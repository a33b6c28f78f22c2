import "./helpers/env.js";
import t from "tap";
import { defaultPlugins } from "@hubpkg/hub";
import { startTestServer, type TestServer } from "@hubpkg/hub/test";
import { CoinflipBetPlugin, referenceMigrationsPath } from "@hubpkg/hub/plugins";
import { gql } from "./helpers/http.js";
import { makeOperator, makePlayer, type Player } from "./helpers/credentials.js";

/*
 * The house bankroll is the casino's business: a player sees no hub.bankroll
 * row by any path of the GraphQL API, an operator sees every one. The paths
 * are found by introspection, so a new field that reaches hub.bankroll fails
 * the coverage check below until it is added here.
 */

let hub: TestServer;
let player: Player;
let stranger: Player;
let operatorHeader: { authorization: string };
let bankroll: { id: string; casinoId: string; currencyKey: string; amount: number };

const AMOUNT = 123_457;

t.before(async () => {
  hub = await startTestServer({
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: referenceMigrationsPath,
    plugins: [...defaultPlugins, CoinflipBetPlugin],
  });
  player = await makePlayer(hub.superuserDatabaseUrl, "vault-player", { casinoName: "vault" });
  stranger = await makePlayer(hub.superuserDatabaseUrl, "vault-stranger", { casinoName: "vault-other" });
  operatorHeader = (await makeOperator(hub.superuserDatabaseUrl)).header;
  for (const casinoId of [player.casinoId, stranger.casinoId]) {
    await hub.dbPool.query("insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale) values ('GOLD', $1, 'gold', 100)", [casinoId]);
  }
  const { rows } = await hub.dbPool.query("select id, casino_id, currency_key, amount from hub_hidden.ensure_bankroll($1, 'GOLD', $2, 'test')", [player.casinoId, AMOUNT]);
  bankroll = { id: rows[0].id, casinoId: rows[0].casino_id, currencyKey: rows[0].currency_key, amount: rows[0].amount };
  await hub.dbPool.query("select hub_hidden.ensure_bankroll($1, 'GOLD', 999, 'test')", [stranger.casinoId]);
  // A bet, so the bankroll's bets, wagered and expected_value are not all 0.
  await hub.dbPool.query("select hub_hidden.credit_balance($1, $2, $3, 'GOLD', 500, 'test', 'test')", [player.userId, player.casinoId, player.experienceId]);
  const bet = await gql(hub.url, 'mutation { makeCoinflipBet(input: { currency: "GOLD", wager: 100, side: HEADS }) { outcome } }', {}, player.header);
  if (bet.body.errors) throw new Error(JSON.stringify(bet.body.errors));
});
t.teardown(() => hub?.stop());

const FIELDS = "id casinoId currencyKey amount bets wagered expectedValue";

/** Each path that reaches hub.bankroll: its schema coordinate, a query, and how to read the rows it returned. */
function paths(): { coordinate: string; query: string; variables: Record<string, unknown>; rows: (data: any) => any[] }[] {
  const conn = `totalCount nodes { ${FIELDS} } edges { node { ${FIELDS} } }`;
  const connRows = (c: any) => [...(c?.nodes ?? []), ...(c?.edges ?? []).map((e: any) => e.node)];
  return [
    { coordinate: "Query.allHubBankrolls", query: `{ allHubBankrolls { ${conn} } }`, variables: {}, rows: (d) => connRows(d.allHubBankrolls) },
    { coordinate: "Query.hubBankrollById", query: `query($id: UUID!) { hubBankrollById(id: $id) { ${FIELDS} } }`, variables: { id: bankroll.id }, rows: (d) => [d.hubBankrollById].filter(Boolean) },
    {
      coordinate: "Query.hubBankrollByCasinoIdAndCurrencyKey",
      query: `query($c: UUID!) { hubBankrollByCasinoIdAndCurrencyKey(casinoId: $c, currencyKey: "GOLD") { ${FIELDS} } }`,
      variables: { c: bankroll.casinoId },
      rows: (d) => [d.hubBankrollByCasinoIdAndCurrencyKey].filter(Boolean),
    },
    {
      coordinate: "HubCasino.hubBankrollsByCasinoId",
      query: `query($c: UUID!) {
        hubCurrentCasino { hubBankrollsByCasinoId { ${conn} } }
        hubCasinoById(id: $c) { hubBankrollsByCasinoId { ${conn} } }
        allHubCasinos { nodes { hubBankrollsByCasinoId { ${conn} } } }
      }`,
      variables: { c: bankroll.casinoId },
      rows: (d) => [
        ...connRows(d.hubCurrentCasino?.hubBankrollsByCasinoId),
        ...connRows(d.hubCasinoById?.hubBankrollsByCasinoId),
        ...d.allHubCasinos.nodes.flatMap((n: any) => connRows(n.hubBankrollsByCasinoId)),
      ],
    },
    {
      coordinate: "HubCurrency.hubBankrollByCurrencyKeyAndCasinoId",
      query: `query($c: UUID!) {
        allHubCurrencies { nodes { hubBankrollByCurrencyKeyAndCasinoId { ${FIELDS} } } }
        hubCurrencyByKeyAndCasinoId(key: "GOLD", casinoId: $c) { hubBankrollByCurrencyKeyAndCasinoId { ${FIELDS} } }
      }`,
      variables: { c: bankroll.casinoId },
      rows: (d) => [...d.allHubCurrencies.nodes.map((n: any) => n.hubBankrollByCurrencyKeyAndCasinoId), d.hubCurrencyByKeyAndCasinoId?.hubBankrollByCurrencyKeyAndCasinoId].filter(Boolean),
    },
  ];
}

t.test("every field that reaches hub.bankroll is checked here", async (t) => {
  const res = await gql(
    hub.url,
    "{ __schema { types { name fields { name type { name ofType { name ofType { name ofType { name } } } } } } } }",
    {},
    operatorHeader,
  );
  const named = (ty: any): string => ty.name ?? named(ty.ofType);
  const found = new Set<string>();
  for (const type of res.body.data!.__schema.types as any[]) {
    // Inside a path; operator-only mutations and the payload of the operator-only updateHubBankrollById.
    if (["HubBankrollConnection", "HubBankrollEdge", "Mutation", "UpdateHubBankrollPayload"].includes(type.name)) continue;
    for (const f of type.fields ?? []) if (["HubBankroll", "HubBankrollConnection"].includes(named(f.type))) found.add(`${type.name}.${f.name}`);
  }
  t.ok(found.size >= 5, `found ${[...found].join(", ")}`);
  t.same([...found].sort(), paths().map((p) => p.coordinate).sort(), "the paths below are all the paths there are");
});

t.test("a player sees no bankroll row, by any path, its own casino's included", async (t) => {
  for (const who of [player, stranger]) {
    for (const p of paths()) {
      const res = await gql(hub.url, p.query, p.variables, who.header);
      t.equal(res.status, 200, p.coordinate);
      t.same(res.body.errors, undefined, `${p.coordinate}: no error, just nothing`);
      t.same(p.rows(res.body.data), [], `${p.coordinate}: no rows`);
      t.notMatch(JSON.stringify(res.body), new RegExp(`"amount":|"totalCount":[1-9]`), `${p.coordinate}: no amount, no count`);
    }
  }
  // The house side of the ledger stays hidden too (its balance_after is the bankroll).
  const ledger = await gql(hub.url, "{ allHubLedgers { nodes { account balanceAfter } } }", {}, player.header);
  t.ok((ledger.body.data as any).allHubLedgers.nodes.length > 0, "the player sees their own ledger rows");
  t.ok((ledger.body.data as any).allHubLedgers.nodes.every((n: any) => n.account === "player"), "and no house row");
});

t.test("an operator sees the amounts by every path", async (t) => {
  const stored = (await hub.dbPool.query("select amount, bets::int, wagered, expected_value from hub.bankroll where id = $1", [bankroll.id])).rows[0];
  t.equal(stored.bets, 1, "the bet was counted");
  for (const p of paths()) {
    const res = await gql(hub.url, p.query, p.variables, operatorHeader);
    t.same(res.body.errors, undefined, p.coordinate);
    const mine = p.rows(res.body.data).filter((r) => r.id === bankroll.id);
    t.ok(mine.length >= 1, `${p.coordinate}: the bankroll is there`);
    for (const r of mine) {
      t.same(
        { amount: r.amount, bets: Number(r.bets), wagered: r.wagered, expectedValue: r.expectedValue },
        { amount: stored.amount, bets: 1, wagered: 100, expectedValue: stored.expected_value },
        `${p.coordinate}: the stored figures`,
      );
    }
  }
  const all = await gql(hub.url, "{ allHubBankrolls { totalCount } }", {}, operatorHeader);
  t.equal((all.body.data as any).allHubBankrolls.totalCount, (await hub.dbPool.query("select count(*)::int as n from hub.bankroll")).rows[0].n, "all of them");
});

t.test("an anonymous request sees none", async (t) => {
  for (const p of paths()) {
    const res = await gql(hub.url, p.query, p.variables);
    t.same(p.rows(res.body.data ?? {}), [], p.coordinate);
  }
});
