import type { FastifyInstance } from "fastify";
import { WebSocketServer, type RawData, type WebSocket } from "ws";
import { CloseCode, handleProtocols, makeServer, type ServerOptions as GraphQLWSOptions } from "graphql-ws";
import { makeGraphQLWSConfig, type GrafservBase } from "grafserv";
import { GraphQLError } from "graphql";
import { expiresAtOf, identityKey, type Identity } from "../src/auth/identity.js";
import type { IdentityResolver } from "../src/auth/resolver.js";
import { createRevocationSweep, settleSocketIdentity, type IdentityHolder } from "../src/auth/socket-identity.js";
import { ErrorCode } from "../src/errors.js";
import type { Logger } from "../src/logger.js";
import type { TrustFunction } from "../src/trust-proxy.js";
import type { WebSocketLimits } from "../src/live/limits.js";
import { CLOSE_TOO_MANY_CONNECTIONS, IdentitySlots, startSocketSweeps, type SweptConnection } from "../src/live/socket-limits.js";
import { UPGRADE_ID, upgradeAdmission, type AdmittedUpgrade } from "./websocket-upgrade.js";

export interface WebSocketFrontOptions {
  graphqlPath: string;
  resolver: IdentityResolver;
  limits: WebSocketLimits;
  log: Logger;
  /** While `draining` is true, upgrades are refused with 503 (src/start.ts sets it at stop()). */
  drain?: { readonly draining: boolean } | undefined;
  /** The peers whose X-Request-ID is taken as an upgrade's id (src/trust-proxy.ts). */
  trustProxy?: TrustFunction | undefined;
}

export interface WebSocketFront {
  /** A credential changed somewhere (NOTIFY): close the sockets of every credential no longer valid. */
  credentialsChanged(): void;
  /** Open sockets of this process. */
  socketCount(): number;
  /**
   * Close up to `count` sockets, the oldest first, with the code a graphql-ws
   * client reconnects on (1013, try again later): the rebalance of
   * src/live/rebalance.ts. Returns how many it closed.
   */
  shed(count: number): number;
}

/**
 * What a connection keeps of its upgrade request, in place of the request
 * itself (its headers and parser state would live as long as the socket).
 * The GraphQL context reads it back as `ws.request` (grafservRequestInfo).
 */
export type WebSocketRequest = AdmittedUpgrade;

type Extra = { socket: WebSocket; request: WebSocketRequest };
type Receive = (data: string) => Promise<void>;

/**
 * One open socket: the hub's bookkeeping and the socket graphql-ws talks to,
 * in one object with shared methods. Closures per socket would each live as
 * long as it does; ten thousand idle subscribers are ten thousand of each.
 */
