import { makePgService } from "postgraphile/adaptors/pg";
import { PostGraphileAmberPreset } from "postgraphile/presets/amber";
import type pg from "pg";
import type { Identity } from "../auth/identity.js";
import { pgSettingsFor } from "../auth/identity.js";
import { HubInflectionPlugin } from "./inflection.js";
import type { Logger } from "../logger.js";
import { ADOPT_IDENTITY, type AdoptIdentity, type PluginContext } from "./context.js";
import { queryLimitRules, type QueryLimits } from "./query-limits.js";
import { makeParseAndValidatePlugin } from "./parse-cache.js";
import { makePipelinedPgService } from "../db/pipelined-adaptor.js";
import { makeMaskError } from "./mask-error.js";
import { ClientInputPlugin } from "./client-input-plugin.js";
import { ErrorRequestIdPlugin } from "./request-id.js";
import { CommittedMoneyPlugin } from "./committed.js";
import { HubGameResultTypesPlugin } from "../fair/game-result-types.js";
import type { LiveNotifications } from "../live/notifications.js";
import { OneStatementRoutingPlugin } from "../../adapters/dataplan-pg-executor.js";
import { SubscriptionOverHttpPlugin } from "./subscription-over-http.js";
import { HUB_SERVER, type ServerState } from "../server-state.js";
import { createServerState } from "../create-server-state.js";
import { createIdentityResolver } from "../auth/resolver.js";

/** What the GraphQL context needs from the HTTP request; read by the server adapter (adapters/grafserv.ts). */
export interface RequestInfo {
  identity: Identity | undefined;
  /** The HTTP request's id, for log lines. */
  requestId: string | undefined;
}

export interface PresetInput {
  plugins: GraphileConfig.Plugin[];
  extraPgSchemas: string[];
  graphqlPool: pg.Pool;
  /**
   * true: GraphQL transactions use the pipelined adaptor (src/db/pipelined-adaptor.ts),
   * which pays off on a graphqlPool opened in pipeline mode; false: @dataplan/pg's stock adaptor.
   */
  pipelinedPg: boolean;
  /** Reads the identity and request id from grafast's request context (depends on the HTTP server). */
  requestInfo: (requestContext: Partial<Grafast.RequestContext>) => RequestInfo;
  superuserPool: pg.Pool;
  /** The superuser pool a request's plugins get (default: superuserPool itself); start.ts bounds it per identity. */
  superuserPoolFor?: (identity: Identity | undefined) => pg.Pool;
  graphiql: boolean;
  log: Logger;
  /** Largest accepted /graphql body in bytes. */
  maxRequestLength: number;
  limits: QueryLimits;
  /** statement_timeout for GraphQL requests, ms (0 = none). */
  statementTimeoutMs: number;
  /** The process's LISTEN connection, behind every subscription (null: no subscriptions served). */
  pubsub?: LiveNotifications | null;
  /** Ping interval and pong deadline of WebSocket connections, ms (0 = none). */
  websocketKeepaliveMs?: number;
  /**
   * true: graphile's lenient mode, where a recoverable schema error (a plugin's
   * unknown type, a naming conflict) is logged and the part it affects left out;
   * false (default): it stops the start (HUB_PLUGIN_FAILED).
   */
  lenientSchema?: boolean;
  /** The server the schema is built for (src/server-state.ts); default, one of its own with this log. */
  server?: ServerState;
}

/** Hands the server to the schema's plugins as `build.hubServer` (serverOfBuild). */
function serverPlugin(server: ServerState): GraphileConfig.Plugin {
  return {
    name: "HubServerPlugin",
    version: "0.0.0",
    schema: {
      hooks: {
        build: (build) => build.extend(build, { hubServer: server }, "HubServerPlugin"),
      },
    },
  };
}

