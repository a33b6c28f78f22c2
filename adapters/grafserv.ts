import type { FastifyInstance } from "fastify";
import { grafserv } from "grafserv/fastify/v5";
import type { PostGraphileInstance } from "postgraphile";

/**
 * POST and GET /graphql through grafserv's Fastify v5 adapter. GET serves
 * queries; grafserv answers a mutation over GET with 405, as the GraphQL over
 * HTTP spec asks.
 */
export async function mountGraphQL(app: FastifyInstance, pgl: PostGraphileInstance): Promise<void> {
  const serv = pgl.createServ(grafserv);
  await serv.addTo(app);
}
