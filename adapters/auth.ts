import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import { setIdentity } from "../src/auth/identity.js";
import type { IdentityResolver } from "../src/auth/resolver.js";
import type { ApiKeyUsage } from "../src/auth/api-key-usage.js";
import { isPoolSaturated } from "../src/db/pools.js";
import { ErrorCode } from "../src/errors.js";
import type { IdentityPoolLimiter } from "../src/db/identity-limit.js";
import { createAdmission } from "./overload.js";

/**
 * The one place the Authorization header is read. Registered
 * before everything else, it puts the identity on the raw Node request
 * (setIdentity), which is Express's `req` and what grafserv hands to the
 * GraphQL context, so nothing downstream parses the header again.
 *
 * A bad credential is simply no identity: routes and resolvers decide what
 * that means. Only a failing database lookup answers 503, because
 * then we cannot know who is asking; its body's `code` says whether the
 * database is unavailable or the server too busy to check in time. Lookups
 * use their own small pool, so plugin work never makes them wait.
 *
 * With a limiter, the same hook then admits the identity's request or refuses
 * it (adapters/overload.ts): one hook instead of two, and an anonymous request
 * (no header) passes with a single test.
 */
export function addAuthHook(fastify: FastifyInstance, resolver: IdentityResolver, usage?: ApiKeyUsage, limiter?: IdentityPoolLimiter): void {
  const admit = limiter ? createAdmission(limiter) : undefined;
  fastify.addHook("onRequest", (request, reply, done) => {
    const header = request.headers.authorization;
    // Health checks answer whatever the header says, without the database.
    if (header === undefined || (request.routeOptions.config as { hubPublic?: boolean }).hubPublic === true) {
      done();
      return;
    }
    resolver.resolve(header).then(
      (identity) => {
        if (identity === undefined) {
          done();
          return;
        }
        setIdentity(request.raw, identity);
        if (identity.kind === "operator") usage?.record(identity.apiKeyId);
        if (admit === undefined || admit(request, reply, identity)) done();
      },
      (error: unknown) => {
        void reply.code(503).header("retry-after", "1").send(identityLookupFailure(error, request.log));
      },
    );
  });
}

/**
 * A credential that could not be checked: logged, and the 503 body that both
 * HTTP requests and WebSocket upgrades answer (with Retry-After: 1). Every
 * connection of the credentials pool staying busy (a flood of distinct
 * credentials) means the database is up and the server loaded: a warning.
 * Anything else is a fault of the database: an error.
 */
export function identityLookupFailure(error: unknown, log: Pick<FastifyBaseLogger, "warn" | "error">, bindings: object = {}) {
  if (isPoolSaturated(error)) {
    log.warn({ ...bindings, err: error }, "identity lookup waited too long for a database connection");
    return {
      statusCode: 503,
      code: ErrorCode.SERVER_BUSY,
      error: "Service Unavailable",
      message: "The credential could not be checked because the server is busy; retry shortly.",
    };
  }
  log.error({ ...bindings, err: error }, "identity lookup failed");
  return {
    statusCode: 503,
    code: ErrorCode.DATABASE_UNAVAILABLE,
    error: "Service Unavailable",
    message: "The credential could not be checked because the database is unavailable; retry shortly.",
  };
}
