/**
 * The hub as a Fastify plugin: GraphQL (POST, GET, WebSockets), the health
 * checks, the dashboard and the Express app of configureApp, mounted on
 * whichever Fastify 5 instance it is registered on (the user's, or the one
 * buildHub makes), and everything it opened released in that instance's
 * onClose. Wrapped with fastify-plugin, so its hooks (the identity, the
 * per-identity admission, the drain's `Connection: close`) apply to the
 * routes the user adds beside it in the same context.
 */
import type { FastifyInstance, FastifyPluginAsync } from "fastify";
import fp from "fastify-plugin";
import { addAuthHook } from "../adapters/auth.js";
import { mountDashboard } from "../adapters/dashboard.js";
import { closeConnectionsWhileDraining, followResponses } from "../adapters/fastify.js";
import { mountHealth } from "../adapters/health.js";
import { createApiKeyUsage } from "./auth/api-key-usage.js";
import { identityOf, type Identity } from "./auth/identity.js";
import { startSocketRebalance } from "./live/rebalance.js";
import type { Logger } from "./logger.js";
import { resolveOptions, type ServerOptions } from "./options.js";
import { closeCore, loggerFor, prepareHub, type HubInternals, type PreparedHub } from "./hub-core.js";
import type { ServerState } from "./server-state.js";

/**
 * A server's drain: started by hubDrain() (stop() of startAndListen), before
 * anything closes. Readiness answers 503, every response ends its connection,
 * WebSocket upgrades are refused with 503, and what registered in `onDrain`
 * stops (the socket rebalance).
 */
export interface Drain {
  draining: boolean;
  readonly onDrain: (() => Promise<void>)[];
  /** Set by the first hubDrain(): it runs once. */
  done?: Promise<void>;
}

declare module "fastify" {
  interface FastifyInstance {
    /** The hub's server state (src/server-state.ts). */
    hubServer: ServerState;
    /**
     * Start the drain and wait drainMs: readiness answers 503 and every
     * response closes its connection while requests are still served. Call it
     * before close() to leave a load balancer's pool gracefully; close()
     * alone does not drain.
     */
    hubDrain(): Promise<void>;
  }
  interface FastifyRequest {
    /** Who is asking, from the Authorization header (the same as Express's req.identity and GraphQL's context.identity). */
    readonly identity: Identity | undefined;
  }
}

/**
 * The first step of stop(): readiness turns 503 at once, while requests keep
 * being served (each answer closing its connection) for drainMs, the time a
 * proxy's health checks need to stop sending traffic here.
 */
function drainFor(drain: Drain, drainMs: number, log: Logger): Promise<void> {
  drain.done ??= (async () => {
    drain.draining = true;
    log.info({ drainMs }, "drain started: readiness answers 503, WebSocket upgrades 503; still serving, each response with Connection: close");
    // The steps run during the drain rather than before it (the rebalance deletes its row: a query).
    const steps = drain.onDrain.map((step) => step().catch((error: unknown) => log.warn({ err: error }, "error while draining")));
    await Promise.all([...steps, drainMs > 0 ? new Promise((resolve) => setTimeout(resolve, drainMs)) : undefined]);
  })();
  return drain.done;
}

/** The state on the instance, the drain, the identity on the request, the counters; the core is released in onClose, which runs last. */
const serverPart = fp(
  async (instance: FastifyInstance, { hub, drain }: { hub: PreparedHub; drain: Drain }) => {
    const { server, core, options, internals } = hub;
    instance.decorate("hubServer", server);
    instance.decorate("hubDrain", () => drainFor(drain, options.drainMs, server.log));
    instance.decorateRequest("identity", {
      getter(this: { raw: import("node:http").IncomingMessage }) {
        return identityOf(this.raw);
      },
    });
    instance.addHook("onClose", () => closeCore(core, server.log, internals));
    followResponses(instance, server.stats);
    closeConnectionsWhileDraining(instance, drain);
  },
  { name: "hub-server", fastify: "5.x" },
);

