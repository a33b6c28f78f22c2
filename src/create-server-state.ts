import { createCasinoKeys } from "./auth/casino-token.js";
import type { IdentityResolver } from "./auth/resolver.js";
import type { HubPools } from "./db/pools.js";
import { createChainSecrets } from "./fair/chain-secret.js";
import type { Logger } from "./logger.js";
import type { ServerState } from "./server-state.js";
import { createServerStats } from "./stats.js";
import { resolveTransferOptions } from "./transfers/options.js";
import { createTransferRuntime, type TransferRuntime } from "./transfers/runtime.js";

/**
 * A server's state, complete when made: the pools and the resolver are open
 * already; its own caches, queues and counters start empty (src/server-state.ts).
 */
export function createServerState(input: { log: Logger; pools: HubPools; resolver: IdentityResolver; transfers?: TransferRuntime }): ServerState {
  return {
    log: input.log,
    // Counted from here: uptime and requests of this server alone.
    stats: createServerStats(),
    pools: input.pools,
    resolver: input.resolver,
    chains: createChainSecrets(),
    casinoKeys: createCasinoKeys(),
    transfers: input.transfers ?? createTransferRuntime(resolveTransferOptions(undefined)),
  };
}
