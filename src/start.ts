import "./prelude.js";
import fsp from "node:fs/promises";
import path from "node:path";
import type { FastifyInstance, FastifyPluginAsync } from "fastify";
import { postgraphile, type PostGraphileInstance } from "postgraphile";
import { lexicographicSortSchema, printSchema, type GraphQLSchema } from "graphql";
import { readConfig, type HubConfig } from "./config.js";
import { createLogger, type Logger } from "./logger.js";
import { endPool, openDatabase, retryWhileEmbeddedRestarts, startupError, type OpenedDatabase, type PrewarmedDatabase } from "./db/database.js";
import { openPools, ensureRoleSwitch, type HubPools } from "./db/pools.js";
import { migrate, migrateDirect } from "./db/migrate.js";
import { checkServerConnectionLimit, planConnections, type ConnectionPlan } from "./db/connection-budget.js";
import { checkTlsFiles } from "./db/connection-errors.js";
import { warnAboutGrants } from "./db/grants.js";
import { validateOptions, type ServerOptions } from "./options.js";
import { makePreset } from "./graphql/preset.js";
import { defaultPlugins } from "./graphql/default-plugins.js";
import { addAuthHook } from "../adapters/auth.js";
import { mountDashboard } from "../adapters/dashboard.js";
import { createIdentityResolver } from "./auth/resolver.js";
import { DEFAULT_QUERY_LIMITS } from "./graphql/query-limits.js";
import { credentialEvents } from "./db/credential-events.js";
import { createApiKeyUsage } from "./auth/api-key-usage.js";
import { createIdentityPoolLimiter, DEFAULT_IDENTITY_LIMITS, type IdentityPoolLimiter } from "./db/identity-limit.js";
import { HubPlaygroundPlugin } from "./graphql/sessions.js";
import { createLiveNotifications, type LiveNotifications } from "./live/notifications.js";
import { webSocketLimits } from "./live/limits.js";
import type { WebSocketFront } from "../adapters/websocket.js";
import type { BuiltInPath } from "../adapters/express.js";
import { GRAPHQL_PATH } from "../adapters/graphql-path.js";
import { HubError } from "./errors.js";
import { listenFailed, schemaBuildFailed } from "./startup-errors.js";
import { explainSchemaError } from "./graphql/plugin-checks.js";
import { resolveTransferOptions } from "./transfers/options.js";
import { startTransferWorker, type TransferWorker } from "./transfers/worker.js";
import type { ServerState } from "./server-state.js";
import { serverStarted, serverStopped } from "./exports/current-server.js";
import { createServerState } from "./create-server-state.js";
import { startBankrollSweep, type BankrollSweep } from "./money/fold.js";
import { mountHealth } from "../adapters/health.js";
import { trustFunction } from "./trust-proxy.js";
import { startSocketRebalance } from "./live/rebalance.js";

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

declare module "fastify" {
  interface FastifyInstance {
    /** The server's state (src/server-state.ts). */
    hubServer: ServerState;
  }
}

const MAX_BODY = 1024 * 1024;

/**
 * Connections the kernel may hold for the server before it accepts them.
 * Node's default, 511, overflows when a few thousand clients connect at
 * once: Linux then drops their handshakes, and clients that had already sent
 * their request got a reset instead of the server's answer (a 429 for a
 * flooding player). The kernel caps it at net.core.somaxconn (4096 on
 * current kernels).
 */
const LISTEN_BACKLOG = 4096;

/**
 * GraphQL transactions send their prologue (begin, set_config) with their first
 * query in one round trip: the GraphQL pool in node-postgres's pipeline mode,
 * and the pipelined adaptor on it (src/db/pipelined-adaptor.ts). One choice for both.
 */
const PIPELINED_GRAPHQL = true;
/** Behind a transaction pooler the stock adaptor: a pipelined batch could span two of the pooler's transactions. */
const pipelinedGraphQL = (config: HubConfig) => PIPELINED_GRAPHQL && config.databasePooler === "none";

