/**
 * A reference point, not a target of `npm run bench`: Fastify 5 + grafserv's
 * Fastify adapter serving the same preset as the hub and the baseline, and
 * nothing else (no identity hook, no request ids, logging off, no Express
 * app, no response counting). `bench/ab.ts` compares it with the hub and the
 * baseline: what the hub adds to a request, and the ratio the framework change
 * alone gives on this machine.
 */
import "../lib/child-prelude.js";
import "../../dist/src/prelude.js";
import type { AddressInfo } from "node:net";
import { postgraphile } from "postgraphile";
import { grafserv } from "grafserv/fastify/v5";
import Fastify from "fastify";
// The hub's own building blocks, as src/start.ts assembles them (keep in step with it).
import { readConfig } from "../../dist/src/config.js";
import { endPool, openDatabase } from "../../dist/src/db/database.js";
import { openPools, setSuperuserPool } from "../../dist/src/db/pools.js";
import { createLogger, setLogger } from "../../dist/src/logger.js";
import { MAX_BODY, demoPreset } from "../lib/demo-preset.js";
import { serveBench } from "../lib/child.js";

const dataDir = process.env.BENCH_DATA_DIR;
if (!dataDir) throw new Error("BENCH_DATA_DIR is not set");

// The same environment as the hub target, read the same way (NODE_ENV, HUB_PLAYGROUND, HUB_INTROSPECTION…).
const config = { ...readConfig(), dataDir };
const log = createLogger({ level: config.logLevel, pretty: false });
setLogger(log);

// Attaches to the Postgres the hub target started (owned: false, so close() leaves it running).
const db = await openDatabase(config, log);
const pools = await openPools({ databaseUrl: db.databaseUrl, superuserDatabaseUrl: db.superuserUrl }, log);
setSuperuserPool(pools.superuser);

const pgl = postgraphile(demoPreset(config, pools, log));
await pgl.getSchemaResult();
const serv = pgl.createServ(grafserv);
const f = Fastify({ logger: false, bodyLimit: MAX_BODY });
await serv.addTo(f);
await f.listen({ port: 0, host: "127.0.0.1" });
const { port } = f.server.address() as AddressInfo;
serveBench({ url: `http://127.0.0.1:${port}`, superuserDatabaseUrl: db.superuserUrl }, async () => {
  await f.close();
  await pgl.release();
  await Promise.all([endPool(pools.graphql), endPool(pools.superuser)]);
  await db.close();
});
