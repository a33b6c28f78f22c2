/**
 * One timed run of autocannon against one target, with the target's own CPU
 * time (process.cpuUsage over IPC, before and after) divided by the responses
 * it served, and its RSS at the end.
 */
import autocannon from "autocannon";
import type { Target } from "./target.js";
import type { HttpRequest } from "./scenarios.js";

export interface LoadOptions {
  connections: number;
  durationS: number;
  /** Called with every response body; false counts as a mismatch ("bad body"). */
  verify: (body: string) => boolean;
  /** Cumulative CPU µs of the Postgres both targets use (bench/lib/pg-cpu.ts). */
  postgresCpu?: () => number;
  /** The request of the i-th connection (another player per connection), instead of `req` for all. */
  perConnection?: (index: number) => HttpRequest;
  /** Requests per second over all connections (autocannon's overallRate); as fast as answered when absent. */
  rate?: number;
}

export interface RunResult {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  responses: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  mismatches: number;
  /** Target process CPU (user + system) per response, µs. */
  cpuUsPerReq: number;
  /** The same, in the kernel only (system time: sockets, syscalls), µs. */
  sysUsPerReq: number;
  /** The target's garbage-collection pauses per response, µs (part of its user time). */
  gcUsPerReq: number;
  /** Of which scavenges, µs per response; scavenges and other pauses per 1,000 responses. */
  gcMinorUsPerReq: number;
  scavengesPer1k: number;
  otherGcPer1k: number;
  /** Postgres CPU (all its processes) per response, µs; NaN when unknown. */
  pgCpuUsPerReq: number;
  rssBytes: number;
  /** Postgres statements and round trips the target made per response. */
  pgStatementsPerReq: number;
  pgRoundTripsPerReq: number;
}

/** req.authorizations in turn, one per request: autocannon rebuilds each request through setupRequest. */
function rotateAuthorization(req: HttpRequest): Pick<autocannon.Options, "requests"> {
  const list = req.authorizations;
  if (!list?.length) return {};
  let next = 0;
  return {
    requests: [
      {
        method: req.method,
        path: req.path,
        ...(req.body !== undefined ? { body: req.body } : {}),
        setupRequest: (request) => ({ ...request, headers: { ...req.headers, authorization: list[next++ % list.length]! } }),
      },
    ],
  };
}

/** autocannon calls setupClient once per connection, in order: connection i gets request i. */
function perConnectionSetup(perConnection: (index: number) => HttpRequest) {
  let next = 0;
  return (client: autocannon.Client) => {
    const req = perConnection(next++);
    client.setHeadersAndBody(req.headers, req.body);
  };
}

export async function runLoad(target: Target, req: HttpRequest, opts: LoadOptions): Promise<RunResult> {
  const before = await target.stats();
  const pgBefore = opts.postgresCpu?.() ?? Number.NaN;
  const result = await autocannon({
    url: `${target.url}${req.path}`,
    method: req.method,
    headers: req.headers,
    ...(req.body !== undefined ? { body: req.body } : {}),
    ...rotateAuthorization(req),
    connections: opts.connections,
    duration: opts.durationS,
    ...(opts.rate ? { overallRate: opts.rate } : {}),
    verifyBody: (body) => opts.verify(String(body)),
    ...(opts.perConnection ? { setupClient: perConnectionSetup(opts.perConnection) } : {}),
  });
  const pgAfter = opts.postgresCpu?.() ?? Number.NaN;
  const after = await target.stats();
  const cpuUs = after.cpuUserUs + after.cpuSystemUs - before.cpuUserUs - before.cpuSystemUs;
  const responses = result.requests.total;
  return {
    rps: result.requests.average,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    responses,
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
    mismatches: result.mismatches,
    cpuUsPerReq: responses > 0 ? cpuUs / responses : Number.NaN,
    sysUsPerReq: responses > 0 ? (after.cpuSystemUs - before.cpuSystemUs) / responses : Number.NaN,
    gcUsPerReq: responses > 0 ? (after.gcPauseUs - before.gcPauseUs) / responses : Number.NaN,
    gcMinorUsPerReq: responses > 0 ? (after.gcMinorUs - before.gcMinorUs) / responses : Number.NaN,
    scavengesPer1k: responses > 0 ? (1000 * (after.gcMinorCount - before.gcMinorCount)) / responses : Number.NaN,
    otherGcPer1k: responses > 0 ? (1000 * (after.gcOtherCount - before.gcOtherCount)) / responses : Number.NaN,
    pgCpuUsPerReq: responses > 0 ? (pgAfter - pgBefore) / responses : Number.NaN,
    rssBytes: after.rssBytes,
    pgStatementsPerReq: responses > 0 ? (after.pgStatements - before.pgStatements) / responses : Number.NaN,
    pgRoundTripsPerReq: responses > 0 ? (after.pgRoundTrips - before.pgRoundTrips) / responses : Number.NaN,
  };
}

/** A fixed number of requests (the identity evidence), returning how long they took. */
export async function runAmount(
  url: string,
  req: HttpRequest,
  amount: number,
  connections: number,
  verify: (body: string) => boolean,
): Promise<{ seconds: number; responses: number; bad: number }> {
  const started = Date.now();
  const result = await autocannon({
    url: `${url}${req.path}`,
    method: req.method,
    headers: req.headers,
    ...(req.body !== undefined ? { body: req.body } : {}),
    connections,
    amount,
    verifyBody: (body) => verify(String(body)),
  });
  return {
    seconds: (Date.now() - started) / 1000,
    responses: result.requests.total,
    bad: result.errors + result.timeouts + result.non2xx + result.mismatches,
  };
}
