/**
 * Process-wide request counters, kept by the HTTP adapters and read by
 * `serverStats()` (e.g. for a /metrics route). Plain increments: cheap enough
 * for the hot path, and no client library is imposed on users.
 */
const startedAt = new Date();
const counters = { total: 0, graphql: 0, express: 0, status2xx: 0, status3xx: 0, status4xx: 0, status5xx: 0 };

export function countResponse(kind: "graphql" | "express" | "other", statusCode: number): void {
  counters.total++;
  if (kind !== "other") counters[kind]++;
  if (statusCode >= 500) counters.status5xx++;
  else if (statusCode >= 400) counters.status4xx++;
  else if (statusCode >= 300) counters.status3xx++;
  else counters.status2xx++;
}

export interface ServerStats {
  startedAt: string;
  uptimeSeconds: number;
  requests: typeof counters;
  memory: { rssBytes: number; heapUsedBytes: number };
}

export function serverStats(): ServerStats {
  const memory = process.memoryUsage();
  return {
    startedAt: startedAt.toISOString(),
    uptimeSeconds: Math.round(process.uptime()),
    requests: { ...counters },
    memory: { rssBytes: memory.rss, heapUsedBytes: memory.heapUsed },
  };
}
