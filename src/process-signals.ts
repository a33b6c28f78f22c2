/**
 * SIGINT and SIGTERM stop a server, then exit the process. Installed only by
 * the process's owner: `node dist/server.js` (src/bin/server.ts), or
 * startAndListen when its options ask for it (handleSignals: true). The
 * library installs nothing by default.
 */
import type { Logger } from "./logger.js";

/**
 * On the first signal, stop() then exit (0, or 1 when stopping failed); a
 * second signal while stopping exits at once (exit hooks still stop an owned
 * embedded Postgres). The function returned removes the handlers.
 */
export function stopOnSignals(stop: () => Promise<void>, log: Pick<Logger, "info" | "warn" | "error" | "flush">): () => void {
  let signalled = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) {
      log.warn({ signal }, "second signal: exiting now");
      process.exit(1);
    }
    signalled = true;
    log.info({ signal }, "received signal");
    void stop().then(
      () => exitAfterLog(log, 0),
      (error: unknown) => {
        log.error({ err: error }, "error while stopping");
        exitAfterLog(log, 1);
      },
    );
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  return () => {
    process.removeListener("SIGINT", onSignal);
    process.removeListener("SIGTERM", onSignal);
  };
}

/** How long an exit waits for the log's last lines (a reader that stopped reading must not hold it). */
const LOG_FLUSH_MS = 2000;

/**
 * Exit once the log's lines are written. Its writes are asynchronous: at
 * process.exit pino writes what is still buffered at once, while a write
 * already handed to a worker thread may land after it, or not at all.
 */
function exitAfterLog(log: Pick<Logger, "flush">, code: number): void {
  const exit = () => process.exit(code);
  setTimeout(exit, LOG_FLUSH_MS);
  try {
    log.flush(exit);
  } catch {
    exit();
  }
}
