import type { ServerState } from "../server-state.js";

/**
 * The servers running in this process, oldest first. Only the module-level
 * façades of src/exports/ (`superuserPool` of `@hubpkg/hub/db`, `logger` of
 * `@hubpkg/hub/logger`, `serverStats()` without a request, `runMigrations`,
 * the hash-chain helpers given no chain work) read it: they follow the most
 * recently started server that is still running, and fall back to the one
 * started before it once it stops. The core never reads it: what a server
 * does uses its own state, passed to it.
 */
const running: ServerState[] = [];

export function serverStarted(state: ServerState): void {
  running.push(state);
}

export function serverStopped(state: ServerState): void {
  const at = running.lastIndexOf(state);
  if (at >= 0) running.splice(at, 1);
}

/** The server the façades follow, optionally the latest one that has reached a given point (e.g. open pools). */
export function currentServer(having?: (state: ServerState) => boolean): ServerState | undefined {
  for (let i = running.length - 1; i >= 0; i--) {
    const state = running[i]!;
    if (!having || having(state)) return state;
  }
  return undefined;
}
