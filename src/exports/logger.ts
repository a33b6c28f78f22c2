import { createLogger, type Logger } from "../logger.js";
import { forwardingProxy } from "../forwarding-proxy.js";
import { currentServer } from "./current-server.js";

export type { Logger };

/** Before any server starts: a plain JSON logger at "info", so importing the façade early never fails. */
const beforeAnyServer: Logger = createLogger({ level: "info", pretty: false });

/**
 * The logger of the running server, for plugin code (`@hubpkg/hub/logger`):
 * that of the server started last that is still running (./current-server.ts).
 */
export const logger: Logger = forwardingProxy(
  () => currentServer()?.log ?? beforeAnyServer,
  () => undefined,
);
