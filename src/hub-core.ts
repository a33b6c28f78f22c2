/**
 * What a hub opens before any HTTP exists: the database and its pools, the
 * migrations, the transfer worker and the bankroll sweep (the database side),
 * then the identity resolver, the LISTEN connection and the schema (the
 * GraphQL side), and the Express app of configureApp. The Fastify plugin
 * (src/hub-plugin.ts) then mounts it on an instance; until it does, a failed
 * start releases it here (closeCore).
 */
import fsp from "node:fs/promises";
import path from "node:path";
import { postgraphile, type PostGraphileInstance } from "postgraphile";
import { lexicographicSortSchema, printSchema, type GraphQLSchema } from "graphql";
import { createLogger, type Logger } from "./logger.js";
import { endPool, openDatabase, retryWhileEmbeddedRestarts, startupError, type OpenedDatabase, type PrewarmedDatabase } from "./db/database.js";
import { openPools, ensureRoleSwitch, type HubPools } from "./db/pools.js";
import { migrate, migrateDirect } from "./db/migrate.js";
import { checkServerConnectionLimit, planConnections, type ConnectionPlan } from "./db/connection-budget.js";
import { checkTlsFiles } from "./db/connection-errors.js";
import { warnAboutGrants } from "./db/grants.js";
import type { ResolvedOptions } from "./options.js";
import { makePreset } from "./graphql/preset.js";
import { defaultPlugins } from "./graphql/default-plugins.js";
import { createIdentityResolver } from "./auth/resolver.js";
import { credentialEvents } from "./db/credential-events.js";
import { createIdentityPoolLimiter, type IdentityPoolLimiter } from "./db/identity-limit.js";
import { HubPlaygroundPlugin } from "./graphql/sessions.js";
import { createLiveNotifications, type LiveNotifications } from "./live/notifications.js";
import type { WebSocketFront } from "../adapters/websocket.js";
import type { BuiltInPath, ExpressApp } from "../adapters/express.js";
import { GRAPHQL_PATH } from "../adapters/graphql-path.js";
import { HubError } from "./errors.js";
import { schemaBuildFailed } from "./startup-errors.js";
import { explainSchemaError } from "./graphql/plugin-checks.js";
import { startTransferWorker, type TransferWorker } from "./transfers/worker.js";
import { createTransferRuntime, type TransferRuntime } from "./transfers/runtime.js";
import type { ServerState } from "./server-state.js";
import { createServerState } from "./create-server-state.js";
import { startBankrollSweep, type BankrollSweep } from "./money/fold.js";
import { trustFunction, type TrustFunction } from "./trust-proxy.js";

/** Largest request body GraphQL accepts (413 beyond). */
export const MAX_BODY = 1024 * 1024;

/**
 * GraphQL transactions send their prologue (begin, set_config) with their first
 * query in one round trip: the GraphQL pool in node-postgres's pipeline mode,
 * and the pipelined adaptor on it (src/db/pipelined-adaptor.ts). One choice for both.
 */
const PIPELINED_GRAPHQL = true;
/** Behind a transaction pooler the stock adaptor: a pipelined batch could span two of the pooler's transactions. */
const pipelinedGraphQL = (options: ResolvedOptions) => PIPELINED_GRAPHQL && options.databasePooler === "none";

/**
 * What the entry points give the core besides the options: the list the
 * module-level façades follow (told when the server's state exists and again
 * when its pools are about to close), and the embedded Postgres `node
 * dist/server.js` started early.
 */
export interface HubInternals {
  registry?: { started(state: ServerState): void; stopped(state: ServerState): void } | undefined;
  prewarmed?: PrewarmedDatabase | undefined;
}

/** What a hub opens, filled in as it is opened; closeCore releases what is there. */
export interface Core {
  db?: OpenedDatabase;
  pools?: HubPools;
  worker?: TransferWorker;
  sweep?: BankrollSweep;
  live?: LiveNotifications;
  pgl?: PostGraphileInstance;
  /** Set once the server's state exists and the registry was told. */
  state?: ServerState;
  /** Set by closeCore: it runs once, whoever calls it first. */
  closed?: Promise<void>;
}

