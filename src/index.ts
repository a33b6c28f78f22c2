import "./prelude.js";
import type { FastifyInstance, FastifyPluginAsync } from "fastify";
import { startServer, type RunningServer } from "./start.js";
import { buildPreparedHub } from "./build-hub.js";
import { createHubPlugin, type HubPluginOptions } from "./hub-plugin.js";
import type { HubInternals } from "./hub-core.js";
import type { ServerOptions } from "./options.js";
import { serverStarted, serverStopped } from "./exports/current-server.js";

/** The entry points register each server with the list the module-level façades follow (superuserPool, logger, serverStats()). */
const internals: HubInternals = { registry: { started: serverStarted, stopped: serverStopped } };

/**
 * The hub as a Fastify 5 plugin: `await app.register(hub, options)` serves
 * GraphQL, the health checks, the dashboard and configureApp's routes on your
 * instance, and releases everything in its onClose (docs/fastify-plugin.md).
 */
export const hub: FastifyPluginAsync<ServerOptions> = createHubPlugin(internals) as FastifyPluginAsync<HubPluginOptions>;
export default hub;

/** A Fastify instance made and tuned by the hub, with the hub registered, not yet listening (docs/fastify-plugin.md). */
export async function buildHub(options?: ServerOptions): Promise<FastifyInstance> {
  return (await buildPreparedHub(options, internals)).app;
}

/** Start a hub and listen (the original interface): resolves once it listens; `stop()` drains, then closes. */
export function startAndListen(options?: ServerOptions, callback?: (info: { port: number }) => void): Promise<RunningServer> {
  return startServer(options, callback, internals);
}

export type { RunningServer };
export type { ResolvedOptions } from "./options.js";
export { exitOnStartFailure, formatStartFailure } from "./start-failure.js";
export { defaultPlugins, HubCurrentIdentityPlugin } from "./graphql/default-plugins.js";
export { BetInterfacePlugin } from "./graphql/bet-interface.js";
export type { ServerOptions, ConfigureApp, ConfigureAppArgs, ConfigureAppArgument } from "./options.js";
export type { PluginContext } from "./graphql/context.js";
export type { Identity, UserIdentity, OperatorIdentity } from "./auth/identity.js";
export { ErrorCode, ErrorCodes, HubError, HubErrorCodes, type HubErrorCode } from "./errors.js";
export { serverStats, type ServerStats } from "./exports/stats.js";
export { runMigrations } from "./exports/migrate.js";
export { HubGameConfigPlugin, type HubGameConfigOptions } from "./fair/game-config-plugin.js";
export type { OutcomeBetConfig, OutcomeBetConfigMap, CustomGameConfig, CustomGameConfigMap } from "./fair/outcome-bet.js";
export { validateRisk, type RiskPolicy, type RiskPolicyArgs, type RiskLimits, type ValidateRiskInput, type ValidateRiskResult } from "./fair/risk.js";
export { createHttpConnector } from "./transfers/http-connector.js";
export { OutcomeUnknownError, type CasinoConnector, type ConnectorFactory, type ConnectorSettings, type IncomingPage, type IncomingTransfer, type OutgoingTransfer, type OutgoingOutcome, type LookupOutcome, type TakeRequest, type TakeRequestPage, type TakeTransfer, type TakeOutcome } from "./transfers/connector.js";
export type { TransferOptions } from "./transfers/options.js";
