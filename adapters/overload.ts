import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { IdentityPoolLimiter } from "../src/db/identity-limit.js";
import { ErrorCode } from "../src/errors.js";
import { identityOf, type Identity } from "../src/auth/identity.js";
import { isGraphQLPath, pathOf } from "./graphql-path.js";

/**
 * One player (or API key) has at most perIdentityConnections +
 * perIdentityQueue requests in progress at once: its further requests are
 * refused right after the identity is known (the auth hook calls this), before
 * their body is read or any GraphQL or route work is done for them. Without
 * this, a burst of a thousand requests is parsed, planned and executed (in the
 * same few event loop turns, stalling every other request) only to be refused
 * at the pool.
 *
 * The refusal is written directly (429, Retry-After: 1; GraphQL's shape on
 * /graphql, the hub's JSON error shape elsewhere), without Fastify's reply
 * pipeline or a log line per request: a flood costs as little as it can.
 * One warning per second says how many were refused.
 *
 * Returns whether the request was admitted; when not, its response is sent.
 */
export type Admission = (request: FastifyRequest, reply: FastifyReply, identity: Identity) => boolean;

export function createAdmission(limiter: IdentityPoolLimiter): Admission {
  let refusedSinceLog = 0;
  let lastLogAt = 0;
  return (request, reply, identity) => {
    const admitted = limiter.admit(identity);
    if (typeof admitted === "function") {
      // "close" also fires for hijacked replies (Express) and aborted requests.
      reply.raw.once("close", admitted);
      return true;
    }
    const graphql = isGraphQLPath(pathOf(request.url));
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
    return false;
  };
}

/**
 * The admission as a hook of its own, after the auth hook (the benches measure
 * it apart; the hub passes the limiter to addAuthHook instead, one hook for both).
 */
export function addOverloadHook(fastify: FastifyInstance, limiter: IdentityPoolLimiter): void {
  const admit = createAdmission(limiter);
  fastify.addHook("onRequest", (request, reply, done) => {
    const identity = identityOf(request.raw);
    if (identity === undefined || admit(request, reply, identity)) done();
  });
}
