import "./helpers/env.js";
import t from "tap";
import { defaultPlugins } from "@hubpkg/hub";
import { startTestServer, type TestServer } from "@hubpkg/hub/test";
import { configureReferenceRoutes, CoinflipBetPlugin, CoinflipPlanPlugin, referenceMigrationsPath } from "@hubpkg/hub/plugins";
import { gql } from "./helpers/http.js";
import { makePlayer, type Player } from "./helpers/credentials.js";

/*
 * GET /bets (the reference routes): scoped to the session's casino and
 * experience as the GraphQL API is, paged with ?before=<id>, and strict about
 * its query parameters. Every check goes over HTTP to a real server.
 */

let hub: TestServer;

t.before(async () => {
  hub = await startTestServer({
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: referenceMigrationsPath,
    plugins: [...defaultPlugins, CoinflipPlanPlugin, CoinflipBetPlugin],
    configureApp: configureReferenceRoutes,
  });
});
t.teardown(() => hub?.stop());

interface BetRow {
  kind: string;
  id: string;
  wager: number;
  net: number;
  currencyKey: string;
  casinoId: string;
  experienceId: string;
  createdAt: string;
}

async function getBets(p: Player, query = "") {
  const res = await fetch(`${hub.url}/bets${query}`, { headers: p.header });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text) as any, link: res.headers.get("link"), type: res.headers.get("content-type") };
}

/** One flip (no money) and, when funded, one bet (money) for `p`; returns their ids. */
async function play(p: Player, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await gql(hub.url, 'mutation { makeCoinflip(input: { currency: "HOUSE", wager: 3 }) { id } }', {}, p.header);
    if (res.body.errors) throw new Error(JSON.stringify(res.body.errors));
    ids.push((res.body.data as any).makeCoinflip.id);
  }
  return ids;
}

t.test("a session lists only the bets of its own casino and experience, like GraphQL", async (t) => {
  const inDefault = await makePlayer(hub.superuserDatabaseUrl, "scoped", { experienceName: "default" });
  const inDice = await makePlayer(hub.superuserDatabaseUrl, "scoped", { experienceName: "dice" });
  const otherCasino = await makePlayer(hub.superuserDatabaseUrl, "scoped", { casinoName: "scoped-other" });
  t.equal(inDefault.userId, inDice.userId, "one player, two experiences");
  await hub.dbPool.query("insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale) values ('HOUSE', $1, 'house', 1)", [otherCasino.casinoId]);

  // Both kinds of bet in each experience: flips (makeCoinflip) and money bets (makeCoinflipBet).
  await hub.dbPool.query("select hub_hidden.ensure_bankroll($1, 'HOUSE', 100000, 'test')", [inDefault.casinoId]);
  for (const p of [inDefault, inDice]) {
    await hub.dbPool.query("select hub_hidden.credit_balance($1, $2, $3, 'HOUSE', 1000, 'test', 'test')", [p.userId, p.casinoId, p.experienceId]);
  }
  const flips = { default: await play(inDefault, 2), dice: await play(inDice, 3), other: await play(otherCasino, 1) };
  const bet = async (p: Player) => {
    const res = await gql(hub.url, 'mutation { makeCoinflipBet(input: { currency: "HOUSE", wager: 10, side: HEADS }) { bet { id } } }', {}, p.header);
    if (res.body.errors) throw new Error(JSON.stringify(res.body.errors));
    return (res.body.data as any).makeCoinflipBet.bet.id as string;
  };
  const bets = { default: [await bet(inDefault)], dice: [await bet(inDice), await bet(inDice)] };

  for (const [label, p, expected] of [
    ["default", inDefault, [...flips.default, ...bets.default]],
    ["dice", inDice, [...flips.dice, ...bets.dice]],
    ["other casino", otherCasino, flips.other],
  ] as const) {
    const res = await getBets(p);
    t.equal(res.status, 200, label);
    const rows = res.body as BetRow[];
    t.same(rows.map((r) => r.id), [...expected].sort().reverse(), `${label}: exactly this session's bets, newest first`);
    t.ok(rows.every((r) => r.casinoId === p.casinoId && r.experienceId === p.experienceId), `${label}: every row is of the session's casino and experience`);
    // The same set as GraphQL's row-level security shows this session.
    const viaGraphql = await gql(hub.url, "{ allCoinflips { nodes { id } } allCoinflipBets { nodes { id } } }", {}, p.header);
    const graphqlIds = [...(viaGraphql.body.data as any).allCoinflips.nodes, ...(viaGraphql.body.data as any).allCoinflipBets.nodes].map((n: { id: string }) => n.id).sort();
    t.same([...rows.map((r) => r.id)].sort(), graphqlIds, `${label}: the same bets as GraphQL`);
  }
  t.match((await getBets(inDice)).body, [{ kind: "coinflip_bet", wager: 10 }], "both kinds are listed");
});

