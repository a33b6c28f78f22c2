/**
 * Messages between bench/run.ts and the two target servers (bench/hub/server.ts,
 * bench/baseline/server.ts) over the Node IPC channel. IPC rather than an HTTP
 * admin route so that reading the counters costs the target nothing that shows
 * up in its request path or its request counts.
 */

export type ParentMessage =
  | { type: "stats"; id: number }
  | { type: "profile-start"; id: number }
  | { type: "profile-stop"; id: number; file: string }
  | { type: "stop" };

export interface ChildStats {
  /** process.cpuUsage(): user and system CPU of the whole process, in µs. */
  cpuUserUs: number;
  cpuSystemUs: number;
  rssBytes: number;
  heapUsedBytes: number;
  /** Requests the bench's logging middleware saw (Express routes only). */
  loggedRequests: number;
  /** Postgres statements and round trips of the whole process so far (bench/lib/child-prelude.ts). */
  pgStatements: number;
  pgRoundTrips: number;
  /** Garbage-collection pauses of the whole process so far, µs. */
  gcPauseUs: number;
  /** Of which scavenges (the young generation), µs, and how many there were; and how many pauses of any other kind. */
  gcMinorUs: number;
  gcMinorCount: number;
  gcOtherCount: number;
}

export type ChildMessage =
  | { type: "ready"; url: string; superuserDatabaseUrl: string; pid: number }
  | { type: "stats"; id: number; stats: ChildStats }
  | { type: "done"; id: number; error?: string };
