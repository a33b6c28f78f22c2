/**
 * Imported first by the target servers.
 *
 * 1. They are started with `node --import tsx` (so the bench stays
 *    TypeScript), and tsx turns on source-mapped stack traces for the whole
 *    process; a production `node dist/server.js` has them off, and mapping
 *    stacks costs CPU whenever an Error's stack is read. Turn them off again so
 *    both targets run the request path as production does.
 * 2. Count the Postgres statements and round trips of the process (every pool,
 *    every client), for the bench's "round trips per request": a figure the
 *    machine's load cannot move. A statement starts a round trip when nothing
 *    is outstanding on its connection; on a connection in pipeline mode, a
 *    statement written while earlier ones still await their answers shares
 *    their round trip. Without pipeline mode node-postgres writes a statement
 *    only once the previous one has been answered, so each is a round trip.
 */
import pg from "pg";

process.setSourceMapsEnabled(false);

export const pgCounters = { statements: 0, roundTrips: 0 };

type Internals = { pipeline?: boolean; _activeQuery?: unknown; _sentQueryQueue?: unknown[]; _queryQueue?: unknown[] };
const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
pg.Client.prototype.query = function countedQuery(this: pg.Client & Internals, ...args: unknown[]) {
  pgCounters.statements++;
  const busy = this.pipeline === true && (this._activeQuery != null || (this._sentQueryQueue?.length ?? 0) > 0 || (this._queryQueue?.length ?? 0) > 0);
  if (!busy) pgCounters.roundTrips++;
  return query.apply(this, args);
} as typeof pg.Client.prototype.query;
