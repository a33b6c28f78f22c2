import "./helpers/env.js";
import fs from "node:fs";
import path from "node:path";
import t from "tap";
import { defaultPlugins } from "@hubpkg/hub";
import { startTestServer, type TestServer } from "@hubpkg/hub/test";
import { configureReferenceRoutes, CoinflipBetPlugin, CoinflipPlanPlugin, referenceMigrationsPath } from "@hubpkg/hub/plugins";
import { gql } from "./helpers/http.js";
import { makeOperator, makePlayer, type Player } from "./helpers/credentials.js";
import { tmpDir } from "./helpers/tmp.js";

/*
 * hubBets: one bet history over every game's table tagged @hubBet, newest
 * first, paged and filtered; a player sees only their own, an operator
 * everyone's. GET /bets serves the same bets. (Issue 47, point 2.)
 */

let hub: TestServer;

// A second game of the test's own: tagged @hubBet, readable by GraphQL, and on purpose without a row-level security policy.
const LIMBO = `
create table app.limbo_bet (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  wager float8 not null, net float8 not null, currency_key text not null,
  user_id uuid not null references hub.user(id), casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id), target float8 not null);
grant select on app.limbo_bet to app_postgraphile;
comment on table app.limbo_bet is E'@hubBet';
`;

t.before(async () => {
  const migrations = tmpDir(t, "hub-bets-");
  for (const file of fs.readdirSync(referenceMigrationsPath)) fs.copyFileSync(path.join(referenceMigrationsPath, file), path.join(migrations, file));
  fs.writeFileSync(path.join(migrations, "900-limbo.sql"), LIMBO);
  hub = await startTestServer({
    logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: migrations,
    plugins: [...defaultPlugins, CoinflipPlanPlugin, CoinflipBetPlugin],
    configureApp: configureReferenceRoutes,
  });
});
t.teardown(() => hub?.stop());

const PAGE = `query($first: Int, $after: String, $kind: [String!], $currency: String, $userId: UUID) {
  hubBets(first: $first, after: $after, kind: $kind, currency: $currency, userId: $userId) {
    edges { cursor kind node { __typename id wager net currencyKey userId } }
    nodes { id }
    pageInfo { hasNextPage endCursor }
  }
}`;

interface Page {
  edges: { cursor: string; kind: string; node: { __typename: string; id: string; wager: number; net: number; currencyKey: string; userId: string } }[];
  nodes: { id: string }[];
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
}

async function hubBets(who: { header: Record<string, string> } | undefined, variables: Record<string, unknown> = {}) {
  const res = await gql(hub.url, PAGE, variables, who?.header ?? {});
  return { page: (res.body.data as { hubBets: Page } | undefined)?.hubBets, errors: res.body.errors };
}

/** A flip (makeCoinflip), a money bet (makeCoinflipBet) and a limbo bet of net 0 for `p`, in that order; their ids. */
async function playEach(p: Player): Promise<string[]> {
  const flip = await gql(hub.url, 'mutation { makeCoinflip(input: { currency: "HOUSE", wager: 3 }) { id } }', {}, p.header);
  const bet = await gql(hub.url, 'mutation { makeCoinflipBet(input: { currency: "HOUSE", wager: 10, side: HEADS }) { bet { id } } }', {}, p.header);
  if (flip.body.errors || bet.body.errors) throw new Error(JSON.stringify([flip.body.errors, bet.body.errors]));
  const { rows } = await hub.dbPool.query<{ id: string }>(
    "insert into app.limbo_bet (wager, net, currency_key, user_id, casino_id, experience_id, target) values (5, 0, 'HOUSE', $1, $2, $3, 2) returning id",
    [p.userId, p.casinoId, p.experienceId],
  );
  return [(flip.body.data as any).makeCoinflip.id, (bet.body.data as any).makeCoinflipBet.bet.id, rows[0]!.id];
}

let alice: Player;
let bob: Player;
const ids: Record<string, string[]> = {};

t.before(async () => {
  alice = await makePlayer(hub.superuserDatabaseUrl, "alice");
  bob = await makePlayer(hub.superuserDatabaseUrl, "bob");
  await hub.dbPool.query("select hub_hidden.ensure_bankroll($1, 'HOUSE', 100000, 'test')", [alice.casinoId]);
  for (const p of [alice, bob]) await hub.dbPool.query("select hub_hidden.credit_balance($1, $2, $3, 'HOUSE', 1000, 'test', 'test')", [p.userId, p.casinoId, p.experienceId]);
  ids.alice = [...(await playEach(alice)), ...(await playEach(alice))];
  ids.bob = await playEach(bob);
});

const newestFirst = (list: string[]) => [...list].reverse();