export function makePreset(input: PresetInput): GraphileConfig.Preset {
  const { superuserPool, statementTimeoutMs, requestInfo } = input;
  const superuserPoolFor = input.superuserPoolFor ?? (() => superuserPool);
  const pubsub = input.pubsub ?? null;
  // A preset made outside a server (tests, benchmarks): a state of its own on the pools it was given.
  const server =
    input.server ??
    createServerState({ log: input.log, pools: { graphql: input.graphqlPool, superuser: superuserPool, credentials: superuserPool }, resolver: createIdentityResolver(superuserPool) });
  // A login's payload (`query`) is read with the new session: steps that run after it see this identity.
  const adoptIdentity: AdoptIdentity = (context, identity) => {
    context.identity = identity;
    context.superuserPool = superuserPoolFor(identity);
    context.pgSettings = pgSettingsFor(identity, statementTimeoutMs);
  };
  return {
    extends: [PostGraphileAmberPreset],
    // No Relay global ids: `id` is the row's UUID, as existing game clients expect.
    disablePlugins: ["NodePlugin"],
    plugins: [
      serverPlugin(server),
      ...(input.pipelinedPg ? [OneStatementRoutingPlugin] : []),
      HubInflectionPlugin,
      ErrorRequestIdPlugin,
      CommittedMoneyPlugin,
      makeParseAndValidatePlugin({
        firstRules: queryLimitRules(input.limits),
        // Introspection off still lets operators (verified API keys) introspect: the dashboard needs it.
        ...(input.limits.introspection
          ? {}
          : { operator: { firstRules: queryLimitRules({ ...input.limits, introspection: true }), is: (ctx) => requestInfo(ctx).identity?.kind === "operator" } }),
      }),
      ClientInputPlugin,
      // Subscriptions are served over WebSocket when there are live updates; over HTTP they get an error naming it.
      ...(input.pubsub != null ? [SubscriptionOverHttpPlugin] : []),
      // Whatever the plugin list: any game plugin may answer with these types.
      HubGameResultTypesPlugin,
      ...input.plugins,
    ],
    schema: {
      // A recoverable error (a plugin's unknown type, a naming conflict) leaves parts of the schema out:
      // it stops the start unless the operator asked for graphile's lenient mode.
      dontSwallowErrors: !input.lenientSchema,
    },
    pgServices: [
      (input.pipelinedPg ? makePipelinedPgService : makePgService)({
        pool: input.graphqlPool,
        schemas: ["hub", ...input.extraPgSchemas],
      }),
    ],
    grafserv: {
      graphqlPath: "/graphql",
      graphqlOverGET: true,
      graphiql: input.graphiql,
      graphiqlOnGraphQLGET: input.graphiql,
      graphiqlPath: "/graphiql",
      maxRequestLength: input.maxRequestLength,
      // Subscriptions over WebSocket (graphql-transport-ws). adapters/websocket.ts serves the sockets itself, on
      // grafserv's graphql-ws configuration; the flag still tells GraphiQL to offer subscriptions, and the keep-alive
      // is what grafserv would use (the hub's own sweep uses the same interval).
      websockets: input.pubsub != null,
      websocketKeepalive: input.websocketKeepaliveMs ?? 12_000,
      // grafast writes the JSON text itself instead of building objects that are then stringified.
      outputDataAsString: true,
      maskError: makeMaskError(input.log),
    },
    grafast: {
      context(requestContext): Partial<PluginContext> {
        const { identity, requestId } = requestInfo(requestContext);
        return {
          identity,
          superuserPool: superuserPoolFor(identity),
          pgSettings: pgSettingsFor(identity, statementTimeoutMs),
          requestId,
          // grafast's listen() calls subscribe(topic) only, which is all the hub's subscriber has.
          pgSubscriber: pubsub as unknown as PluginContext["pgSubscriber"],
          [ADOPT_IDENTITY]: adoptIdentity,
          hashChains: server.chains,
          [HUB_SERVER]: server,
        } as Partial<PluginContext>;
      },
    },
  };
}
