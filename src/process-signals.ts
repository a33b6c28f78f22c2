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
export function stopOnSignals(stop: () => Promise<void>, log: Pick<Logger, "info" | "warn" | "error">): () => void {
  let signalled = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) {
      log.warn({ signal }, "second signal: exiting now");
      process.exit(1);
    }
    signalled = true;
    log.info({ signal }, "received signal");
    void stop().then(
      () => process.exit(0),
      (error: unknown) => {
        log.error({ err: error }, "error while stopping");
        process.exit(1);
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
