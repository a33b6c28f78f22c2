import "./prelude.js";
import fsp from "node:fs/promises";
import path from "node:path";
import { postgraphile } from "postgraphile";
import { lexicographicSortSchema, printSchema } from "graphql";
import { readConfig } from "./config.js";
import { createLogger, setLogger, type Logger } from "./logger.js";
import { discardPrewarmed, endPool, openDatabase, retryWhileEmbeddedRestarts, startupError, type OpenedDatabase } from "./db/database.js";
import { openPools, ensureRoleSwitch, setSuperuserPool, clearSuperuserPool, type HubPools } from "./db/pools.js";
import { migrate } from "./db/migrate.js";
import { warnAboutGrants } from "./db/grants.js";
import { validateOptions, type ServerOptions } from "./options.js";
import { makePreset } from "./graphql/preset.js";
import { defaultPlugins } from "./graphql/default-plugins.js";
import { addAuthHook } from "../adapters/auth.js";
import { mountDashboard } from "../adapters/dashboard.js";
import { createIdentityResolver } from "./auth/resolver.js";
import { DEFAULT_QUERY_LIMITS } from "./graphql/query-limits.js";
import { listenForCredentialChanges } from "./db/credential-events.js";
import { createApiKeyUsage } from "./auth/api-key-usage.js";
import { createIdentityPoolLimiter, DEFAULT_IDENTITY_LIMITS } from "./db/identity-limit.js";
import { HubPlaygroundPlugin } from "./graphql/sessions.js";
import { createServerStats, setLatestServerStats } from "./stats.js";
import { createLiveNotifications } from "./live/notifications.js";
import { webSocketLimits } from "./live/limits.js";
import type { WebSocketFront } from "../adapters/websocket.js";
import type { BuiltInPath } from "../adapters/express.js";
import { GRAPHQL_PATH } from "../adapters/graphql-path.js";
import { HubError } from "./errors.js";
import { listenFailed, schemaBuildFailed } from "./startup-errors.js";
import { resolveTransferOptions } from "./transfers/options.js";
import { registerWorker, setTransferOptions } from "./transfers/runtime.js";
import { startTransferWorker } from "./transfers/worker.js";
import { startBankrollSweep } from "./money/fold.js";

export interface RunningServer {
  port: number;
  /** http://host:port, with 127.0.0.1 for a wildcard host. */
  url: string;
  /** Connection string of the superuser connection (the embedded one, or SUPERUSER_DATABASE_URL). */
  superuserDatabaseUrl: string;
  /** Close HTTP (finishing in-flight requests), the pools and the embedded database. */
  stop(): Promise<void>;
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

/**
 * Stop accepting, let in-flight requests finish, and after timeoutMs cut the
 * connections still open so a stuck client cannot hold the shutdown forever.
 */
async function closeWithin(app: import("fastify").FastifyInstance, timeoutMs: number, log: Logger): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), timeoutMs);
  });
  const closing = app.close();
  const outcome = await Promise.race([closing.then(() => "closed" as const), timedOut]);
  clearTimeout(timer);
  if (outcome === "timeout") {
    log.warn({ timeoutMs }, "in-flight requests did not finish in time; closing their connections");
    app.server.closeAllConnections();
    await closing;
  }
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
function builtInPaths(dashboard: string | false, graphiql: boolean): BuiltInPath[] {
  const paths: BuiltInPath[] = [{ path: GRAPHQL_PATH, what: "GraphQL", prefix: false }];
  if (graphiql) {
    const hint = "turn GraphiQL off (graphiql: false)";
    paths.push({ path: "/graphiql", what: "GraphiQL", prefix: false, hint }, { path: "/ruru-static", what: "GraphiQL's files", prefix: true, hint });
  }
  if (dashboard !== false) {
    paths.push({ path: dashboard, what: "the dashboard", prefix: true, hint: 'move the dashboard (the option dashboard: "/ops", or HUB_DASHBOARD=/ops) or turn it off (dashboard: false, HUB_DASHBOARD=off)' });
  }
  return paths;
}

/** Undo what a failed start had already done, in reverse order. */
async function unwind(steps: (() => Promise<unknown>)[], log: Logger): Promise<void> {
  for (const step of steps.reverse()) {
    try {
      await step();
    } catch (error) {
      log.warn({ err: error }, "error while releasing resources");
    }
  }
}

