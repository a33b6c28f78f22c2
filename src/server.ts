/**
 * `node dist/server.js`: the stock server. Configuration comes from the
 * environment (README: Configuration).
 */
import "./prelude.js";
import { startAndListen } from "./start.js";
import { HubError } from "./errors.js";

try {
  await startAndListen({});
} catch (error) {
  if (error instanceof HubError) {
    process.stderr.write(`hub: ${error.message} [${error.code}]\n`);
  } else {
    process.stderr.write(`hub: failed to start: ${(error as Error)?.stack ?? String(error)}\n`);
  }
  process.exit(1);
}