/** Release the core, the reverse of the order it was opened in; a failing step is logged and the rest still run. */
export function closeCore(core: Core, log: Logger, internals: HubInternals): Promise<void> {
  core.closed ??= (async () => {
    const attempt = async (step: (() => Promise<unknown>) | undefined) => {
      try {
        await step?.();
      } catch (error) {
        log.warn({ err: error }, "error while releasing resources");
      }
    };
    const { db, pools, worker, sweep, live, pgl, state } = core;
    await attempt(pgl && (async () => pgl.release()));
    await attempt(live && (() => live.close()));
    await attempt(worker && (() => worker.stop()));
    await attempt(sweep && (() => sweep.stop()));
    // From here the façades (superuserPool, logger, serverStats()) follow the server started before this one.
    if (state) internals.registry?.stopped(state);
    await attempt(pools && (() => Promise.all([endPool(pools.graphql), endPool(pools.superuser), endPool(pools.credentials)])));
    await attempt(db && (() => db.close()));
  })();
  return core.closed;
}

/** This instance's connections (src/db/connection-budget.ts), from the budget, the pools option and the transfer worker. */
function connectionPlan(options: ResolvedOptions): ConnectionPlan {
  const { transfers } = options;
  return planConnections({
    maxConnections: options.maxConnections?.value,
    maxConnectionsFrom: options.maxConnections?.from ?? "env",
    pools: options.pools,
    transferWorker: transfers.worker ? transfers.concurrency + 1 : 0,
  });
}

/** The database, its pools and migrations, and the transfer worker: everything that needs no schema. */
async function openDatabaseSide(core: Core, options: ResolvedOptions, log: Logger, transfers: TransferRuntime, prewarmed: PrewarmedDatabase | undefined): Promise<HubPools> {
  const plan = connectionPlan(options);
  const db = await (prewarmed?.adopt(options) ?? openDatabase(options, log));
  core.db = db;
  await prewarmed?.discard();
  const urls = { databaseUrl: db.databaseUrl, superuserDatabaseUrl: db.superuserUrl };
  if (!db.embedded) {
    checkTlsFiles(options.databaseUrlVariable, urls.databaseUrl);
    checkTlsFiles("SUPERUSER_DATABASE_URL", urls.superuserDatabaseUrl);
    if (options.directDatabaseUrl) checkTlsFiles("DIRECT_DATABASE_URL", options.directDatabaseUrl);
  }
  const unnamedStatements = options.databasePooler === "transaction";
  const pools = await retryWhileEmbeddedRestarts(db, () =>
    openPools(urls, log, { graphqlPipeline: pipelinedGraphQL(options), databaseUrlVariable: options.databaseUrlVariable, sizes: plan, unnamedStatements }),
  );
  core.pools = pools;
  // Connected while the rest starts, so the first credential lookup finds a warm connection.
  pools.credentials.query("select 1").catch(() => undefined);
  const migrations = { userMigrationsPath: options.userDatabaseMigrationsPath, log };
  await retryWhileEmbeddedRestarts(db, () => (options.directDatabaseUrl ? migrateDirect(options.directDatabaseUrl, migrations) : migrate(pools.superuser, migrations)));
  await ensureRoleSwitch(pools, log, options.databaseUrlVariable);
  // Behind a pooler the server's max_connections bounds the pooler, not this instance's pools.
  if (options.databasePooler === "none") await checkServerConnectionLimit(pools.superuser, plan, log);
  // Warnings only: a table GraphQL cannot read fails the requests that use it, not the start.
  await warnAboutGrants(pools.superuser, options.extraPgSchemas, log);
  // Bets' house sides left pending by an earlier run are folded before the first request.
  core.sweep = startBankrollSweep(pools.superuser, log);
  await core.sweep.first;
  // Deposits and withdrawals with casinos: every instance runs a worker on the shared outbox.
  if (options.transfers.worker) {
    const worker = startTransferWorker(urls.superuserDatabaseUrl, options.transfers, log, { max: plan.transferWorker, unnamedStatements });
    const unregister = transfers.register(worker);
    core.worker = { wake: () => worker.wake(), stop: () => (unregister(), worker.stop()) };
  }
  return pools;
}

