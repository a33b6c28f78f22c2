import type { FastifyInstance } from "fastify";
import type { IdentityPoolLimiter } from "../src/db/identity-limit.js";
import { ErrorCode } from "../src/errors.js";
import { identityOf } from "../src/auth/identity.js";

/**
 * One player (or API key) has at most perIdentityConnections +
 * perIdentityQueue requests in progress at once: its further requests are
 * refused here, right after the identity is known, before their body is read
 * or any GraphQL or route work is done for them. Without this, a burst of a
 * thousand requests is parsed, planned and executed (in the same few event
 * loop turns, stalling every other request) only to be refused at the pool.
 *
 * The refusal is written directly (429, Retry-After: 1; GraphQL's shape on
 * /graphql, the hub's JSON error shape elsewhere), without Fastify's reply
 * pipeline or a log line per request: a flood costs as little as it can.
 * One warning per second says how many were refused. Registered after the
 * auth hook.
 */
export function addOverloadHook(fastify: FastifyInstance, limiter: IdentityPoolLimiter): void {
  let refusedSinceLog = 0;
  let lastLogAt = 0;
  fastify.addHook("onRequest", (request, reply, done) => {
    const identity = identityOf(request.raw);
    if (identity === undefined) {
      done();
      return;
    }
    const admitted = limiter.admit(identity);
    if (typeof admitted === "function") {
      // "close" also fires for hijacked replies (Express) and aborted requests.
      reply.raw.once("close", admitted);
      done();
      return;
    }
    const graphql = request.url.split("?")[0] === "/graphql";
    const body = JSON.stringify(
      graphql
        ? { errors: [{ message: admitted, extensions: { code: ErrorCode.TOO_MANY_REQUESTS } }] }
        : { statusCode: 429, code: ErrorCode.TOO_MANY_REQUESTS, error: "Too Many Requests", message: admitted },
    );
    reply.hijack();
    reply.raw.writeHead(429, {
      "content-type": "application/json; charset=utf-8",
      "content-length": Buffer.byteLength(body),
      "retry-after": "1",
    });
    reply.raw.end(body);
    refusedSinceLog++;
    const now = Date.now();
    if (now - lastLogAt >= 1000) {
      const who = identity.kind === "user" ? { userId: identity.session.user_id } : { apiKeyId: identity.apiKeyId };
      request.log.warn({ ...who, refused: refusedSinceLog }, "requests refused: over the per-identity limit of requests in progress");
      lastLogAt = now;
      refusedSinceLog = 0;
    }
  });
}
