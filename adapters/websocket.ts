import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from "fastify";
import fastifyWebsocket from "@fastify/websocket";
import { makeHandler } from "graphql-ws/use/@fastify/websocket";
import { CloseCode, type ServerOptions as GraphQLWSOptions } from "graphql-ws";
import { makeGraphQLWSConfig, type GrafservBase } from "grafserv";
import { getOperationAST, GraphQLError, parse } from "graphql";
import type { WebSocket } from "ws";
import type { IncomingMessage, ServerResponse } from "node:http";
import type pg from "pg";
import { identityOf, type Identity } from "../src/auth/identity.js";
import type { IdentityResolver } from "../src/auth/resolver.js";
import { ErrorCode } from "../src/errors.js";
import type { Logger } from "../src/logger.js";
import type { WebSocketLimits } from "../src/live/limits.js";
import { releaseUpgradeAdmission } from "./overload.js";

export interface WebSocketFrontOptions {
  graphqlPath: string;
  resolver: IdentityResolver;
  /** For the revocation check: reads hub.session and hub.api_key. */
  credentialsPool: pg.Pool;
  limits: WebSocketLimits;
  log: Logger;
}

export interface WebSocketFront {
  /** A credential changed somewhere (NOTIFY): close the sockets of every credential no longer valid. */
  credentialsChanged(): void;
  /** Open sockets of this process. */
  socketCount(): number;
}

interface Tracked {
  identity: Identity | undefined;
  /** Its key in the per-identity counts, once counted. */
  identityKey: string | undefined;
  /** When the session behind it expires (ms since the epoch); Infinity for none. */
  expiresAt: number;
  /** Answered the previous keep-alive ping (or opened since it was sent). */
  alive: boolean;
}

/**
 * What a connection keeps of its upgrade request, in place of Fastify's
 * request (which holds the raw request, its reply, headers and a child
 * logger for as long as the socket lives). The GraphQL context reads it back
 * as `ws.request` (grafservRequestInfo).
 */
export interface WebSocketRequest {
  /** The upgrade request's id, for logs. */
  id: string;
  /** The identity the upgrade's Authorization header gave, replaced by connectionParams' once resolved. */
  identity: Identity | undefined;
  /** Whether the upgrade carried an Authorization header (a bad one is refused at connection_init). */
  hadAuthorization: boolean;
}

type Extra = { socket: WebSocket; request: WebSocketRequest };

/** Shared by every socket: a closure per socket would be kept for its whole life. */
function onPong(this: WebSocket) {
  const tracked = trackedOf.get(this);
  if (tracked) tracked.alive = true;
}
const trackedOf = new WeakMap<WebSocket, Tracked>();

/** What a graphql-ws client treats as "unauthorised": it does not reconnect with the same credential. */
export const CLOSE_UNAUTHORIZED = CloseCode.Unauthorized; // 4401
const CLOSE_GOING_AWAY = 1001;
const CLOSE_TOO_MANY_CONNECTIONS = 4429;
const CLOSE_TRY_AGAIN_LATER = 1013;
const EXPIRY_SWEEP_MS = 250;

const identityKeyOf = (identity: Identity | undefined) =>
  identity?.kind === "user" ? `session:${identity.session.id}` : identity?.kind === "operator" ? `apikey:${identity.apiKeyId}` : undefined;

/**
 * Subscriptions over WebSocket at the GraphQL path (graphql-transport-ws), on
 * grafserv's own graphql-ws configuration: registered before grafserv's
 * routes, it swaps the WebSocket handler grafserv gives its GET route for one
 * built from the same configuration plus the hub's identity, limits,
 * revocation and shutdown. Must be called before `serv.addTo(app)`.
 */
