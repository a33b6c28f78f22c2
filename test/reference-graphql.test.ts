import "./helpers/env.js";
import t from "tap";
import pg from "pg";
import type { RunningServer } from "@hubpkg/hub";
import type { TestServer } from "@hubpkg/hub/test";
import { dbLockHouseBankroll, dbLockPlayerBalance, dbLockPlayerBalanceAndHouseBankroll, withPgPoolTransaction } from "@hubpkg/hub/db";
// The reference plugins, compiled, exactly as a user's server would load them (started by ./helpers/reference-hubs.ts).
import { FortunePlugin, MAX_FORTUNE_LENGTH } from "../dist/plugins/fortune.js";
import { CoinflipResolverPlugin } from "../dist/plugins/coinflip-resolver.js";
import { CoinflipPlanPlugin } from "../dist/plugins/coinflip-plan.js";
import { CoinflipBetPlugin } from "../dist/plugins/coinflip-bet.js";
import { gql } from "./helpers/http.js";
import { makeOperator, type Player } from "./helpers/credentials.js";
import { bettingTable as sharedBettingTable, pooled, referencePlayer, useReferenceHubs } from "./helpers/reference-hubs.js";

const hubs = useReferenceHubs(t);
let resolverHub: TestServer;
let planHub: RunningServer;
let db: pg.Pool;
t.before(() => ({ resolverHub, planHub, db } = hubs));

// ---------------------------------------------------------------------------
// helpers

const player = (prefix: string, opts: { casinoName?: string } = {}) => referencePlayer(hubs, prefix, opts);