/** This instance's connections (src/db/connection-budget.ts), from the budget, the pools option and the transfer worker. */
function connectionPlan(options: ServerOptions, config: HubConfig, server: ServerState): ConnectionPlan {
  const transfers = server.transfers.options;
  return planConnections({
    maxConnections: config.maxConnections?.value,
    maxConnectionsFrom: config.maxConnections?.from ?? "env",
    pools: options.pools,
    transferWorker: transfers.worker ? transfers.concurrency + 1 : 0,
  });
}

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

/**
 * The HTTP side (Fastify, grafserv's Fastify adapter, Express when there is a
 * configureApp) is needed only once the schema is built, and loading it is
 * most of what start-up loads besides PostGraphile. It is loaded once the
 * introspection query has gone out, so Node loads it while Postgres works on
 * that query, instead of before.
 */
function loadHttpModules(withExpress: boolean) {
  const modules = {
    grafserv: import("../adapters/grafserv.js"),
    fastify: import("../adapters/fastify.js"),
    express: withExpress ? import("../adapters/express.js") : Promise.resolve(undefined),
  };
  // Each is awaited where it is needed; a start that fails before must not leave a rejection unhandled.
  for (const loading of Object.values(modules)) loading.catch(() => undefined);
  return modules;
}

/** The paths the hub serves itself, which configureApp's routes cannot take. */
function builtInPaths(dashboard: string | false, graphiql: boolean, health: Pick<HubConfig, "livenessPath" | "readinessPath"> = { livenessPath: false, readinessPath: false }): BuiltInPath[] {
  const paths: BuiltInPath[] = [{ path: GRAPHQL_PATH, what: "GraphQL", prefix: false }];
  if (health.livenessPath !== false) {
    paths.push({ path: health.livenessPath, what: "the liveness check", prefix: false, hint: "move it (livenessPath, HUB_LIVENESS_PATH) or turn it off (livenessPath: false, HUB_LIVENESS_PATH=off)" });
  }
  if (health.readinessPath !== false) {
    paths.push({ path: health.readinessPath, what: "the readiness check", prefix: false, hint: "move it (readinessPath, HUB_READINESS_PATH) or turn it off (readinessPath: false, HUB_READINESS_PATH=off)" });
  }
  if (graphiql) {
    const hint = "turn GraphiQL off (graphiql: false)";
    paths.push({ path: "/graphiql", what: "GraphiQL", prefix: false, hint }, { path: "/ruru-static", what: "GraphiQL's files", prefix: true, hint });
  }
  if (dashboard !== false) {
    paths.push({ path: dashboard, what: "the dashboard", prefix: true, hint: 'move the dashboard (the option dashboard: "/ops", or HUB_DASHBOARD=/ops) or turn it off (dashboard: false, HUB_DASHBOARD=off)' });
  }
  return paths;
}


/**
 * What a server opens before its HTTP side exists, filled in as it is opened.
 * Fastify is loaded only once the schema's introspection query has gone out
 * (loadHttpModules), so until then this is what a failed start releases; from
 * then on Fastify's onClose releases it (createHttpSide).
 */
interface Core {
  db?: OpenedDatabase;
  pools?: HubPools;
  worker?: TransferWorker;
  sweep?: BankrollSweep;
  live?: LiveNotifications;
  pgl?: PostGraphileInstance;
  /** Set by closeCore: it runs once, whoever calls it first. */
  closed?: Promise<void>;
}

/** Release the core, the reverse of the order it was opened in; a failing step is logged and the rest still run. */
function closeCore(core: Core, server: ServerState): Promise<void> {
  core.closed ??= (async () => {
    const attempt = async (step: (() => Promise<unknown>) | undefined) => {
      try {
        await step?.();
      } catch (error) {
        server.log.warn({ err: error }, "error while releasing resources");
      }
    };
    const { db, pools, worker, sweep, live, pgl } = core;
    await attempt(pgl && (async () => pgl.release()));
    await attempt(live && (() => live.close()));
    await attempt(worker && (() => worker.stop()));
    await attempt(sweep && (() => sweep.stop()));
    // From here the façades (superuserPool, logger, serverStats()) follow the server started before this one.
    serverStopped(server);
    await attempt(pools && (() => Promise.all([endPool(pools.graphql), endPool(pools.superuser), endPool(pools.credentials)])));
    await attempt(db && (() => db.close()));
  })();
  return core.closed;
}

