/**
 * Through a transaction pooler (docs/deployment.md, "Through a transaction
 * pooler"): a real PgBouncer 1.18 in transaction mode, configured with the
 * ini block of that page, in front of the test kit's cluster; two instances
 * with DATABASE_URL and SUPERUSER_DATABASE_URL through it and
 * DIRECT_DATABASE_URL straight to Postgres. Bets (hubMakeOutcomeBet and a
 * reference game), a live alert and a revocation across the two instances,
 * a deposit pulled from a casino and a withdrawal sent to it (sim-casino).
 * PgBouncer's pool is smaller than the instances' pools, so their
 * transactions are spread over shared server connections, where a named
 * prepared statement or a session setting would break.
 */
import "./helpers/env.js";
import fs from "node:fs";
import path from "node:path";
import t from "tap";
import pg from "pg";
import { startAndListen, type RunningServer } from "@hubpkg/hub";
import { defaultPlugins, HubGameConfigPlugin } from "../dist/src/index.js";
import { CoinflipBetPlugin } from "../dist/plugins/coinflip-bet.js";
import { gql } from "./helpers/http.js";
import { makeOperator, makePlayer } from "./helpers/credentials.js";
import { createPlayer } from "../dist/src/exports/test.js";
import { createSession } from "../dist/src/auth/credentials.js";
import { startSimCasino } from "./helpers/sim-casino.js";
import { addSimCasino, FAST_TRANSFERS, ok, reconcile, waitFor } from "./helpers/transfers.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
import { iniBlockAfter, PGBOUNCER, startPgBouncer } from "./helpers/pgbouncer.js";
import { feed, wsClient } from "./helpers/ws.js";
import { tmpDir } from "./helpers/tmp.js";
import { ROOT } from "./helpers/process.js";

if (!fs.existsSync(PGBOUNCER)) throw new Error(`${PGBOUNCER} is missing: apt-get install pgbouncer (.ci/run does), or set PGBOUNCER_PATH`);

const MIGRATIONS = path.join(ROOT, "plugins/migrations");
const credentialsOf = (url: string) => {
  const u = new URL(url);
  return { user: decodeURIComponent(u.username), password: decodeURIComponent(u.password), database: u.pathname.slice(1), port: Number(u.port) };
};

t.test("a pooler without DIRECT_DATABASE_URL is refused, naming it", async (t) => {
  const database = await sharedClusterDatabase(t);
  const base = { port: 0, handleSignals: false, logLevel: "silent" as const, dataDir: tmpDir(t) };
  await t.rejects(startAndListen({ ...base, databaseUrl: database.DATABASE_URL, superuserDatabaseUrl: database.SUPERUSER_DATABASE_URL, databasePooler: "transaction" }), {
    code: "HUB_OPTION_INVALID",
    message: /"directDatabaseUrl" is invalid: received undefined, expected a postgres:\/\/ URL whenever "databasePooler" is transaction: .*LISTEN, migrations/,
  });
  await t.rejects(startAndListen({ ...base, databasePooler: "transaction" }), { code: "HUB_OPTION_INVALID", message: /"databasePooler" is invalid: received "transaction", expected none with the embedded database/ });
  await t.rejects(startAndListen({ ...base, databasePooler: "session" as never }), { code: "HUB_OPTION_INVALID", message: /expected one of none, transaction/ });
});

