import type { FastifyInstance } from "fastify";
import diagnosticsChannel from "node:diagnostics_channel";
import { ServerResponse, type IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { Identity } from "../src/auth/identity.js";
import type { IdentityResolver } from "../src/auth/resolver.js";
import type { Logger } from "../src/logger.js";
import type { TrustFunction } from "../src/trust-proxy.js";
import { identityLookupFailure } from "./auth.js";
import { requestIdOf } from "./fastify.js";
import { isGraphQLPath, pathOf } from "./graphql-path.js";

const responseFinished = diagnosticsChannel.channel("http.server.response.finish");

/** The upgrade's id on its request, for the 101 response's x-request-id (ws's "headers" event sees only the request). */
export const UPGRADE_ID = Symbol("hub.upgradeId");

/** What an admitted upgrade hands on: its request id, the identity its header gave, the header itself. */
export interface AdmittedUpgrade {
  /** The upgrade request's id, for logs. */
  id: string;
  /** The identity settled at connection_init (until then, what the upgrade's Authorization header gave). */
  identity: Identity | undefined;
  /** The upgrade's Authorization header, checked again at connection_init, then dropped (a credential). */
  authorization: string | undefined;
}

export interface UpgradeAdmissionOptions {
  app: FastifyInstance;
  graphqlPath: string;
  resolver: IdentityResolver;
  log: Logger;
  /** The peers whose X-Request-ID is taken as the upgrade's id. */
  trustProxy?: TrustFunction | undefined;
  /** The server is draining or shutting down: upgrades are refused with 503, so a proxy retries them elsewhere. */
  closing(): boolean;
  /** Completes an admitted upgrade (the WebSocket handshake). */
  accept(req: IncomingMessage, socket: Duplex, head: Buffer, upgrade: AdmittedUpgrade): void;
}

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

/** Not a WebSocket (h2c and the like): answered as the plain HTTP request it also is, without upgrading. */
function answerAsHttp(app: FastifyInstance, req: IncomingMessage, socket: Duplex): void {
  const res = new ServerResponse(req);
  res.setHeader("connection", "close");
  res.assignSocket(socket as never);
  res.once("finish", () => {
    // Node announces the responses it made itself; this one it did not make, so we announce it (serverStats counts there).
    if (responseFinished.hasSubscribers) responseFinished.publish({ request: req, response: res, socket, server: app.server });
    socket.end();
  });
  app.routing(req, res);
}

/**
 * The HTTP server's "upgrade" listener: which upgrades become WebSockets.
 * Only on the GraphQL path, not while shutting down, and with the upgrade's
 * Authorization header resolved first (a database that cannot be asked is a
 * 503, as over HTTP).
 */
export function upgradeAdmission(options: UpgradeAdmissionOptions): (req: IncomingMessage, socket: Duplex, head: Buffer) => void {
  const { app, graphqlPath, resolver, log } = options;
  return (req, socket, head) => {
    // Node hands the socket over without its own error listener: until ws takes it over (or for good, when the
    // upgrade is refused), a reset by the peer must end the socket, not become an uncaught error.
    socket.on("error", onEarlyError);
    const pathName = pathOf(req.url ?? "/");
    if (req.headers.upgrade?.toLowerCase() !== "websocket") {
      answerAsHttp(app, req, socket);
      return;
    }
    const id = requestIdOf(req, options.trustProxy);
    if (!isGraphQLPath(pathName, graphqlPath)) {
      log.info({ reqId: id, url: pathName }, "WebSocket upgrade refused: not the GraphQL path");
      refuseUpgrade(
        socket,
        404,
        "Not Found",
        {
          statusCode: 404,
          error: "Not Found",
          message: `WebSocket connections are accepted on ${graphqlPath} only (graphql-transport-ws); received an upgrade for ${pathName}.`,
        },
        `x-request-id: ${id}\r\n`,
      );
      return;
    }
    if (options.closing()) {
      refuseUpgrade(socket, 503, "Service Unavailable", { statusCode: 503, error: "Service Unavailable", message: "The server is shutting down; connect again." }, `retry-after: 1\r\nx-request-id: ${id}\r\n`);
      return;
    }
    const header = req.headers.authorization;
    (req as { [UPGRADE_ID]?: string })[UPGRADE_ID] = id;
    const upgrade = (identity: Identity | undefined) => {
      socket.off("error", onEarlyError);
      if (socket.destroyed) return;
      options.accept(req, socket, head, { id, identity, authorization: header });
    };
    if (header === undefined) {
      upgrade(undefined);
      return;
    }
    resolver.resolve(header).then(upgrade, (error: unknown) => {
      refuseUpgrade(socket, 503, "Service Unavailable", identityLookupFailure(error, log, { reqId: id, websocket: true }), `retry-after: 1\r\nx-request-id: ${id}\r\n`);
    });
  };
}
