/**
 * A reference point for `bench/ab.ts`, not a target of `npm run bench`: the
 * hub's Fastify front (its adapters, as src/start.ts assembles them: request
 * ids and logging, the auth hook, the per-identity overload hook, grafserv at
 * /graphql) with configureApp's Express app mounted by `@fastify/express`
 * instead of the hub's own bridge (adapters/express.ts). Only the bridge
 * differs from the hub target.
 *
 * `@fastify/express` is registered in an encapsulated context, so its hook
 * never runs for /graphql (a Fastify route of the root context), and the app
 * is mounted with `scope.use(app)`, as its README shows. The catch-all routes
 * give the context's hook a route to run on (without one Fastify answers 404
 * from the root context before any hook of this one) and answer what Express
 * passed on with the hub's JSON 404.
 *
 * Node builds the requests with its own classes: `@fastify/express` assigns
 * `req.hostname` and `req.ip`, which are getters on Express's request
 * prototype, so it cannot run on the requests the hub builds with those
 * prototypes (bench/fastify-express/check.ts shows it).
 */
import "../lib/child-prelude.js";
import "../../dist/src/bin/process-setup.js"; // the tuning node dist/server.js applies
import "../../dist/src/prelude.js";
import type { AddressInfo } from "node:net";
import fastifyExpress from "@fastify/express";
// The hub's own building blocks, as src/start.ts assembles them (keep in step with it).
import { createIdentityResolver } from "../../dist/src/auth/resolver.js";
import { createApiKeyUsage } from "../../dist/src/auth/api-key-usage.js";
import { listenForCredentialChanges } from "../../dist/src/db/credential-events.js";
import { createIdentityPoolLimiter, DEFAULT_IDENTITY_LIMITS } from "../../dist/src/db/identity-limit.js";
import { createFastify } from "../../dist/adapters/fastify.js";
import { createServerStats } from "../../dist/src/stats.js";
import { addAuthHook } from "../../dist/adapters/auth.js";
import { mountGraphQL } from "../../dist/adapters/grafserv.js";
import { createExpressApp } from "../../dist/adapters/express.js";
import { benchConfigureApp } from "../lib/demo.js";
import { MAX_BODY } from "../lib/demo-preset.js";
import { attachToBenchDatabase } from "../lib/attach.js";
import { serveBench } from "../lib/child.js";

const { db, pools, pgl, log, close } = await attachToBenchDatabase();
const resolver = createIdentityResolver(pools.credentials, { cacheTtlMs: 1000 });
const credentialEvents = listenForCredentialChanges(db.superuserUrl, () => resolver.clear(), log);
await credentialEvents.ready;
const apiKeyUsage = createApiKeyUsage(pools.credentials, log);
const limiter = createIdentityPoolLimiter(pools.superuser, { ...DEFAULT_IDENTITY_LIMITS, waitMs: 10_000 });

// The same app the hub mounts: configureApp's, built by the hub's createExpressApp.
const express = await createExpressApp(benchConfigureApp, pools.superuser);
const app = createFastify({
  logger: log,
  stats: createServerStats(),
  bodyLimit: MAX_BODY,
  requestTimeoutMs: 30_000,
});
addAuthHook(app, resolver, apiKeyUsage, limiter);
await mountGraphQL(app, pgl);
await app.register(async (scope) => {
  // The body stream is Express's to read (express.json() runs in the onRequest hook, before Fastify would parse it).
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser("*", (_request, _payload, done) => done(null));
  await scope.register(fastifyExpress);
  scope.use(express.app);
  const notFound = (request: { method: string; url: string }, reply: { code(n: number): { send(body: unknown): unknown } }) =>
    reply.code(404).send({ statusCode: 404, error: "Not Found", message: `No route for ${request.method} ${request.url.split("?")[0]}` });
  scope.all("/", notFound);
  scope.all("/*", notFound);
});
await app.listen({ port: 0, host: "127.0.0.1" });
const { port } = app.server.address() as AddressInfo;

serveBench({ url: `http://127.0.0.1:${port}`, superuserDatabaseUrl: db.superuserUrl }, async () => {
  await app.close();
  await apiKeyUsage.stop();
  await credentialEvents.close();
  await close();
});