t.test("a player's bets of every game, newest first, zero-net included; never another player's", async (t) => {
  const { page, errors } = await hubBets(alice);
  t.same(errors, undefined);
  t.same(page!.nodes.map((n) => n.id), newestFirst(ids.alice!));
  t.same(page!.edges.map((e) => e.kind), ["limbo_bet", "coinflip_bet", "coinflip", "limbo_bet", "coinflip_bet", "coinflip"]);
  t.same(page!.edges.map((e) => e.node.__typename), ["LimboBet", "CoinflipBet", "Coinflip", "LimboBet", "CoinflipBet", "Coinflip"]);
  t.ok(page!.edges.every((e) => e.node.userId === alice.userId && e.cursor === e.node.id));
  t.same(page!.edges[0]!.node, { __typename: "LimboBet", id: ids.alice![5], wager: 5, net: 0, currencyKey: "HOUSE", userId: alice.userId }, "a zero-net bet");
  t.same(page!.pageInfo, { hasNextPage: false, endCursor: ids.alice![0] });

  const bobs = await hubBets(bob);
  t.same(bobs.page!.nodes.map((n) => n.id), newestFirst(ids.bob!), "bob sees his own only, the policy-less limbo table included");
  t.same((await hubBets(bob, { userId: alice.userId })).page!.nodes, [], "a player asking for another's bets gets none");
  t.same((await hubBets(undefined)).page!.nodes, [], "no identity: no bets");
});

t.test("cursor pagination with first and after", async (t) => {
  const seen: string[] = [];
  let after: string | null = null;
  for (let pages = 0; pages < 10; pages++) {
    const { page } = await hubBets(alice, { first: 4, after });
    seen.push(...page!.nodes.map((n) => n.id));
    if (!page!.pageInfo.hasNextPage) break;
    after = page!.pageInfo.endCursor;
  }
  t.same(seen, newestFirst(ids.alice!), "two pages of 4 and 2, no bet twice or missed");
  const second = await hubBets(alice, { first: 2, after: ids.alice![4] });
  t.same(second.page!.nodes.map((n) => n.id), [ids.alice![3], ids.alice![2]]);
});

t.test("filters: kind and currency", async (t) => {
  t.same((await hubBets(alice, { kind: ["limbo_bet"] })).page!.nodes.map((n) => n.id), [ids.alice![5], ids.alice![2]]);
  t.same((await hubBets(alice, { kind: ["coinflip", "limbo_bet"] })).page!.edges.map((e) => e.kind), ["limbo_bet", "coinflip", "limbo_bet", "coinflip"]);
  t.same((await hubBets(alice, { currency: "HOUSE" })).page!.nodes.length, 6);
  t.same((await hubBets(alice, { currency: "BTC" })).page!.nodes, []);
});

t.test("a client's mistakes are client errors", async (t) => {
  const code = async (variables: Record<string, unknown>) => ((await hubBets(alice, variables)).errors as { extensions: { code: string }; message: string }[] | undefined)?.[0];
  t.match(await code({ first: 0 }), { extensions: { code: "INVALID_LIMIT" }, message: /first must be a whole number from 1 to 1000; received 0/ });
  t.match(await code({ first: 1001 }), { extensions: { code: "INVALID_LIMIT" } });
  t.match(await code({ after: "nope" }), { extensions: { code: "INVALID_CURSOR" } });
  t.match(await code({ kind: ["dice"] }), { extensions: { code: "UNKNOWN_BET_KIND" }, message: /no bets of kind "dice"; the kinds are: coinflip, coinflip_bet, limbo_bet, outcome_bet, tower_game\./ });
});

t.test("an operator sees every player's bets, or one player's with userId", async (t) => {
  const op = await makeOperator(hub.superuserDatabaseUrl);
  const all = await hubBets(op, { first: 1000 });
  t.same(all.errors, undefined);
  const listed = all.page!.nodes.map((n) => n.id);
  t.ok([...ids.alice!, ...ids.bob!].every((id) => listed.includes(id)), "both players' bets");
  t.same((await hubBets(op, { userId: bob.userId })).page!.nodes.map((n) => n.id), newestFirst(ids.bob!));
});

t.test("GET /bets serves the same bets, every kind, in its JSON shape", async (t) => {
  const res = await fetch(`${hub.url}/bets`, { headers: alice.header });
  const body = (await res.json()) as Record<string, unknown>[];
  t.equal(res.status, 200);
  t.same(body.map((b) => b.id), newestFirst(ids.alice!));
  t.same(Object.keys(body[0]!), ["kind", "id", "wager", "net", "currencyKey", "casinoId", "experienceId", "createdAt"]);
  t.match(body[0], { kind: "limbo_bet", wager: 5, net: 0, currencyKey: "HOUSE", casinoId: alice.casinoId, experienceId: alice.experienceId });
});