/** The database, its pools and migrations, and the transfer worker: everything that needs no schema. */
async function openDatabaseSide(server: ServerState, core: Core, options: ServerOptions, config: HubConfig, prewarmed: PrewarmedDatabase | undefined): Promise<HubPools> {
  const { log } = server;
  const plan = connectionPlan(options, config, server);
  const db = await (prewarmed?.adopt(config) ?? openDatabase(config, log));
  core.db = db;
  await prewarmed?.discard();
  const urls = { databaseUrl: db.databaseUrl, superuserDatabaseUrl: db.superuserUrl };
  if (!db.embedded) {
    checkTlsFiles(config.databaseUrlVariable, urls.databaseUrl);
    checkTlsFiles("SUPERUSER_DATABASE_URL", urls.superuserDatabaseUrl);
    if (config.directDatabaseUrl) checkTlsFiles("DIRECT_DATABASE_URL", config.directDatabaseUrl);
  }
  const unnamedStatements = config.databasePooler === "transaction";
  const pools = await retryWhileEmbeddedRestarts(db, () =>
    openPools(urls, log, { graphqlPipeline: pipelinedGraphQL(config), databaseUrlVariable: config.databaseUrlVariable, sizes: plan, unnamedStatements }),
  );
  core.pools = pools;
  // Connected while the rest starts, so the first credential lookup finds a warm connection.
  pools.credentials.query("select 1").catch(() => undefined);
  const migrations = { userMigrationsPath: options.userDatabaseMigrationsPath, log };
  await retryWhileEmbeddedRestarts(db, () => (config.directDatabaseUrl ? migrateDirect(config.directDatabaseUrl, migrations) : migrate(pools.superuser, migrations)));
  await ensureRoleSwitch(pools, log, config.databaseUrlVariable);
  // Behind a pooler the server's max_connections bounds the pooler, not this instance's pools.
  if (config.databasePooler === "none") await checkServerConnectionLimit(pools.superuser, plan, log);
  // Warnings only: a table GraphQL cannot read fails the requests that use it, not the start.
  await warnAboutGrants(pools.superuser, options.extraPgSchemas ?? [], log);
  server.pools = pools;
  // Bets' house sides left pending by an earlier run are folded before the first request.
  core.sweep = startBankrollSweep(pools.superuser, log);
  await core.sweep.first;
  // Deposits and withdrawals with casinos: every instance runs a worker on the shared outbox.
  if (server.transfers.options.worker) {
    const worker = startTransferWorker(urls.superuserDatabaseUrl, server.transfers.options, log, { max: plan.transferWorker, unnamedStatements });
    const unregister = server.transfers.register(worker);
    core.worker = { wake: () => worker.wake(), stop: () => (unregister(), worker.stop()) };
  }
  return pools;
}

/**
 * A server's drain: set at stop(), before anything closes. Readiness answers
 * 503, every response ends its connection, WebSocket upgrades are refused with
 * 503, and what registered in `onDrain` stops (the socket rebalance).
 */
interface Drain {
  draining: boolean;
  readonly onDrain: (() => Promise<void>)[];
}

/** What the HTTP side needs of the GraphQL side. */
interface GraphQLSide {
  pgl: PostGraphileInstance;
  schema: Promise<GraphQLSchema>;
  identityLimiter: IdentityPoolLimiter;
  wsLimits: ReturnType<typeof webSocketLimits>;
  /** Set once mounted: told when credentials change. */
  webSockets: { front?: WebSocketFront | undefined };
  /** Filled in once the HTTP modules are loaded (the preset reads it per request). */
  requestInfo: { read?: typeof import("../adapters/grafserv.js").grafservRequestInfo };
}