/** POST a raw body: JSON.stringify cannot write 1e999, but a client can. */
async function postRaw(url: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${url}/graphql`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  return { status: res.status, body: (await res.json()) as { data?: any; errors?: { message: string }[] } };
}

const firstError = (body: { errors?: { message: string }[] | undefined }) => body.errors?.[0]?.message ?? "";

const bettingTable = (opts: Parameters<typeof sharedBettingTable>[1]) => sharedBettingTable(hubs, opts);

interface Books {
  balance: number;
  bankroll: number;
  bets: number;
  wagered: number;
  expectedValue: number;
  storedBets: number;
}

async function books(p: Player, currency: string): Promise<Books> {
  const { rows } = await db.query(
    `select (select amount from hub.balance where user_id = $1 and experience_id = $2 and currency_key = $4) as balance,
            b.amount as bankroll, b.bets::int as bets, b.wagered, b.expected_value,
            (select count(*)::int from app.coinflip_bet where casino_id = $3 and currency_key = $4) as stored_bets
       from hub.bankroll b where b.casino_id = $3 and b.currency_key = $4`,
    [p.userId, p.experienceId, p.casinoId, currency],
  );
  const r = rows[0];
  return { balance: r.balance, bankroll: r.bankroll, bets: r.bets, wagered: r.wagered, expectedValue: r.expected_value, storedBets: r.stored_bets };
}

const close = (a: number, b: number) => Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(a), Math.abs(b));

/** Postgres's clock in milliseconds, rounded exactly as hub_hidden.uuid_generate_v7() rounds it. */
async function pgClockMs(): Promise<number> {
  const { rows } = await db.query("select (extract(epoch from clock_timestamp()) * 1000)::bigint::text as ms");
  return Number(rows[0].ms);
}

/** The Unix time in milliseconds in the first 48 bits of a UUIDv7. */
const v7Millis = (id: string) => Number.parseInt(id.replace(/-/g, "").slice(0, 12), 16);
const isV7 = (id: string) => /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id);


t.test("each reference plugin has its own stable name", async (t) => {
  t.same(
    [FortunePlugin, CoinflipResolverPlugin, CoinflipPlanPlugin, CoinflipBetPlugin].map((plugin) => plugin.name),
    ["FortunePlugin", "CoinflipResolverPlugin", "CoinflipPlanPlugin", "CoinflipBetPlugin"],
  );
});

// ---------------------------------------------------------------------------
// The reference schema (plugins/migrations)

t.test("schema: reference tables become Coinflip, CoinflipBet and CoinSide; app.fortune stays hidden", async (t) => {
  const res = await gql(
    resolverHub.url,
    `{
      coinflip: __type(name: "Coinflip") { fields { name type { kind name ofType { name } } } interfaces { name } }
      bet: __type(name: "CoinflipBet") { fields { name } interfaces { name } }
      side: __type(name: "CoinSide") { kind enumValues { name } }
      fortune: __type(name: "Fortune") { fields { name type { kind ofType { name } } } }
      query: __type(name: "Query") { fields { name args { name type { kind ofType { name } } } } }
      mutation: __type(name: "Mutation") { fields { name } }
    }`,
  );
  t.same(res.body.errors, undefined);
  const data = res.body.data!;
  const columns = Object.fromEntries(
    (data.coinflip.fields as { name: string; type: { kind: string; ofType: { name: string } | null } }[])
      .filter((f) => f.type.kind === "NON_NULL")
      .map((f) => [f.name, f.type.ofType!.name]),
  );
  t.same(columns, { casinoId: "UUID", currencyKey: "String", experienceId: "UUID", id: "UUID", net: "Float", userId: "UUID", wager: "Float" }, "the reference columns, all non-null");
  t.same(data.coinflip.interfaces, [{ name: "Bet" }], "@hubBet: Coinflip implements Bet");
  t.same(data.bet.interfaces, [{ name: "Bet" }], "@hubBet: CoinflipBet implements Bet");
  for (const name of ["side", "outcome", "balanceAfter"]) t.ok(data.bet.fields.some((f: { name: string }) => f.name === name), `CoinflipBet.${name}`);
  t.same(data.side, { kind: "ENUM", enumValues: [{ name: "HEADS" }, { name: "TAILS" }] }, "app.coin_side → enum CoinSide");
  t.same(
    data.fortune.fields.map((f: any) => [f.name, f.type.ofType.name]),
    [["id", "Int"], ["text", "String"]],
    "Fortune is the plugin's own type",
  );
  const queryFields = new Map<string, any>(data.query.fields.map((f: any) => [f.name, f]));
  t.same(queryFields.get("coinflipById")?.args, [{ name: "id", type: { kind: "NON_NULL", ofType: { name: "UUID" } } }], "coinflipById(id: UUID!)");
  t.ok(queryFields.has("coinflipBetById") && queryFields.has("allCoinflips") && queryFields.has("allCoinflipBets"));
  t.notOk([...queryFields.keys()].some((name) => /fortune/i.test(name) && name !== "randomFortune"), "@behavior -*: no generated field for app.fortune");
  const mutations = data.mutation.fields.map((f: { name: string }) => f.name);
  // updateHubBankrollById and updateHubCasinoById are the hub's own, written as the original has them (test/original-surface.test.ts).
  const own = new Set(["updateHubBankrollById", "updateHubCasinoById"]);
  t.notOk(mutations.some((name: string) => /^(create|update|delete)/.test(name) && !own.has(name)), "select-only grants: no generated CRUD mutations");

  const returns = "{ __type(name: \"Mutation\") { fields { name type { name } } } }";
  const typeOf = async (hub: RunningServer) =>
    Object.fromEntries(((await gql(hub.url, returns)).body.data!.__type.fields as { name: string; type: { name: string } }[]).map((f) => [f.name, f.type.name]));
  t.match(await typeOf(resolverHub), { makeCoinflip: "CoinflipOut", makeCoinflipBet: "MakeCoinflipBetPayload", addFortune: "Fortune" }, "resolver server");
  t.match(await typeOf(planHub), { makeCoinflip: "Coinflip" }, "plan server: the generated Coinflip");
});

t.test("schema: foreign keys, an index per foreign key, row-level security, grants", async (t) => {
  for (const table of ["app.coinflip", "app.coinflip_bet"]) {
    const fks = await db.query(
      `select (select n.nspname || '.' || c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.oid = confrelid) as target,
              array(select attname::text from unnest(conkey) with ordinality k(n, i) join pg_attribute a on a.attrelid = conrelid and a.attnum = k.n order by i) as cols,
              exists (select 1 from pg_index x where x.indrelid = conrelid
                        and (x.indkey::int2[])[0:array_length(conkey, 1) - 1] = conkey) as indexed
         from pg_constraint where conrelid = $1::regclass and contype = 'f' order by 1, 2`,
      [table],
    );
    t.same(
      fks.rows.map((r) => [r.target, r.cols.join(","), r.indexed]),
      [
        ["hub.casino", "casino_id", true],
        ["hub.currency", "currency_key,casino_id", true],
        ["hub.experience", "experience_id", true],
        ["hub.user", "user_id", true],
      ],
      `${table}: foreign keys, each with an index`,
    );
    const meta = await db.query(
      `select c.relrowsecurity as rls, obj_description(c.oid, 'pg_class') as comment,
              has_table_privilege('app_postgraphile', c.oid, 'select') as can_select,
              has_table_privilege('app_postgraphile', c.oid, 'insert,update,delete') as can_write,
              (select count(*)::int from pg_policy p where p.polrelid = c.oid) as policies
         from pg_class c where c.oid = $1::regclass`,
      [table],
    );
    t.match(meta.rows[0], { rls: true, comment: /^@hubBet\n/, can_select: true, can_write: false, policies: 1 }, `${table}: RLS, @hubBet, select only`);
    const idDefault = await db.query("select pg_get_expr(adbin, adrelid) as expr from pg_attrdef where adrelid = $1::regclass and adnum = 1", [table]);
    t.equal(idDefault.rows[0].expr, "hub_hidden.uuid_generate_v7()", `${table}.id defaults to a UUIDv7`);
  }
});

// ---------------------------------------------------------------------------
// FortunePlugin

t.test("randomFortune: each stored fortune equally likely", async (t) => {
  const stored = (await db.query<{ id: number; text: string }>("select id, text from app.fortune order by id")).rows;
  t.equal(stored.length, 5, "the migration seeds five fortunes");
  const perRequest = 100;
  const requests = 30;
  const counts = new Map<number, number>();
  const unknown: unknown[] = [];
  await pooled(requests, 5, async () => {
    const query = `{ ${Array.from({ length: perRequest }, (_, i) => `f${i}: randomFortune { id text }`).join(" ")} }`;
    const res = await gql(resolverHub.url, query);
    t.same(res.body.errors, undefined);
    for (const f of Object.values(res.body.data!) as { id: number; text: string }[]) {
      if (!stored.some((s) => s.id === f.id && s.text === f.text)) unknown.push(f);
      counts.set(f.id, (counts.get(f.id) ?? 0) + 1);
    }
  });
  t.same(unknown, [], "every answer is a stored fortune");
  /*
   * Pearson's χ² with k − 1 = 4 degrees of freedom over n = 3000 draws. For 4
   * degrees of freedom P(χ² > x) = e^(−x/2)·(1 + x/2), so the bound 33.4 fails
   * a uniform picker with probability 1e-6. A picker that never returns one
   * fortune scores ≥ 600, one that favours a fortune at 30% (instead of 20%)
   * scores ≈ 190 on average.
   */
  const n = perRequest * requests;
  const expected = n / stored.length;
  const chi2 = stored.reduce((sum, s) => sum + ((counts.get(s.id) ?? 0) - expected) ** 2 / expected, 0);
  t.ok(chi2 < 33.4, `χ² = ${chi2.toFixed(2)} < 33.4 (counts ${JSON.stringify([...counts.entries()].sort((a, b) => a[0] - b[0]))})`);
});

t.test("randomFortune: null when there is no fortune", async (t) => {
  const saved = (await db.query<{ id: number; text: string }>("delete from app.fortune returning id, text")).rows;
  try {
    t.same((await gql(resolverHub.url, "{ randomFortune { id text } }")).body, { data: { randomFortune: null } });
  } finally {
    for (const f of saved) await db.query("insert into app.fortune (id, text) overriding system value values ($1, $2)", [f.id, f.text]);
  }
});

t.test("addFortune: stores the text under the next sequential id", async (t) => {
  const max = (await db.query("select max(id) as max from app.fortune")).rows[0].max as number;
  const res = await gql(resolverHub.url, "mutation($text: String!) { addFortune(text: $text) { id text } }", { text: "Tests pass on the first try." });
  t.same(res.body, { data: { addFortune: { id: max + 1, text: "Tests pass on the first try." } } });
  const row = await db.query("select text from app.fortune where id = $1", [max + 1]);
  t.equal(row.rows[0]?.text, "Tests pass on the first try.");
});

t.test("addFortune: concurrent calls get distinct, consecutive ids", async (t) => {
  const max = (await db.query("select max(id) as max from app.fortune")).rows[0].max as number;
  const results = await Promise.all(
    Array.from({ length: 50 }, (_, i) => gql(resolverHub.url, "mutation($text: String!) { addFortune(text: $text) { id text } }", { text: `concurrent ${i}` })),
  );
  const ids = results.map((r) => r.body.data?.addFortune?.id as number).sort((a, b) => a - b);
  t.same(ids, Array.from({ length: 50 }, (_, i) => max + 1 + i), "50 calls: ids max+1 … max+50, each once");
  const texts = results.map((r, i) => [r.body.data?.addFortune?.text, `concurrent ${i}`]);
  t.ok(texts.every(([got, sent]) => got === sent), "each call got its own row back");
});

t.test("addFortune: refuses empty, blank, over-long and NUL text, saying what it received", async (t) => {
  const max = (await db.query("select max(id) as max from app.fortune")).rows[0].max as number;
  const add = (text: string) => gql(resolverHub.url, "mutation($text: String!) { addFortune(text: $text) { id text } }", { text });
  const cases: [string, RegExp][] = [
    ["", /must be 1 to 280 characters.*received an empty string/],
    ["  \n\t ", /not only whitespace.*received only whitespace \(5 characters\)/],
    ["x".repeat(MAX_FORTUNE_LENGTH + 1), /must be 1 to 280 characters.*received 281 characters/],
  ];
  for (const [text, message] of cases) {
    const res = await add(text);
    t.equal(res.body.data?.addFortune, null);
    t.match(firstError(res.body), message, `refused: ${JSON.stringify(text.slice(0, 20))}`);
    t.match(res.body.errors?.[0], { extensions: { code: "BAD_USER_INPUT" } });
  }
  // A NUL character never reaches the plugin: the hub refuses it in any variable, before execution.
  const nul = await add("nul\u0000byte");
  t.equal(nul.status, 400);
  t.same(nul.body, { errors: [{ message: 'Variable "$text" contains a NUL character (\\u0000), which the database cannot store.', extensions: { statusCode: 400, code: "BAD_USER_INPUT" } }] });
  // Characters, not UTF-16 units: 280 emoji (560 units) are 280 characters.
  const emoji = "🍀".repeat(MAX_FORTUNE_LENGTH);
  const ok = await add(emoji);
  t.same(ok.body, { data: { addFortune: { id: max + 1, text: emoji } } }, "the longest fortune is accepted, and refusals left no gap in the ids");
});

// ---------------------------------------------------------------------------
// makeCoinflip, both variants

const RESOLVER_FLIP = "mutation($input: MakeCoinflipInput!) { makeCoinflip(input: $input) { id net } }";
const PLAN_FLIP = `mutation($input: MakeCoinflipInput!) {
  makeCoinflip(input: $input) { id wager net currencyKey userId casinoId experienceId hubUserByUserId { uname } }
}`;
const variants = [
  { name: "resolver variant", hub: () => resolverHub, query: RESOLVER_FLIP },
  { name: "plan variant", hub: () => planHub, query: PLAN_FLIP },
];

for (const variant of variants) {
  t.test(`makeCoinflip (${variant.name}): no player identity → null, no error`, async (t) => {
    const input = { currency: "HOUSE", wager: 5 };
    const before = (await db.query("select count(*)::int as n from app.coinflip")).rows[0].n;
    t.same((await gql(variant.hub().url, variant.query, { input })).body, { data: { makeCoinflip: null } }, "anonymous");
    const op = await makeOperator(resolverHub.superuserDatabaseUrl);
    t.same((await gql(variant.hub().url, variant.query, { input }, op.header)).body, { data: { makeCoinflip: null } }, "operator");
    const bogus = { authorization: "session:not-a-real-token" };
    t.same((await gql(variant.hub().url, variant.query, { input }, bogus)).body, { data: { makeCoinflip: null } }, "unknown session");
    t.equal((await db.query("select count(*)::int as n from app.coinflip")).rows[0].n, before, "nothing stored");
  });

  t.test(`makeCoinflip (${variant.name}): wager below 1 → GraphQLError; 1 is accepted`, async (t) => {
    const p = await player(`low-${variant.name.split(" ")[0]}`);
    for (const wager of [0.99, 0, -5]) {
      const res = await gql(variant.hub().url, variant.query, { input: { currency: "HOUSE", wager } }, p.header);
      t.equal(res.status, 200);
      t.equal(res.body.data?.makeCoinflip, null);
      t.equal(firstError(res.body), `makeCoinflip: the wager must be at least 1, received ${wager}.`);
    }
    const ok = await gql(variant.hub().url, variant.query, { input: { currency: "HOUSE", wager: 1 } }, p.header);
    t.same(ok.body.errors, undefined);
    t.ok([0.99, -1].includes(ok.body.data?.makeCoinflip?.net), "wager 1 is allowed");
    t.equal((await db.query("select count(*)::int as n from app.coinflip where user_id = $1", [p.userId])).rows[0].n, 1, "only the valid flip is stored");
  });

  t.test(`makeCoinflip (${variant.name}): non-finite wagers are a clear error, never a 500`, async (t) => {
    const p = await player(`inf-${variant.name.split(" ")[0]}`);
    const url = variant.hub().url;
    // Literals: GraphQL parses 1e999 to Infinity and lets it through; the plugin must refuse it.
    for (const literal of ["1e999", "-1e999"]) {
      const res = await postRaw(url, JSON.stringify({ query: `mutation { makeCoinflip(input: { currency: "HOUSE", wager: ${literal} }) { id } }` }), p.header);
      t.equal(res.status, 200);
      t.equal(res.body.data?.makeCoinflip, null);
      t.match(firstError(res.body), /^makeCoinflip: the wager must be a finite number, received -?Infinity\.$/, `literal ${literal}`);
    }
    // Variables: JSON 1e999 parses to Infinity, and GraphQL's Float refuses it before any plugin runs.
    const variable = await postRaw(url, `{"query": ${JSON.stringify(RESOLVER_FLIP.replace("{ id net }", "{ id }"))}, "variables": {"input": {"currency": "HOUSE", "wager": 1e999}}}`, p.header);
    t.ok(variable.status < 500, `status ${variable.status}`);
    t.match(firstError(variable.body), /Float cannot represent non numeric value: Infinity/);
    // NaN cannot be written in JSON; JSON.stringify sends null, which a Float! refuses.
    const nan = await gql(url, variant.query, { input: { currency: "HOUSE", wager: Number.NaN } }, p.header);
    t.ok(nan.status < 500);
    t.match(firstError(nan.body), /wager.*null|null.*wager|Expected non-nullable/);
    t.equal((await db.query("select count(*)::int as n from app.coinflip where user_id = $1", [p.userId])).rows[0].n, 0, "nothing stored");
  });

  t.test(`makeCoinflip (${variant.name}): an unknown currency is named in the error`, async (t) => {
    const p = await player(`cur-${variant.name.split(" ")[0]}`);
    const res = await gql(variant.hub().url, variant.query, { input: { currency: "DOGE", wager: 5 } }, p.header);
    t.equal(res.body.data?.makeCoinflip, null);
    t.equal(firstError(res.body), 'makeCoinflip: unknown currency "DOGE"; the casino of this session has no such currency.');
    t.equal(res.body.errors?.[0]?.extensions?.code, "UNKNOWN_CURRENCY", "the catalogue's code");
  });

  t.test(`makeCoinflip (${variant.name}): stores one row from the session and moves no money`, async (t) => {
    const p = await player(`row-${variant.name.split(" ")[0]}`);
    await db.query("insert into hub.balance (user_id, casino_id, experience_id, currency_key, amount) values ($1, $2, $3, 'HOUSE', 100)", [
      p.userId,
      p.casinoId,
      p.experienceId,
    ]);
    const bankrollBefore = (await db.query("select amount, bets from hub.bankroll where casino_id = $1", [p.casinoId])).rows;
    const res = await gql(variant.hub().url, variant.query, { input: { currency: "HOUSE", wager: 12.5 } }, p.header);
    t.same(res.body.errors, undefined);
    const out = res.body.data!.makeCoinflip;
    t.ok(isV7(out.id), `a UUIDv7 id: ${out.id}`);
    t.ok(out.net === 12.5 * 0.99 || out.net === -12.5, `net ${out.net} is wager*0.99 or -wager`);
    if (variant.name === "plan variant") {
      t.match(out, { wager: 12.5, currencyKey: "HOUSE", userId: p.userId, casinoId: p.casinoId, experienceId: p.experienceId, hubUserByUserId: { uname: /^row-plan/ } }, "the generated Coinflip, relations included");
    } else {
      t.same(Object.keys(out).sort(), ["id", "net"], "CoinflipOut");
    }
    const rows = await db.query("select * from app.coinflip where user_id = $1", [p.userId]);
    t.same(rows.rows, [{ id: out.id, wager: 12.5, net: out.net, currency_key: "HOUSE", user_id: p.userId, casino_id: p.casinoId, experience_id: p.experienceId }]);
    t.equal((await db.query("select amount from hub.balance where user_id = $1", [p.userId])).rows[0].amount, 100, "balance untouched (makeCoinflip moves no money)");
    t.same((await db.query("select amount, bets from hub.bankroll where casino_id = $1", [p.casinoId])).rows, bankrollBefore, "bankroll untouched");
  });

}

t.test("makeCoinflip: 200 concurrent calls → exactly 200 rows with unique, time-ordered ids", async (t) => {
  /*
   * What "time-ordered" can honestly mean here: hub_hidden.uuid_generate_v7()
   * puts the insert's clock time in milliseconds in the first 48 bits and random
   * bits after, so ids sort by creation time at millisecond precision; within
   * one millisecond their order is random (there is no cross-connection
   * counter). So we check: every id is a v7 whose time lies inside the window
   * of the calls (on Postgres's clock, rounded as the generator rounds), ids
   * sort exactly as their times, and every id created after the clock has
   * passed the last millisecond of this batch is greater than all of them.
   */
  const p = await player("burst");
  const start = await pgClockMs();
  const results = await Promise.all(
    Array.from({ length: 200 }, () => gql(resolverHub.url, RESOLVER_FLIP, { input: { currency: "HOUSE", wager: 3 } }, p.header)),
  );
  const end = await pgClockMs();
  t.ok(results.every((r) => r.status === 200 && r.body.errors === undefined), "all 200 succeeded");
  const ids = results.map((r) => r.body.data!.makeCoinflip.id as string);
  t.equal(new Set(ids).size, 200, "200 distinct ids");
  const stored = await db.query<{ id: string }>("select id::text from app.coinflip where user_id = $1", [p.userId]);
  t.equal(stored.rows.length, 200, "exactly 200 rows");
  t.same(new Set(stored.rows.map((r) => r.id)), new Set(ids), "the rows are the ids returned");
  t.ok(ids.every(isV7), "every id is a UUIDv7");
  const millis = ids.map(v7Millis);
  t.ok(millis.every((ms) => ms >= start && ms <= end), `every id's time lies in [${start}, ${end}]`);
  const sorted = [...ids].sort();
  t.ok(sorted.every((id, i) => i === 0 || v7Millis(id) >= v7Millis(sorted[i - 1]!)), "sorting the ids sorts them by time");

  const last = Math.max(...millis);
  while ((await pgClockMs()) <= last); // at most a millisecond or two: the next batch is strictly later
  const later = await Promise.all(
    Array.from({ length: 20 }, () => gql(resolverHub.url, RESOLVER_FLIP, { input: { currency: "HOUSE", wager: 3 } }, p.header)),
  );
  const laterIds = later.map((r) => r.body.data!.makeCoinflip.id as string);
  t.ok(laterIds.every((id) => id > sorted[sorted.length - 1]!), "every later id is greater than every earlier one");
});

