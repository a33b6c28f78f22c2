/** The server's options, shared by src/index.ts and the tests. */
import path from "node:path";
import { fileURLToPath } from "node:url";
import { defaultPlugins, HubGameConfigPlugin, type ServerOptions } from "@hubpkg/hub";
import { DicePlugin } from "./dice.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

export const serverOptions: ServerOptions = {
  plugins: [
    ...defaultPlugins,
    // The games this hub offers: the kinds of hubMakeOutcomeBet, and custom games such as DICE.
    HubGameConfigPlugin({ outcomeBetConfigs: {}, customGameConfigs: { DICE: {} } }),
    DicePlugin,
  ],
  extraPgSchemas: ["app"],
  userDatabaseMigrationsPath: path.join(root, "migrations"),
};
