import "./prelude.js";

export { startAndListen, type RunningServer } from "./start.js";
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
