/**
 * What every bench target but the hub does first: read the environment the
 * hub target reads (NODE_ENV, HUB_PLAYGROUND, HUB_INTROSPECTION…), attach to the
 * Postgres the hub target started in BENCH_DATA_DIR (not owned, so close()
 * leaves it running), open the hub's pools and build the demo preset.
 */
import { postgraphile } from "postgraphile";
import { readConfig } from "../../dist/src/config.js";
import { endPool, openDatabase } from "../../dist/src/db/database.js";
import { openPools } from "../../dist/src/db/pools.js";
import { createLogger } from "../../dist/src/logger.js";
import { createServerState } from "../../dist/src/create-server-state.js";
import { createIdentityResolver } from "../../dist/src/auth/resolver.js";
import { serverStarted, serverStopped } from "../../dist/src/exports/current-server.js";
import { demoPreset } from "./demo-preset.js";

export async function attachToBenchDatabase(options: { graphqlPipeline?: boolean; plugins?: GraphileConfig.Plugin[] } = {}) {
  const dataDir = process.env.BENCH_DATA_DIR;
  if (!dataDir) throw new Error("BENCH_DATA_DIR is not set");
  const config = { ...readConfig(), dataDir };
  const log = createLogger({ level: config.logLevel, pretty: false });
  const db = await openDatabase(config, log);
  const pools = await openPools({ databaseUrl: db.databaseUrl, superuserDatabaseUrl: db.superuserUrl }, log, options.graphqlPipeline === undefined ? {} : { graphqlPipeline: options.graphqlPipeline });
  // A server's state, as a hub makes one once its pools are open: the façades (logger, superuserPool) follow it.
  const server = createServerState({ log, pools, resolver: createIdentityResolver(pools.credentials) });
  serverStarted(server);
  const preset = demoPreset(config, pools, log, server);
  const pgl = postgraphile(options.plugins?.length ? { extends: [preset], plugins: options.plugins } : preset);
  const { schema } = await pgl.getSchemaResult();
  /** Release the schema, the pools and the attachment (the Postgres keeps running). */
  const close = async () => {
    await pgl.release();
    serverStopped(server);
    await Promise.all([endPool(pools.graphql), endPool(pools.superuser), endPool(pools.credentials)]);
    await db.close();
  };
  return { config, log, db, pools, pgl, schema, close };
}
