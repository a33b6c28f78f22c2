/**
 * Request counters of one server, kept by the HTTP adapters and read by
 * `serverStats()` (e.g. for a /metrics route). Plain increments: cheap enough
 * for the hot path, and no client library is imposed on users. Each server
 * has its own (a test process may run several).
 */

export type ResponseKind = "graphql" | "express" | "other";

export interface ServerStats {
  /** When this server started. */
  startedAt: string;
  uptimeSeconds: number;
  requests: { total: number; graphql: number; express: number; status2xx: number; status3xx: number; status4xx: number; status5xx: number };
  memory: { rssBytes: number; heapUsedBytes: number };
}

export interface ServerStatsRecorder {
  countResponse(kind: ResponseKind, statusCode: number): void;
  snapshot(): ServerStats;
}

export function createServerStats(startedAt = new Date()): ServerStatsRecorder {
  const counters = { total: 0, graphql: 0, express: 0, status2xx: 0, status3xx: 0, status4xx: 0, status5xx: 0 };
  return {
    countResponse(kind, statusCode) {
      counters.total++;
      if (kind !== "other") counters[kind]++;
      if (statusCode >= 500) counters.status5xx++;
      else if (statusCode >= 400) counters.status4xx++;
      else if (statusCode >= 300) counters.status3xx++;
      else counters.status2xx++;
    },
    snapshot() {
      const memory = process.memoryUsage();
      return {
        startedAt: startedAt.toISOString(),
        uptimeSeconds: Math.round((Date.now() - startedAt.getTime()) / 1000),
        requests: { ...counters },
        memory: { rssBytes: memory.rss, heapUsedBytes: memory.heapUsed },
      };
    },
  };
}

/** Where a request finds its server's stats: inherited from the request's prototype (adapters/express.ts). */
const STATS = Symbol("hub.serverStats");

/** Make the requests built on this prototype report this server's stats to serverStats(req). */
export function attachServerStats(requestPrototype: object, stats: ServerStatsRecorder): void {
  Object.defineProperty(requestPrototype, STATS, { value: stats, configurable: true });
}

/** The stats of the server that received `req` (an Express request of the app `configureApp` configured); undefined for any other object. */
export function serverStatsOfRequest(req: object): ServerStatsRecorder | undefined {
  return (req as { [STATS]?: ServerStatsRecorder })[STATS];
}