/** The identity resolver, the LISTEN connection and the schema, built while the HTTP modules load. */
function openGraphQLSide(server: ServerState, core: Core, pools: HubPools, options: ServerOptions, config: HubConfig): GraphQLSide {
  const { log } = server;
  // LISTEN needs a session of its own: straight to Postgres when a pooler is in the way.
  const superuserUrl = config.directDatabaseUrl ?? core.db!.superuserUrl;
  // Plugins get, per request, a view of the superuser pool bounded per player / API key.
  const identityLimiter = createIdentityPoolLimiter(pools.superuser, {
    connections: options.perIdentityConnections ?? DEFAULT_IDENTITY_LIMITS.connections,
    queue: options.perIdentityQueue ?? DEFAULT_IDENTITY_LIMITS.queue,
    waitMs: pools.superuser.options.connectionTimeoutMillis ?? 10_000,
  });
  // Made before the LISTEN connection, whose credential channel clears its cache.
  const resolver = createIdentityResolver(pools.credentials, { cacheTtlMs: options.identityCacheTtlMs ?? 1000 });
  server.resolver = resolver;
  const webSockets: GraphQLSide["webSockets"] = {};
  // One LISTEN connection for every subscription of this server and for credential changes.
  const live = createLiveNotifications(superuserUrl, log, {
    internal: [
      credentialEvents(() => {
        resolver.clear();
        webSockets.front?.credentialsChanged();
      }),
    ],
  });
  core.live = live;
  live.ready.catch(() => undefined); // awaited by the HTTP side, after the schema
  const wsLimits = webSocketLimits(options.websocket);
  const requestInfo: GraphQLSide["requestInfo"] = {};
  const pgl = postgraphile(
    makePreset({
      // The playground mutation depends on configuration, not on the plugin list.
      plugins: [...(options.plugins ?? defaultPlugins), ...(config.playground ? [HubPlaygroundPlugin] : [])],
      extraPgSchemas: options.extraPgSchemas ?? [],
      graphqlPool: pools.graphql,
      pipelinedPg: pipelinedGraphQL(config),
      requestInfo: (requestContext) => requestInfo.read!(requestContext),
      superuserPool: pools.superuser,
      superuserPoolFor: identityLimiter.poolFor,
      graphiql: options.graphiql ?? config.nodeEnv !== "production",
      lenientSchema: options.lenientSchema ?? false,
      log,
      maxRequestLength: MAX_BODY,
      limits: {
        maxDepth: options.maxQueryDepth ?? DEFAULT_QUERY_LIMITS.maxDepth,
        maxAliases: options.maxQueryAliases ?? DEFAULT_QUERY_LIMITS.maxAliases,
        maxSelections: options.maxQuerySelections ?? DEFAULT_QUERY_LIMITS.maxSelections,
        introspection: config.introspection,
      },
      statementTimeoutMs: options.statementTimeoutMs ?? 10_000,
      pubsub: live,
      websocketKeepaliveMs: wsLimits.keepAliveMs,
      server,
    }),
  );
  core.pgl = pgl;
  const schema = Promise.resolve(pgl.getSchemaResult()).then(
    (result) => result.schema,
    (error: unknown) => {
      // Database errors carry a code and are reported as such; anything else came from a plugin's code.
      if (typeof (error as { code?: unknown } | undefined)?.code === "string") throw error;
      throw explainSchemaError(error, options.plugins ?? defaultPlugins) ?? schemaBuildFailed(error);
    },
  );
  return { pgl, schema, identityLimiter, wsLimits, webSockets, requestInfo };
}

/**
 * A Fastify plugin of the root context (Fastify's documented 'skip-override',
 * what fastify-plugin sets): its hooks and routes apply to the whole server.
 */
function rootPlugin(name: string, register: (instance: FastifyInstance) => unknown): FastifyPluginAsync {
  const plugin: FastifyPluginAsync = async (instance) => {
    await register(instance);
  };
  return Object.assign(plugin, { [Symbol.for("skip-override")]: true, [Symbol.for("fastify.display-name")]: name });
}

/** Write the schema's SDL where the options ask, for GraphQL code generators. */
async function exportSchema(schema: GraphQLSchema, file: string, log: Logger): Promise<void> {
  const resolved = path.resolve(file);
  await fsp.mkdir(path.dirname(resolved), { recursive: true });
  await fsp.writeFile(resolved, `${printSchema(lexicographicSortSchema(schema))}\n`);
  log.info({ file: resolved }, "wrote the GraphQL schema SDL");
}

/**
 * The Fastify instance, which owns the server's lifecycle from here: each
 * part is a plugin of it, and releases what it holds in its own onClose hook
 * (the WebSocket front, the API key stamps). The first plugin's hook, run
 * last, releases the core. Fastify runs them once HTTP has stopped and the
 * in-flight requests are done.
 */
