import type { ResolvedTransferOptions } from "./options.js";
import { resolveTransferOptions } from "./options.js";
import type { TransferWorker } from "./worker.js";

/**
 * What the GraphQL plugin needs from the running server: the transfer
 * options (timeouts, connector kinds) and this process's workers, to wake them
 * when new work is queued. Several servers in one process (tests) share it;
 * the most recently started one's options apply.
 */
let current: ResolvedTransferOptions = resolveTransferOptions(undefined);
const workers = new Set<TransferWorker>();

export const transferOptions = (): ResolvedTransferOptions => current;
export function setTransferOptions(options: ResolvedTransferOptions): void {
  current = options;
}
export function registerWorker(worker: TransferWorker): () => void {
  workers.add(worker);
  return () => workers.delete(worker);
}
/** New work is due now: let the local workers look without waiting for their interval. */
export function wakeWorkers(): void {
  for (const worker of workers) worker.wake();
}
