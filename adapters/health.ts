import type { FastifyInstance } from "fastify";

/** What readiness reads: cheap signals kept up to date elsewhere, never a query per probe. */
export interface HealthSignals {
  /** stop() has begun: the instance must get no new traffic. */
  draining(): boolean;
  /** The server's LISTEN connection is connected: the database answered it last time it could tell. */
  databaseReachable(): boolean;
}

export interface HealthPaths {
  liveness: string | false;
  readiness: string | false;
}

/** Route config the auth hook reads: a health route needs no Authorization lookup nor admission. */
export const PUBLIC_ROUTE = { hubPublic: true } as const;

/**
 * Liveness and readiness, Kubernetes' two questions. Liveness: the process
 * answers (no database work). Readiness: may this instance be sent traffic?
 * The server listens only once the database has answered and the migrations
 * are applied, so a listening server is ready until it drains. A database
 * outage after the start does not make it unready: every instance would
 * drop out of the proxy together, and clients would get the proxy's "no
 * server" instead of the hub's own retryable DATABASE_UNAVAILABLE; the body
 * says what the database looks like instead.
 */
export function mountHealth(app: FastifyInstance, paths: HealthPaths, signals: HealthSignals): void {
  const noStore = { "content-type": "application/json; charset=utf-8", "cache-control": "no-store" };
  if (paths.liveness !== false) {
    app.get(paths.liveness, { config: PUBLIC_ROUTE }, (_request, reply) => {
      void reply.headers(noStore).send({ status: "alive" });
    });
  }
  if (paths.readiness !== false) {
    app.get(paths.readiness, { config: PUBLIC_ROUTE }, (_request, reply) => {
      const database = signals.databaseReachable() ? "reachable" : "unreachable";
      if (signals.draining()) {
        void reply.code(503).headers(noStore).send({ status: "draining", database });
        return;
      }
      void reply.headers(noStore).send({ status: "ready", database });
    });
  }
}
