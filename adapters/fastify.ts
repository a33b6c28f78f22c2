import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify";
import { randomUUID } from "node:crypto";
import diagnosticsChannel from "node:diagnostics_channel";
import type { IncomingMessage, ServerOptions, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Logger } from "../src/logger.js";
import type { TrustFunction } from "../src/trust-proxy.js";
import type { ResponseKind, ServerStatsRecorder } from "../src/stats.js";
import { isGraphQLPath, pathOf } from "./graphql-path.js";
import { fastifySerializers, LazyRequestLogger, lazyChildLoggerFactory, RequestLogController } from "./request-logger.js";

export interface FastifyOptions {
  logger: Logger;
  /** Largest request body in bytes (413 beyond). */
  bodyLimit: number;
  /** Longest time to receive a whole request (408 beyond); 0 = none. */
  requestTimeoutMs: number;
  /** Request counters to count every response in (the hub plugin counts its server's itself: src/hub-plugin.ts). */
  stats?: ServerStatsRecorder | undefined;
  /** Node's request/response classes, when not its own (adapters/express.ts). */
  messageClasses?: Pick<ServerOptions, "IncomingMessage" | "ServerResponse"> | undefined;
  /** The peers whose X-Forwarded-For and X-Request-ID are believed (src/trust-proxy.ts); none when undefined. */
  trustProxy?: TrustFunction | undefined;
}

/** Where the request's id is kept on the raw request, from the "request" event until Fastify asks for it. */
const REQUEST_ID = Symbol("hub.requestId");

/**
 * The request id: a trusted proxy's X-Request-ID (one line of at most 200
 * printable characters), else a new UUID. A client's own header is not
 * taken: it could make its requests' log lines pass for someone else's.
 */
export function requestIdOf(req: IncomingMessage, trust: TrustFunction | undefined): string {
  const header = req.headers["x-request-id"];
  if (trust && typeof header === "string" && /^[\x21-\x7e]{1,200}$/.test(header) && trust(req.socket?.remoteAddress ?? "", 0)) return header;
  return randomUUID();
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
 * The Fastify instance buildHub makes (the hub plugin, src/hub-plugin.ts, is
 * then registered on it): pino logging with the Authorization header
 * redacted, a request id on every request (taken from x-request-id when a
 * trusted proxy set one) echoed in its response, and JSON 404s for any path nothing handled.
 *
 * Fastify given a logger times every request and follows its response with
 * two listeners, only to write the "request completed" line. When the hub
 * logs above `info` that line is never written, and those listeners were the
 * larger half of what logging cost a `{__typename}` request (bench/README.md).
 * So above `info` Fastify gets no logger: its request loggers and its own
 * log (`app.log`, where it reports a failing hook) are still ours, with the
 * serializers Fastify would have added, made by the factory below.
 */
export function createFastify(options: FastifyOptions): FastifyInstance {
  const requestLines = options.logger.isLevelEnabled("info");
  // Above info, what Fastify would have built from a loggerInstance: a child with its req/res/err serializers.
  const fastifyLog = requestLines ? undefined : options.logger.child({}, { serializers: fastifySerializers });
  const app = Fastify({
    ...(requestLines ? { loggerInstance: options.logger } : {}),
    bodyLimit: options.bodyLimit,
    requestTimeout: options.requestTimeoutMs,
    // Node's default (16 KiB) would refuse a 64 KiB Authorization header outright;
    // we accept it and treat it as the bad credential it is (unauthenticated).
    http: { maxHeaderSize: 96 * 1024, ...requestTimeoutChecks(options.requestTimeoutMs), ...options.messageClasses },
    requestIdHeader: false,
    genReqId: (req) => (req as { [REQUEST_ID]?: string })[REQUEST_ID] ?? requestIdOf(req, options.trustProxy),
    ...(options.trustProxy ? { trustProxy: options.trustProxy } : {}),
    // Without a loggerInstance Fastify hands the factory its silent logger: the parent is ours either way.
    childLoggerFactory: fastifyLog ? (_silent, bindings, opts) => new LazyRequestLogger(fastifyLog, bindings, opts) : lazyChildLoggerFactory,
    logController: new RequestLogController(),
    return503OnClosing: true,
    forceCloseConnections: "idle",
    routerOptions: { ignoreTrailingSlash: true },
  });
  if (fastifyLog) (app as { log: FastifyBaseLogger }).log = fastifyLog;
  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send({
      statusCode: 404,
      error: "Not Found",
      message: `No route for ${request.method} ${pathOf(request.url)}`,
    });
  });
  if (options.stats) followResponses(app as unknown as FastifyInstance, options.stats);
  stampResponses(app as unknown as FastifyInstance, options.trustProxy);
  return app as unknown as FastifyInstance;
}