/** The auth hook: Express, GraphQL and the user's routes all see the identity; it also admits (per-identity limit). */
const authPart = fp(
  async (instance: FastifyInstance, { hub }: { hub: PreparedHub }) => {
    const { server, graphql } = hub;
    const apiKeyUsage = createApiKeyUsage(server.pools.credentials, server.log);
    instance.addHook("onClose", () => apiKeyUsage.stop());
    addAuthHook(instance, server.resolver, apiKeyUsage, graphql.identityLimiter);
  },
  { name: "hub-auth", fastify: "5.x" },
);

const graphqlPart = fp(
  async (instance: FastifyInstance, { hub, drain }: { hub: PreparedHub; drain: Drain }) => {
    const { server, graphql, options, trustProxy } = hub;
    const { log } = server;
    const front = await hub.mountGraphQL(instance, graphql.pgl, { resolver: server.resolver, limits: options.websocket, log, drain, trustProxy });
    graphql.webSockets.front = front;
    if (front && options.socketRebalance) {
      const rebalance = startSocketRebalance(server.pools.superuser, front, options.socketRebalance, log);
      drain.onDrain.push(() => rebalance.stop());
      // Before the core's hook (registered first, run last) ends the pools.
      instance.addHook("onClose", () => rebalance.stop());
    }
  },
  { name: "hub-graphql", fastify: "5.x" },
);

const healthPart = fp(
  async (instance: FastifyInstance, { hub, drain }: { hub: PreparedHub; drain: Drain }) => {
    const { livenessPath, readinessPath } = hub.options;
    const live = hub.core.live!;
    mountHealth(instance, { liveness: livenessPath, readiness: readinessPath }, { draining: () => drain.draining, databaseReachable: () => live.connected() });
  },
  { name: "hub-health", fastify: "5.x" },
);

const dashboardPart = fp(async (instance: FastifyInstance, { path, log }: { path: string; log: Logger }) => mountDashboard(instance, path, log), {
  name: "hub-dashboard",
  fastify: "5.x",
});

const expressPart = fp(
  async (instance: FastifyInstance, { hub }: { hub: PreparedHub }) => {
    const { expressAdapter, expressApp, server, graphql } = hub;
    if (expressAdapter && expressApp) await expressAdapter.mountExpressApp(instance, expressApp.app, server.stats, graphql.identityLimiter.poolFor);
  },
  { name: "hub-express", fastify: "5.x" },
);

/**
 * Mount a prepared hub on an instance, in this order: the state (whose
 * onClose, registered first, runs last and releases the core), the auth hook,
 * GraphQL and WebSockets, the health checks, the dashboard, the Express app.
 * Fastify runs the onClose hooks once HTTP has stopped and the in-flight
 * requests are done. A failed mount releases the core before it rethrows.
 */
export async function mountHub(app: FastifyInstance, hub: PreparedHub): Promise<void> {
  const drain: Drain = { draining: false, onDrain: [] };
  try {
    await app.register(serverPart, { hub, drain });
    await app.register(authPart, { hub });
    await app.register(graphqlPart, { hub, drain });
    const { livenessPath, readinessPath, dashboard } = hub.options;
    if (livenessPath !== false || readinessPath !== false) await app.register(healthPart, { hub, drain });
    if (dashboard !== false) await app.register(dashboardPart, { path: dashboard, log: hub.server.log });
    if (hub.expressApp) await app.register(expressPart, { hub });
  } catch (error) {
    await closeCore(hub.core, hub.server.log, hub.internals);
    throw error;
  }
}

/** Set by buildHub on the options it registers the plugin with: a hub it has already prepared. */
export const PREPARED: unique symbol = Symbol("hub.prepared");

export type HubPluginOptions = ServerOptions & { [PREPARED]?: PreparedHub };

/**
 * The plugin the entry points export (src/index.ts `hub`), told of the
 * façades' registry. Given plain options it resolves them and opens the hub
 * itself; buildHub hands it a hub it prepared (to make the instance around
 * it) under PREPARED.
 */
export function createHubPlugin(internals: HubInternals): FastifyPluginAsync<HubPluginOptions> {
  const plugin: FastifyPluginAsync<HubPluginOptions> = async (app, options) => {
    let hub = options[PREPARED];
    if (!hub) {
      const resolved = resolveOptions(options, process.env, "the hub plugin");
      hub = await prepareHub(resolved, loggerFor(resolved), internals);
    }
    await mountHub(app, hub);
  };
  return fp(plugin, { name: "@hubpkg/hub", fastify: "5.x" });
}
