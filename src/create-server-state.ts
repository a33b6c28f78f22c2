import { createCasinoKeys } from "./auth/casino-token.js";
import { createChainSecrets } from "./fair/chain-secret.js";
import type { Logger } from "./logger.js";
import type { ServerState } from "./server-state.js";
import { createServerStats } from "./stats.js";
import { resolveTransferOptions, type ResolvedTransferOptions } from "./transfers/options.js";
import { createTransferRuntime } from "./transfers/runtime.js";

/** A server's state before anything is opened: its own caches, queues and counters (src/server-state.ts). */
export function createServerState(input: { log: Logger; transfers?: ResolvedTransferOptions }): ServerState {
  return {
    log: input.log,
    // Counted from here: uptime and requests of this server alone.
    stats: createServerStats(),
    pools: undefined,
    resolver: undefined,
    chains: createChainSecrets(),
    casinoKeys: createCasinoKeys(),
    transfers: createTransferRuntime(input.transfers ?? resolveTransferOptions(undefined)),
  };
}
