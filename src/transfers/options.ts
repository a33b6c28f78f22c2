import type { ConnectorFactory } from "./connector.js";

/** ServerOptions.transfers: how the transfer worker runs. */
export interface TransferOptions {
  /** Run the worker in this instance (default true). Every instance may run one. */
  worker?: boolean;
  /** How often an idle worker looks for due work, ms (default 500). */
  pollIntervalMs?: number;
  /** Pause between two fetches of a polled casino's incoming transfers, ms (default 2000). */
  casinoPollIntervalMs?: number;
  /** Time limit of each call to a casino, ms (default 10000). */
  requestTimeoutMs?: number;
  /** First retry delay after an unknown outcome, doubled per attempt, ms (default 1000). */
  backoffBaseMs?: number;
  /** Longest retry delay, ms (default 60000). */
  backoffMaxMs?: number;
  /** Items one worker processes at once (default 4). */
  concurrency?: number;
  /** Allowed difference between the hub's and a casino's clocks, ms (default 30000): a refund waits this long past a send's expiry. */
  clockSkewMs?: number;
  /** How long the hub has a casino apply a take request's transfer before it gives up and returns the reserve, ms (default 900000: 15 minutes). */
  takeRequestTimeoutMs?: number;
  /** More connector kinds, by name (hub.casino_transfer_config.connector); "http" is built in. */
  connectors?: Record<string, ConnectorFactory>;
}

export type ResolvedTransferOptions = Required<TransferOptions>;

export const DEFAULT_TRANSFER_OPTIONS: Omit<ResolvedTransferOptions, "connectors"> = {
  worker: true,
  pollIntervalMs: 500,
  casinoPollIntervalMs: 2000,
  requestTimeoutMs: 10_000,
  backoffBaseMs: 1000,
  backoffMaxMs: 60_000,
  concurrency: 4,
  clockSkewMs: 30_000,
  takeRequestTimeoutMs: 900_000,
};

const wholeAtLeast = (min: number) => ({ type: "integer", minimum: min, maximum: Number.MAX_SAFE_INTEGER, expected: `a whole number >= ${min}` });

/** The JSON schema of the `transfers` option (checked with the other options, src/options.ts). */
export const TRANSFER_OPTIONS_SCHEMA = {
  type: "object",
  expected: "an object with any of worker, pollIntervalMs, casinoPollIntervalMs, requestTimeoutMs, backoffBaseMs, backoffMaxMs, concurrency, clockSkewMs, takeRequestTimeoutMs and connectors",
  additionalProperties: false,
  properties: {
    worker: { type: "boolean", expected: "true or false" },
    pollIntervalMs: wholeAtLeast(0),
    casinoPollIntervalMs: wholeAtLeast(0),
    requestTimeoutMs: wholeAtLeast(0),
    backoffBaseMs: wholeAtLeast(0),
    backoffMaxMs: wholeAtLeast(0),
    concurrency: wholeAtLeast(1),
    clockSkewMs: wholeAtLeast(0),
    takeRequestTimeoutMs: wholeAtLeast(0),
    connectors: {
      type: "object",
      expected: "an object of connector factories by name: { name: (settings) => CasinoConnector }",
      additionalProperties: { isFunction: true, expected: "a connector factory: (settings) => CasinoConnector" },
    },
  } satisfies Record<keyof TransferOptions, object>,
};

export function resolveTransferOptions(options: TransferOptions | undefined): ResolvedTransferOptions {
  const defined = Object.fromEntries(Object.entries(options ?? {}).filter(([, v]) => v !== undefined));
  return { ...DEFAULT_TRANSFER_OPTIONS, connectors: {}, ...defined } as ResolvedTransferOptions;
}

/** The retry delay after `attempts` failed attempts: doubling from backoffBaseMs, capped, with ±20% jitter so instances spread out. */
export function backoffMs(options: ResolvedTransferOptions, attempts: number): number {
  const raw = Math.min(options.backoffMaxMs, options.backoffBaseMs * 2 ** Math.min(30, Math.max(0, attempts - 1)));
  return Math.round(raw * (0.8 + Math.random() * 0.4));
}
