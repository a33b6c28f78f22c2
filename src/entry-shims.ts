/**
 * Build step: `node dist/server.js` and `node dist/cli.js` are the documented
 * entry points, while tsc mirrors the source tree (dist/src/…). This writes the
 * two one-line modules that forward to the compiled files.
 */
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const dist = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
for (const name of ["server", "cli"]) {
  const target = path.join(dist, "src", `${name}.js`);
  if (!fs.existsSync(target)) continue;
  const file = path.join(dist, `${name}.js`);
  fs.writeFileSync(file, `#!/usr/bin/env node\nimport "./src/${name}.js";\n`, { mode: 0o755 });
}