t.test("makeCoinflip (plan variant): the generated Coinflip is read under row-level security", async (t) => {
  const owner = await player("rls-owner");
  const other = await player("rls-other");
  const op = await makeOperator(resolverHub.superuserDatabaseUrl);
  const made = await gql(planHub.url, PLAN_FLIP, { input: { currency: "HOUSE", wager: 4 } }, owner.header);
  const id = made.body.data!.makeCoinflip.id as string;
  const byId = "query($id: UUID!) { coinflipById(id: $id) { id userId } }";
  t.same((await gql(planHub.url, byId, { id }, owner.header)).body.data, { coinflipById: { id, userId: owner.userId } }, "the owner");
  t.same((await gql(planHub.url, byId, { id }, other.header)).body.data, { coinflipById: null }, "another player");
  t.same((await gql(planHub.url, byId, { id })).body.data, { coinflipById: null }, "anonymous");
  t.same((await gql(planHub.url, byId, { id }, op.header)).body.data, { coinflipById: { id, userId: owner.userId } }, "an operator");
  const all = await gql(resolverHub.url, "{ allCoinflips { nodes { userId } } }", {}, other.header);
  t.same(all.body.data, { allCoinflips: { nodes: [] } }, "another player lists none of them");
});

// ---------------------------------------------------------------------------
// Locks (@hubpkg/hub/db)

