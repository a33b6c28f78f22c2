/**
 * Two facts about `@fastify/express` that decide how the hub mounts
 * configureApp's Express app, checked over real HTTP (no database needed):
 *
 *  1. A handler written `(req, res) => res.json(x)` returns what `res.json`
 *     returns. Under `@fastify/express`, `res.send` is replaced by Fastify's
 *     `reply.send`, so `res.json` returns Fastify's reply, a thenable, and
 *     Express 5's router prints "handlers that are Promise-like are
 *     deprecated". Under the hub's bridge it returns `res`, as in Express.
 *  2. `@fastify/express` assigns `req.hostname` (and `req.ip`), getters on
 *     Express's request prototype, so it cannot run on requests Node builds
 *     with the Express app's prototypes, as the hub's bridge has them built
 *     (adapters/express.ts).
 *
 *   npm run build && node --import tsx bench/fastify-express/check.ts
 *
 * Prints what it saw and exits 1 if either fact no longer holds (a new
 * `@fastify/express` may change them: then the README's reasons need another look).
 */
import "../../dist/src/bin/process-setup.js"; // the tuning node dist/server.js applies
import "../../dist/src/prelude.js";
import type { AddressInfo } from "node:net";
import Fastify, { type FastifyInstance } from "fastify";
import fastifyExpress from "@fastify/express";
import type pg from "pg";
import { createExpressApp, mountExpressApp, type ExpressApp } from "../../dist/adapters/express.js";
import { createServerStats } from "../../dist/src/stats.js";
import type { ConfigureAppArgument } from "../../dist/src/options.js";

const deprecations: string[] = [];
process.on("deprecation", (error: Error) => deprecations.push(error.message));

/** Whether `res.json` returned a thenable, on the last GET /returned. */
let returnedThenable: boolean | undefined;

function configureApp(app: ConfigureAppArgument): void {
  // The one-line form users write; the handler returns whatever res.json returns.
  app.get("/json", (_req, res) => res.json({ ok: true }));
  app.get("/returned", (_req, res) => {
    const returned = res.json({ ok: true }) as unknown;
    returnedThenable = typeof (returned as { then?: unknown } | null)?.then === "function";
  });
}

async function serve(build: (f: FastifyInstance, express: ExpressApp) => Promise<void>, withPrototypes: boolean): Promise<{ url: string; close(): Promise<void> }> {
  const express = await createExpressApp(configureApp, undefined as unknown as pg.Pool);
  const f = Fastify({ logger: false, ...(withPrototypes ? { http: { ...express.messageClasses } } : {}) }) as unknown as FastifyInstance;
  await build(f, express);
  await f.listen({ port: 0, host: "127.0.0.1" });
  return { url: `http://127.0.0.1:${(f.server.address() as AddressInfo).port}`, close: () => f.close() };
}

async function viaFastifyExpress(f: FastifyInstance, express: ExpressApp): Promise<void> {
  await f.register(async (scope) => {
    await scope.register(fastifyExpress);
    scope.use(express.app);
    scope.all("/*", (_request, reply) => reply.code(404).send({ statusCode: 404 }));
  });
}
const viaHubBridge = (f: FastifyInstance, express: ExpressApp) => mountExpressApp(f, express.app, createServerStats());

async function get(url: string): Promise<string> {
  const res = await fetch(url);
  return `${res.status} ${await res.text()}`;
}

/** What `res.json` returned and which deprecations the requests printed. */
async function returnedBy(name: string, build: typeof viaHubBridge, withPrototypes: boolean): Promise<{ thenable: boolean | string; deprecations: string[] }> {
  deprecations.length = 0;
  returnedThenable = undefined;
  const server = await serve(build, withPrototypes);
  try {
    const a = await get(`${server.url}/json`);
    const b = await get(`${server.url}/returned`);
    if (!a.startsWith("200") || !b.startsWith("200")) return { thenable: `${name}: /json → ${a}; /returned → ${b}`, deprecations: [...deprecations] };
    return { thenable: returnedThenable ?? "no answer", deprecations: [...deprecations] };
  } finally {
    await server.close();
  }
}

let failed = false;
const report = (ok: boolean, line: string) => {
  process.stdout.write(`${ok ? "as expected" : "NOT as expected"}: ${line}\n`);
  if (!ok) failed = true;
};

const fe = await returnedBy("@fastify/express", viaFastifyExpress, false);
report(fe.thenable === true && fe.deprecations.some((m) => m.includes("Promise-like")), `@fastify/express: res.json returns a thenable: ${String(fe.thenable)}; deprecations: ${JSON.stringify(fe.deprecations)}`);
const hub = await returnedBy("hub bridge", viaHubBridge, true);
report(hub.thenable === false && hub.deprecations.length === 0, `hub bridge: res.json returns a thenable: ${String(hub.thenable)}; deprecations: ${JSON.stringify(hub.deprecations)}`);

// 2. @fastify/express on requests built with Express's prototypes.
const errors: string[] = [];
const server = await serve(async (f, express) => {
  f.setErrorHandler((error, _request, reply) => {
    errors.push(String((error as Error).message));
    void reply.code(500).send({ statusCode: 500 });
  });
  await viaFastifyExpress(f, express);
}, true);
try {
  const answer = await get(`${server.url}/json`);
  report(answer.startsWith("500") && errors.some((m) => /hostname/.test(m)), `@fastify/express on requests built with Express's prototypes: GET /json → ${answer}; error: ${JSON.stringify(errors)}`);
} finally {
  await server.close();
}
process.exit(failed ? 1 : 0);
