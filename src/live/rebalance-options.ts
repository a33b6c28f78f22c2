import type { Parsed } from "../parse.js";

/** How an instance moves WebSockets off itself when it holds more than its share (the socketRebalance option). */
export interface SocketRebalance {
  /** How often the instance records its socket count and reads the others' (ms). */
  heartbeatMs: number;
  /** Sockets are shed once the instance holds more than this many times the fair share (>= 1). */
  maxShare: number;
  /** At most this many sockets are closed per second. */
  closePerSecond: number;
}

export const DEFAULT_SOCKET_REBALANCE: SocketRebalance = { heartbeatMs: 5000, maxShare: 1.5, closePerSecond: 20 };

const EXPECTED = "true, false or an object { heartbeatMs (an integer >= 100), maxShare (a number >= 1), closePerSecond (a number > 0) }, each optional";

/** The option: a switch, or the settings to change (the others keep their defaults). */
export function socketRebalanceOption(v: unknown): Parsed<SocketRebalance | false> {
  if (v === true) return { value: DEFAULT_SOCKET_REBALANCE };
  if (v === false) return { value: false };
  if (typeof v !== "object" || v === null || Array.isArray(v)) return { expected: EXPECTED };
  const given = v as Record<string, unknown>;
  const valid: Record<keyof SocketRebalance, (x: unknown) => boolean> = {
    heartbeatMs: (x) => Number.isInteger(x) && (x as number) >= 100,
    maxShare: (x) => typeof x === "number" && Number.isFinite(x) && x >= 1,
    closePerSecond: (x) => typeof x === "number" && Number.isFinite(x) && x > 0,
  };
  for (const [key, value] of Object.entries(given)) {
    if (value === undefined) continue;
    if (!(key in valid) || !valid[key as keyof SocketRebalance](value)) return { expected: EXPECTED };
  }
  const pick = <K extends keyof SocketRebalance>(key: K) => (given[key] as SocketRebalance[K] | undefined) ?? DEFAULT_SOCKET_REBALANCE[key];
  return { value: { heartbeatMs: pick("heartbeatMs"), maxShare: pick("maxShare"), closePerSecond: pick("closePerSecond") } };
}