t.test("dbLock*: lock the rows until the transaction ends; not found when a row is missing", async (t) => {
  const { players, casinoId, currency } = await bettingTable({ casino: "locks", players: 1, balance: 70, bankroll: 900 });
  const p = players[0]!;
  const other = await player("locks-none", { casinoName: "locks" });
  const playground = (await db.query("select id from hub.casino where name = 'playground'")).rows[0].id as string;
  const pool = new pg.Pool({ connectionString: resolverHub.superuserDatabaseUrl, max: 3 });
  t.teardown(() => pool.end());
  const key = { userId: p.userId, casinoId, experienceId: p.experienceId, currencyKey: currency };
  const probe = async (sql: string, params: unknown[]) => {
    // NOWAIT: fails at once with 55P03 when another transaction holds the row lock.
    try {
      await pool.query(`${sql} for update nowait`, params);
      return "free";
    } catch (error) {
      return (error as { code?: string }).code === "55P03" ? "locked" : String(error);
    }
  };
  const balanceLocked = () => probe("select 1 from hub.balance where user_id = $1 and currency_key = $2", [p.userId, currency]);
  const bankrollLocked = () => probe("select 1 from hub.bankroll where casino_id = $1 and currency_key = $2", [casinoId, currency]);

  await withPgPoolTransaction(pool, async (client) => {
    const locked = await dbLockPlayerBalanceAndHouseBankroll(client, key);
    t.match(locked, {
      found: true,
      dbPlayerBalance: { user_id: p.userId, casino_id: casinoId, experience_id: p.experienceId, currency_key: currency, amount: 70 },
      dbHouseBankroll: { casino_id: casinoId, currency_key: currency, amount: 900, bets: "0", wagered: 0, expected_value: 0 },
    });
    t.equal(await balanceLocked(), "locked", "balance locked inside the transaction");
    t.equal(await bankrollLocked(), "locked", "bankroll locked inside the transaction");
  });
  t.equal(await balanceLocked(), "free", "released at commit");
  t.equal(await bankrollLocked(), "free");

  await withPgPoolTransaction(pool, async (client) => {
    t.same(await dbLockPlayerBalanceAndHouseBankroll(client, { ...key, userId: other.userId }), { found: false }, "no balance");
    t.same(await dbLockPlayerBalanceAndHouseBankroll(client, { ...key, currencyKey: "HOUSE" }), { found: false }, "no such currency here");
    t.same(await dbLockPlayerBalanceAndHouseBankroll(client, { ...key, casinoId: playground }), { found: false }, "the balance belongs to another casino");
    t.equal(await dbLockPlayerBalance(client, { userId: other.userId, experienceId: p.experienceId, currencyKey: currency }), undefined);
    t.equal(await dbLockHouseBankroll(client, { casinoId, currencyKey: "HOUSE" }), undefined);
    t.match(await dbLockPlayerBalance(client, key), { amount: 70 });
    t.equal(await balanceLocked(), "locked", "dbLockPlayerBalance alone");
    t.equal(await bankrollLocked(), "free", "… leaves the bankroll alone");
    t.match(await dbLockHouseBankroll(client, key), { amount: 900 });
    t.equal(await bankrollLocked(), "locked", "dbLockHouseBankroll");
  });
});