class Connection implements IdentityHolder, SweptConnection {
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
/** Sent to the sockets a rebalance moves: graphql-ws 6's client retries on it (only its own fatal codes and 4xxx refusals stop it). */
export const CLOSE_TRY_AGAIN_LATER = 1013;
/** How long sockets get to close after the 1001 before they are cut, ms. */
const CLOSE_GRACE_MS = 2000;

function closeSocket(socket: WebSocket, code: number, reason: string): void {
  if (socket.readyState === socket.OPEN || socket.readyState === socket.CONNECTING) socket.close(code, reason);
}

/** The sockets of one front, with the per-identity counts, shared by its parts. */
interface Sockets {
  readonly connections: Map<WebSocket, Connection>;
  readonly slots: IdentitySlots;
  closing: boolean;
}

/**
 * Subscriptions over WebSocket at the GraphQL path (graphql-transport-ws), on
 * grafserv's own graphql-ws configuration plus the hub's identity, limits,
 * revocation and shutdown. The upgrade is taken from the HTTP server's
 * "upgrade" event, before Fastify: no route, hook or Express handler runs for
 * it, and no plain request pays for WebSocket support. grafserv's GET route
 * still carries the handler it offers @fastify/websocket (`wsHandler`), which
 * Fastify without that plugin ignores. A subscription sent over HTTP is
 * answered by src/graphql/subscription-over-http.ts.
 */
export async function addWebSockets(app: FastifyInstance, serv: GrafservBase, options: WebSocketFrontOptions): Promise<WebSocketFront> {
  const { graphqlPath, resolver, limits, log } = options;
  const sockets: Sockets = { connections: new Map(), slots: new IdentitySlots(limits.connectionsPerIdentity), closing: false };
  const graphqlWs = makeServer(graphqlWsConfig(serv, sockets, options));
  // No compression: ws keeps a zlib context per socket for it (tens of KiB each), and alerts are tiny.
  // No client tracking: the connections map is the one list of sockets.
  const wss = new WebSocketServer({ noServer: true, maxPayload: limits.maxMessageBytes, perMessageDeflate: false, clientTracking: false, handleProtocols });
  const listeners = socketListeners(sockets, log);
  // The 101 carries the upgrade's id too, as every HTTP response does.
  wss.on("headers", (headers: string[], req: { [UPGRADE_ID]?: string }) => {
    if (req[UPGRADE_ID] !== undefined) headers.push(`x-request-id: ${req[UPGRADE_ID]}`);
  });

  const open = (socket: WebSocket, request: WebSocketRequest) => {
    const connection = new Connection(socket);
    // Swept from now on, not from connection_init: a credential revoked before the client speaks closes the socket.
    connection.identity = request.identity;
    connection.expiresAt = expiresAtOf(request.identity);
    sockets.connections.set(socket, connection);
    socket.on("error", listeners.onSocketError);
    socket.on("pong", listeners.onPong);
    socket.on("message", listeners.onMessage);
    socket.once("close", listeners.onClose);
    if (sockets.closing) {
      closeSocket(socket, CLOSE_GOING_AWAY, "Server shutting down");
      return;
    }
    connection.closed = graphqlWs.opened(connection, { socket, request });
  };
  const onUpgrade = upgradeAdmission({
    app,
    graphqlPath,
    resolver,
    log,
    trustProxy: options.trustProxy,
    closing: () => sockets.closing || options.drain?.draining === true,
    accept: (req, socket, head, request) => wss.handleUpgrade(req, socket, head, (ws) => open(ws, request)),
  });
  app.server.on("upgrade", onUpgrade);
  const stopSweeps = startSocketSweeps(sockets.connections, limits.keepAliveMs);
  app.addHook("preClose", (done) => {
    sockets.closing = true;
    closeAll(sockets.connections, log, done);
  });
  app.addHook("onClose", (_app, done) => {
    stopSweeps();
    app.server.off("upgrade", onUpgrade);
    wss.close();
    done();
  });
  return {
    credentialsChanged: createRevocationSweep(resolver, sockets.connections, log),
    socketCount: () => sockets.connections.size,
    shed: (count) => shedOldest(sockets, count),
  };
}

/** Closes up to `count` open sockets, in the order they opened (the map's order). */
function shedOldest(sockets: Sockets, count: number): number {
  let closed = 0;
  if (sockets.closing) return 0;
  for (const socket of sockets.connections.keys()) {
    if (closed >= count) break;
    if (socket.readyState !== socket.OPEN) continue;
    closeSocket(socket, CLOSE_TRY_AGAIN_LATER, "Rebalancing: connect again");
    closed++;
  }
  return closed;
}

/**
 * grafserv's graphql-ws configuration with the hub's admission at
 * connection_init (the identity, then its connection slot) and the bound on
 * operations per connection.
 */
function graphqlWsConfig(serv: GrafservBase, sockets: Sockets, options: WebSocketFrontOptions): GraphQLWSOptions<Record<string, unknown> | undefined, Extra> {
  const { resolver, limits, log } = options;
  const base = makeGraphQLWSConfig(serv) as GraphQLWSOptions<Record<string, unknown> | undefined, Extra>;
  return {
    ...base,
    connectionInitWaitTimeout: limits.connectionInitTimeoutMs,
    async onConnect(ctx) {
      const { socket, request } = ctx.extra;
      const connection = sockets.connections.get(socket);
      if (!connection) return false;
      const identity = await settleSocketIdentity(resolver, connection, request, ctx.connectionParams?.authorization, log);
      if (identity === false) return false;
      // The peer may have left while its credential was being checked: its close has been handled already and
      // would never give back a slot counted now.
      if (sockets.connections.get(socket) !== connection) return false;
      const key = identityKey(identity);
      if (key !== undefined) {
        const refused = sockets.slots.take(key, identity);
        if (refused !== undefined) {
          closeSocket(socket, CLOSE_TOO_MANY_CONNECTIONS, refused);
          return false;
        }
      }
      connection.identity = identity;
      connection.identityKey = key;
      // Closed by the shared expiry sweep.
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
}

/** The socket's listeners, shared by every socket: each finds its connection by the socket. */
function socketListeners(sockets: Sockets, log: Logger) {
  const { connections, slots } = sockets;
  return {
    onPong(this: WebSocket) {
      const connection = connections.get(this);
      if (connection) connection.alive = true;
    },
    onMessage(this: WebSocket, data: RawData) {
      const receive = connections.get(this)?.receive;
      if (receive === undefined) return;
      receive(String(data)).catch((error: unknown) => {
        // graphql-ws answers the client's mistakes itself (4400 and the like); what throws here is the server's fault.
        log.error({ err: error }, "a WebSocket message could not be handled");
        closeSocket(this, CloseCode.InternalServerError, "Internal server error");
      });
    },
    // A socket's error is the peer's doing (a bad frame, an oversized message, a reset): ws has already closed it with its code.
    onSocketError(this: WebSocket, error: Error) {
      log.info({ err: error }, "WebSocket closed after an error");
      if (this.readyState === this.OPEN) this.terminate();
    },
    onClose(this: WebSocket, code: number, reason: Buffer) {
      const connection = connections.get(this);
      if (!connection) return;
      connections.delete(this);
      if (connection.identityKey !== undefined) slots.give(connection.identityKey);
      connection.closed?.(code, String(reason)).catch((error: unknown) => log.warn({ err: error }, "a WebSocket's operations could not be ended cleanly"));
    },
  };
}

/** Shutdown: 1001 "going away" to every socket (clients reconnect, elsewhere), after what is already queued; cut after the grace. */
function closeAll(connections: ReadonlyMap<WebSocket, Connection>, log: Logger, done: () => void): void {
  const sockets = [...connections.keys()];
  if (sockets.length === 0) {
    // A step of the stop's logged timeline, even with nothing to close.
    log.info({ sockets: 0 }, "WebSocket connections closed");
    done();
    return;
  }
  log.info({ sockets: sockets.length }, "closing WebSocket connections (1001)");
  let left = sockets.length;
  const timer = setTimeout(() => {
    for (const socket of sockets) if (socket.readyState !== socket.CLOSED) socket.terminate();
  }, CLOSE_GRACE_MS);
  for (const socket of sockets) {
    socket.once("close", () => {
      if (--left === 0) {
        clearTimeout(timer);
        log.info("WebSocket connections closed");
        done();
      }
    });
    if (socket.readyState === socket.CLOSED) socket.emit("close");
    else closeSocket(socket, CLOSE_GOING_AWAY, "Server shutting down");
  }
}
