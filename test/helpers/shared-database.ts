import { acquireCluster, createDatabase, dropDatabase } from "../../dist/src/test-kit/cluster.js";
import { createLogger } from "../../dist/src/logger.js";

/**
 * A throw-away database on the test kit's shared cluster (a copy of its
 * migrated template: no initdb, no migrations), for a test that runs
 * `node dist/server.js` itself: give the server DATABASE_URL and
 * SUPERUSER_DATABASE_URL. Dropped when the test ends, passed or failed.
 */
export async function sharedClusterDatabase(t: { teardown(fn: () => unknown): void }): Promise<{ DATABASE_URL: string; SUPERUSER_DATABASE_URL: string }> {
  const cluster = await acquireCluster({ log: createLogger({ level: "warn", pretty: false }) });
  const name = await createDatabase(cluster);
  t.teardown(() => dropDatabase(cluster, name));
  return { DATABASE_URL: cluster.authenticatorUrlFor(name), SUPERUSER_DATABASE_URL: cluster.superuserUrlFor(name) };
}
