import express, { type Express } from "express";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import http from "node:http";
import type pg from "pg";
import type { ConfigureApp, ConfigureAppArgument } from "../src/options.js";
import { attachServerStats, type ServerStatsRecorder } from "../src/stats.js";
import { identityOf, type Identity } from "../src/auth/identity.js";
import type { TrustFunction } from "../src/trust-proxy.js";
import { EXPRESS_RESPONSE } from "./fastify.js";
import { pathOf } from "./graphql-path.js";
import { expressMessageClasses, type MessageClasses } from "./express-message-classes.js";

/** The user's Express app, configured, and what Node's server needs to build its requests. */
export interface ExpressApp {
  app: Express;
  /** For Node's HTTP server: see adapters/express-message-classes.ts. */
  messageClasses: MessageClasses;
}

export async function createExpressApp(configureApp: ConfigureApp, superuserPool: pg.Pool, trustProxy?: TrustFunction): Promise<ExpressApp> {
  const app = express();
  app.disable("x-powered-by");
  // req.ip as Fastify's request.ip and the logs see it: X-Forwarded-For only from the proxies trustProxy names.
  if (trustProxy) app.set("trust proxy", trustProxy);
  // Before configureApp, so what it adds to app.request / app.response lands on the objects requests are built with.
  const messageClasses = expressMessageClasses(app);
  // One argument that works for both revisions of the interface: `({ app, superuserPool }) => …`
  // destructures these two properties; `(app) => …` uses the app itself.
  Object.defineProperties(app, {
    app: { value: app, enumerable: false },
    superuserPool: { value: superuserPool, enumerable: false },
  });
  await recordingDeclarations(app, () => configureApp(app as ConfigureAppArgument));
  return { app, messageClasses };
}

/**
 * The user's Express app (configureApp's), mounted under Fastify.
 *
 * - It is a genuine `express()` app from our own Express 5, so Express code
 *   runs unchanged: `res.json` returns `res`, 4-argument error middleware and
 *   rejected async handlers behave as in Express, responses can stream.
 * - It lives in an encapsulated Fastify context behind a catch-all route, so
 *   the Fastify routes (POST/GET /graphql) never run it: users' body parsers
 *   cannot consume a /graphql body, their routes cannot shadow /graphql, and
 *   /graphql pays nothing for it.
 * - Express gets the raw request and response (`reply.hijack()`), with the
 *   identity the auth hook already put on `req.identity`.
 * - What Express does not handle gets the hub's JSON 404; an error no user
 *   middleware handled gets a JSON error (its status when it carries a 4xx one,
 *   as body-parser's do; 500 otherwise, logged with the request id).
 */
export async function mountExpressApp(
  fastify: FastifyInstance,
  app: Express,
  stats: ServerStatsRecorder,
  poolFor?: (identity: Identity | undefined) => pg.Pool,
): Promise<void> {
  // serverStats(req) in a route: this server's counters, inherited by every request (no per-request cost).
  attachServerStats(app.request, stats);
  await fastify.register(async (scope) => {
    // The body stream is Express's to read (express.json() & co.), not Fastify's.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", (_request, _payload, done) => done(null));
    const handler = (request: FastifyRequest, reply: FastifyReply) => {
      reply.hijack();
      (reply.raw as { [EXPRESS_RESPONSE]?: boolean })[EXPRESS_RESPONSE] = true;
      const started = process.hrtime.bigint();
      reply.raw.once("finish", () => {
        request.log.info(
          { res: { statusCode: reply.raw.statusCode }, responseTime: Number(process.hrtime.bigint() - started) / 1e6 },
          "request completed",
        );
      });
      // req.superuserPool: the superuser pool bounded for this request's player or API key.
      if (poolFor) (request.raw as { superuserPool?: pg.Pool }).superuserPool = poolFor(identityOf(request.raw));
      app(request.raw as never, reply.raw as never, (error?: unknown) => finish(request, reply, error));
    };
    scope.all("/", handler);
    scope.all("/*", handler);
  });
}

function finish(request: FastifyRequest, reply: FastifyReply, error: unknown): void {
  const res = reply.raw;
  if (error === undefined || error === null || error === "route" || error === "router") {
    sendJson(res, 404, { statusCode: 404, error: "Not Found", message: `No route for ${request.method} ${pathOf(request.url)}` });
    return;
  }
  const err = error as { status?: unknown; statusCode?: unknown; expose?: unknown; message?: unknown };
  const status = Number(err.status ?? err.statusCode);
  const clientError = Number.isInteger(status) && status >= 400 && status < 500;
  if (!clientError) request.log.error({ err: error }, "unhandled error in an Express route");
  if (res.headersSent) {
    // Too late for an error response: cut the connection so the client sees a failure, not a truncated success.
    res.destroy();
    return;
  }
  if (clientError) {
    sendJson(res, status, { statusCode: status, error: http.STATUS_CODES[status] ?? "Bad Request", message: err.expose === false ? "Bad request" : String(err.message ?? "Bad request") });
  } else {
    sendJson(res, 500, { statusCode: 500, error: "Internal Server Error", message: `Internal error (request ${request.id}); the server log has the details.` });
  }
}