async function createHttpSide(server: ServerState, core: Core, graphql: GraphQLSide, options: ServerOptions, config: HubConfig, drain: Drain): Promise<FastifyInstance> {
  const { log } = server;
  const pools = core.pools!;
  const httpModules = loadHttpModules(options.configureApp !== undefined);
  const schema = await graphql.schema;
  const { grafservRequestInfo, mountGraphQL } = await httpModules.grafserv;
  graphql.requestInfo.read = grafservRequestInfo;
  if (options.exportSchemaSDLPath) await exportSchema(schema, options.exportSchemaSDLPath, log);

  const [{ createFastify }, expressAdapter] = await Promise.all([httpModules.fastify, httpModules.express]);
  const trustProxy = trustFunction(config.trustProxy);
  const expressApp = options.configureApp && expressAdapter ? await expressAdapter.createExpressApp(options.configureApp, pools.superuser, trustProxy) : undefined;
  if (expressApp && expressAdapter) {
    const collisions = expressAdapter.routeCollisions(expressApp.app, builtInPaths(config.dashboard, options.graphiql ?? config.nodeEnv !== "production", config));
    if (collisions.length > 0) throw new HubError("HUB_ROUTE_CONFLICT", collisions.join(" "));
  }
  const app = createFastify({
    logger: log,
    stats: server.stats,
    bodyLimit: MAX_BODY,
    requestTimeoutMs: options.requestTimeoutMs ?? 30_000,
    messageClasses: expressApp?.messageClasses,
    trustProxy,
    drain,
  });
  // Registered first, so its onClose runs last: after HTTP has stopped and every part below has closed.
  await app.register(
    rootPlugin("hub-server", (instance) => {
      instance.decorate("hubServer", server);
      instance.addHook("onClose", () => closeCore(core, server));
    }),
  );
  await core.live!.ready;
  const { identityLimiter } = graphql;
  // Order matters: the auth hook first, so Express and GraphQL both see the identity; it also admits (per-identity limit).
  await app.register(
    rootPlugin("hub-auth", (instance) => {
      const apiKeyUsage = createApiKeyUsage(pools.credentials, log);
      instance.addHook("onClose", () => apiKeyUsage.stop());
      addAuthHook(instance, server.resolver!, apiKeyUsage, identityLimiter);
    }),
  );
  await app.register(
    rootPlugin("hub-graphql", async (instance) => {
      const front = await mountGraphQL(instance, graphql.pgl, { resolver: server.resolver!, limits: graphql.wsLimits, log, drain, trustProxy });
      graphql.webSockets.front = front;
      if (front && config.socketRebalance) {
        const rebalance = startSocketRebalance(pools.superuser, front, config.socketRebalance, log);
        drain.onDrain.push(() => rebalance.stop());
        // Before the core's hook (registered first, run last) ends the pools.
        instance.addHook("onClose", () => rebalance.stop());
      }
    }),
  );
  const { livenessPath, readinessPath } = config;
  if (livenessPath !== false || readinessPath !== false) {
    const live = core.live!;
    await app.register(
      rootPlugin("hub-health", (instance) =>
        mountHealth(instance, { liveness: livenessPath, readiness: readinessPath }, { draining: () => drain.draining, databaseReachable: () => live.connected() }),
      ),
    );
  }
  const dashboard = config.dashboard;
  if (dashboard !== false) await app.register(rootPlugin("hub-dashboard", (instance) => mountDashboard(instance, dashboard, log)));
  if (expressApp && expressAdapter) {
    await app.register(rootPlugin("hub-express", (instance) => expressAdapter.mountExpressApp(instance, expressApp.app, server.stats, identityLimiter.poolFor)));
  }
  return app;
}

