/**
 * A steady closed-loop load for fault tests: `concurrency` workers, each
 * sending one request after the other until stopped, every outcome recorded
 * (HTTP status and parsed body, or the network error) with when it was sent
 * and when it was answered. A request that gets no answer within `timeoutMs`
 * is recorded as a timeout, so a hanging server shows as a result instead of
 * blocking the test.
 */
export interface LoadRequest {
  /** A label to group results by, e.g. "anonymous" or "player". */
  kind: string;
  path?: string;
  method?: string;
  headers?: Record<string, string>;
  body?: unknown;
}

export interface LoadResult {
  kind: string;
  worker: number;
  /** Date.now() when sent and when answered (or failed). */
  sentAt: number;
  doneAt: number;
  /** HTTP status, or undefined when no response arrived. */
  status: number | undefined;
  /** The JSON body (or text when not JSON). */
  body: any;
  /** The network error (ECONNREFUSED, reset, timeout) when no response arrived. */
  error: string | undefined;
  request: LoadRequest;
}

export interface Load {
  results: LoadResult[];
  /** Stop sending; resolves once every worker's last request has settled. */
  stop(): Promise<void>;
  /** Number of requests sent but not yet settled. */
  inFlight(): number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function sendOnce(baseUrl: string, request: LoadRequest, timeoutMs: number, worker = 0): Promise<LoadResult> {
  const sentAt = Date.now();
  const method = request.method ?? "POST";
  try {
    const res = await fetch(`${baseUrl}${request.path ?? "/graphql"}`, {
      method,
      headers: { ...(request.body !== undefined ? { "content-type": "application/json" } : {}), ...request.headers },
      ...(request.body !== undefined ? { body: JSON.stringify(request.body) } : {}),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // keep the text
    }
    return { kind: request.kind, worker, sentAt, doneAt: Date.now(), status: res.status, body, error: undefined, request };
  } catch (error) {
    const err = error as Error & { cause?: { code?: string; message?: string } };
    const detail = err.name === "TimeoutError" ? "timeout" : (err.cause?.code ?? err.cause?.message ?? err.message);
    return { kind: request.kind, worker, sentAt, doneAt: Date.now(), status: undefined, body: undefined, error: detail, request };
  }
}

/**
 * Start `concurrency` workers; worker i sends next(i, n) for its n-th request.
 * After a network error a worker pauses `errorPauseMs` so a down server is
 * not spun on.
 */
export function startLoad(
  baseUrl: string,
  options: { concurrency: number; next: (worker: number, n: number) => LoadRequest; timeoutMs?: number; errorPauseMs?: number },
): Load {
  const results: LoadResult[] = [];
  let stopped = false;
  let inFlight = 0;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const workers = Array.from({ length: options.concurrency }, async (_, worker) => {
    for (let n = 0; !stopped; n++) {
      inFlight++;
      const result = await sendOnce(baseUrl, options.next(worker, n), timeoutMs, worker);
      inFlight--;
      results.push(result);
      if (result.error) await sleep(options.errorPauseMs ?? 20);
    }
  });
  return {
    results,
    inFlight: () => inFlight,
    async stop() {
      stopped = true;
      await Promise.all(workers);
    },
  };
}

/** A short description of a result for test messages. */
export function describeResult(r: LoadResult): string {
  const took = r.doneAt - r.sentAt;
  if (r.error) return `${r.kind}: ${r.error} after ${took} ms`;
  return `${r.kind}: ${r.status} after ${took} ms ${JSON.stringify(r.body).slice(0, 300)}`;
}

/** Count results by a key, for t.comment summaries. */
export function tally(results: LoadResult[], key: (r: LoadResult) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of results) out[key(r)] = (out[key(r)] ?? 0) + 1;
  return out;
}

/**
 * A pace for `clients` load clients: `await pace(n)` returns once client n's
 * previous call is at least gapMs ago, so a busy client's rate does not grow
 * with the cores a quiet machine leaves idle.
 */
export function pacer(clients: number, gapMs: number): (client: number) => Promise<void> {
  const lastAt = Array<number>(clients).fill(0);
  return async (client) => {
    const wait = lastAt[client]! + gapMs - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    lastAt[client] = performance.now();
  };
}