t.test("two instances behind PgBouncer in transaction mode: bets, a reference game, live alerts, revocations, a deposit and a withdrawal", async (t) => {
  const database = await sharedClusterDatabase(t);
  const su = credentialsOf(database.SUPERUSER_DATABASE_URL);
  const auth = credentialsOf(database.DATABASE_URL);
  const bouncer = await startPgBouncer(t, { ini: iniBlockAfter("docs/deployment.md", "<!-- pgbouncer-ini"), postgresPort: su.port, users: [su, auth] });
  const pooled = {
    databaseUrl: bouncer.urlFor(auth.user, auth.password, auth.database),
    superuserDatabaseUrl: bouncer.urlFor(su.user, su.password, su.database),
    directDatabaseUrl: database.SUPERUSER_DATABASE_URL,
    databasePooler: "transaction" as const,
  };
  const options = {
    ...pooled,
    port: 0,
    handleSignals: false,
    logLevel: "warn" as const,
    // Revocations must reach the other instance by NOTIFY, not by its cache expiring.
    identityCacheTtlMs: 600_000,
    transfers: FAST_TRANSFERS,
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: MIGRATIONS,
    plugins: [...defaultPlugins, CoinflipBetPlugin, HubGameConfigPlugin({ outcomeBetConfigs: { GENERAL: { houseEdge: 0.01, saveOutcomes: false } }, hashChainLength: 1000 })],
  };
  // Started together: the migrations' lock, on the direct connection, lets one apply them.
  const [a, b] = (await Promise.all([startAndListen(options), startAndListen(options)])) as [RunningServer, RunningServer];
  t.teardown(async () => {
    await b.stop();
    await a.stop();
  });

  const db = new pg.Pool({ connectionString: database.SUPERUSER_DATABASE_URL, max: 2 });
  t.teardown(() => db.end());
  const players = await Promise.all(Array.from({ length: 6 }, (_, i) => makePlayer(database.SUPERUSER_DATABASE_URL, `pooled-${i}-${Date.now()}`, { casinoName: "pooled" })));
  const casinoId = players[0]!.casinoId;
  await db.query("insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale) values ('CHIPS', $1, 'chips', 1)", [casinoId]);
  await db.query("insert into hub.bankroll (casino_id, currency_key, amount) values ($1, 'CHIPS', 100000000)", [casinoId]);
  for (const p of players) {
    await db.query("insert into hub.balance (user_id, casino_id, experience_id, currency_key, amount) values ($1, $2, $3, 'CHIPS', 1000000)", [p.userId, p.casinoId, p.experienceId]);
  }
  const balanceOf = async (userId: string) => Number((await db.query("select amount from hub.balance where user_id = $1 and currency_key = 'CHIPS'", [userId])).rows[0].amount);

  // A live alert published by a bet on a, received by a subscription on b.
  const watched = players[0]!;
  const ws = wsClient(b.url, { authorization: watched.header.authorization });
  t.teardown(() => ws.dispose());
  const alerts = feed(ws, "subscription { hubBalanceAlert { currencyKey } }");

  const chains = await Promise.all(
    players.map(async (p, i) => {
      const res = await gql([a, b][i % 2]!.url, "mutation { hubCreateHashChain { hashChain { id } } }", {}, p.header);
      t.notOk(res.body.errors, `hash chain for ${i}: ${JSON.stringify(res.body.errors)}`);
      return res.body.data!.hubCreateHashChain.hashChain.id as string;
    }),
  );
  const OUTCOME = "mutation($input: HubMakeOutcomeBetInput!) { hubMakeOutcomeBet(input: $input) { result { __typename ... on HubMakeOutcomeBetSuccess { bet { id } } } } }";
  const COINFLIP = "mutation($input: MakeCoinflipBetInput!) { makeCoinflipBet(input: $input) { bet { id net } } }";
  const before = await Promise.all(players.map((p) => balanceOf(p.userId)));
  // Several rounds of concurrent bets on both instances: more transactions than PgBouncer has server connections.
  const answers = [];
  for (let round = 0; round < 4; round++) {
    answers.push(
      ...(await Promise.all(
        players.flatMap((p, i) => [
          gql([a, b][(i + round) % 2]!.url, OUTCOME, { input: { kind: "GENERAL", wager: 10, currency: "CHIPS", hashChainId: chains[i], clientSeed: `r${round}`, outcomes: [{ weight: 1, profit: 0.98 }, { weight: 1, profit: -1 }] } }, p.header),
          gql([b, a][(i + round) % 2]!.url, COINFLIP, { input: { wager: 10, currency: "CHIPS", side: "HEADS" } }, p.header),
          gql([a, b][round % 2]!.url, "{ hubCurrentUser { id } }", {}, p.header),
        ]),
      )),
    );
  }
  const failed = answers.filter((r) => r.body.errors);
  t.same(failed.map((r) => r.body.errors), [], "every request answered without error");
  const outcomeBets = answers.filter((r) => r.body.data?.hubMakeOutcomeBet?.result.__typename === "HubMakeOutcomeBetSuccess");
  const flips = answers.filter((r) => r.body.data?.makeCoinflipBet?.bet.id);
  t.equal(outcomeBets.length, 24, "24 outcome bets taken");
  t.equal(flips.length, 24, "24 coin flips taken");
  const after = await Promise.all(players.map((p) => balanceOf(p.userId)));
  const recorded = Number((await db.query("select count(*) as n from hub.outcome_bet where user_id = any($1)", [players.map((p) => p.userId)])).rows[0].n);
  t.ok(recorded >= 24, `the outcome bets are in hub.outcome_bet (${recorded})`);
  t.notSame(after, before, "balances moved");
  await alerts.waitFor(1);
  t.same(alerts.events[0], { data: { hubBalanceAlert: { currencyKey: "CHIPS" } } }, "b's subscriber heard of a balance change made on a");

  // A session revoked through a is refused by b, whose cache would otherwise keep it for ten minutes.
  const revoked = players[1]!;
  const me = "{ hubCurrentUser { id } }";
  t.same((await gql(b.url, me, {}, revoked.header)).body.data, { hubCurrentUser: { id: revoked.userId } }, "b knows the session (and caches it)");
  const logout = await gql(a.url, "mutation { hubLogout { success } }", {}, revoked.header);
  t.notOk(logout.body.errors, `logged out on a: ${JSON.stringify(logout.body)}`);
  let seen: unknown;
  for (let i = 0; i < 500; i++) {
    seen = (await gql(b.url, me, {}, revoked.header)).body.data;
    if ((seen as { hubCurrentUser: unknown }).hubCurrentUser === null) break;
  }
  t.same(seen, { hubCurrentUser: null }, "b refuses it: the revocation's NOTIFY reached b's LISTEN on the direct connection");

  // Deposits and withdrawals with a casino: both instances' transfer workers share the outbox through the pooler.
  const casino = await startSimCasino();
  t.teardown(() => casino.close());
  const operator = (await makeOperator(database.SUPERUSER_DATABASE_URL)).header;
  const simCasinoId = await addSimCasino(a.url, operator, casino, { poll: true });
  const alice = await createPlayer(db, { casinoId: simCasinoId, uname: "alice" });
  const experienceId = (await db.query<{ id: string }>("insert into hub.experience (casino_id, name) values ($1, 'main') returning id", [simCasinoId])).rows[0]!.id;
  const aliceHeader = { authorization: `session:${(await createSession(db, { userId: alice.id, casinoId: simCasinoId, experienceId })).token}` };
  casino.fund("alice", "BTC", 1000);
  casino.deposit("alice", "BTC", 700);
  const BTC = '{ hubCurrentUser { hubBalanceByCurrency(currency: "BTC") { amount } } }';
  const btcOn = async (url: string) => (await ok(url, aliceHeader, BTC)).hubCurrentUser.hubBalanceByCurrency?.amount ?? 0;
  await waitFor("the casino's deposit pulled and credited", 20_000, async () => (await btcOn(b.url)) === 700);
  const WITHDRAW = 'mutation { hubWithdraw(input: { currencyKey: "BTC", amount: 300 }) { withdrawalRequest { id } } }';
  await ok(b.url, aliceHeader, WITHDRAW);
  await waitFor("the withdrawal sent and completed", 20_000, async () => casino.balance("alice", "BTC") === 600);
  t.equal(await btcOn(a.url), 400, "deposit 700, withdrawal 300: 400 left, seen on the other instance");
  const books = await waitFor("the books settled", 20_000, async () => {
    const r = await reconcile(database.SUPERUSER_DATABASE_URL, simCasinoId, casino);
    return r.pending === 0 ? r : undefined;
  });
  t.same(books.problems, [], "the casino's ledger and the hub's agree");

  // Straight on Postgres, each instance keeps its LISTEN connection; the migrations' connection is closed.
  const { rows } = await db.query<{ name: string; n: number }>(
    "select application_name as name, count(*)::int as n from pg_stat_activity where datname = current_database() and application_name in ('hub:live-notifications', 'hub:migrate') group by 1",
  );
  t.same(Object.fromEntries(rows.map((r) => [r.name, r.n])), { "hub:live-notifications": 2 }, "two LISTEN connections, one per instance, and no migration connection left");
});
