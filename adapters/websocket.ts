import type { FastifyInstance, FastifyReply, FastifyRequest, RouteHandlerMethod, RouteOptions } from "fastify";
import { WebSocketServer, type RawData, type WebSocket } from "ws";
import { CloseCode, handleProtocols, makeServer, type ServerOptions as GraphQLWSOptions } from "graphql-ws";
import { makeGraphQLWSConfig, type GrafservBase } from "grafserv";
import { getOperationAST, GraphQLError, parse } from "graphql";
import { randomUUID } from "node:crypto";
import diagnosticsChannel from "node:diagnostics_channel";
import { ServerResponse, type IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { credentialIdOf, expiresAtOf, identityKey, type Identity } from "../src/auth/identity.js";
import type { IdentityResolver } from "../src/auth/resolver.js";
import { identityLookupFailure } from "./auth.js";
import { isGraphQLPath, pathOf } from "./graphql-path.js";
import { ErrorCode } from "../src/errors.js";
import type { Logger } from "../src/logger.js";
import type { WebSocketLimits } from "../src/live/limits.js";

const responseFinished = diagnosticsChannel.channel("http.server.response.finish");

export interface WebSocketFrontOptions {
  graphqlPath: string;
  resolver: IdentityResolver;
  limits: WebSocketLimits;
  log: Logger;
}

export interface WebSocketFront {
  /** A credential changed somewhere (NOTIFY): close the sockets of every credential no longer valid. */
  credentialsChanged(): void;
  /** Open sockets of this process. */
  socketCount(): number;
}

/**
 * What a connection keeps of its upgrade request, in place of the request
 * itself (its headers and parser state would live as long as the socket).
 * The GraphQL context reads it back as `ws.request` (grafservRequestInfo).
 */
export interface WebSocketRequest {
  /** The upgrade request's id, for logs. */
  id: string;
  /** The identity settled at connection_init (until then, what the upgrade's Authorization header gave). */
  identity: Identity | undefined;
  /** The upgrade's Authorization header, checked again at connection_init, then dropped (a credential). */
  authorization: string | undefined;
}

type Extra = { socket: WebSocket; request: WebSocketRequest };
type Receive = (data: string) => Promise<void>;

/**
 * One open socket: the hub's bookkeeping and the socket graphql-ws talks to,
 * in one object with shared methods. Closures per socket would each live as
 * long as it does; ten thousand idle subscribers are ten thousand of each.
 */
class Connection {
  /**
   * Whom the socket acts for: from its opening, what the upgrade's header
   * gave; from connection_init, what was checked then. The revocation and
   * expiry sweeps close the socket when this stops being valid.
   */
  identity: Identity | undefined = undefined;
  /** Its key in the per-identity counts, once counted. */
  identityKey: string | undefined = undefined;
  /** When the session behind it expires (ms since the epoch); Infinity for none. */
  expiresAt = Infinity;
  /** Answered the previous keep-alive ping (or opened since it was sent). */
  alive = true;
  receive: Receive | undefined = undefined;
  closed: ((code?: number, reason?: string) => Promise<void>) | undefined = undefined;
  constructor(readonly socket: WebSocket) {}

  get protocol(): string {
    return this.socket.protocol;
  }

  send(data: string): Promise<void> {
    const socket = this.socket;
    if (socket.readyState !== socket.OPEN) return Promise.resolve();
    return new Promise((resolve, reject) => socket.send(data, (error) => (error ? reject(error) : resolve())));
  }

  close(code: number, reason: string): void {
    closeSocket(this.socket, code, reason);
  }

  onMessage(receive: Receive): void {
    this.receive = receive;
  }
}

/** What a graphql-ws client treats as "unauthorised": it does not reconnect with the same credential. */
export const CLOSE_UNAUTHORIZED = CloseCode.Unauthorized; // 4401
const CLOSE_GOING_AWAY = 1001;
const CLOSE_TOO_MANY_CONNECTIONS = 4429;
const CLOSE_TRY_AGAIN_LATER = 1013;
const EXPIRY_SWEEP_MS = 250;

function closeSocket(socket: WebSocket, code: number, reason: string): void {
  if (socket.readyState === socket.OPEN || socket.readyState === socket.CONNECTING) socket.close(code, reason);
}

const REVOKED_REASON = "Unauthorized: the credential was revoked or has expired";

/** Ends a socket that errs before ws has taken it over (ws adds its own listener then). */
function onEarlyError(this: Duplex): void {
  this.destroy();
}

/** A plain HTTP answer on a socket whose upgrade is refused; the socket is closed after it. */
function refuseUpgrade(socket: Duplex, status: number, reason: string, body: object, headers = ""): void {
  if (socket.destroyed) return;
  const text = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(text)}\r\n${headers}connection: close\r\n\r\n${text}`,
  );
}

/**
 * Subscriptions over WebSocket at the GraphQL path (graphql-transport-ws), on
 * grafserv's own graphql-ws configuration plus the hub's identity, limits,
 * revocation and shutdown. The upgrade is taken from the HTTP server's
 * "upgrade" event, before Fastify: no route, hook or Express handler runs for
 * it, and no plain request pays for WebSocket support. Must be called before
 * `serv.addTo(app)`.
 */
export async function addWebSockets(app: FastifyInstance, serv: GrafservBase, options: WebSocketFrontOptions): Promise<WebSocketFront> {
  const { graphqlPath, resolver, limits, log } = options;
  const connections = new Map<WebSocket, Connection>();
  const perIdentity = new Map<string, number>();
  let closing = false;

  const base = makeGraphQLWSConfig(serv) as GraphQLWSOptions<Record<string, unknown> | undefined, Extra>;
  const config: GraphQLWSOptions<Record<string, unknown> | undefined, Extra> = {
    ...base,
    connectionInitWaitTimeout: limits.connectionInitTimeoutMs,
    async onConnect(ctx) {
      const { socket, request } = ctx.extra;
      const connection = connections.get(socket);
      if (!connection) return false;
      const identity = await settleIdentity(connection, request, ctx.connectionParams?.authorization);
      if (identity === false) return false;
      // The peer may have left while its credential was being checked: its close has been handled already and
      // would never give back a slot counted now.
      if (connections.get(socket) !== connection) return false;
      const key = identityKey(identity);
      if (key !== undefined) {
        const held = perIdentity.get(key) ?? 0;
        if (held >= limits.connectionsPerIdentity) {
          const who = identity?.kind === "user" ? "this player" : "this API key";
          closeSocket(socket, CLOSE_TOO_MANY_CONNECTIONS, `Too many connections: ${who} already holds ${held} (at most ${limits.connectionsPerIdentity})`);
          return false;
        }
        perIdentity.set(key, held + 1);
      }
      connection.identity = identity;
      connection.identityKey = key;
      // Closed by the shared expiry sweep below.
      connection.expiresAt = expiresAtOf(identity);
      return true;
    },
    onSubscribe(ctx, id, payload) {
      // The operation being subscribed is already in ctx.subscriptions.
      const active = Object.keys(ctx.subscriptions).length;
      if (active > limits.maxOperations) {
        return [
          new GraphQLError(`Too many operations on this connection: ${active - 1} are running (at most ${limits.maxOperations}); complete one or open another connection.`, {
            extensions: { code: ErrorCode.TOO_MANY_OPERATIONS, limit: limits.maxOperations },
          }),
        ];
      }
      return base.onSubscribe!(ctx, id, payload);
    },
  };
  /**
   * The identity a connection acts for, checked at connection_init by the
   * resolver every HTTP request goes through (never the upgrade's answer
   * reused): connectionParams.authorization, else the upgrade's header. A
   * credential that is not valid is no identity, as over HTTP. One exception:
   * the upgrade's own credential, valid when the socket opened and no longer
   * now, closes it with 4401, as the revocation sweep would have. False when
   * the socket is closed.
   */
  async function settleIdentity(connection: Connection, request: WebSocketRequest, fromParams: unknown): Promise<Identity | undefined | false> {
    const presented = fromParams !== undefined ? fromParams : request.authorization;
    request.authorization = undefined;
    if (typeof presented !== "string") return undefined;
    let identity: Identity | undefined;
    try {
      identity = await resolver.resolve(presented);
    } catch (error) {
      // The database could not be asked: not the client's fault, and worth a retry (1013 "try again later").
      log.warn({ err: error }, "a WebSocket credential could not be checked");
      connection.close(CLOSE_TRY_AGAIN_LATER, "The credential could not be checked: the database is unavailable or busy; retry shortly");
      return false;
    }
    if (identity === undefined && fromParams === undefined && connection.identity !== undefined) {
      connection.close(CLOSE_UNAUTHORIZED, REVOKED_REASON);
      return false;
    }
    request.identity = identity;
    return identity;
  }

  const graphqlWs = makeServer(config);
  // No compression: ws keeps a zlib context per socket for it (tens of KiB each), and alerts are tiny.
  // No client tracking: the connections map below is the one list of sockets.
  const wss = new WebSocketServer({ noServer: true, maxPayload: limits.maxMessageBytes, perMessageDeflate: false, clientTracking: false, handleProtocols });

  // The socket's listeners are shared by every socket and find its connection by the socket.
  function onPong(this: WebSocket) {
    const connection = connections.get(this);
    if (connection) connection.alive = true;
  }
  function onMessage(this: WebSocket, data: RawData) {
    const receive = connections.get(this)?.receive;
    if (receive === undefined) return;
    receive(String(data)).catch((error: unknown) => {
      // graphql-ws answers the client's mistakes itself (4400 and the like); what throws here is the server's fault.
      log.error({ err: error }, "a WebSocket message could not be handled");
      closeSocket(this, CloseCode.InternalServerError, "Internal server error");
    });
  }
  // A socket's error is the peer's doing (a bad frame, an oversized message, a reset): ws has already closed it with its code.
  function onSocketError(this: WebSocket, error: Error) {
    log.info({ err: error }, "WebSocket closed after an error");
    if (this.readyState === this.OPEN) this.terminate();
  }
  function onClose(this: WebSocket, code: number, reason: Buffer) {
    const connection = connections.get(this);
    if (!connection) return;
    connections.delete(this);
    if (connection.identityKey !== undefined) {
      const n = (perIdentity.get(connection.identityKey) ?? 1) - 1;
      if (n > 0) perIdentity.set(connection.identityKey, n);
      else perIdentity.delete(connection.identityKey);
    }
    connection.closed?.(code, String(reason)).catch((error: unknown) => log.warn({ err: error }, "a WebSocket's operations could not be ended cleanly"));
  }

  const open = (socket: WebSocket, request: WebSocketRequest) => {
    const connection = new Connection(socket);
    // Swept from now on, not from connection_init: a credential revoked before the client speaks closes the socket.
    connection.identity = request.identity;
    connection.expiresAt = expiresAtOf(request.identity);
    connections.set(socket, connection);
    socket.on("error", onSocketError);
    socket.on("pong", onPong);
    socket.on("message", onMessage);
    socket.once("close", onClose);
    if (closing) {
      closeSocket(socket, CLOSE_GOING_AWAY, "Server shutting down");
      return;
    }
    connection.closed = graphqlWs.opened(connection, { socket, request });
  };

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    // Node hands the socket over without its own error listener: until ws takes it over (or for good, when the
    // upgrade is refused), a reset by the peer must end the socket, not become an uncaught error.
    socket.on("error", onEarlyError);
    const pathName = pathOf(req.url ?? "/");
    if (req.headers.upgrade?.toLowerCase() !== "websocket") {
      // Not a WebSocket (h2c and the like): answered as the plain HTTP request it also is, without upgrading.
      const res = new ServerResponse(req);
      res.shouldKeepAlive = false;
      res.assignSocket(socket as never);
      res.once("finish", () => {
        // Node announces the responses it made itself; this one it did not make, so we announce it (serverStats counts there).
        if (responseFinished.hasSubscribers) responseFinished.publish({ request: req, response: res, socket, server: app.server });
        socket.end();
      });
      app.routing(req, res);
      return;
    }
    const id = (typeof req.headers["x-request-id"] === "string" && req.headers["x-request-id"]) || randomUUID();
    if (!isGraphQLPath(pathName, graphqlPath)) {
      log.info({ reqId: id, url: pathName }, "WebSocket upgrade refused: not the GraphQL path");
      refuseUpgrade(socket, 404, "Not Found", {
        statusCode: 404,
        error: "Not Found",
        message: `WebSocket connections are accepted on ${graphqlPath} only (graphql-transport-ws); received an upgrade for ${pathName}.`,
      });
      return;
    }
    if (closing) {
      refuseUpgrade(socket, 503, "Service Unavailable", { statusCode: 503, error: "Service Unavailable", message: "The server is shutting down; connect again." }, "retry-after: 1\r\n");
      return;
    }
    const header = req.headers.authorization;
    const upgrade = (identity: Identity | undefined) => {
      socket.off("error", onEarlyError);
      if (socket.destroyed) return;
      const request: WebSocketRequest = { id, identity, authorization: header };
      wss.handleUpgrade(req, socket, head, (ws) => open(ws, request));
    };
    if (header === undefined) {
      upgrade(undefined);
      return;
    }
    resolver.resolve(header).then(upgrade, (error: unknown) => {
      refuseUpgrade(socket, 503, "Service Unavailable", identityLookupFailure(error, log, { reqId: id, websocket: true }), "retry-after: 1\r\n");
    });
  };
  app.server.on("upgrade", onUpgrade);

  app.addHook("onRoute", (route: RouteOptions) => {
    if (route.url !== graphqlPath) return;
    // grafserv offers @fastify/websocket a handler on its GET route; sockets are opened above instead.
    delete (route as { wsHandler?: unknown }).wsHandler;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    // Around grafserv's handler rather than a preHandler hook: Fastify's hook runner would cost every GraphQL request a microsecond or two.
    if (methods.includes("GET") || methods.includes("POST")) route.handler = refuseSubscriptionOverHttp(graphqlPath, route.handler);
  });

  // Keep-alive: every keepAliveMs, a socket that did not answer the previous ping is cut, the others pinged.
  // forEach, not for…of: no entry array per socket, so an idle server allocates next to nothing and V8's
  // memory reducer can return the young generation's space.
  // A sweep that comes late means this process was too busy to run it: answers to the previous ping may be waiting,
  // unread, behind the timer. Nobody is cut on such a round; everyone is pinged again.
  let lastSweep = Date.now();
  const keepAlive =
    limits.keepAliveMs > 0
      ? setInterval(() => {
          const now = Date.now();
          const late = now - lastSweep > limits.keepAliveMs * 1.5;
          lastSweep = now;
          connections.forEach((connection, socket) => {
            if (socket.readyState !== socket.OPEN) return;
            if (!connection.alive && !late) {
              socket.terminate();
              return;
            }
            connection.alive = false;
            socket.ping();
          });
        }, limits.keepAliveMs).unref()
      : undefined;
  // Session expiry: one sweep for all sockets, often enough to close an expired one within a second.
  const expiry = setInterval(() => {
    const now = Date.now();
    connections.forEach((connection, socket) => {
      if (connection.expiresAt <= now) closeSocket(socket, CLOSE_UNAUTHORIZED, "Unauthorized: the session has expired");
    });
  }, EXPIRY_SWEEP_MS).unref();

  app.addHook("preClose", (done) => {
    closing = true;
    // 1001 "going away": clients reconnect, elsewhere. ws sends the close frame after what is already queued.
    const sockets = [...connections.keys()];
    if (sockets.length === 0) {
      done();
      return;
    }
    log.info({ sockets: sockets.length }, "closing WebSocket connections (1001)");
    let left = sockets.length;
    const timer = setTimeout(() => {
      for (const socket of sockets) if (socket.readyState !== socket.CLOSED) socket.terminate();
    }, 2000);
    for (const socket of sockets) {
      socket.once("close", () => {
        if (--left === 0) {
          clearTimeout(timer);
          done();
        }
      });
      if (socket.readyState === socket.CLOSED) socket.emit("close");
      else closeSocket(socket, CLOSE_GOING_AWAY, "Server shutting down");
    }
  });
  app.addHook("onClose", (_app, done) => {
    clearInterval(keepAlive);
    clearInterval(expiry);
    app.server.off("upgrade", onUpgrade);
    wss.close();
    done();
  });

  let sweeping: Promise<void> | undefined;
  let again = false;
  const sweep = async () => {
    const held = new Map<Connection, Identity>();
    connections.forEach((connection) => {
      if (connection.identity !== undefined) held.set(connection, connection.identity);
    });
    if (held.size === 0) return;
    const valid = await resolver.stillValid(held.values());
    // Only what was checked: a socket whose identity connection_init settled meanwhile was checked there.
    held.forEach((identity, connection) => {
      if (connection.identity === identity && !valid.has(credentialIdOf(identity))) connection.close(CLOSE_UNAUTHORIZED, REVOKED_REASON);
    });
  };
  const runSweep = () => {
    if (sweeping) {
      again = true;
      return;
    }
    sweeping = sweep()
      .catch((error: unknown) => log.warn({ err: error }, "could not check the credentials of WebSocket connections"))
      .finally(() => {
        sweeping = undefined;
        if (again) {
          again = false;
          runSweep();
        }
      });
  };

  return { credentialsChanged: runSweep, socketCount: () => connections.size };
}

/**
 * A subscription sent over POST or GET: a GraphQL error naming the WebSocket
 * endpoint, instead of grafserv's generic answers. Costs a substring test per
 * request; only documents containing "subscription" are parsed here.
 */
function refuseSubscriptionOverHttp(graphqlPath: string, handler: RouteHandlerMethod): RouteHandlerMethod {
  return function (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) {
    const params = (request.method === "GET" ? request.query : request.body) as { query?: unknown; operationName?: unknown } | undefined;
    const query = params?.query;
    if (typeof query !== "string" || !query.includes("subscription") || !isSubscription(query, params?.operationName)) return handler.call(this, request, reply);
    const host = request.headers.host ?? "host";
    void reply
      .code(400)
      .header("content-type", "application/graphql-response+json; charset=utf-8")
      .send({
        errors: [
          {
            message: `Subscriptions are served over WebSocket only: connect to ws://${host}${graphqlPath} with the graphql-transport-ws protocol (the graphql-ws client); received a subscription over HTTP ${request.method}.`,
            extensions: { code: ErrorCode.SUBSCRIPTION_NEEDS_WEBSOCKET },
          },
        ],
      });
    return undefined;
  };
}

/** Whether the operation to run is a subscription; a document that does not parse is not (grafserv reports its syntax error). */
function isSubscription(query: string, operationName: unknown): boolean {
  try {
    return getOperationAST(parse(query), typeof operationName === "string" ? operationName : undefined)?.operation === "subscription";
  } catch {
    return false;
  }
}
