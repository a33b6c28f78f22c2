import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { randomUUID } from "node:crypto";
import diagnosticsChannel from "node:diagnostics_channel";
import type { ServerOptions } from "node:http";
import type { Logger } from "../src/logger.js";
import type { ResponseKind, ServerStatsRecorder } from "../src/stats.js";
import { lazyChildLoggerFactory, RequestLogController } from "./request-logger.js";

declare module "fastify" {
  interface FastifyContextConfig {
    /** How the route's responses count in serverStats (default: "graphql" for /graphql, else "other"). */
    countAs?: ResponseKind;
  }
}

export interface FastifyOptions {
  logger: Logger;
  /** Largest request body in bytes (413 beyond). */
  bodyLimit: number;
  /** Longest time to receive a whole request (408 beyond); 0 = none. */
  requestTimeoutMs: number;
  /** This server's request counters (serverStats). */
  stats: ServerStatsRecorder;
  /** Node's request/response classes, when not its own (adapters/express.ts). */
  messageClasses?: Pick<ServerOptions, "IncomingMessage" | "ServerResponse"> | undefined;
}

/**
 * Node enforces requestTimeout (and headersTimeout) only when it sweeps its
 * connections, every connectionsCheckingInterval: 30 s by default, so a client
 * that sent headers and part of a body, then stalled, held its connection for
 * up to 30 s more than the configured timeout (measured: not closed after 20 s
 * with requestTimeoutMs 1000). Sweep at a quarter of the timeout (between 100 ms
 * and 1 s; the sweep walks only the open connections), and let headers take no
 * longer than the whole request (Node's default is 60 s, and Fastify sets
 * requestTimeout only after creating the server, so the default would stay).
 */
function requestTimeoutChecks(requestTimeoutMs: number): { connectionsCheckingInterval?: number; headersTimeout?: number } {
  if (requestTimeoutMs <= 0) return {};
  return {
    connectionsCheckingInterval: Math.min(1000, Math.max(100, Math.floor(requestTimeoutMs / 4))),
    headersTimeout: requestTimeoutMs,
  };
}

/**
 * The Fastify front: pino logging with the Authorization header
 * redacted, a request id on every request (taken from x-request-id when a proxy
 * set one), and JSON 404s for any path nothing handled.
 */
export function createFastify(options: FastifyOptions): FastifyInstance {
  const { stats } = options;
  // Every response once, hijacked ones (the Express app's) included: their routes say what they count as.
  const countResponse = (request: FastifyRequest, reply: FastifyReply) => {
    const route = request.routeOptions; // a getter that builds an object: read it once
    stats.countResponse(route.config.countAs ?? (route.url === "/graphql" ? "graphql" : "other"), reply.raw.statusCode);
  };
  const app = Fastify({
    loggerInstance: options.logger,
    bodyLimit: options.bodyLimit,
    requestTimeout: options.requestTimeoutMs,
    // Node's default (16 KiB) would refuse a 64 KiB Authorization header outright;
    // we accept it and treat it as the bad credential it is (unauthenticated).
    http: { maxHeaderSize: 96 * 1024, ...requestTimeoutChecks(options.requestTimeoutMs), ...options.messageClasses },
    requestIdHeader: "x-request-id",
    genReqId: () => randomUUID(),
    childLoggerFactory: lazyChildLoggerFactory,
    logController: new RequestLogController(countResponse),
    return503OnClosing: true,
    forceCloseConnections: "idle",
    routerOptions: { ignoreTrailingSlash: true },
  });
  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send({
      statusCode: 404,
      error: "Not Found",
      message: `No route for ${request.method} ${request.url.split("?")[0]}`,
    });
  });
  closeConnectionsOnceIdle(app as unknown as FastifyInstance);
  return app as unknown as FastifyInstance;
}

/**
 * On close, Fastify ("idle") and Node close the keep-alive connections idle at
 * that moment; a connection whose request is still in flight stays open after
 * its response has gone out, until the client or the shutdown timeout closes
 * it, so a keep-alive client held every shutdown for the whole timeout. While
 * closing we follow every finished response (Node's diagnostics channel; no
 * cost before shutdown, when nobody subscribes) and close the connections that
 * have become idle.
 */
function closeConnectionsOnceIdle(app: FastifyInstance): void {
  app.addHook("preClose", (done) => {
    const server = app.server;
    const onFinish = (message: unknown) => {
      if ((message as { server?: unknown }).server !== server) return;
      // After Node has detached the response from its socket.
      setImmediate(() => server.closeIdleConnections());
    };
    diagnosticsChannel.subscribe("http.server.response.finish", onFinish);
    server.once("close", () => diagnosticsChannel.unsubscribe("http.server.response.finish", onFinish));
    done();
  });
}
