/**
 * startAndListen, the original interface's way in, as a thin wrapper: the
 * instance buildHub makes, listening, and a stop() that drains, then closes
 * within shutdownTimeoutMs. Signals are handled only when handleSignals asks.
 */
import "./prelude.js";
import type { FastifyInstance } from "fastify";
import type { Logger } from "./logger.js";
import type { ServerOptions } from "./options.js";
import { listenFailed } from "./startup-errors.js";
import { buildPreparedHub } from "./build-hub.js";
import type { HubInternals, PreparedHub } from "./hub-core.js";
import { stopOnSignals } from "./process-signals.js";

export interface RunningServer {
  port: number;
  /** http://host:port, with 127.0.0.1 for a wildcard host. */
  url: string;
  /** Connection string of the superuser connection (the embedded one, or SUPERUSER_DATABASE_URL). */
  superuserDatabaseUrl: string;
  /** Close HTTP (finishing in-flight requests), the pools and the embedded database. */
  stop(): Promise<void>;
}

/**
 * Where a RunningServer keeps its server's state, for the hub's own tests
 * (test/two-servers.test.ts): a symbol, so it is no part of the object's
 * documented shape.
 */
export const SERVER_STATE: unique symbol = Symbol("hub.serverState");
/** Where a RunningServer keeps its Fastify instance (the test kit's `app`). */
export const FASTIFY_APP: unique symbol = Symbol("hub.fastifyApp");

/**
 * Connections the kernel may hold for the server before it accepts them.
 * Node's default, 511, overflows when a few thousand clients connect at
 * once: Linux then drops their handshakes, and clients that had already sent
 * their request got a reset instead of the server's answer (a 429 for a
 * flooding player). The kernel caps it at net.core.somaxconn (4096 on
 * current kernels).
 */
export const LISTEN_BACKLOG = 4096;

/**
 * Stop accepting, let in-flight requests finish, and after timeoutMs cut the
 * connections still open so a stuck client cannot hold the shutdown forever.
 * Fastify then runs the onClose hooks, which release what the requests used.
 */
async function closeWithin(app: FastifyInstance, timeoutMs: number, log: Logger): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), timeoutMs);
  });
  const httpClosed = new Promise<"closed">((resolve) => app.server.once("close", () => resolve("closed")));
  const closing = app.close();
  const outcome = await Promise.race([httpClosed, closing.then(() => "closed" as const), timedOut]);
  clearTimeout(timer);
  if (outcome === "timeout") {
    log.warn({ timeoutMs }, "in-flight requests did not finish in time; closing their connections");
    app.server.closeAllConnections();
  }
  await closing;
}

/** Listen, and a stop() that drains, then closes; with handleSignals, SIGINT/SIGTERM call it and exit. */
async function listen(app: FastifyInstance, hub: PreparedHub): Promise<Omit<RunningServer, "superuserDatabaseUrl">> {
  const { options } = hub;
  const { log } = hub.server;
  await app.listen({ port: options.port, host: options.host, backlog: LISTEN_BACKLOG }).catch((error: unknown) => {
    throw listenFailed(error, options.port, options.host, options.portFromOption);
  });
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : options.port;
  const { host } = options;
  const displayHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  const url = `http://${displayHost}:${port}`;
  if (options.playground && options.nodeEnv === "production") {
    log.warn("the playground is on in production: anyone can create players and sessions with hubCreatePlaygroundSession (HUB_PLAYGROUND=off or playground: false turns it off)");
  }
  log.info({ url: `${url}/graphql`, dataDir: options.databaseUrl ? undefined : options.dataDir }, `hub listening on ${url}/graphql`);

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      await app.hubDrain();
      log.info("stopping: no longer accepting; in-flight requests finish, WebSockets close (1001), then the database pools");
      await closeWithin(app, options.shutdownTimeoutMs, log);
      log.info("stopped");
      // Only now: a second Ctrl-C while stopping must reach the handler (which
      // exits through process.exit, whose hook stops the embedded Postgres),
      // not Node's default action, which kills the process on the spot.
      removeSignalHandlers();
    })();
    return stopping;
  };
  const removeSignalHandlers = options.handleSignals ? stopOnSignals(stop, log) : () => undefined;
  return { port, url, stop };
}

/**
 * startAndListen with what the entry points add: the façades' registry, and
 * for `node dist/server.js` the embedded Postgres it started early. Each call
 * makes its own server state: nothing here is shared with another server.
 */
export async function startServer(rawOptions: ServerOptions | undefined, callback?: (info: { port: number }) => void, internals: HubInternals = {}): Promise<RunningServer> {
  const { app, hub } = await buildPreparedHub(rawOptions, internals, "startAndListen");
  try {
    const running = await listen(app, hub);
    callback?.({ port: running.port });
    return { ...running, superuserDatabaseUrl: hub.core.db!.superuserUrl, [SERVER_STATE]: hub.server, [FASTIFY_APP]: app } as RunningServer;
  } catch (error) {
    // Fastify runs the hooks of whatever was mounted, the core's last.
    await app.close().catch((closeError: unknown) => hub.server.log.warn({ err: closeError }, "error while releasing resources"));
    throw error;
  }
}

/** startAndListen without the façades' registry: for the hub's own tests that start a server beside the test kit's. */
export function startAndListen(rawOptions?: ServerOptions, callback?: (info: { port: number }) => void): Promise<RunningServer> {
  return startServer(rawOptions, callback);
}
