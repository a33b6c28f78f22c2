import "./helpers/env.js";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import pg from "pg";
import t from "tap";
import { startAndListen } from "@hubpkg/hub";
import { referenceMigrationsPath } from "@hubpkg/hub/plugins";
import { CORE_MIGRATIONS_DIR, PRE_BASELINE_MIGRATIONS, readCoreMigrations } from "../dist/src/db/core-migrations.js";
import { readMigrationFolder } from "../dist/src/db/migration-files.js";
import { coreChecksum } from "../dist/src/test-kit/cluster.js";
import { ROOT } from "./helpers/process.js";
import { tmpDir, writeFiles } from "./helpers/tmp.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";

const base = { port: 0, logLevel: "silent" as const, handleSignals: false };

/** A database of the test kit's shared cluster (a template copy, dropped at the end) as start options: no initdb of its own. */
async function sharedDatabase(t: { teardown(fn: () => unknown): void }) {
  const db = await sharedClusterDatabase(t);
  return { databaseUrl: db.DATABASE_URL, superuserDatabaseUrl: db.SUPERUSER_DATABASE_URL };
}

async function query<T extends pg.QueryResultRow>(url: string, sql: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

t.test("user migrations: numeric order, once each, concurrent starts, edits reported", async (t) => {
  const dataDir = tmpDir(t);
  const db = await sharedDatabase(t);
  const dir = writeFiles(path.join(dataDir, "migrations"), {
    // Lexically "10-" sorts before "2-": the numeric prefix decides.
    "10-third.sql": "insert into app.log (step) values ('third');",
    "2-second.sql": "insert into app.log (step) values ('second');",
    "001-first.sql": "create schema app; create table app.log (n serial primary key, step text not null);",
    "README.md": "not a migration",
  });

  // Two hubs starting at the same moment on one database: each migration once.
  const [a, b] = await Promise.all([
    startAndListen({ ...base, ...db, userDatabaseMigrationsPath: dir }),
    startAndListen({ ...base, ...db, userDatabaseMigrationsPath: dir }),
  ]);
  t.teardown(async () => {
    await b.stop();
    await a.stop();
  });
  const rows = await query<{ step: string }>(a.superuserDatabaseUrl, "select step from app.log order by n");
  t.same(rows.map((r) => r.step), ["second", "third"], "applied once each, in numeric order");
  const recorded = await query<{ name: string }>(a.superuserDatabaseUrl, "select name from hub_secret.migration where kind = 'user' order by applied_at, name");
  t.same(recorded.map((r) => r.name).sort(), ["001-first.sql", "10-third.sql", "2-second.sql"]);
  await b.stop();
  await a.stop();

  // Restart: nothing re-runs.
  const c = await startAndListen({ ...base, ...db, userDatabaseMigrationsPath: dir });
  t.same((await query(c.superuserDatabaseUrl, "select step from app.log")).length, 2, "a restart applies nothing again");
  await c.stop();

  // An applied file that was edited is reported, not silently re-run.
  fs.writeFileSync(path.join(dir, "2-second.sql"), "insert into app.log (step) values ('edited');");
  await t.rejects(startAndListen({ ...base, ...db, userDatabaseMigrationsPath: dir }), {
    code: "HUB_MIGRATION_CHANGED",
    message: /"2-second\.sql".*edited after it was applied/,
  });
});

t.test("an edit declaring the text it replaces (hub:replaces-checksum) is accepted by a database that applied that text, and only by it", async (t) => {
  const dataDir = tmpDir(t);
  const db = await sharedDatabase(t);
  const v1 = "-- version 1\ncreate table public.replaced (id int);\n";
  const dir = writeFiles(path.join(dataDir, "migrations"), { "001-replaced.sql": v1 });
  const checksum = (text: string) => createHash("sha256").update(text).digest("hex");
  const recorded = async (url: string) =>
    (await query<{ checksum: string }>(url, "select checksum from hub_secret.migration where kind = 'user' and name = '001-replaced.sql'"))[0]?.checksum;
  const first = await startAndListen({ ...base, ...db, userDatabaseMigrationsPath: dir });
  t.equal(await recorded(first.superuserDatabaseUrl), checksum(v1));
  await first.stop();

  // An edit without the line: refused, and the refusal prints the line that would declare it.
  const v2 = "-- version 2, reworded\ncreate table public.replaced (id int);\n";
  fs.writeFileSync(path.join(dir, "001-replaced.sql"), v2);
  await t.rejects(startAndListen({ ...base, ...db, userDatabaseMigrationsPath: dir }), {
    code: "HUB_MIGRATION_CHANGED",
    message: new RegExp(`"-- hub:replaces-checksum ${checksum(v1)}"`),
  });

  // With it: the database records the new text and starts; nothing re-runs (the table would exist twice).
  const v2declared = `${v2}-- hub:replaces-checksum ${checksum(v1)}\n`;
  fs.writeFileSync(path.join(dir, "001-replaced.sql"), v2declared);
  const second = await startAndListen({ ...base, ...db, userDatabaseMigrationsPath: dir });
  t.equal(await recorded(second.superuserDatabaseUrl), checksum(v2declared), "the new checksum is recorded");
  await second.stop();
  const again = await startAndListen({ ...base, ...db, userDatabaseMigrationsPath: dir });
  await again.stop();

  // A line naming a text this database never applied changes nothing: it now has v2declared's.
  fs.writeFileSync(path.join(dir, "001-replaced.sql"), `-- version 3\ncreate table public.replaced (id int);\n-- hub:replaces-checksum ${checksum(v1)}\n`);
  await t.rejects(startAndListen({ ...base, ...db, userDatabaseMigrationsPath: dir }), { code: "HUB_MIGRATION_CHANGED" });

  // A line that names no checksum is refused rather than ignored.
  fs.writeFileSync(path.join(dir, "001-replaced.sql"), `${v2}-- hub:replaces-checksum ${checksum(v1).slice(0, 40)}\n`);
  await t.rejects(startAndListen({ ...base, ...db, userDatabaseMigrationsPath: dir }), {
    code: "HUB_MIGRATION_FAILED",
    message: /"-- hub:replaces-checksum [0-9a-f]{40}" does not name a checksum: expected .*64 lowercase hex digits/,
  });
});

// Reference migrations changed after release, each declaring the text it replaces (hub:replaces-checksum).
for (const { file, original, change } of [
  { file: "002-coinflip.sql", original: "428d44d54766e96ff35811419709a0a20c1d820822b00f790155d6b1cad2d876", change: "reworded since" },
  { file: "006-whole-amounts.sql", original: "11d87a7b89c90e0da8b04f8cf63129730a9192886994ca61699e9baab792752e", change: "which names offending rows since" },
]) {
  t.test(`the reference ${file}, ${change}, starts a database that applied its first text`, async (t) => {
    const db = await sharedDatabase(t);
    const first = await startAndListen({ ...base, ...db, userDatabaseMigrationsPath: referenceMigrationsPath });
    // As a database migrated before the change recorded it.
    await query(first.superuserDatabaseUrl, "update hub_secret.migration set checksum = $1 where kind = 'user' and name = $2", [original, file]);
    await first.stop();
    const second = await startAndListen({ ...base, ...db, userDatabaseMigrationsPath: referenceMigrationsPath });
    t.teardown(() => second.stop());
    const now = createHash("sha256").update(fs.readFileSync(path.join(referenceMigrationsPath, file))).digest("hex");
    const rows = await query<{ checksum: string }>(second.superuserDatabaseUrl, "select checksum from hub_secret.migration where kind = 'user' and name = $1", [file]);
    t.same(rows, [{ checksum: now }], "started, and recorded the current text");
    t.not(now, original);
  });
}

t.test("a failing migration stops start-up, names the file and leaves nothing behind", async (t) => {
  const dataDir = tmpDir(t);
  const db = await sharedDatabase(t);
  const dir = writeFiles(path.join(dataDir, "migrations"), {
    "001-ok.sql": "create table public.ok_table (id int);",
    "002-broken.sql": "create table public.half_done (id int);\ninsert into public.half_done values (1);\nselect * from no_such_table;",
  });
  await t.rejects(startAndListen({ ...base, ...db, userDatabaseMigrationsPath: dir }), {
    code: "HUB_MIGRATION_FAILED",
    message: /"002-broken\.sql".*line 3.*relation "no_such_table" does not exist/s,
  });
  // Fix the file and start: the first migration is not re-run, the fixed one applies.
  fs.writeFileSync(path.join(dir, "002-broken.sql"), "create table public.half_done (id int);");
  const hub = await startAndListen({ ...base, ...db, userDatabaseMigrationsPath: dir });
  t.teardown(() => hub.stop());
  const tables = await query<{ relname: string }>(hub.superuserDatabaseUrl, "select relname from pg_class where relname in ('ok_table', 'half_done') order by relname");
  t.same(tables.map((r) => r.relname), ["half_done", "ok_table"]);
  const halfDone = await query<{ n: number }>(hub.superuserDatabaseUrl, "select count(*)::int as n from public.half_done");
  t.equal(halfDone[0]!.n, 0, "the failed attempt's insert was rolled back");
});

t.test("ambiguous or unreadable migration folders stop start-up with the file name", async (t) => {
  const dataDir = tmpDir(t);
  const db = await sharedDatabase(t);
  const dup = writeFiles(path.join(dataDir, "dup"), { "001-a.sql": "select 1;", "1-b.sql": "select 1;" });
  await t.rejects(startAndListen({ ...base, ...db, userDatabaseMigrationsPath: dup }), {
    code: "HUB_MIGRATION_NAME",
    message: /"001-a\.sql" and "1-b\.sql".*share the numeric prefix 1/,
  });
  const syntax = writeFiles(path.join(dataDir, "syntax"), { "001-typo.sql": "create table public.ok (id int);\ncreate tabel public.typo (id int);" });
  await t.rejects(startAndListen({ ...base, ...db, userDatabaseMigrationsPath: syntax }), {
    code: "HUB_MIGRATION_FAILED",
    message: /"001-typo\.sql".*line 2.*syntax error at or near "tabel".*Nothing of it was applied/s,
  });
  // A name starting with a number must be a whole NNN-name.sql; one starting otherwise is skipped (next test).
  const misnamed = writeFiles(path.join(dataDir, "misnamed"), { "1create.sql": "select 1;" });
  await t.rejects(startAndListen({ ...base, ...db, userDatabaseMigrationsPath: misnamed }), {
    code: "HUB_MIGRATION_NAME",
    message: /"1create\.sql".*not named like 001-create-tables\.sql/,
  });
  const latin1 = writeFiles(path.join(dataDir, "latin1"), { "001-x.sql": Buffer.from([0x73, 0x65, 0x6c, 0xe9, 0x0a]) });
  await t.rejects(startAndListen({ ...base, ...db, userDatabaseMigrationsPath: latin1 }), {
    code: "HUB_MIGRATION_FAILED",
    message: /"001-x\.sql".*not valid UTF-8/,
  });
  await t.rejects(startAndListen({ ...base, ...db, userDatabaseMigrationsPath: path.join(dataDir, "missing") }), {
    code: "HUB_MIGRATION_NAME",
    message: /cannot be read/,
  });
});

t.test("a .sql file whose name does not start with a number is skipped, not applied and not a refusal", async (t) => {
  const dataDir = tmpDir(t);
  const db = await sharedDatabase(t);
  const dir = writeFiles(path.join(dataDir, "migrations"), {
    "001-app.sql": "create schema app; create table app.game (id int);",
    // Would fail if it ran: the template ships its disabled example this way.
    "skip-002-coinflip.sql": "this is not sql;",
    "create.sql": "create table app.never (id int);",
  });
  const hub = await startAndListen({ ...base, ...db, userDatabaseMigrationsPath: dir });
  t.teardown(() => hub.stop());
  const recorded = await query<{ name: string }>(hub.superuserDatabaseUrl, "select name from hub_secret.migration where kind = 'user' order by name");
  t.same(recorded.map((r) => r.name), ["001-app.sql"], "only the numbered file is a migration");
  t.same(await query(hub.superuserDatabaseUrl, "select 1 from pg_class where relname = 'never'"), [], "the unnumbered file did not run");
});

t.test("core migrations: the .sql files are what databases record, never edited once released, and ship in the package", async (t) => {
  // Every database migrated by this version holds these names and SHA-256 checksums in hub_secret.migration,
  // and test kits name their template by them: a change goes in a new file, never in one listed here.
  const released = JSON.parse(fs.readFileSync(path.join(ROOT, "test/fixtures/core-migration-checksums.json"), "utf8")) as {
    templateChecksum: string;
    migrations: { name: string; checksum: string }[];
    preBaseline: { migrations: { name: string; checksum: string }[] };
  };
  const core = await readCoreMigrations();
  t.same(
    core.map((m) => ({ name: m.name, checksum: m.checksum })),
    released.migrations,
    "the same names, in the same order, with the same checksums",
  );
  t.equal(await coreChecksum(), released.templateChecksum, "the test kit's template keeps its name");

  // The migrations the baseline replaced: the names the runner recognises, and the test copies
  // (test/fixtures/pre-baseline-migrations) are the texts those databases recorded, byte for byte.
  t.same(PRE_BASELINE_MIGRATIONS, released.preBaseline.migrations.map((m) => m.name), "the runner recognises the released names");
  const old = await readMigrationFolder(path.join(ROOT, "test/fixtures/pre-baseline-migrations"), "core", "the pre-baseline copies");
  t.same(old.map((m) => ({ name: m.name, checksum: m.checksum })), released.preBaseline.migrations, "the copies are the released texts");

  // What a hub records in the database is those same stamps, and a restart leaves them as they are.
  // A data dir of its own: what a hub records when it migrates a database from nothing.
  const dataDir = tmpDir(t);
  const stamps = (url: string) =>
    query<{ name: string; checksum: string; applied_at: Date }>(url, "select name, checksum, applied_at from hub_secret.migration where kind = 'core' order by name");
  const first = await startAndListen({ ...base, dataDir });
  const recorded = await stamps(first.superuserDatabaseUrl);
  await first.stop();
  t.same(
    recorded.map(({ name, checksum }) => ({ name, checksum })),
    released.migrations,
    "the database holds the released stamps",
  );
  const second = await startAndListen({ ...base, dataDir });
  t.teardown(() => second.stop());
  t.same(await stamps(second.superuserDatabaseUrl), recorded, "a restart re-runs and re-stamps nothing");

  // The package ships the files the compiled code reads (npm pack lists what `files` includes).
  const packed = JSON.parse(execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: ROOT, encoding: "utf8" })) as [
    { files: { path: string }[] },
  ];
  const shipped = new Set(packed[0].files.map((f) => f.path));
  for (const m of core) t.ok(shipped.has(`src/db/migrations/${m.name}.sql`), `${m.name}.sql is in the package`);
  t.equal(CORE_MIGRATIONS_DIR, path.join(ROOT, "src/db/migrations/"), "the compiled code reads the shipped folder");
});
