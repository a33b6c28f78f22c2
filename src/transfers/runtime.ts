import type { ResolvedTransferOptions } from "./options.js";
import type { TransferWorker } from "./worker.js";

/**
 * What the GraphQL plugin needs from its server: the transfer options
 * (timeouts, connector kinds) and the server's own workers, to wake them when
 * new work is queued. One per server (src/server-state.ts).
 */
export interface TransferRuntime {
  readonly options: ResolvedTransferOptions;
  /** Count a worker of this server; the function forgets it again. */
  register(worker: TransferWorker): () => void;
  /** New work is due now: let this server's workers look without waiting for their interval. */
  wake(): void;
}

export function createTransferRuntime(options: ResolvedTransferOptions): TransferRuntime {
  const workers = new Set<TransferWorker>();
  return {
    options,
    register(worker) {
      workers.add(worker);
      return () => workers.delete(worker);
    },
    wake() {
      for (const worker of workers) worker.wake();
    },
  };
}
