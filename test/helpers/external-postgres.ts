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
import { isAlive, readPostmasterPid, restartPostmaster, startEmbeddedPostgres, stopPostmaster } from "../../dist/src/db/embedded.js";
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

export { isAlive, readPostmasterPid };

/** SIGINT the postmaster of this cluster (if running) and wait until it is gone. */
export async function stopPostmasterOf(clusterDir: string): Promise<void> {
  const info = readPostmasterPid(clusterDir);
  if (info) await stopPostmaster(info.pid, createLogger({ level: "warn", pretty: false }));
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
      await restartPostmaster(dataDir, port);
    },
  };
}