export async function addWebSockets(app: FastifyInstance, serv: GrafservBase, options: WebSocketFrontOptions): Promise<WebSocketFront> {
  const { graphqlPath, resolver, limits, log } = options;
  const sockets = new Map<WebSocket, Tracked>();
  const upgradeResponses = new WeakMap<IncomingMessage, ServerResponse>();
  const perIdentity = new Map<string, number>();
  let closing = false;

  const closeSocket = (socket: WebSocket, code: number, reason: string) => {
    if (socket.readyState === socket.OPEN || socket.readyState === socket.CONNECTING) socket.close(code, reason);
  };

  const base = makeGraphQLWSConfig(serv) as GraphQLWSOptions<Record<string, unknown> | undefined, Extra>;
  const config: GraphQLWSOptions<Record<string, unknown> | undefined, Extra> = {
    ...base,
    connectionInitWaitTimeout: limits.connectionInitTimeoutMs,
    async onConnect(ctx) {
      const { socket, request } = ctx.extra;
      const tracked = sockets.get(socket);
      if (!tracked) return false;
      // connectionParams.authorization, else the upgrade's Authorization header (already resolved by the auth hook).
      const fromParams = ctx.connectionParams?.authorization;
      let identity: Identity | undefined;
      if (fromParams !== undefined) {
        if (typeof fromParams !== "string") {
          closeSocket(socket, CLOSE_UNAUTHORIZED, "Unauthorized: connectionParams.authorization must be a string (session:<key> or apikey:<key>)");
          return false;
        }
        try {
          identity = await resolver.resolve(fromParams);
        } catch (error) {
          // The database could not be asked: not the client's fault, and worth a retry (1013 "try again later").
          log.warn({ err: error }, "a WebSocket credential could not be checked");
          closeSocket(socket, CLOSE_TRY_AGAIN_LATER, "The credential could not be checked: the database is unavailable or busy; retry shortly");
          return false;
        }
        if (!identity) {
          closeSocket(socket, CLOSE_UNAUTHORIZED, "Unauthorized: connectionParams.authorization is not a valid credential");
          return false;
        }
        request.identity = identity;
      } else {
        identity = request.identity;
        if (!identity && request.hadAuthorization) {
          closeSocket(socket, CLOSE_UNAUTHORIZED, "Unauthorized: the Authorization header is not a valid credential");
          return false;
        }
      }
      const key = identityKeyOf(identity);
      if (key !== undefined) {
        const held = perIdentity.get(key) ?? 0;
        if (held >= limits.connectionsPerIdentity) {
          closeSocket(socket, CLOSE_TOO_MANY_CONNECTIONS, `Too many connections: this credential already holds ${held} (at most ${limits.connectionsPerIdentity})`);
          return false;
        }
        perIdentity.set(key, held + 1);
      }
      tracked.identity = identity;
      tracked.identityKey = key;
      // Closed by the shared expiry sweep below.
      if (identity?.kind === "user") tracked.expiresAt = identity.session.expired_at.getTime();
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
  // No keep-alive of graphql-ws's own: it costs an interval per socket and a timeout and listener per ping.
  // One sweep for all sockets instead (below).
  const wsHandler = makeHandler(config, 0);

  const handler = function (this: FastifyInstance, socket: WebSocket, request: FastifyRequest) {
    // The upgrade is over: from now on the socket's own limits (connections per identity) apply.
    releaseUpgradeAdmission(request.raw);
    const tracked: Tracked = { identity: undefined, identityKey: undefined, expiresAt: Infinity, alive: true };
    sockets.set(socket, tracked);
    trackedOf.set(socket, tracked);
    socket.on("pong", onPong);
    // @fastify/websocket's error listener holds Fastify's request and reply for the socket's life: ours holds neither.
    // Ours is added first: removing an event's only listener deletes its key, and the emitter's
    // listener table then turns into a slower, larger dictionary for the socket's life.
    const theirs = socket.listeners("error");
    socket.on("error", onSocketError);
    for (const listener of theirs) socket.off("error", listener as never);
    // @fastify/websocket routes the upgrade with a ServerResponse bound to the TCP socket: unbound, it no longer
    // keeps the request, the reply, their listeners and logger alive with the socket.
    const response = upgradeResponses.get(request.raw);
    if (response) {
      upgradeResponses.delete(request.raw);
      if (response.socket) response.detachSocket(response.socket);
    }
    const slim: WebSocketRequest = { id: request.id, identity: identityOf(request.raw), hadAuthorization: request.headers.authorization !== undefined };
    socket.once("close", () => {
      sockets.delete(socket);
      if (tracked.identityKey !== undefined) {
        const n = (perIdentity.get(tracked.identityKey) ?? 1) - 1;
        if (n > 0) perIdentity.set(tracked.identityKey, n);
        else perIdentity.delete(tracked.identityKey);
      }
    });
    if (closing) {
      closeSocket(socket, CLOSE_GOING_AWAY, "Server shutting down");
      return;
    }
    const before = socket.listeners("error");
    wsHandler.call(this as never, socket, slim as never);
    // graphql-ws prints every socket error to the console as an internal error; a peer's bad frame or
    // oversized message is the peer's doing, and ws has already closed the socket with its code (1009 & co.).
    for (const listener of socket.listeners("error")) if (!before.includes(listener)) socket.off("error", listener as never);
  };

  // Ours before @fastify/websocket's: it reads wsHandler as the route is added.
  app.addHook("onRoute", (route: RouteOptions) => {
    if (route.url !== graphqlPath) {
      // Upgrades on other paths: a plain HTTP 404 before the route (the Express app's included) runs. A hook of
      // those routes only, so a request to the GraphQL path does not pay for it; a path no route matches gets
      // the ordinary 404.
      route.onRequest = [...(route.onRequest ? [route.onRequest].flat() : []), refuseUpgrade(graphqlPath)];
      return;
    }
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (methods.includes("GET") && route.wsHandler) {
      route.wsHandler = handler as never;
      // The upgrade's response, so the socket's handler can unbind it (see there).
      const recordUpgradeResponse = (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
        if (request.ws) upgradeResponses.set(request.raw, reply.raw);
        done();
      };
      route.onRequest = [...(route.onRequest ? [route.onRequest].flat() : []), recordUpgradeResponse as never];
    }
    if (methods.includes("GET") || methods.includes("POST")) {
      route.preHandler = [...(route.preHandler ? [route.preHandler].flat() : []), refuseSubscriptionOverHttp(graphqlPath)];
    }
  });

  const onSocketError = function (this: WebSocket, error: Error) {
    log.info({ err: error }, "WebSocket closed after an error");
    if (this.readyState === this.OPEN) this.terminate();
  };

  // Keep-alive: every keepAliveMs, a socket that did not answer the previous ping is cut, the others pinged.
  const keepAlive =
    limits.keepAliveMs > 0
      ? setInterval(() => {
          sockets.forEach((tracked, socket) => {
            if (socket.readyState !== socket.OPEN) return;
            if (!tracked.alive) {
              socket.terminate();
              return;
            }
            tracked.alive = false;
            socket.ping();
          });
        }, limits.keepAliveMs).unref()
      : undefined;
  // Session expiry: one sweep for all sockets, often enough to close an expired one within a second.
  const expiry = setInterval(() => {
    const now = Date.now();
    // forEach, not for…of: no entry array per socket four times a second, so an idle server allocates next to
    // nothing and V8's memory reducer can return the young generation's space.
    sockets.forEach((tracked, socket) => {
      if (tracked.expiresAt <= now) closeSocket(socket, CLOSE_UNAUTHORIZED, "Unauthorized: the session has expired");
    });
  }, EXPIRY_SWEEP_MS).unref();
  app.addHook("onClose", (_app, done) => {
    clearInterval(keepAlive);
    clearInterval(expiry);
    done();
  });

  await app.register(fastifyWebsocket, {
    // No compression: ws keeps a zlib context per socket for it (tens of KiB each), and alerts are tiny.
    options: { maxPayload: limits.maxMessageBytes, perMessageDeflate: false },
    // A socket's error is the peer's doing (a bad frame, a reset): it is closed, not a fault of the server.
    errorHandler(error, socket, request) {
      request.log.info({ err: error }, "WebSocket closed after an error");
      if (socket.readyState === socket.OPEN) socket.terminate();
    },
    preClose(done) {
      closing = true;
      // 1001 "going away": clients reconnect, elsewhere. ws sends the close frame after what is already queued.
      const open = [...sockets.keys()];
      if (open.length === 0) {
        done();
        return;
      }
      log.info({ sockets: open.length }, "closing WebSocket connections (1001)");
      let left = open.length;
      const timer = setTimeout(() => {
        for (const socket of open) if (socket.readyState !== socket.CLOSED) socket.terminate();
      }, 2000);
      for (const socket of open) {
        socket.once("close", () => {
          if (--left === 0) {
            clearTimeout(timer);
            done();
          }
        });
        if (socket.readyState === socket.CLOSED) socket.emit("close");
        else closeSocket(socket, CLOSE_GOING_AWAY, "Server shutting down");
      }
    },
  });

  let sweeping: Promise<void> | undefined;
  let again = false;
  const sweep = async () => {
    const sessionIds = new Set<string>();
    const keyIds = new Set<string>();
    for (const { identity } of sockets.values()) {
      if (identity?.kind === "user") sessionIds.add(identity.session.id);
      else if (identity?.kind === "operator") keyIds.add(identity.apiKeyId);
    }
    if (sessionIds.size === 0 && keyIds.size === 0) return;
    const { rows } = await options.credentialsPool.query<{ id: string }>(
      `select id from hub.session where id = any($1::uuid[]) and revoked_at is null and expired_at > now()
       union all
       select id from hub.api_key where id = any($2::uuid[]) and revoked_at is null`,
      [[...sessionIds], [...keyIds]],
    );
    const live = new Set(rows.map((r) => r.id));
    for (const [socket, { identity }] of sockets) {
      const id = identity?.kind === "user" ? identity.session.id : identity?.kind === "operator" ? identity.apiKeyId : undefined;
      if (id !== undefined && !live.has(id)) closeSocket(socket, CLOSE_UNAUTHORIZED, "Unauthorized: the credential was revoked or has expired");
    }
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

  return { credentialsChanged: runSweep, socketCount: () => sockets.size };
}

/** An upgrade on a route other than the GraphQL path: 404, saying where WebSockets are accepted. */
function refuseUpgrade(graphqlPath: string) {
  return function (request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) {
    if (!request.ws) {
      done();
      return;
    }
    void reply.code(404).send({
      statusCode: 404,
      error: "Not Found",
      message: `WebSocket connections are accepted on ${graphqlPath} only (graphql-transport-ws); received an upgrade for ${request.url.split("?")[0]}.`,
    });
  };
}

/**
 * A subscription sent over POST or GET: a GraphQL error naming the WebSocket
 * endpoint, instead of grafserv's generic answers. Costs a substring test per
 * request; only documents containing "subscription" are parsed here.
 */
function refuseSubscriptionOverHttp(graphqlPath: string) {
  return function (request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) {
    if (request.ws) {
      done();
      return;
    }
    const params = (request.method === "GET" ? request.query : request.body) as { query?: unknown; operationName?: unknown } | undefined;
    const query = params?.query;
    if (typeof query !== "string" || !query.includes("subscription")) {
      done();
      return;
    }
    let operation;
    try {
      operation = getOperationAST(parse(query), typeof params?.operationName === "string" ? params.operationName : undefined);
    } catch {
      done(); // grafserv reports the syntax error
      return;
    }
    if (operation?.operation !== "subscription") {
      done();
      return;
    }
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
  };
}
