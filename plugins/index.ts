/**
 * `@hubpkg/hub/plugins`: the reference extensions, written exactly
 * as a user writes them (they import only `@hubpkg/hub/...`).
 */
import fs from "node:fs";
import { fileURLToPath } from "node:url";

export { FortunePlugin } from "./fortune.js";
export { CoinflipResolverPlugin } from "./coinflip-resolver.js";
export { CoinflipPlanPlugin } from "./coinflip-plan.js";
export { CoinflipBetPlugin } from "./coinflip-bet.js";
export { configureReferenceRoutes } from "./routes.js";
export { TowerPlugin, towerPayout, towerTrapTile, TOWER_TILES, TOWER_MAX_FLOORS, type TowerPluginOptions } from "./tower.js";

/**
 * The folder of the reference SQL (pass it as userDatabaseMigrationsPath). The
 * SQL is not compiled, so from dist/plugins/ it is found in the package's
 * plugins/migrations/; from the sources, beside this file.
 */
export const referenceMigrationsPath: string = [
  new URL("./migrations/", import.meta.url),
  new URL("../../plugins/migrations/", import.meta.url),
]
  .map((url) => fileURLToPath(url))
  .find((dir) => fs.existsSync(dir)) ?? fileURLToPath(new URL("../../plugins/migrations/", import.meta.url));