export async function startAndListen(
  rawOptions?: ServerOptions,
  callback?: (info: { port: number }) => void,
): Promise<RunningServer> {
  const options = validateOptions(rawOptions);
  // The environment, overridden by the options: one set of rules and messages for both.
  const config = readConfig(process.env, options as Record<string, unknown>);
  const log = createLogger({ level: config.logLevel, pretty: config.logPretty ?? (config.nodeEnv === "development" && process.stdout.isTTY === true) });
  setLogger(log);
  // Counted from this call: uptime and requests of this server alone.
  const stats = createServerStats();

  const cleanup: (() => Promise<unknown>)[] = [];
  let opened: OpenedDatabase | undefined;
  try {
    const db = await openDatabase(config, log);
    opened = db;
    cleanup.push(() => db.close());
    await discardPrewarmed();
    const urls = { databaseUrl: db.databaseUrl, superuserDatabaseUrl: db.superuserUrl };
    const embedded = db.embedded;

    const pools: HubPools = await retryWhileEmbeddedRestarts(db, () => openPools(urls, log, { graphqlPipeline: PIPELINED_GRAPHQL, databaseUrlVariable: config.databaseUrlVariable }));
    cleanup.push(() => Promise.all([endPool(pools.graphql), endPool(pools.superuser), endPool(pools.credentials)]));
    // Connected while the rest starts, so the first credential lookup finds a warm connection.
    pools.credentials.query("select 1").catch(() => undefined);
    await retryWhileEmbeddedRestarts(db, () => migrate(pools.superuser, { userMigrationsPath: options.userDatabaseMigrationsPath, log }));
    await ensureRoleSwitch(pools, log, config.databaseUrlVariable);
    // Warnings only: a table GraphQL cannot read fails the requests that use it, not the start.
    await warnAboutGrants(pools.superuser, options.extraPgSchemas ?? [], log);
    setSuperuserPool(pools.superuser);
    cleanup.push(async () => clearSuperuserPool(pools.superuser));
    // Bets' house sides left pending by an earlier run are folded before the first request.
    const sweep = startBankrollSweep(pools.superuser, (error) => log.warn({ err: error }, "folding pending bets into the bankroll failed; retrying in 1 s"));
    cleanup.push(() => sweep.stop());
    await sweep.first;
    // Deposits and withdrawals with casinos: every instance runs a worker on the shared outbox.
    const transfers = resolveTransferOptions(options.transfers);
    setTransferOptions(transfers);
    if (transfers.worker) {
      const worker = startTransferWorker(urls.superuserDatabaseUrl, transfers, log);
      const unregister = registerWorker(worker);
      cleanup.push(async () => {
        unregister();
        await worker.stop();
      });
    }

    // Plugins get, per request, a view of the superuser pool bounded per player / API key.
    const identityLimiter = createIdentityPoolLimiter(pools.superuser, {
      connections: options.perIdentityConnections ?? DEFAULT_IDENTITY_LIMITS.connections,
      queue: options.perIdentityQueue ?? DEFAULT_IDENTITY_LIMITS.queue,
      waitMs: pools.superuser.options.connectionTimeoutMillis ?? 10_000,
    });
    // One LISTEN connection for every subscription of this process.
    const live = createLiveNotifications(urls.superuserDatabaseUrl, log);
    cleanup.push(() => live.close());
    live.ready.catch(() => undefined); // awaited below, after the schema
    const wsLimits = webSocketLimits(options.websocket);
    // Read per request, so only once the server runs: by then the adapter (loaded below) is there.
    let requestInfo: typeof import("../adapters/grafserv.js").grafservRequestInfo | undefined;
    const preset = makePreset({
      // The playground mutation depends on configuration, not on the plugin list.
      plugins: [...(options.plugins ?? defaultPlugins), ...(config.playground ? [HubPlaygroundPlugin] : [])],
      extraPgSchemas: options.extraPgSchemas ?? [],
      graphqlPool: pools.graphql,
      pipelinedPg: PIPELINED_GRAPHQL,
      requestInfo: (requestContext) => requestInfo!(requestContext),
      superuserPool: pools.superuser,
      superuserPoolFor: identityLimiter.poolFor,
      graphiql: options.graphiql ?? config.nodeEnv !== "production",
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
    });
    const pgl = postgraphile(preset);
    cleanup.push(async () => pgl.release());
    // Independent of the schema: its connection (and LISTEN) is made while the schema builds.
    const resolver = createIdentityResolver(pools.credentials, { cacheTtlMs: options.identityCacheTtlMs ?? 1000 });
    let webSockets: WebSocketFront | undefined;
    const credentialEvents = listenForCredentialChanges(
      urls.superuserDatabaseUrl,
      () => {
        resolver.clear();
        webSockets?.credentialsChanged();
      },
      log,
    );
    cleanup.push(() => credentialEvents.close());
    credentialEvents.ready.catch(() => undefined); // awaited below, after the schema
    const schemaResult = pgl.getSchemaResult();
    const httpModules = loadHttpModules(options.configureApp !== undefined);
    const { schema } = await Promise.resolve(schemaResult).catch((error: unknown) => {
      // Database errors carry a code and are reported as such; anything else came from a plugin's code.
      throw typeof (error as { code?: unknown } | undefined)?.code === "string" ? error : schemaBuildFailed(error);
    });
    const { grafservRequestInfo, mountGraphQL } = await httpModules.grafserv;
    requestInfo = grafservRequestInfo;
    if (options.exportSchemaSDLPath) {
      const file = path.resolve(options.exportSchemaSDLPath);
      await fsp.mkdir(path.dirname(file), { recursive: true });
      await fsp.writeFile(file, `${printSchema(lexicographicSortSchema(schema))}\n`);
      log.info({ file }, "wrote the GraphQL schema SDL");
    }

    const [{ createFastify }, expressAdapter] = await Promise.all([httpModules.fastify, httpModules.express]);
    const expressApp = options.configureApp && expressAdapter ? await expressAdapter.createExpressApp(options.configureApp, pools.superuser) : undefined;
    if (expressApp && expressAdapter) {
      const collisions = expressAdapter.routeCollisions(expressApp.app, builtInPaths(config.dashboard, options.graphiql ?? config.nodeEnv !== "production"));
      if (collisions.length > 0) throw new HubError("HUB_ROUTE_CONFLICT", collisions.join(" "));
    }
    const app = createFastify({
      logger: log,
      stats,
      bodyLimit: MAX_BODY,
      requestTimeoutMs: options.requestTimeoutMs ?? 30_000,
      messageClasses: expressApp?.messageClasses,
    });
    await credentialEvents.ready;
    await live.ready;
    const apiKeyUsage = createApiKeyUsage(pools.credentials, log);
    cleanup.push(() => apiKeyUsage.stop());
    // Order matters: the auth hook first, so Express and GraphQL both see the identity; it also admits (per-identity limit).
    addAuthHook(app, resolver, apiKeyUsage, identityLimiter);
    // Registered last so it runs first: stop accepting and finish in-flight requests before anything they use closes.
    cleanup.push(() => closeWithin(app, options.shutdownTimeoutMs ?? 10_000, log));
    webSockets = await mountGraphQL(app, pgl, { resolver, limits: wsLimits, log });
    if (config.dashboard !== false) mountDashboard(app, config.dashboard, log);
    if (expressApp && expressAdapter) await expressAdapter.mountExpressApp(app, expressApp.app, stats, identityLimiter.poolFor);
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
    setLatestServerStats(stats);
    log.info({ url: `${url}/graphql`, dataDir: embedded ? config.dataDir : undefined }, `hub listening on ${url}/graphql`);

    let stopping: Promise<void> | undefined;
    const stop = () => {
      stopping ??= (async () => {
        log.info("stopping: closing HTTP, then the database pools");
        await unwind(cleanup, log);
        log.info("stopped");
        // Only now: a second Ctrl-C while stopping must reach onSignal (which
        // exits through process.exit, whose hook stops the embedded Postgres),
        // not Node's default action, which kills the process on the spot.
        removeSignalHandlers();
      })();
      return stopping;
    };

    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        log.warn({ signal }, "second signal: exiting now");
        process.exit(1);
      }
      log.info({ signal }, "received signal");
      void stop().then(
        () => process.exit(0),
        (error: unknown) => {
          log.error({ err: error }, "error while stopping");
          process.exit(1);
        },
      );
    };
    const removeSignalHandlers = () => {
      process.removeListener("SIGINT", onSignal);
      process.removeListener("SIGTERM", onSignal);
    };
    if (options.handleSignals !== false) {
      process.on("SIGINT", onSignal);
      process.on("SIGTERM", onSignal);
    }

    callback?.({ port });
    return { port, url, superuserDatabaseUrl: urls.superuserDatabaseUrl, stop };
  } catch (error) {
    await unwind(cleanup, log);
    throw startupError(error, opened);
  }
}
