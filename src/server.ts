/**
 * `node dist/server.js`: the stock server. Configuration comes from the
 * environment (README: Configuration) and picks the server options:
 *
 *   HUB_CONFIG=path/to/module.js  the ServerOptions that module exports by default
 *   HUB_EXAMPLES=off              the bare hub (defaultPlugins only)
 *   otherwise                     the demo: the spec's reference plugins and routes
 */
import "./prelude.js";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { readConfig } from "./config.js";
import { discardPrewarmed, prewarmDatabase } from "./db/database.js";
import { createLogger } from "./logger.js";
import { HubError, configInvalid } from "./errors.js";
import type { ServerOptions } from "./options.js";

// Postgres boots in its own process while the heavy modules below load.
try {
  const config = readConfig();
  // Until Postgres runs on its own (a few ms; bounded in case the steps before the spawn hang).
  await Promise.race([prewarmDatabase(config, createLogger({ level: config.logLevel, pretty: false })), new Promise((r) => setTimeout(r, 300).unref())]);
} catch {
  // A configuration error: startAndListen reports it with its message.
}
const { startAndListen } = await import("./start.js");

async function demoOptions(): Promise<ServerOptions> {
  // Loaded through the package's own export, exactly as a user would.
  const reference = await import("@hubpkg/hub/plugins");
  const { defaultPlugins } = await import("./default-plugins.js");
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
    throw new HubError("HUB_CONFIG_INVALID", `HUB_CONFIG=${JSON.stringify(file)} could not be loaded: ${(error as Error).message}`, { cause: error });
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

try {
  await startAndListen(await optionsFromEnvironment());
} catch (error) {
  // A Postgres started early and never adopted (the options failed first) must
  // not outlive us: an initdb still writing into the data dir, or a postmaster.
  await discardPrewarmed().catch(() => undefined);
  if (error instanceof HubError) {
    process.stderr.write(`hub: ${error.message} [${error.code}]\n`);
  } else {
    process.stderr.write(`hub: failed to start: ${(error as Error)?.stack ?? String(error)}\n`);
  }
  process.exit(1);
}
