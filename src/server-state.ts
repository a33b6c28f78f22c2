import type { Logger } from "./logger.js";
import type { ServerStatsRecorder } from "./stats.js";
import type { HubPools } from "./db/pools.js";
import type { IdentityResolver } from "./auth/resolver.js";
import type { ChainSecrets } from "./fair/chain-secret.js";
import type { CasinoKeys } from "./auth/casino-token.js";
import type { TransferRuntime } from "./transfers/runtime.js";

/**
 * Everything one server holds that can change while it runs. Each hub (the
 * plugin, buildHub, startAndListen) makes one, once its pools are open, and hands it to what needs it: the schema's plugins
 * through the build (`build.hubServer`) and the GraphQL context
 * (`serverOf(context)`), the HTTP side through the Fastify instance
 * (`app.hubServer`). Two servers in one process share none of it.
 */
export interface ServerState {
  readonly log: Logger;
  /** Request counters: serverStats(). */
  readonly stats: ServerStatsRecorder;
  /** The GraphQL, superuser and credentials pools, open when the state is made. */
  readonly pools: HubPools;
  /** Authorization → identity, with its cache (on the credentials pool). */
  readonly resolver: IdentityResolver;
  /** Hash chains: creations in progress, the worker-thread queue, the derived segments. */
  readonly chains: ChainSecrets;
  /** Casinos' token keys: the JWKS fetchers and what was last recorded of each set. */
  readonly casinoKeys: CasinoKeys;
  /** The transfer options and this server's workers. */
  readonly transfers: TransferRuntime;
}

/**
 * Where a resolver finds its server in the GraphQL context. A symbol, so no
 * plugin takes it for a member of its own.
 */
export const HUB_SERVER: unique symbol = Symbol("hub.server");

/** The server that is answering this GraphQL request. */
export function serverOf(context: object): ServerState {
  const state = (context as { [HUB_SERVER]?: ServerState })[HUB_SERVER];
  if (!state) throw new Error("this GraphQL context was not made by the hub's preset (it has no server)");
  return state;
}

declare global {
  namespace GraphileBuild {
    interface Build {
      /** The server this schema is built for (set by the hub's preset). */
      hubServer?: ServerState;
    }
  }
}

/** The server a schema is built for: plugins that keep state read it here. */
export function serverOfBuild(build: GraphileBuild.Build): ServerState {
  if (!build.hubServer) throw new Error("this schema is not built by the hub's preset (its build has no hubServer)");
  return build.hubServer;
}
