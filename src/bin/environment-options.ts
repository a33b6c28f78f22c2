/**
 * The ServerOptions `node dist/server.js` starts with, picked by the
 * environment (README: Configuration):
 *
 *   HUB_CONFIG=path/to/module.js  the ServerOptions that module exports by default
 *   HUB_EXAMPLES=off              the bare hub (defaultPlugins only)
 *   otherwise                     the demo: the reference plugins and routes
 *
 * Apart from server.ts, which starts a server as soon as it is imported.
 */
import path from "node:path";
import { pathToFileURL } from "node:url";
import { HubError, configInvalid } from "../errors.js";
import { whereLoadFailed } from "../startup-errors.js";
import type { ServerOptions } from "../options.js";

async function demoOptions(): Promise<ServerOptions> {
  // Loaded through the package's own export, exactly as a user would.
  const reference = await import("@hubpkg/hub/plugins");
  const { defaultPlugins } = await import("../graphql/default-plugins.js");
  return {
    plugins: [...defaultPlugins, reference.FortunePlugin, reference.CoinflipPlanPlugin, reference.CoinflipBetPlugin],
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
  const examples = env.HUB_EXAMPLES ?? "on";
  if (examples !== "on" && examples !== "off") throw configInvalid("HUB_EXAMPLES", examples, "on or off");
  if (env.HUB_CONFIG) return configModuleOptions(env.HUB_CONFIG);
  return examples === "off" ? {} : demoOptions();
}
