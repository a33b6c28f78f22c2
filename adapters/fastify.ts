import Fastify, { type FastifyInstance } from "fastify";
import { randomUUID } from "node:crypto";
import type { Logger } from "../src/logger.js";
import { countResponse } from "../src/stats.js";

export interface FastifyOptions {
  logger: Logger;
  /** Largest request body in bytes (413 beyond). */
  bodyLimit: number;
}

/**
 * The Fastify front (design §2): pino logging with the Authorization header
 * redacted, a request id on every request (taken from x-request-id when a proxy
 * set one), and JSON 404s for any path nothing handled.
 */
export function createFastify(options: FastifyOptions): FastifyInstance {
  const app = Fastify({
    loggerInstance: options.logger,
    bodyLimit: options.bodyLimit,
    requestIdHeader: "x-request-id",
    genReqId: () => randomUUID(),
    return503OnClosing: true,
    forceCloseConnections: "idle",
    routerOptions: { ignoreTrailingSlash: true },
  });
  // Express requests are hijacked and counted by the Express adapter instead.
  app.addHook("onResponse", (request, reply, done) => {
    countResponse(request.routeOptions.url === "/graphql" ? "graphql" : "other", reply.statusCode);
    done();
  });
  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send({
      statusCode: 404,
      error: "Not Found",
      message: `No route for ${request.method} ${request.url.split("?")[0]}`,
    });
  });
  return app as unknown as FastifyInstance;
}
