/**
 * The ServerOptions `node dist/server.js` starts with, picked by the
 * environment (README: Configuration):
 *
 *   HUB_CONFIG=path/to/module.js  the ServerOptions that module exports by default
 *   HUB_EXAMPLES=off              the bare hub (defaultPlugins only)
 *   otherwise                     the demo: the reference plugins and routes,
 *                                 the tower game, and HubGameConfigPlugin with
 *                                 outcome bets (GENERAL) and TOWER
 *
 * Apart from server.ts, which starts a server as soon as it is imported.
 */
import path from "node:path";
import { pathToFileURL } from "node:url";
import { HubError, configInvalid } from "../errors.js";
import { whereLoadFailed } from "../startup-errors.js";
import * as parse from "../parse.js";
import type { ServerOptions } from "../options.js";

async function demoOptions(): Promise<ServerOptions> {
  // Loaded through the package's own export, exactly as a user would.
  const reference = await import("@hubpkg/hub/plugins");
  const { defaultPlugins } = await import("../graphql/default-plugins.js");
  const { HubGameConfigPlugin } = await import("../fair/game-config-plugin.js");
  // As the other revision's controller template configures its games: no bet may pay more than 1% of the bankroll.
  const riskPolicy = ({ bankroll }: { bankroll: number }) => ({ maxPayout: bankroll * 0.01 });
  return {
    plugins: [
      ...defaultPlugins,
      reference.FortunePlugin,
      reference.CoinflipPlanPlugin,
      reference.CoinflipBetPlugin,
      reference.TowerPlugin({ maxFloor: 10, riskPolicy }),
      HubGameConfigPlugin({
        outcomeBetConfigs: { GENERAL: { houseEdge: 0.01, saveOutcomes: false, riskPolicy } },
        customGameConfigs: { TOWER: { riskPolicy } },
      }),
    ],
    extraPgSchemas: ["app"],
    userDatabaseMigrationsPath: reference.referenceMigrationsPath,
    configureApp: reference.configureReferenceRoutes,
  };
}

async function configModuleOptions(file: string): Promise<ServerOptions> {
  let mod: { default?: unknown };
  try {
    mod = (await import(pathToFileURL(path.resolve(file)).href)) as { default?: unknown };
  } catch (error) {
    // Node names no file for a SyntaxError of an ES module, and the failing file may be one the config imports.
    throw new HubError("HUB_CONFIG_INVALID", `HUB_CONFIG=${JSON.stringify(file)} could not be loaded: ${(error as Error).message}${whereLoadFailed(error, path.resolve(file))}`, {
      cause: error,
    });
  }
  const options = mod.default;
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw configInvalid("HUB_CONFIG", file, "a module whose default export is a ServerOptions object");
  }
  return options as ServerOptions;
}

export async function optionsFromEnvironment(env: NodeJS.ProcessEnv = process.env): Promise<ServerOptions> {
  const examples = parse.onOff(env.HUB_EXAMPLES ?? "on");
  if ("expected" in examples) throw configInvalid("HUB_EXAMPLES", env.HUB_EXAMPLES, examples.expected);
  if (env.HUB_CONFIG) return configModuleOptions(env.HUB_CONFIG);
  return examples.value ? demoOptions() : {};
}
