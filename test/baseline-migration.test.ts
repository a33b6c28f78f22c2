/**
 * The core baseline (src/db/migrations/0029-baseline.sql) replaces core
 * migrations 0001 to 0029. A database migrated by them (their verbatim copies
 * in test/fixtures/pre-baseline-migrations, applied as the runner before the
 * baseline applied them: each in its own transaction with its record) and
 * holding players, balances, bankrolls, ledger rows, bets, sessions and API
 * keys upgrades with every row intact and serves; a fresh database gets the
 * same schema, as pg_dump --schema-only prints it; a database with only some
 * of 0001 to 0029 is refused.
 *
 * The cluster is one pg_dump can dump (test/helpers/own-cluster.ts): on a
 * Debian machine the server of pg_dump's major version, whatever the embedded
 * Postgres's is.
 */
import "./helpers/env.js";
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import pg from "pg";
import t, { type Test } from "tap";
import { startAndListen } from "@hubpkg/hub";
import { defaultPlugins, HubGameConfigPlugin } from "../dist/src/index.js";
import { createSession } from "../dist/src/auth/credentials.js";
import { migrate } from "../dist/src/db/migrate.js";
import { BASELINE_MIGRATION, PRE_BASELINE_MIGRATIONS } from "../dist/src/db/core-migrations.js";
import { migrationChecksum } from "../dist/src/db/migration-files.js";
import { createLogger } from "../dist/src/logger.js";
import { PG_DUMP, startOwnCluster } from "./helpers/own-cluster.js";
import { gql } from "./helpers/http.js";
import { ROOT } from "./helpers/process.js";

const OLD = path.join(ROOT, "test/fixtures/pre-baseline-migrations");
const silent = createLogger({ level: "silent", pretty: false });
const MIGRATION_TABLE = fs.readFileSync(path.join(ROOT, "src/db/queries/migration-table.sql"), "utf8");

/** Applies the first `count` old core migrations as the runner before the baseline did. */
async function applyOldMigrations(db: pg.Pool, count = PRE_BASELINE_MIGRATIONS.length): Promise<void> {
  const files = fs.readdirSync(OLD).filter((f) => f.endsWith(".sql")).sort();
  await db.query(MIGRATION_TABLE);
  for (const file of files.slice(0, count)) {
    const sql = fs.readFileSync(path.join(OLD, file), "utf8");
    const client = await db.connect();
    try {
      await client.query("begin");
      await client.query(sql);
      await client.query("insert into hub_secret.migration (kind, name, checksum) values ('core', $1, $2)", [file.slice(0, -4), migrationChecksum(sql)]);
      await client.query("commit");
    } finally {
      client.release();
    }
  }
}

interface Player {
  userId: string;
  token: string;
}

/** Casino, currency, experience, bankroll and three players with sessions, balances and bets, through the old schema's own functions. */
async function fillOldDatabase(t: Test, db: pg.Pool): Promise<{ casinoId: string; experienceId: string; players: Player[] }> {
  const one = async <T extends pg.QueryResultRow>(sql: string, values: unknown[]) => (await db.query<T>(sql, values)).rows[0]!;
  const casinoId = (await one<{ id: string }>("insert into hub.casino (name, base_url) values ('upgrade', 'https://casino.example') returning id", [])).id;
  await db.query("insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale) values ('BTC', $1, 'bits', 100)", [casinoId]);
  const experienceId = (await one<{ id: string }>("insert into hub.experience (casino_id, name) values ($1, 'upgrade-experience') returning id", [casinoId])).id;
  await db.query("select hub_hidden.ensure_bankroll($1, 'BTC', 100000000, 'opening bankroll', 'test:upgrade')", [casinoId]);
  await db.query("select hub_hidden.adjust_bankroll($1, 'BTC', 5000, 'test:upgrade', 'top-up')", [casinoId]);
  await db.query("insert into hub.api_key (key_digest) values ($1)", [createHash("sha256").update("upgrade-api-key").digest()]);
  const players: Player[] = [];
  for (let i = 0; i < 3; i++) {
    const userId = (await one<{ id: string }>("insert into hub.user (casino_id, uname) values ($1, $2) returning id", [casinoId, `upgrade-${i}`])).id;
    const { token } = await createSession(db, { userId, casinoId, experienceId });
    players.push({ userId, token });
    const args = [userId, casinoId, experienceId];
    await db.query("select hub_hidden.credit_balance($1, $2, $3, 'BTC', 100000, 'test:upgrade', 'deposit')", args);
    await db.query("select hub_hidden.debit_balance($1, $2, $3, 'BTC', 1000, 'test:upgrade', 'withdrawal')", args);
    const chainId = (await one<{ id: string }>(
      "insert into hub.hash_chain (user_id, casino_id, experience_id, max_iteration, current_iteration) values ($1, $2, $3, 1000, 1000) returning id",
      args,
    )).id;
    await db.query("insert into hub.hash (hash_chain_id, kind, digest, iteration) values ($1, 'TERMINAL', $2, 1000)", [chainId, randomBytes(32)]);
    for (let n = 0; n < 4; n++) {
      const won = (n + i) % 2 === 0;
      const { rows } = await db.query<{ status: string }>(
        `select status from hub_hidden.settle_outcome_bet($1, $2, $3, 'BTC', null, 100, $4, 198, -1, 'test:upgrade', 'outcome bet',
           $5, $6, $7, $8, 'GENERAL', $9, $10, '{1,1}', '{0.98,-1}', null)`,
        [...args, won ? 198 : 0, chainId, 999 - n, randomBytes(32), `seed-${n}`, won ? 0.98 : -1, won ? 0 : 1],
      );
      t.equal(rows[0]!.status, "settled", `old schema: outcome bet ${n} of player ${i} settled`);
    }
    const keyed = await db.query<{ status: string }>(
      `select status from hub_hidden.settle_bet_once($1, 'key-1', 'dbSettleBet', 'fp', $2, $3, $4, 'BTC', null, 50, 0, 100, -0.5, 'test:upgrade', 'keyed bet', '{"ok": true}')`,
      [`user:${userId}`, ...args],
    );
    t.equal(keyed.rows[0]!.status, "settled", `old schema: a keyed bet of player ${i} settled`);
  }
  await db.query(
    "insert into hub.deposit (casino_id, mp_transfer_id, user_id, experience_id, currency_key, amount) values ($1, 'transfer-1', $2, $3, 'BTC', 500)",
    [casinoId, players[0]!.userId, experienceId],
  );
  await db.query(
    "insert into hub.chat_message (casino_id, experience_id, user_id, type, client_id, body) values ($1, $2, $3, 'user', gen_random_uuid(), 'hello')",
    [casinoId, experienceId, players[1]!.userId],
  );
  return { casinoId, experienceId, players };
}