// ---------------------------------------------------------------------------
// makeCoinflipBet (CoinflipBetPlugin)

const BET = `mutation($input: MakeCoinflipBetInput!) {
  makeCoinflipBet(input: $input) {
    outcome balance
    bet { id wager net currencyKey userId casinoId experienceId side outcome balanceAfter }
  }
}`;
const bet = (p: Player | undefined, input: { wager: number; currency: string; side: "HEADS" | "TAILS" }) =>
  gql(resolverHub.url, BET, { input }, p?.header ?? {});

t.test("makeCoinflipBet: Unauthorized without a player session", async (t) => {
  const op = await makeOperator(resolverHub.superuserDatabaseUrl);
  // No credential: UNAUTHENTICATED; an operator's key, the wrong kind of identity: FORBIDDEN.
  for (const [who, p, code] of [["anonymous", undefined, "UNAUTHENTICATED"], ["operator", { header: op.header }, "FORBIDDEN"]] as const) {
    const res = await bet(p as Player | undefined, { wager: 1, currency: "HOUSE", side: "HEADS" });
    t.equal(res.status, 200);
    t.equal(res.body.data?.makeCoinflipBet, null);
    t.equal(firstError(res.body), "Unauthorized", who);
    t.equal(res.body.errors?.[0]?.extensions?.code, code, `${who}: ${code}`);
  }
});