/** What the HTTP side needs of the GraphQL side. */
export interface GraphQLSide {
  pgl: PostGraphileInstance;
  schema: Promise<GraphQLSchema>;
  identityLimiter: IdentityPoolLimiter;
  /** Set once mounted: told when credentials change. */
  webSockets: { front?: WebSocketFront | undefined };
  /** Filled in once the HTTP modules are loaded (the preset reads it per request). */
  requestInfo: { read?: typeof import("../adapters/grafserv.js").grafservRequestInfo };
}

/** The LISTEN connection and the schema, built while the HTTP modules load. */
function openGraphQLSide(server: ServerState, core: Core, options: ResolvedOptions): GraphQLSide {
  const { log, pools, resolver } = server;
  // LISTEN needs a session of its own: straight to Postgres when a pooler is in the way.
  const superuserUrl = options.directDatabaseUrl ?? core.db!.superuserUrl;
  // Plugins get, per request, a view of the superuser pool bounded per player / API key.
  const identityLimiter = createIdentityPoolLimiter(pools.superuser, {
    connections: options.perIdentityConnections,
    queue: options.perIdentityQueue,
    waitMs: pools.superuser.options.connectionTimeoutMillis ?? 10_000,
  });
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
  const requestInfo: GraphQLSide["requestInfo"] = {};
  const plugins = options.plugins ?? defaultPlugins;
  const pgl = postgraphile(
    makePreset({
      // The playground mutation depends on configuration, not on the plugin list.
      plugins: [...plugins, ...(options.playground ? [HubPlaygroundPlugin] : [])],
      extraPgSchemas: options.extraPgSchemas,
      graphqlPool: pools.graphql,
      pipelinedPg: pipelinedGraphQL(options),
      requestInfo: (requestContext) => requestInfo.read!(requestContext),
      superuserPool: pools.superuser,
      superuserPoolFor: identityLimiter.poolFor,
      graphiql: options.graphiql,
      lenientSchema: options.lenientSchema,
      log,
      maxRequestLength: MAX_BODY,
      limits: { maxDepth: options.maxQueryDepth, maxAliases: options.maxQueryAliases, maxSelections: options.maxQuerySelections, introspection: options.introspection },
      statementTimeoutMs: options.statementTimeoutMs,
      pubsub: live,
      websocketKeepaliveMs: options.websocket.keepAliveMs,
      server,
    }),
  );
  core.pgl = pgl;
  const schema = Promise.resolve(pgl.getSchemaResult()).then(
    (result) => result.schema,
    (error: unknown) => {
      // Database errors carry a code and are reported as such; anything else came from a plugin's code.
      if (typeof (error as { code?: unknown } | undefined)?.code === "string") throw error;
      throw explainSchemaError(error, plugins) ?? schemaBuildFailed(error);
    },
  );
  return { pgl, schema, identityLimiter, webSockets, requestInfo };
}

/**
 * The HTTP modules (grafserv's Fastify adapter, Express when there is a
 * configureApp) are needed only once the schema is built, and loading them is
 * most of what start-up loads besides PostGraphile. They are loaded once the
 * introspection query has gone out, so Node loads them while Postgres works on
 * that query, instead of before.
 */
function loadHttpModules(withExpress: boolean) {
  const modules = {
    grafserv: import("../adapters/grafserv.js"),
    express: withExpress ? import("../adapters/express.js") : Promise.resolve(undefined),
  };
  // Each is awaited where it is needed; a start that fails before must not leave a rejection unhandled.
  for (const loading of Object.values(modules)) loading.catch(() => undefined);
  return modules;
}

