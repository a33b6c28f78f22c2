/**
 * `node dist/server.js`: the stock server, started on import with the options
 * the environment picks (environment-options.ts: HUB_CONFIG, HUB_EXAMPLES).
 * This process is the server's alone, so it owns the signals: SIGINT and
 * SIGTERM drain, stop and exit (a second one exits at once).
 */
import "./process-setup.js";
import "../prelude.js";
import { readConfig } from "../config.js";
import { prewarmDatabase, type PrewarmedDatabase } from "../db/database.js";
import { createLogger } from "../logger.js";
import { HubError } from "../errors.js";
import { exitOnStartFailure } from "../start-failure.js";
import { optionsFromEnvironment } from "./environment-options.js";
import { SERVER_USAGE, serverArguments } from "./server-usage.js";

// Before anything starts: a mistaken argument must not start a server on settings its operator did not mean.
try {
  if (serverArguments(process.argv.slice(2)) === "help") {
    process.stdout.write(SERVER_USAGE);
    process.exit(0);
  }
} catch (error) {
  process.stderr.write(`hub: ${(error as HubError).message} [${(error as HubError).code}]\n`);
  process.exit(2);
}

// Postgres boots in its own process while the heavy modules below load.
let prewarmed: PrewarmedDatabase | undefined;
try {
  const config = readConfig();
  prewarmed = prewarmDatabase(config, createLogger({ level: config.logLevel, pretty: false }));
  // Until Postgres runs on its own (a few ms; bounded in case the steps before the spawn hang).
  if (prewarmed) await Promise.race([prewarmed.spawned, new Promise((r) => setTimeout(r, 300).unref())]);
} catch {
  // A configuration error: startAndListen reports it with its message.
}
const [{ startServer, SERVER_STATE }, { serverStarted, serverStopped }, { stopOnSignals }] = await Promise.all([
  import("../start.js"),
  import("../exports/current-server.js"),
  import("../process-signals.js"),
]);

try {
  const running = await startServer(await optionsFromEnvironment(), undefined, { prewarmed, registry: { started: serverStarted, stopped: serverStopped } });
  const state = (running as unknown as Record<symbol, import("../server-state.js").ServerState>)[SERVER_STATE]!;
  stopOnSignals(running.stop, state.log);
} catch (error) {
  // A Postgres started early and never adopted (the options failed first) must
  // not outlive us: an initdb still writing into the data dir, or a postmaster.
  await prewarmed?.discard().catch(() => undefined);
  exitOnStartFailure(error);
}
