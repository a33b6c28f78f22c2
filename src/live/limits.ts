/** Bounds on WebSocket connections (README: Live updates). */
export interface WebSocketLimits {
  /** A connection that sends no connection_init within this closes with 4408, ms. */
  connectionInitTimeoutMs: number;
  /** Operations running at once on one connection; one more gets TOO_MANY_OPERATIONS. */
  maxOperations: number;
  /** Largest message a client may send, bytes; a larger one closes the connection with 1009. */
  maxMessageBytes: number;
  /** Ping interval, ms: a peer that has not answered one ping by the next is cut (0 = no pings). */
  keepAliveMs: number;
  /** Connections one session or API key holds at once, per process; one more closes with 4429. */
  connectionsPerIdentity: number;
}

export const DEFAULT_WEBSOCKET_LIMITS: WebSocketLimits = {
  connectionInitTimeoutMs: 3000,
  maxOperations: 100,
  maxMessageBytes: 64 * 1024,
  keepAliveMs: 12_000,
  connectionsPerIdentity: 20,
};

const integerAtLeast = (min: number) => ({ type: "integer", minimum: min, expected: `an integer >= ${min}` });

/** The JSON schema of the `websocket` option (checked with the other options, src/options.ts). */
export const WEBSOCKET_OPTION_SCHEMA = {
  type: "object",
  expected: `an object with some of ${Object.keys(DEFAULT_WEBSOCKET_LIMITS).join(", ")}`,
  additionalProperties: false,
  properties: {
    connectionInitTimeoutMs: integerAtLeast(1),
    maxOperations: integerAtLeast(1),
    maxMessageBytes: integerAtLeast(64),
    keepAliveMs: { type: "integer", minimum: 0, expected: "an integer number of milliseconds >= 0" },
    connectionsPerIdentity: integerAtLeast(1),
  } satisfies Record<keyof WebSocketLimits, object>,
};

export function webSocketLimits(option: Partial<WebSocketLimits> | undefined): WebSocketLimits {
  const limits = { ...DEFAULT_WEBSOCKET_LIMITS };
  for (const [key, v] of Object.entries(option ?? {})) if (v !== undefined) limits[key as keyof WebSocketLimits] = v;
  return limits;
}