/** Every row of every table of the hub's schemas but the migration records, as text, per table. */
async function allRows(db: pg.Pool): Promise<Record<string, string[]>> {
  const { rows: tables } = await db.query<{ name: string }>(
    `select format('%I.%I', n.nspname, c.relname) as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where c.relkind = 'r' and n.nspname in ('hub', 'hub_hidden', 'hub_secret') and (n.nspname, c.relname) <> ('hub_secret', 'migration')
      order by 1`,
  );
  const result: Record<string, string[]> = {};
  for (const { name } of tables) {
    const { rows } = await db.query<{ row: string }>(`select to_jsonb(t)::text as row from ${name} t order by 1`);
    result[name] = rows.map((r) => r.row);
  }
  return result;
}

function schemaDump(url: string): string {
  const dump = execFileSync(PG_DUMP, ["--schema-only", url], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  // pg_dump 15.14 and later fence the dump with a random key; nothing else differs between two runs.
  return dump.replace(/^\\(un)?restrict \S+$/gm, "\\$1restrict KEY");
}

const plugins = [...defaultPlugins, HubGameConfigPlugin({ outcomeBetConfigs: { GENERAL: { houseEdge: 0.01, saveOutcomes: true } }, hashChainLength: 1000 })];
const BALANCE = '{ hubCurrentUser { hubBalanceByCurrency(currency: "BTC") { amount } } }';
const BET = "mutation($input: HubMakeOutcomeBetInput!) { hubMakeOutcomeBet(input: $input) { result { __typename } } }";

const cluster = await startOwnCluster(t, "hub-baseline-");
const admin = new pg.Pool({ connectionString: cluster.url("postgres"), max: 1 });
// The root's teardowns run in order: the cluster may stop before this pool ends.
admin.on("error", () => undefined);
t.teardown(() => admin.end());

t.test("a database of the old core migrations upgrades to the baseline with every row intact, serves, and has a fresh database's schema", async (t) => {
  await admin.query("create database upgraded");
  await admin.query("create database fresh");
  const db = new pg.Pool({ connectionString: cluster.url("upgraded"), max: 2 });
  t.teardown(() => db.end());

  await applyOldMigrations(db);
  const { casinoId, players } = await fillOldDatabase(t, db);
  const before = await allRows(db);
  for (const table of ["hub.balance", "hub.bankroll", "hub.ledger", "hub.outcome_bet", "hub.hash", "hub.session", "hub.api_key", "hub_hidden.idempotency_key"]) {
    t.ok(before[table]!.length > 0, `${table} has rows before the upgrade (${before[table]!.length})`);
  }

  const { applied } = await migrate(db, { log: silent });
  t.notOk(applied.includes(BASELINE_MIGRATION), "the baseline is not run on a database of 0001 to 0029");
  const records = (await db.query<{ name: string; checksum: string }>("select name, checksum from hub_secret.migration where kind = 'core' order by name")).rows;
  const baselineSql = fs.readFileSync(path.join(ROOT, "src/db/migrations", `${BASELINE_MIGRATION}.sql`), "utf8");
  t.same(records.find((r) => r.name === BASELINE_MIGRATION)?.checksum, migrationChecksum(baselineSql), "the baseline is recorded as applied, with its checksum");
  t.same(records.filter((r) => PRE_BASELINE_MIGRATIONS.includes(r.name)).length, 29, "the old records stay");

  const after = await allRows(db);
  for (const table of ["hub.balance", "hub.bankroll", "hub.ledger", "hub.outcome_bet"]) t.same(after[table], before[table], `${table}: every row as before`);
  t.same(after, before, "every row of every table as before");
  t.same((await migrate(db, { log: silent })).applied, [], "a second start applies nothing");

  // A fresh database: the baseline runs, and the schema is the upgraded one's.
  const fresh = new pg.Pool({ connectionString: cluster.url("fresh"), max: 1 });
  t.teardown(() => fresh.end());
  t.ok((await migrate(fresh, { log: silent })).applied.includes(BASELINE_MIGRATION), "a fresh database runs the baseline");
  const freshDump = schemaDump(cluster.url("fresh"));
  t.match(freshDump, /CREATE FUNCTION hub_hidden\.settle_outcome_bets_once/, "the dump has the schema");
  t.equal(freshDump, schemaDump(cluster.url("upgraded")), "pg_dump --schema-only: a fresh database and an upgraded one are equal");
  const seed = "select c.name, c.is_playground, u.key, u.display_unit_name, u.display_unit_scale from hub.casino c join hub.currency u on u.casino_id = c.id where c.is_playground";
  t.same((await fresh.query(seed)).rows, (await db.query(seed)).rows, "the playground casino and its currency");
  const counter = "select last_seq, pruned_through from hub_hidden.live_alert_counter";
  t.same((await fresh.query(counter)).rows, [{ last_seq: "0", pruned_through: "0" }], "the alert counter row");

  // The hub serves the upgraded database: balances read over GraphQL, a new chain, a bet.
  const hub = await startAndListen({ port: 0, logLevel: "silent", handleSignals: false, plugins, databaseUrl: cluster.url("upgraded"), superuserDatabaseUrl: cluster.url("upgraded") });
  t.teardown(() => hub.stop());
  for (const p of players) {
    const header = { authorization: `session:${p.token}` };
    const amount = (await gql(hub.url, BALANCE, {}, header)).body.data?.hubCurrentUser.hubBalanceByCurrency.amount;
    const stored = (await db.query<{ amount: number }>("select amount from hub.balance where user_id = $1", [p.userId])).rows[0]!.amount;
    t.equal(amount, stored, "the balance over GraphQL is the stored one");
  }
  const header = { authorization: `session:${players[0]!.token}` };
  const chain = await gql(hub.url, "mutation { hubCreateHashChain { hashChain { id } } }", {}, header);
  const hashChainId = chain.body.data!.hubCreateHashChain.hashChain.id as string;
  const bet = await gql(hub.url, BET, { input: { kind: "GENERAL", wager: 100, currency: "BTC", hashChainId, clientSeed: "after", outcomes: [{ weight: 1, profit: 0.98 }, { weight: 1, profit: -1 }] } }, header);
  t.equal(bet.body.data?.hubMakeOutcomeBet.result.__typename, "HubMakeOutcomeBetSuccess", "a bet is taken after the upgrade");
  t.equal((await db.query("select 1 from hub.outcome_bet where casino_id = $1", [casinoId])).rowCount, 13, "12 old bets and the new one");
});

t.test("a database with only some of the old core migrations is refused, naming what is missing, and left as it was", async (t) => {
  await admin.query("create database partial");
  const db = new pg.Pool({ connectionString: cluster.url("partial"), max: 1 });
  t.teardown(() => db.end());
  // Through 0016: before the whole-amount constraints, so a fractional balance could be stored.
  await applyOldMigrations(db, 16);
  const casinoId = (await db.query<{ id: string }>("insert into hub.casino (name) values ('legacy') returning id")).rows[0]!.id;
  await db.query("insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale) values ('OLD', $1, 'old', 1)", [casinoId]);
  const experienceId = (await db.query<{ id: string }>("insert into hub.experience (casino_id, name) values ($1, 'legacy') returning id", [casinoId])).rows[0]!.id;
  const userId = (await db.query<{ id: string }>("insert into hub.user (casino_id, uname) values ($1, 'legacy') returning id", [casinoId])).rows[0]!.id;
  await db.query("insert into hub.balance (user_id, casino_id, experience_id, currency_key, amount) values ($1, $2, $3, 'OLD', 10.25)", [userId, casinoId, experienceId]);

  await t.rejects(migrate(db, { log: silent }), {
    code: "HUB_MIGRATION_PRE_BASELINE",
    message: /16 of the 29 core migrations that 0029-baseline replaces \(missing: 0017-exact-money, 0018-chat, .*, 0029-instances\).*Start it once with a hub from before the baseline/s,
  });
  const names = (await db.query<{ name: string }>("select name from hub_secret.migration order by name")).rows.map((r) => r.name);
  t.same(names, PRE_BASELINE_MIGRATIONS.slice(0, 16), "nothing recorded");
  t.same((await db.query("select amount from hub.balance where user_id = $1", [userId])).rows, [{ amount: 10.25 }], "nothing converted");
});