/** Listen, then stop on SIGINT/SIGTERM unless the options say the caller handles signals. */
async function listen(app: FastifyInstance, server: ServerState, options: ServerOptions, config: HubConfig, drain: Drain): Promise<Omit<RunningServer, "superuserDatabaseUrl">> {
  const { log } = server;
  await app.listen({ port: config.port, host: config.host, backlog: LISTEN_BACKLOG }).catch((error: unknown) => {
    throw listenFailed(error, config.port, config.host, options.port !== undefined);
  });
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const displayHost = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host.includes(":") ? `[${config.host}]` : config.host;
  const url = `http://${displayHost}:${port}`;
  if (config.playground && config.nodeEnv === "production") {
    log.warn("the playground is on in production: anyone can create players and sessions with hubCreatePlaygroundSession (HUB_PLAYGROUND=off or playground: false turns it off)");
  }
  log.info({ url: `${url}/graphql`, dataDir: config.databaseUrl ? undefined : config.dataDir }, `hub listening on ${url}/graphql`);

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      await drainFor(drain, config.drainMs, log);
      log.info("stopping: no longer accepting; in-flight requests finish, WebSockets close (1001), then the database pools");
      await closeWithin(app, options.shutdownTimeoutMs ?? 10_000, log);
      log.info("stopped");
      // Only now: a second Ctrl-C while stopping must reach onSignal (which
      // exits through process.exit, whose hook stops the embedded Postgres),
      // not Node's default action, which kills the process on the spot.
      removeSignalHandlers();
    })();
    return stopping;
  };
  const removeSignalHandlers = options.handleSignals === false ? () => undefined : stopOnSignals(stop, log);
  return { port, url, stop };
}

/**
 * The first step of stop(): readiness turns 503 at once, while requests keep
 * being served (each answer closing its connection) for drainMs, the time a
 * proxy's health checks need to stop sending traffic here.
 */
async function drainFor(drain: Drain, drainMs: number, log: Logger): Promise<void> {
  drain.draining = true;
  log.info({ drainMs }, "drain started: readiness answers 503, WebSocket upgrades 503; still serving, each response with Connection: close");
  // The steps run during the drain rather than before it (the rebalance deletes its row: a query).
  const steps = drain.onDrain.map((step) => step().catch((error: unknown) => log.warn({ err: error }, "error while draining")));
  await Promise.all([...steps, drainMs > 0 ? new Promise((resolve) => setTimeout(resolve, drainMs)) : undefined]);
}

/** SIGINT and SIGTERM stop the server, then exit; a second signal while stopping exits at once. The function removes the handlers. */
function stopOnSignals(stop: () => Promise<void>, log: Logger): () => void {
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

export function startAndListen(rawOptions?: ServerOptions, callback?: (info: { port: number }) => void): Promise<RunningServer> {
  return startServer(rawOptions, callback);
}

/**
 * startAndListen, with what `node dist/server.js` adds: the embedded Postgres
 * it started before loading the heavy modules. Each call makes its own server
 * state (src/server-state.ts): nothing here is shared with another server.
 */
export async function startServer(
  rawOptions: ServerOptions | undefined,
  callback?: (info: { port: number }) => void,
  extra: { prewarmed?: PrewarmedDatabase | undefined } = {},
): Promise<RunningServer> {
  const options = validateOptions(rawOptions);
  // The environment, overridden by the options: one set of rules and messages for both.
  const config = readConfig(process.env, options as Record<string, unknown>);
  const log = createLogger({ level: config.logLevel, pretty: config.logPretty ?? (config.nodeEnv === "development" && process.stdout.isTTY === true) });
  const server = createServerState({ log, transfers: resolveTransferOptions(options.transfers) });
  serverStarted(server);
  const core: Core = {};
  let app: FastifyInstance | undefined;
  try {
    const pools = await openDatabaseSide(server, core, options, config, extra.prewarmed);
    const graphql = openGraphQLSide(server, core, pools, options, config);
    const drain: Drain = { draining: false, onDrain: [] };
    app = await createHttpSide(server, core, graphql, options, config, drain);
    const running = await listen(app, server, options, config, drain);
    callback?.({ port: running.port });
    return { ...running, superuserDatabaseUrl: core.db!.superuserUrl, [SERVER_STATE]: server } as RunningServer;
  } catch (error) {
    // Fastify, once there, runs the hooks of whatever was mounted; closeCore runs once either way.
    if (app) await app.close().catch((closeError: unknown) => log.warn({ err: closeError }, "error while releasing resources"));
    await closeCore(core, server);
    throw startupError(error, core.db);
  }
}
