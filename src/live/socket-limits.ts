import { EXPIRED_REASON, CLOSE_UNAUTHORIZED } from "../auth/socket-identity.js";
import type { Identity } from "../auth/identity.js";

export const CLOSE_TOO_MANY_CONNECTIONS = 4429;
const EXPIRY_SWEEP_MS = 250;

/** Connections held at once per session or API key, in this process. */
export class IdentitySlots {
  private readonly held = new Map<string, number>();
  constructor(private readonly max: number) {}

  /** Takes a slot for `key`; when it already holds the most, the close reason instead. */
  take(key: string, identity: Identity | undefined): string | undefined {
    const held = this.held.get(key) ?? 0;
    if (held >= this.max) {
      const who = identity?.kind === "user" ? "this player" : "this API key";
      return `Too many connections: ${who} already holds ${held} (at most ${this.max})`;
    }
    this.held.set(key, held + 1);
    return undefined;
  }

  give(key: string): void {
    const n = (this.held.get(key) ?? 1) - 1;
    if (n > 0) this.held.set(key, n);
    else this.held.delete(key);
  }
}

/** The part of a WebSocket the sweeps use (ws's socket has it). */
export interface SweptSocket {
  readonly readyState: number;
  readonly OPEN: number;
  readonly CONNECTING: number;
  ping(): void;
  terminate(): void;
  close(code: number, reason: string): void;
}

export interface SweptConnection {
  /** Answered the previous keep-alive ping (or opened since it was sent). */
  alive: boolean;
  /** When the session behind it expires (ms since the epoch); Infinity for none. */
  expiresAt: number;
}

/**
 * The keep-alive and session-expiry sweeps, one timer each for every socket;
 * returns what stops them.
 *
 * Keep-alive: every keepAliveMs, a socket that did not answer the previous
 * ping is cut, the others pinged. A sweep that comes late means this process
 * was too busy to run it: answers to the previous ping may be waiting, unread,
 * behind the timer, so nobody is cut on such a round. forEach, not for…of: no
 * entry array per socket, so an idle server allocates next to nothing.
 * Expiry: often enough to close an expired session's socket within a second.
 */
export function startSocketSweeps<S extends SweptSocket, C extends SweptConnection>(connections: ReadonlyMap<S, C>, keepAliveMs: number): () => void {
  let lastSweep = Date.now();
  const keepAlive =
    keepAliveMs > 0
      ? setInterval(() => {
          const now = Date.now();
          const late = now - lastSweep > keepAliveMs * 1.5;
          lastSweep = now;
          connections.forEach((connection, socket) => {
            if (socket.readyState !== socket.OPEN) return;
            if (!connection.alive && !late) {
              socket.terminate();
              return;
            }
            connection.alive = false;
            socket.ping();
          });
        }, keepAliveMs).unref()
      : undefined;
  const expiry = setInterval(() => {
    const now = Date.now();
    connections.forEach((connection, socket) => {
      if (connection.expiresAt <= now && (socket.readyState === socket.OPEN || socket.readyState === socket.CONNECTING)) socket.close(CLOSE_UNAUTHORIZED, EXPIRED_REASON);
    });
  }, EXPIRY_SWEEP_MS).unref();
  return () => {
    clearInterval(keepAlive);
    clearInterval(expiry);
  };
}