t.test("?before=<id> pages through every bet, newest first, with no gap and no repeat", async (t) => {
  const p = await makePlayer(hub.superuserDatabaseUrl, "pager");
  const ids = await play(p, 23);
  const expected = [...ids].sort().reverse();
  t.same(expected, [...ids].reverse(), "UUIDv7 ids sort by creation time");

  const seen: string[] = [];
  let query = "?limit=5";
  let pages = 0;
  for (;;) {
    const res = await getBets(p, query);
    t.equal(res.status, 200, `page ${pages}: ${query}`);
    const rows = res.body as BetRow[];
    pages++;
    seen.push(...rows.map((r) => r.id));
    // A cursor that does not advance would page forever: fail instead.
    if (pages > 100) throw new Error(`more than 100 pages of 5 for ${ids.length} bets: the Link header's cursor does not advance (last: ${query})`);
    if (rows.length < 5) {
      t.equal(res.link, null, "no Link header on the last, partial page");
      break;
    }
    t.equal(res.link, `</bets?before=${rows.at(-1)!.id}&limit=5>; rel="next"`, "a full page links to the next one");
    query = `?limit=5&before=${rows.at(-1)!.id}`;
    if (pages > 10) break;
  }
  t.equal(pages, 5, "23 bets in pages of 5: 5 pages");
  t.same(seen, expected, "every bet exactly once, in order");

  const middle = expected[10]!;
  const after = await getBets(p, `?before=${middle.toUpperCase()}`);
  t.same((after.body as BetRow[]).map((r) => r.id), expected.slice(11), "before is exclusive and case-insensitive; default limit");
  const none = await getBets(p, `?before=${expected.at(-1)}`);
  t.same(none.body, [], "before the oldest bet: an empty page");
  const unknown = await getBets(p, "?before=00000000-0000-7000-8000-000000000000");
  t.same(unknown.body, [], "a cursor older than every bet: empty");
  const future = await getBets(p, "?before=ffffffff-ffff-7fff-bfff-ffffffffffff&limit=1000");
  t.same((future.body as BetRow[]).map((r) => r.id), expected, "a cursor newer than every bet: all of them (limit 1000 is allowed)");
});

t.test("the default page is 100 and the cursor reaches the older bets", async (t) => {
  const p = await makePlayer(hub.superuserDatabaseUrl, "many");
  // 130 bets written directly (fast); ids generated in order by the database.
  await hub.dbPool.query(
    `insert into app.coinflip (id, wager, net, currency_key, user_id, casino_id, experience_id)
     select hub_hidden.uuid_generate_v7(), 1, -1, 'HOUSE', $1, $2, $3 from generate_series(1, 130)`,
    [p.userId, p.casinoId, p.experienceId],
  );
  const first = await getBets(p);
  t.equal((first.body as BetRow[]).length, 100, "100 by default");
  const rest = await getBets(p, `?before=${(first.body as BetRow[]).at(-1)!.id}`);
  t.equal((rest.body as BetRow[]).length, 30, "the 30 older ones with the cursor");
  const all = new Set([...(first.body as BetRow[]), ...(rest.body as BetRow[])].map((r) => r.id));
  t.equal(all.size, 130, "130 distinct bets");
});

t.test("bad query parameters: 400 JSON that says what was received and what is expected", async (t) => {
  const p = await makePlayer(hub.superuserDatabaseUrl, "badparams");
  const cases: [string, string, RegExp][] = [
    ["?limit=0", "INVALID_LIMIT", /^limit must be a whole number from 1 to 1000; received "0"\.$/],
    ["?limit=1001", "INVALID_LIMIT", /received "1001"/],
    ["?limit=-5", "INVALID_LIMIT", /received "-5"/],
    ["?limit=abc", "INVALID_LIMIT", /received "abc"/],
    ["?limit=2.5", "INVALID_LIMIT", /received "2\.5"/],
    ["?limit=1e2", "INVALID_LIMIT", /received "1e2"/],
    ["?limit=", "INVALID_LIMIT", /received ""/],
    ["?limit=99999999999999999999", "INVALID_LIMIT", /received "99999999999999999999"/],
    ["?limit=5&limit=6", "INVALID_LIMIT", /^limit must be given once, as a plain value; received \["5","6"\]\.$/],
    ["?before=abc", "INVALID_CURSOR", /^before must be the id of a bet \(a UUID such as the last id of the previous page\); received "abc"\.$/],
    ["?before=", "INVALID_CURSOR", /received ""/],
    ["?before=0190f3a0-0000-7000-8000-00000000000", "INVALID_CURSOR", /received "0190f3a0-0000-7000-8000-00000000000"/],
    ["?before=%00", "INVALID_CURSOR", /received "\\u0000"/],
    ["?before=' or 1=1 --", "INVALID_CURSOR", /received "' or 1=1 --"/],
    ["?befor=0190f3a0-0000-7000-8000-000000000000", "UNKNOWN_PARAMETER", /^Unknown query parameter "befor"; GET \/bets accepts limit and before\.$/],
    ["?offset=5", "UNKNOWN_PARAMETER", /"offset"/],
  ];
  for (const [query, code, message] of cases) {
    const res = await getBets(p, query);
    t.equal(res.status, 400, `${query}: 400`);
    t.match(res.type, /application\/json/, `${query}: JSON`);
    t.match(res.body, { statusCode: 400, error: "Bad Request", code }, `${query}: code ${code}`);
    t.match(res.body.message, message, `${query}: message`);
  }
  // A refused request still needs a player first: 401 before any parameter check.
  const anonymous = await fetch(`${hub.url}/bets?limit=0`);
  t.equal(anonymous.status, 401);
  t.equal((await getBets(p, "?limit=1000")).status, 200, "limit 1000 is accepted");
  t.equal((await getBets(p, "?limit=1")).status, 200, "limit 1 is accepted");
});
