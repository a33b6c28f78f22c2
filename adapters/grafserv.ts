import type { FastifyInstance } from "fastify";
import type { IncomingMessage } from "node:http";
import { grafserv } from "grafserv/fastify/v5";
import type {} from "grafserv/node"; // declares requestContext.node
import type { PostGraphileInstance } from "postgraphile";
import { identityOf } from "../src/auth/identity.js";
import type { RequestInfo } from "../src/graphql/preset.js";
import { GRAPHQL_PATH } from "./graphql-path.js";
import { addWebSockets, type WebSocketFront, type WebSocketFrontOptions, type WebSocketRequest } from "./websocket.js";

/**
 * POST and GET /graphql through grafserv's Fastify v5 adapter. GET serves
 * queries; grafserv answers a mutation over GET with 405, as the GraphQL over
 * HTTP spec asks.
 */
export async function mountGraphQL(
  app: FastifyInstance,
  pgl: PostGraphileInstance,
  websockets?: Omit<WebSocketFrontOptions, "graphqlPath">,
): Promise<WebSocketFront | undefined> {
  const serv = pgl.createServ(grafserv);
  const front = websockets ? await addWebSockets(app, serv, { ...websockets, graphqlPath: GRAPHQL_PATH }) : undefined;
  await serv.addTo(app);
  return front;
}

/**
 * The preset's `requestInfo`: what the GraphQL context takes from the HTTP
 * request. grafserv hands over the raw Node request (where the auth hook left
 * the identity) under `node`, whichever server adapter runs it, and Fastify's
 * request (with its id) under `fastifyv5`.
 */
export function grafservRequestInfo(requestContext: Partial<Grafast.RequestContext>): RequestInfo {
  // A subscription's operation carries what the socket kept of its upgrade request under `ws`, with the identity onConnect settled.
  const ws = (requestContext as { ws?: { request?: WebSocketRequest } }).ws;
  if (ws) return { identity: ws.request?.identity, requestId: ws.request?.id };
  return { identity: identityOf(requestContext.node?.req), requestId: requestContext.fastifyv5?.request.id };
}
