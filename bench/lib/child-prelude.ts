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
 * 3. Sum the garbage-collection pauses (scavenges apart), for the bench's
 *    "GC µs per request": how much of a request's CPU the collector takes.
 */
import pg from "pg";
import { constants, PerformanceObserver, type PerformanceEntry } from "node:perf_hooks";

process.setSourceMapsEnabled(false);

/** Node's own AbortController.prototype.abort, taken before anything the targets import can replace it (bench/bare/server.ts's `nativeabort`). */
export const nativeAbort = AbortController.prototype.abort;

/** Time the process spent in garbage-collection pauses so far, µs (V8's own timing, reported by Node). */
export const gcCounters = { pauseUs: 0, minorUs: 0, minorCount: 0, otherCount: 0 };
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const us = entry.duration * 1000;
    gcCounters.pauseUs += us;
    if ((entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR) {
      gcCounters.minorUs += us;
      gcCounters.minorCount++;
    } else gcCounters.otherCount++;
  }
}).observe({ entryTypes: ["gc"] });

export const pgCounters = { statements: 0, roundTrips: 0 };

type Internals = { pipeline?: boolean; _activeQuery?: unknown; _sentQueryQueue?: unknown[]; _queryQueue?: unknown[] };
const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
pg.Client.prototype.query = function countedQuery(this: pg.Client & Internals, ...args: unknown[]) {
  pgCounters.statements++;
  const busy = this.pipeline === true && (this._activeQuery != null || (this._sentQueryQueue?.length ?? 0) > 0 || (this._queryQueue?.length ?? 0) > 0);
  if (!busy) pgCounters.roundTrips++;
  return query.apply(this, args);
} as typeof pg.Client.prototype.query;