/** The paths the hub serves itself, which configureApp's routes cannot take. */
export function builtInPaths(options: Pick<ResolvedOptions, "dashboard" | "graphiql" | "livenessPath" | "readinessPath">): BuiltInPath[] {
  const { dashboard, graphiql } = options;
  const paths: BuiltInPath[] = [{ path: GRAPHQL_PATH, what: "GraphQL", prefix: false }];
  if (options.livenessPath !== false) {
    paths.push({ path: options.livenessPath, what: "the liveness check", prefix: false, hint: "move it (livenessPath, HUB_LIVENESS_PATH) or turn it off (livenessPath: false, HUB_LIVENESS_PATH=off)" });
  }
  if (options.readinessPath !== false) {
    paths.push({ path: options.readinessPath, what: "the readiness check", prefix: false, hint: "move it (readinessPath, HUB_READINESS_PATH) or turn it off (readinessPath: false, HUB_READINESS_PATH=off)" });
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

/** Write the schema's SDL where the options ask, for GraphQL code generators. */
async function exportSchema(schema: GraphQLSchema, file: string, log: Logger): Promise<void> {
  const resolved = path.resolve(file);
  await fsp.mkdir(path.dirname(resolved), { recursive: true });
  await fsp.writeFile(resolved, `${printSchema(lexicographicSortSchema(schema))}\n`);
  log.info({ file: resolved }, "wrote the GraphQL schema SDL");
}

/**
 * A hub ready to be mounted: its state (complete: pools and resolver open),
 * what it opened (core), the schema built, the Express app made.
 */
export interface PreparedHub {
  options: ResolvedOptions;
  server: ServerState;
  core: Core;
  graphql: GraphQLSide;
  trustProxy: TrustFunction | undefined;
  expressApp: ExpressApp | undefined;
  mountGraphQL: typeof import("../adapters/grafserv.js").mountGraphQL;
  expressAdapter: typeof import("../adapters/express.js") | undefined;
  internals: HubInternals;
}

/** The logger of a server with these options. */
export const loggerFor = (options: ResolvedOptions): Logger => createLogger({ level: options.logLevel, pretty: options.logPretty });

/** Open everything a hub serves with; on failure, release what was opened and rethrow. */
export async function prepareHub(options: ResolvedOptions, log: Logger, internals: HubInternals): Promise<PreparedHub> {
  const core: Core = {};
  try {
    const transfers = createTransferRuntime(options.transfers);
    const pools = await openDatabaseSide(core, options, log, transfers, internals.prewarmed);
    // Made before the LISTEN connection, whose credential channel clears its cache.
    const resolver = createIdentityResolver(pools.credentials, { cacheTtlMs: options.identityCacheTtlMs });
    const server = createServerState({ log, pools, resolver, transfers });
    core.state = server;
    internals.registry?.started(server);
    const graphql = openGraphQLSide(server, core, options);
    const httpModules = loadHttpModules(options.configureApp !== undefined);
    const schema = await graphql.schema;
    const { grafservRequestInfo, mountGraphQL } = await httpModules.grafserv;
    graphql.requestInfo.read = grafservRequestInfo;
    if (options.exportSchemaSDLPath) await exportSchema(schema, options.exportSchemaSDLPath, log);
    const expressAdapter = await httpModules.express;
    const trustProxy = trustFunction(options.trustProxy);
    const expressApp = options.configureApp && expressAdapter ? await expressAdapter.createExpressApp(options.configureApp, pools.superuser, trustProxy) : undefined;
    if (expressApp && expressAdapter) {
      const collisions = expressAdapter.routeCollisions(expressApp.app, builtInPaths(options));
      if (collisions.length > 0) throw new HubError("HUB_ROUTE_CONFLICT", collisions.join(" "));
    }
    await core.live!.ready;
    return { options, server, core, graphql, trustProxy, expressApp, mountGraphQL, expressAdapter, internals };
  } catch (error) {
    await closeCore(core, log, internals);
    throw startupError(error, core.db);
  }
}
