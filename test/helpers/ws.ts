import { createClient, type Client, type FormattedExecutionResult as ExecutionResult } from "graphql-ws";
import WebSocket from "ws";

/** The graphql-ws client as frontends use it, with Node's `ws` and no retries (a test sees every close). */
export function wsClient(
  httpUrl: string,
  connectionParams?: Record<string, unknown>,
  options: { headers?: Record<string, string>; closes?: { code: number; reason: string }[] } = {},
): Client {
  const url = `${httpUrl.replace(/^http/, "ws")}/graphql`;
  const { headers } = options;
  class WithHeaders extends WebSocket {
    constructor(address: string, protocols?: string | string[]) {
      super(address, protocols, headers ? { headers } : {});
    }
  }
  return createClient({
    url,
    webSocketImpl: WithHeaders,
    lazy: true,
    retryAttempts: 0,
    ...(connectionParams ? { connectionParams } : {}),
    on: {
      closed: (event) => {
        const e = event as { code: number; reason: string };
        options.closes?.push({ code: e.code, reason: String(e.reason) });
      },
    },
  });
}

/** A subscription's events, errors and end, with a way to wait for them. */
export interface Feed<T = Record<string, any>> {
  events: ExecutionResult<T, unknown>[];
  errors: unknown[];
  completed: boolean;
  /** Resolves once `n` events arrived (rejects after timeoutMs). */
  waitFor(n: number, timeoutMs?: number): Promise<ExecutionResult<T, unknown>[]>;
  /** Resolves once the subscription errored or completed. */
  ended(timeoutMs?: number): Promise<void>;
  stop(): void;
}

export function feed<T = Record<string, any>>(client: Client, query: string, variables?: Record<string, unknown>): Feed<T> {
  const f: Feed<T> = {
    events: [],
    errors: [],
    completed: false,
    waitFor: (n, timeoutMs = 30_000) => until(() => f.events.length >= n, timeoutMs, () => `expected ${n} events, got ${JSON.stringify(f.events)} (errors ${JSON.stringify(f.errors)})`).then(() => f.events),
    ended: (timeoutMs = 30_000) => until(() => f.completed || f.errors.length > 0, timeoutMs, () => "the subscription did not end"),
    stop: () => stop(),
  };
  const stop = client.subscribe<T>(
    { query, ...(variables ? { variables } : {}) },
    {
      next: (e) => void f.events.push(e),
      error: (e) => void f.errors.push(e),
      complete: () => void (f.completed = true),
    },
  );
  return f;
}

export async function until(test: () => boolean, timeoutMs: number, what: () => string): Promise<void> {
  const started = Date.now();
  while (!test()) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms: ${what()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Resolves once the subscription is live, that is once it announced one of the changes `probe` makes:
 * graphql-ws acknowledges no subscribe, and a change committed before the server registered it is never
 * announced, so the probe is repeated (each given 5 s for its alert) until one is, for up to 30 s.
 * Resolves to the number of events by then: what comes later is what the test made.
 */
export async function live(f: Feed, probe: () => Promise<unknown>, what: string): Promise<number> {
  const before = f.events.length;
  const by = Date.now() + 30_000;
  while (f.events.length === before) {
    if (Date.now() > by) throw new Error(`${what}: no alert within 30 s of changes it announces (errors ${JSON.stringify(f.errors)})`);
    await probe();
    await until(() => f.events.length > before, 5000, () => "").catch(() => undefined);
  }
  return f.events.length;
}

/** Resolves once the graphql-ws client is connected and acknowledged. */
export function connected(client: Client): Promise<void> {
  return new Promise((resolve, reject) => {
    const offC = client.on("connected", () => {
      offC();
      offX();
      resolve();
    });
    const offX = client.on("closed", (e) => {
      offC();
      offX();
      reject(Object.assign(new Error(`closed ${(e as { code: number }).code}`), { event: e }));
    });
  });
}
