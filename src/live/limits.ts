import * as parse from "../parse.js";

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

const RULES: Record<keyof WebSocketLimits, parse.Parser<number>> = {
  connectionInitTimeoutMs: parse.integerAtLeast(1),
  maxOperations: parse.integerAtLeast(1),
  maxMessageBytes: parse.integerAtLeast(64),
  keepAliveMs: parse.wholeMilliseconds,
  connectionsPerIdentity: parse.integerAtLeast(1),
};

/** What the `websocket` option must be: the text of what was expected, or undefined when it is fine. */
export function checkWebSocketOption(value: unknown): string | undefined {
  const shape = `an object with some of ${Object.keys(RULES).join(", ")}`;
  if (typeof value !== "object" || value === null || Array.isArray(value)) return shape;
  for (const [key, v] of Object.entries(value)) {
    const rule = RULES[key as keyof WebSocketLimits];
    if (!rule) return `${shape} (unknown key ${JSON.stringify(key)})`;
    if (v === undefined) continue;
    const expected = parse.expectedOf(rule(v));
    if (expected) return `${shape}, where ${key} is ${expected}`;
  }
  return undefined;
}

export function webSocketLimits(option: Partial<WebSocketLimits> | undefined): WebSocketLimits {
  const limits = { ...DEFAULT_WEBSOCKET_LIMITS };
  for (const [key, v] of Object.entries(option ?? {})) if (v !== undefined) limits[key as keyof WebSocketLimits] = v;
  return limits;
}
