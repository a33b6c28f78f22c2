import type pg from "pg";
import type { Identity } from "../auth/identity.js";
import type { ChainSecrets } from "../fair/chain-secret.js";

/**
 * The GraphQL context every plan and resolver receives (`PluginContext`):
 * `context().get("identity")` in a plan, `context.identity` in a resolver.
 */
export interface PluginContext {
  identity: Identity | undefined;
  superuserPool: pg.Pool;
  /** Applied by the pg adaptor per request: role and RLS settings. */
  pgSettings: Record<string, string | undefined> | null;
  /** Fastify's request id, to correlate logs. */
  requestId: string | undefined;
  /**
   * The process's one LISTEN connection, as grafast's subscriber: in a
   * subscription's plan, `listen(context().get("pgSubscriber"), "my_channel")`.
   * Typed as PostGraphile's PgSubscriber, of which it has `subscribe(topic)` only.
   */
  pgSubscriber: Grafast.Context["pgSubscriber"];
  /**
   * This server's hash-chain work (its cache of derived hashes, its worker
   * threads): what a custom game passes to `getIntermediateHash`,
   * `dbCreateHubHashChain`, `dbRevealHubHashChain` and `makeOutcomeBet` of
   * `@hubpkg/hub/hash-chain`, e.g. `context().get("hashChains")` in a plan.
   */
  hashChains: ChainSecrets;
}

/**
 * Where a login finds how to make the rest of its request run as the player
 * it logged in: identity, the superuser pool bound to that identity and the
 * transaction settings change together. A symbol, so no plugin takes it for
 * a member of its own.
 */
export const ADOPT_IDENTITY: unique symbol = Symbol("hub.adoptIdentity");

export type AdoptIdentity = (context: PluginContext, identity: Identity) => void;

declare global {
  namespace Grafast {
    // Lets `context().get("identity")` be typed in plugin plans.
    interface Context {
      identity: PluginContext["identity"];
      superuserPool: PluginContext["superuserPool"];
      requestId: PluginContext["requestId"];
      hashChains: PluginContext["hashChains"];
    }
  }
}
