import "./prelude.js";

export { startAndListen, type RunningServer } from "./start.js";
export { defaultPlugins, HubCurrentIdentityPlugin } from "./default-plugins.js";
export { BetInterfacePlugin } from "./bet-interface.js";
export type { ServerOptions, ConfigureApp, ConfigureAppArgs, ConfigureAppArgument } from "./options.js";
export type { PluginContext } from "./context.js";
export type { Identity, UserIdentity, OperatorIdentity } from "./identity.js";
export { ErrorCode, ErrorCodes, HubError, HubErrorCodes, type HubErrorCode } from "./errors.js";
export { serverStats, type ServerStats } from "./stats.js";
