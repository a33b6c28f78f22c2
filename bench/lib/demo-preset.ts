/**
 * The preset exactly as src/start.ts builds it for the demo configuration with
 * default options (keep in step with it), for the targets that assemble the
 * hub's building blocks by hand: the baseline and the bare reference.
 */
import { readConfig } from "../../dist/src/config.js";
import { makePreset } from "../../dist/src/graphql/preset.js";
import { DEFAULT_QUERY_LIMITS } from "../../dist/src/graphql/query-limits.js";
import { HubPlaygroundPlugin } from "../../dist/src/graphql/sessions.js";
import type { HubPools } from "../../dist/src/db/pools.js";
import type { Logger } from "../../dist/src/logger.js";
import type { ServerState } from "../../dist/src/server-state.js";
import { grafservRequestInfo } from "../../dist/adapters/grafserv.js";
import { demoExtraPgSchemas, demoPlugins } from "./demo.js";

/** As the hub. */
export const MAX_BODY = 1024 * 1024;

export function demoPreset(config: ReturnType<typeof readConfig>, pools: HubPools, log: Logger, server?: ServerState): GraphileConfig.Preset {
  return makePreset({
    plugins: [...demoPlugins, ...(config.playground ? [HubPlaygroundPlugin] : [])],
    extraPgSchemas: demoExtraPgSchemas,
    graphqlPool: pools.graphql,
    // The adaptor that fits the pool as the target opened it (the baseline's is not in pipeline mode).
    pipelinedPg: (pools.graphql.options as { pipeline?: boolean }).pipeline === true,
    requestInfo: grafservRequestInfo,
    superuserPool: pools.superuser,
    graphiql: false,
    log,
    maxRequestLength: MAX_BODY,
    limits: { ...DEFAULT_QUERY_LIMITS, introspection: config.introspection },
    statementTimeoutMs: 10_000,
    ...(server ? { server } : {}),
  });
}