t.test("makeCoinflipBet: refusals say why and change nothing", async (t) => {
  const { players, currency } = await bettingTable({ casino: "refusals", players: 2, balance: 20, bankroll: 15 });
  const [rich, other] = players as [Player, Player];
  const poor = await player("refusals-nobalance", { casinoName: "refusals" });
  const before = await books(rich, currency);
  const cases: [string, Player, { wager: number; currency: string }, RegExp][] = [
    ["zero wager", rich, { wager: 0, currency }, /^makeCoinflipBet: the wager must be a whole number of base units from 2 to 9007199254740991; received 0\. Amounts are whole base units/],
    ["negative wager", rich, { wager: -3, currency }, /received -3\. /],
    ["fractional wager", rich, { wager: 2.5, currency }, /whole number of base units from 2 to 9007199254740991; received 2\.5\. /],
    ["wager 1 (a win would pay 0)", rich, { wager: 1, currency }, /^makeCoinflipBet: a wager of 1 would pay nothing on a win \(a win pays floor\(wager × 0\.99\)\); the smallest wager is 2\.$/],
    ["unknown currency", rich, { wager: 2, currency: "NOPE" }, /^makeCoinflipBet: unknown currency "NOPE"; the casino of this session has no such currency\.$/],
    ["another casino's currency", rich, { wager: 2, currency: "HOUSE" }, /unknown currency "HOUSE"/],
    ["no balance", poor, { wager: 2, currency }, /^makeCoinflipBet: the wager is 2 CHIPS but this player has no CHIPS balance\.$/],
    ["insufficient balance", rich, { wager: 21, currency }, /^makeCoinflipBet: the wager is 21 CHIPS but the balance is 20 CHIPS\.$/],
    ["bankroll too small", rich, { wager: 17, currency }, /^makeCoinflipBet: the house bankroll cannot cover a win of 16 CHIPS now; try a smaller wager\.$/],
  ];
  for (const [what, p, input, message] of cases) {
    const res = await bet(p, { ...input, side: "TAILS" });
    t.equal(res.body.data?.makeCoinflipBet, null);
    t.match(firstError(res.body), message, what);
  }
  const literal = await postRaw(
    resolverHub.url,
    JSON.stringify({ query: `mutation { makeCoinflipBet(input: { wager: 1e999, currency: "${currency}", side: HEADS }) { balance } }` }),
    other.header,
  );
  t.match(firstError(literal.body), /the wager must be a whole number of base units from 2 to 9007199254740991; received Infinity\./, "Infinity literal");
  t.same(await books(rich, currency), before, "balance, bankroll and bet count unchanged");
  t.equal((await db.query("select count(*)::int as n from app.coinflip_bet where casino_id = $1", [rich.casinoId])).rows[0].n, 0, "no bet stored");

  // The bankroll check is exact: a wager of 16 pays floor(15.84) = 15 ≤ 15 on a win, affordable.
  const edge = await bet(rich, { wager: 16, currency, side: "HEADS" });
  t.same(edge.body.errors, undefined, "a win the bankroll can just cover is accepted");
});

