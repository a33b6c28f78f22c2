import express, { type Express } from "express";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type pg from "pg";
import type { ConfigureApp, ConfigureAppArgument } from "../src/options.js";
import { countResponse } from "../src/stats.js";

/**
 * The user's Express app (spec §4.4), mounted under Fastify.
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
  configureApp: ConfigureApp,
  superuserPool: pg.Pool,
): Promise<Express> {
  const app = express();
  app.disable("x-powered-by");
  // One argument that works for both revisions (spec §9): `({ app, superuserPool }) => …`
  // destructures these two properties; `(app) => …` uses the app itself.
  Object.defineProperties(app, {
    app: { value: app, enumerable: false },
    superuserPool: { value: superuserPool, enumerable: false },
  });
  await configureApp(app as ConfigureAppArgument);

  await fastify.register(async (scope) => {
    // The body stream is Express's to read (express.json() & co.), not Fastify's.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", (_request, _payload, done) => done(null));
    const handler = (request: FastifyRequest, reply: FastifyReply) => {
      reply.hijack();
      const started = process.hrtime.bigint();
      reply.raw.once("finish", () => {
        countResponse("express", reply.raw.statusCode);
        request.log.info(
          { res: { statusCode: reply.raw.statusCode }, responseTime: Number(process.hrtime.bigint() - started) / 1e6 },
          "request completed",
        );
      });
      app(request.raw as never, reply.raw as never, (error?: unknown) => finish(request, reply, error));
    };
    scope.all("/", handler);
    scope.all("/*", handler);
  });
  return app;
}

function finish(request: FastifyRequest, reply: FastifyReply, error: unknown): void {
  const res = reply.raw;
  if (error === undefined || error === null || error === "route" || error === "router") {
    sendJson(res, 404, { statusCode: 404, error: "Not Found", message: `No route for ${request.method} ${request.url.split("?")[0]}` });
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
    sendJson(res, status, { statusCode: status, error: "Bad Request", message: err.expose === false ? "Bad request" : String(err.message ?? "Bad request") });
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
