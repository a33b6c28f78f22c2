/**
 * Target (b), the baseline: the original system's architecture. One Express 5
 * app does everything:
 *
 *   HTTP → Express 5
 *        → identity middleware (the hub's own cached resolver, same TTL)
 *        → the user's middleware and routes (the same bench configureApp)
 *        → PostGraphile through grafserv's Express adapter (grafserv/express/v4,
 *          which works unchanged with Express 5: it reads req.path, req.query,
 *          req.body and req.headers only)
 *
 * It serves the SAME preset (the hub's makePreset with the same inputs as
 * src/start.ts gives it: plugins, schemas, limits, statement timeout, error
 * masking), with the same pools, on the SAME database: it attaches to the
 * embedded Postgres the hub target started in BENCH_DATA_DIR. Only the HTTP
 * architecture differs. bench/run.ts checks that both print the same schema.
 *
 * As in any Express app, middleware added with app.use() before the GraphQL
 * handler runs for /graphql too (express.json() parses the GraphQL body, and
 * grafserv takes req.body). BASELINE_GRAPHQL_FIRST=1 mounts GraphQL before the
 * user's middleware instead, to show what that ordering is worth.
 */
import "../lib/child-prelude.js";
import "../../dist/src/bin/process-setup.js"; // the tuning node dist/server.js applies
import "../../dist/src/prelude.js";
import http from "node:http";
import type { AddressInfo } from "node:net";
import express, { type NextFunction, type Request, type Response } from "express";
import { grafserv } from "grafserv/express/v4";
import { lexicographicSortSchema, printSchema } from "graphql";
import fs from "node:fs";
// The hub's own building blocks, as src/start.ts assembles them (keep in step with it).
import { createIdentityResolver } from "../../dist/src/auth/resolver.js";
import { createApiKeyUsage } from "../../dist/src/auth/api-key-usage.js";
import { listenForCredentialChanges } from "../../dist/src/db/credential-events.js";
import type { Identity } from "../../dist/src/auth/identity.js";
import { benchConfigureApp } from "../lib/demo.js";
import { attachToBenchDatabase } from "../lib/attach.js";
import { serveBench } from "../lib/child.js";

const graphqlFirst = process.env.BASELINE_GRAPHQL_FIRST === "1";

// The stock @dataplan/pg adaptor, as the original: no pipelined transaction prologue (src/db/pipelined-adaptor.ts).
const { log, db, pools, pgl, schema, close } = await attachToBenchDatabase({ graphqlPipeline: false });
// bench/run.ts compares this with the hub's exportSchemaSDLPath: the same preset must give the same schema.
if (process.env.BENCH_SCHEMA_FILE) fs.writeFileSync(process.env.BENCH_SCHEMA_FILE, `${printSchema(lexicographicSortSchema(schema))}\n`);
const serv = pgl.createServ(grafserv);

const app = express();
app.disable("x-powered-by"); // as the hub's Express app: same response headers on both targets

// The identity lookup of the original, as Express middleware, with the hub's resolver (1 s cache),
// its cache invalidation on credential changes and its batched API-key usage, as the hub's auth hook.
const resolver = createIdentityResolver(pools.superuser, { cacheTtlMs: 1000 });
const credentialEvents = listenForCredentialChanges(db.superuserUrl, () => resolver.clear(), log);
await credentialEvents.ready;
const apiKeyUsage = createApiKeyUsage(pools.superuser, log);
app.use((req: Request & { identity?: Identity | undefined }, res: Response, next: NextFunction) => {
  const header = req.headers.authorization;
  if (header === undefined) {
    next();
    return;
  }
  resolver.resolve(header).then(
    (identity) => {
      req.identity = identity;
      if (identity?.kind === "operator") apiKeyUsage.record(identity.apiKeyId);
      next();
    },
    (error: unknown) => {
      log.error({ err: error }, "identity lookup failed");
      res.status(503).set("retry-after", "1").json({ statusCode: 503, error: "Service Unavailable", message: "The credential could not be checked." });
    },
  );
});

const server = http.createServer(app);
if (graphqlFirst) await serv.addTo(app, server, false);
benchConfigureApp({ app, superuserPool: pools.superuser });
if (!graphqlFirst) await serv.addTo(app, server, false);
app.use((req: Request, res: Response) => {
  res.status(404).json({ statusCode: 404, error: "Not Found", message: `No route for ${req.method} ${req.path}` });
});
app.use((error: unknown, req: Request, res: Response, _next: NextFunction) => {
  log.error({ err: error }, "unhandled error in an Express route");
  res.status(500).json({ statusCode: 500, error: "Internal Server Error", message: "Internal error" });
});

await new Promise<void>((resolve, reject) => {
  server.once("error", reject);
  server.listen(0, "127.0.0.1", resolve);
});
const { port } = server.address() as AddressInfo;

serveBench({ url: `http://127.0.0.1:${port}`, superuserDatabaseUrl: db.superuserUrl }, async () => {
  await new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
  await apiKeyUsage.stop();
  await credentialEvents.close();
  await close();
});