t.test("makeCoinflipBet: each bet moves net from the house to the player, books and all", async (t) => {
  const { players, currency } = await bettingTable({ casino: "sequential", players: 1, balance: 1000, bankroll: 5000 });
  const p = players[0]!;
  let prev = await books(p, currency);
  for (let i = 0; i < 20; i++) {
    const side = i % 2 ? "HEADS" : "TAILS";
    const wager = 5 + i;
    const res = await bet(p, { wager, currency, side });
    t.same(res.body.errors, undefined);
    const out = res.body.data!.makeCoinflipBet;
    const won = out.outcome === side;
    const payout = Math.floor((wager * 99) / 100);
    const net = won ? payout : -wager;
    t.match(out.bet, { wager, net, currencyKey: currency, userId: p.userId, casinoId: p.casinoId, experienceId: p.experienceId, side, outcome: out.outcome, balanceAfter: out.balance });
    const now = await books(p, currency);
    t.ok(close(now.balance - prev.balance, net), `bet ${i}: player +${net}`);
    t.ok(close(now.bankroll - prev.bankroll, -net), `bet ${i}: house ${-net}`);
    t.ok(close(now.balance - prev.balance + (now.bankroll - prev.bankroll), 0), "player change + house change = 0");
    t.equal(out.balance, now.balance, "the payload's balance is the stored one");
    t.same([now.bets - prev.bets, now.storedBets - prev.storedBets], [1, 1], "one more bet counted and stored");
    t.ok(close(now.wagered - prev.wagered, wager), "wagered += wager");
    t.ok(close(now.expectedValue - prev.expectedValue, (wager - payout) / 2), "expected_value += the house edge of the bet: (wager − payout) / 2");
    prev = now;
  }
  const rls = await gql(resolverHub.url, "{ allCoinflipBets { totalCount } }", {}, p.header);
  t.same(rls.body.data, { allCoinflipBets: { totalCount: 20 } }, "the player sees their bets through the generated API");
  const stranger = await player("sequential-stranger", { casinoName: "sequential" });
  t.same((await gql(resolverHub.url, "{ allCoinflipBets { totalCount } }", {}, stranger.header)).body.data, { allCoinflipBets: { totalCount: 0 } }, "others do not");
});