function sendJson(res: import("node:http").ServerResponse, status: number, body: unknown): void {
  const payload = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader("content-type", "application/json; charset=utf-8");
  res.setHeader("content-length", Buffer.byteLength(payload));
  res.end(payload);
}

/** A path the hub serves itself, which no configureApp route can take over. */
export interface BuiltInPath {
  path: string;
  /** What is served there, for the message. */
  what: string;
  /** Whether everything under it is the hub's too (the dashboard's files), or only the path itself. */
  prefix: boolean;
  /** How to move it out of the way, when it can be moved. */
  hint?: string;
}

const trimSlash = (path: string) => (path.length > 1 ? path.replace(/\/+$/, "") : path);

function takes(path: string, builtIn: BuiltInPath): boolean {
  const p = trimSlash(path);
  return p === builtIn.path || (builtIn.prefix && p.startsWith(`${builtIn.path}/`));
}

/** A path configureApp gave one of the app's routing methods, and how, for the message. */
interface Declared {
  path: string;
  what: string;
}

const declarations = new WeakMap<Express, Declared[]>();
const ROUTE_METHODS = [...http.METHODS.map((m) => m.toLowerCase()), "all"];

/**
 * Records the paths configureApp passes to the app's own routing methods
 * (`app.get` and the other methods, `app.all`, `app.route`, `app.use`), by
 * wrapping them on this app object until configureApp returns. Express keeps
 * its routes in no public structure, so what is declared elsewhere (a route
 * inside a router or sub-app mounted at a path the hub does not serve, or one
 * added on `app.router` directly) is not seen; a mount on a built-in path is.
 */
async function recordingDeclarations<T>(app: Express, run: () => Promise<T> | T): Promise<T> {
  const found: Declared[] = [];
  declarations.set(app, found);
  const methods = app as unknown as Record<string, (this: unknown, ...args: unknown[]) => unknown>;
  const originals = new Map<string, (this: unknown, ...args: unknown[]) => unknown>();
  // app.get(path, …) goes through app.route(path) itself: one record per call, the outermost.
  let depth = 0;
  const wrap = (name: string, describe: (path: string, args: unknown[]) => string | undefined) => {
    const original = methods[name];
    if (typeof original !== "function") return;
    originals.set(name, original);
    methods[name] = function (this: unknown, ...args: unknown[]) {
      if (depth === 0) for (const path of pathsOf(args[0])) {
        const what = describe(path, args);
        if (what) found.push({ path, what });
      }
      depth++;
      try {
        return original.apply(this, args);
      } finally {
        depth--;
      }
    };
  };
  for (const method of ROUTE_METHODS) {
    const label = method === "all" ? "ALL" : method.toUpperCase();
    // app.get(name) with nothing else reads a setting.
    wrap(method, (path, args) => (args.length > 1 ? `route ${label} ${path}` : undefined));
  }
  wrap("route", (path) => `app.route(${JSON.stringify(path)})`);
  // app.use(fn) takes no path; app.use("/x", …) does.
  wrap("use", (path) => `app.use(${JSON.stringify(path)}, …)`);
  try {
    return await run();
  } finally {
    for (const [name, original] of originals) methods[name] = original;
  }
}

const pathsOf = (value: unknown): string[] => (Array.isArray(value) ? value : [value]).filter((p): p is string => typeof p === "string" && p.startsWith("/"));

/**
 * The routes and mounts configureApp declared on the app (recorded by
 * createExpressApp) whose path is one the hub serves: they would never run,
 * since the hub answers those paths before Express. One line per collision,
 * naming the route and the built-in path.
 */
export function routeCollisions(app: Express, builtIns: readonly BuiltInPath[]): string[] {
  const found: string[] = [];
  for (const { path, what } of declarations.get(app) ?? []) {
    for (const builtIn of builtIns) {
      if (takes(path, builtIn)) {
        found.push(`configureApp's ${what} collides with ${builtIn.what} at ${builtIn.path}${builtIn.prefix ? " (and everything under it)" : ""}, which the hub serves itself, so it would never run: move the route${builtIn.hint ? `, or ${builtIn.hint}` : ""}.`);
      }
    }
  }
  return found;
}