/** Before Fastify (and the Express app) see a request: its id, echoed in the response's x-request-id whoever answers it. */
function stampResponses(app: FastifyInstance, trustProxy: TrustFunction | undefined): void {
  app.server.prependListener("request", (req: IncomingMessage, res: ServerResponse) => {
    const id = requestIdOf(req, trustProxy);
    (req as { [REQUEST_ID]?: string })[REQUEST_ID] = id;
    res.setHeader("x-request-id", id);
  });
}

/**
 * While the server drains, the end of each request's connection after its
 * answer (Node then writes `Connection: close`), so a proxy opens its next
 * connection to an instance that is staying. A hook, so it works on any
 * instance the hub is registered on; the first of the hub's onRequest hooks.
 */
export function closeConnectionsWhileDraining(app: FastifyInstance, drain: { readonly draining: boolean }): void {
  app.addHook("onRequest", (_request, reply, done) => {
    // A response that says so: Node then ends its connection after it.
    if (drain.draining) reply.raw.setHeader("connection", "close");
    done();
  });
}

/** On a socket: its requests whose response has not finished yet (pipelined ones included). */
const IN_FLIGHT = Symbol("hub.inFlight");
type CountedSocket = Socket & { [IN_FLIGHT]?: number };

function endIfIdle(socket: CountedSocket): void {
  if (!socket[IN_FLIGHT] && !socket.destroyed) socket.end();
}

/** Marks a response as one of the Express app's, for serverStats (set by adapters/express.ts). */
export const EXPRESS_RESPONSE = Symbol("hub.expressResponse");

/** Counts a finished response in serverStats: the Express app's, GraphQL's (by its path), or another route's. */
function countFinished(stats: ServerStatsRecorder, req: IncomingMessage, res: ServerResponse): void {
  let kind: ResponseKind = "other";
  if ((res as { [EXPRESS_RESPONSE]?: boolean })[EXPRESS_RESPONSE]) kind = "express";
  else if (isGraphQLPath(pathOf(req.url ?? "/"))) kind = "graphql";
  stats.countResponse(kind, res.statusCode);
}

/**
 * Every response of this server, once it has gone out, from Node's
 * diagnostics channel: Fastify's routes, its 404s and refusals (413, 503 while
 * closing), and the Express app's hijacked responses alike, whatever the log
 * level, at the cost of one publish per response.
 *
 * While closing, the same follower ends each connection once its response
 * has gone out: Fastify ("idle") and Node close the keep-alive connections
 * idle at that moment, but a connection whose request is still in flight
 * stays open after its response, until the client or the shutdown timeout
 * closes it, so a keep-alive client held every shutdown for the whole timeout.
 * Only that response's own connection is ended, gracefully (FIN after what is
 * written): Node's closeIdleConnections() destroys every connection whose
 * response has been ended, written out or not, so calling it after each
 * response reset connections whose answer was still in Node's buffer.
 */
export function followResponses(app: FastifyInstance, stats: ServerStatsRecorder): void {
  const server = app.server;
  let closing = false;
  const onFinish = (message: unknown) => {
    const { server: from, request, response, socket } = message as { server?: unknown; request: IncomingMessage; response: ServerResponse; socket?: Socket };
    if (from !== server) return;
    countFinished(stats, request, response);
    const counted = socket as CountedSocket | undefined;
    if (counted?.[IN_FLIGHT]) counted[IN_FLIGHT]--;
    // After Node has detached the response from its socket; a request pipelined behind it keeps the connection.
    if (closing && socket) setImmediate(endIfIdle, socket);
  };
  // Counted from the request event, which Node emits for a pipelined request while the one before it is answered.
  const onRequest = (req: IncomingMessage) => {
    const socket = req.socket as CountedSocket;
    socket[IN_FLIGHT] = (socket[IN_FLIGHT] ?? 0) + 1;
  };
  server.prependListener("request", onRequest);
  diagnosticsChannel.subscribe("http.server.response.finish", onFinish);
  server.once("close", () => {
    server.off("request", onRequest);
    diagnosticsChannel.unsubscribe("http.server.response.finish", onFinish);
  });
  app.addHook("preClose", (done) => {
    closing = true;
    done();
  });
}