t.test("makeCoinflipBet: 100 concurrent bets on one balance never overdraw it and the books reconcile", async (t) => {
  /*
   * Balance 50, 100 bets of 10 at once (a win pays 9). The coin decides how far the money goes:
   * in about 22% of runs (computed exactly by dynamic programming over the
   * balance) all 100 bets are accepted, otherwise the balance drops below 10
   * and every bet after that is refused. The next test makes a refusal all but
   * certain; here we check what must hold either way.
   */
  const { players, currency } = await bettingTable({ casino: "oneBalance", players: 1, balance: 50, bankroll: 100_000 });
  const p = players[0]!;
  const initial = await books(p, currency);
  const results = await Promise.all(Array.from({ length: 100 }, (_, i) => bet(p, { wager: 10, currency, side: i % 2 ? "HEADS" : "TAILS" })));
  const accepted = results.filter((r) => r.body.data?.makeCoinflipBet).map((r) => r.body.data!.makeCoinflipBet as { balance: number; bet: { net: number } });
  const refused = results.filter((r) => !r.body.data?.makeCoinflipBet);
  t.equal(accepted.length + refused.length, 100);
  t.ok(refused.every((r) => /^makeCoinflipBet: the wager is 10 CHIPS but the balance is \d/.test(firstError(r.body))), "every refusal is for insufficient balance (no deadlock, no constraint failure)");
  const final = await books(p, currency);
  if (refused.length > 0) t.ok(final.balance < 10, `refused only once the balance ran out (final ${final.balance})`);
  t.ok(accepted.every((a) => a.balance >= 0), "no payload shows a negative balance");

  // The balances form one chain from the initial to the final balance: each
  // accepted bet started where another ended, with at least its wager.
  const key = (x: number) => x.toFixed(6);
  const starts = accepted.map((a) => a.balance - a.bet.net);
  t.ok(starts.every((s) => s >= 10 - 1e-9), "no bet started with less than its wager");
  const left = [...starts, final.balance].map(key).sort();
  const right = [initial.balance, ...accepted.map((a) => a.balance)].map(key).sort();
  t.same(left, right, "no two bets spent the same balance");

  const sumNet = accepted.reduce((s, a) => s + a.bet.net, 0);
  t.ok(close(final.balance, initial.balance + sumNet), `final balance ${final.balance} = initial + Σnet`);
  t.ok(close(final.bankroll, initial.bankroll - sumNet), `final bankroll ${final.bankroll} = initial − Σnet`);
  t.same([final.bets, final.storedBets], [accepted.length, accepted.length], "bankroll.bets = stored bets = accepted bets");
  t.ok(close(final.wagered, 10 * accepted.length));
  t.ok(close(final.expectedValue, 0.5 * accepted.length), "expected_value: (10 − 9) / 2 per bet");
});

t.test("makeCoinflipBet: many players on one bankroll at once: no deadlock, refusals when balances run out", async (t) => {
  /*
   * 8 players with balance 10 each, 25 bets of 10 each, all 200 sent at once:
   * every bet locks a balance then the shared bankroll. A player survives 25
   * bets with probability 0.0751 (exact, by dynamic programming), so all 8 do
   * with probability 1.0e-9: at least one refusal is certain in practice.
   */
  const { players, currency } = await bettingTable({ casino: "sharedBankroll", players: 8, balance: 10, bankroll: 100_000 });
  const initialBankroll = (await books(players[0]!, currency)).bankroll;
  const results = await Promise.all(
    players.flatMap((p) => Array.from({ length: 25 }, (_, i) => bet(p, { wager: 10, currency, side: i % 2 ? "HEADS" : "TAILS" }).then((r) => ({ p, r })))),
  );
  const errors = results.filter(({ r }) => r.body.errors).map(({ r }) => firstError(r.body));
  t.ok(errors.length > 0, `${errors.length} bets refused`);
  t.ok(errors.every((m) => /^makeCoinflipBet: the wager is \d+ CHIPS but the balance is/.test(m)), "only for insufficient balance");
  let sumNet = 0;
  for (const p of players) {
    const mine = results.filter((x) => x.p === p && x.r.body.data?.makeCoinflipBet).map((x) => x.r.body.data!.makeCoinflipBet.bet.net as number);
    const net = mine.reduce((s, n) => s + n, 0);
    sumNet += net;
    const now = await books(p, currency);
    t.ok(now.balance >= 0 && close(now.balance, 10 + net), `player ${p.userId.slice(-4)}: ${mine.length} bets, balance ${now.balance}`);
    if (mine.length < 25) t.ok(now.balance < 10, "refused only once out of money");
  }
  const final = await books(players[0]!, currency);
  t.ok(close(final.bankroll, initialBankroll - sumNet), "bankroll = initial − Σnet over all players");
  t.equal(final.bets, results.length - errors.length, "bankroll.bets = accepted bets");
  t.equal(final.storedBets, final.bets, "= stored bets");
});
