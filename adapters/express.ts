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

/** The user's Express app, configured, and what Node's server needs to build its requests. */
export interface ExpressApp {
  app: Express;
  /** For Node's HTTP server: see expressMessageClasses. */
  messageClasses: Pick<http.ServerOptions, "IncomingMessage" | "ServerResponse">;
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
  await configureApp(app as ConfigureAppArgument);
  return { app, messageClasses };
}

/**
 * Request and response classes for Node's HTTP server whose instances are
 * born with the Express app's prototypes.
 *
 * Express's `app.handle` gives each request and response the app's prototypes
 * with `Object.setPrototypeOf`, and on V8 that costs more than all the rest of
 * Express. With the objects built with those prototypes already, Express's
 * `setPrototypeOf` is a no-op. (The figures are in bench/README.md, "Measured figures behind
 * the code".)
 *
 * Classes rather than constructor functions given `app.request` as their
 * `prototype`: V8 sizes a class's objects from its base constructor, a bare
 * function's objects it sizes for none of the fields Node then adds, which
 * loses part of the gain and also slows Fastify's handling of /graphql.
 * So each class's prototype takes the place of `app.request` /
 * `app.response`: the same parent (Express's request / response), the same
 * own properties (`app`), no `constructor` of its own, and mounted sub-apps
 * chain to it as they would to `app.request` itself.
 */
function expressMessageClasses(app: Express): ExpressApp["messageClasses"] {
  class ExpressRequest extends http.IncomingMessage {}
  class ExpressResponse extends http.ServerResponse {}
  adoptAsAppPrototype(app, "request", ExpressRequest.prototype);
  adoptAsAppPrototype(app, "response", ExpressResponse.prototype);
  return { IncomingMessage: ExpressRequest, ServerResponse: ExpressResponse as typeof http.ServerResponse };
}

function adoptAsAppPrototype(app: Express, key: "request" | "response", proto: object): void {
  const original: object = app[key];
  delete (proto as { constructor?: unknown }).constructor;
  Object.setPrototypeOf(proto, Object.getPrototypeOf(original));
  Object.defineProperties(proto, Object.getOwnPropertyDescriptors(original));
  (app as unknown as Record<string, object>)[key] = proto;
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

interface RouterLayer {
  rawPath?: unknown;
  slash?: boolean;
  route?: { path: unknown; methods: Record<string, boolean> };
  handle?: { stack?: RouterLayer[] };
}

/** "GET", "GET,POST", or "ALL" for app.all (which Express 5 records as every method). */
function methodsOf(route: { methods: Record<string, boolean> }): string {
  const methods = Object.keys(route.methods);
  return methods.includes("_all") || methods.length >= http.METHODS.length ? "ALL" : methods.map((m) => m.toUpperCase()).join(",");
}

const joinPath = (mount: string, path: string) => (mount === "/" ? path : `${mount.replace(/\/+$/, "")}${path === "/" ? "" : path}`);
const trimSlash = (path: string) => (path.length > 1 ? path.replace(/\/+$/, "") : path);

function takes(path: string, builtIn: BuiltInPath): boolean {
  const p = trimSlash(path);
  return p === builtIn.path || (builtIn.prefix && p.startsWith(`${builtIn.path}/`));
}

/**
 * The routes and mounts of the configured app (its router's stack, and the
 * stacks of routers mounted on it) whose path is one the hub serves: they
 * would never run, since the hub answers those paths before Express. One
 * line per collision, naming the route and the built-in path.
 */
export function routeCollisions(app: Express, builtIns: readonly BuiltInPath[]): string[] {
  const found: string[] = [];
  const visit = (stack: RouterLayer[] | undefined, mount: string) => {
    for (const layer of stack ?? []) {
      // Middleware without a path (app.use(fn)) takes no path; what a router mounted so declares, does.
      if (!layer.route && layer.slash) {
        if (Array.isArray(layer.handle?.stack)) visit(layer.handle.stack, mount);
        continue;
      }
      const raw = layer.route ? layer.route.path : layer.rawPath;
      const paths = (Array.isArray(raw) ? raw : [raw]).filter((p): p is string => typeof p === "string");
      for (const path of paths) {
        const full = joinPath(mount, path);
        const what = layer.route ? `route ${methodsOf(layer.route)} ${full}` : `app.use(${JSON.stringify(full)}, …)`;
        for (const builtIn of builtIns) {
          if (takes(full, builtIn)) {
            found.push(`configureApp's ${what} collides with ${builtIn.what} at ${builtIn.path}${builtIn.prefix ? " (and everything under it)" : ""}, which the hub serves itself, so it would never run: move the route${builtIn.hint ? `, or ${builtIn.hint}` : ""}.`);
          }
        }
        if (!layer.route && Array.isArray(layer.handle?.stack)) visit(layer.handle.stack, full);
      }
    }
  };
  const router = (app as unknown as { router?: { stack?: RouterLayer[] } }).router;
  visit(router?.stack, "/");
  return found;
}
