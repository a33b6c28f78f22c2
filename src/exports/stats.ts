import { createServerStats, serverStatsOfRequest, type ServerStats, type ServerStatsRecorder } from "../stats.js";
import { currentServer } from "./current-server.js";

export type { ServerStats };

/** Before any server starts: zeros, and the time this module loaded (nothing counts into it). */
const beforeAnyServer: ServerStatsRecorder = createServerStats();

/**
 * `serverStats` of `@hubpkg/hub`: the stats of the server that received `req`
 * (an Express request of the app `configureApp` configured); without a
 * request, those of the server started last that is still running in this
 * process (./current-server.ts).
 */
export function serverStats(req?: object): ServerStats {
  const own = req === undefined ? undefined : serverStatsOfRequest(req);
  return (own ?? currentServer()?.stats ?? beforeAnyServer).snapshot();
}
