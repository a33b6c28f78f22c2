import fs from "node:fs";
import { fileURLToPath } from "node:url";

/**
 * Statements longer than a few lines live in src/db/queries/*.sql, where an
 * editor highlights and formats them as SQL. The folder ships with the
 * package; the compiled module (dist/src/db/) finds it there, the sources
 * beside them.
 */
const QUERIES_DIR = [new URL("./queries/", import.meta.url), new URL("../../../src/db/queries/", import.meta.url)]
  .map((url) => fileURLToPath(url))
  .find((dir) => fs.existsSync(dir));

/** The text of src/db/queries/<name>.sql, read once when the module that needs it is loaded. */
export function queryFile(name: string): string {
  if (!QUERIES_DIR) throw new Error(`the hub's queries folder (src/db/queries) is missing from the package; reinstall @hubpkg/hub`);
  return fs.readFileSync(`${QUERIES_DIR}${name}.sql`, "utf8");
}
