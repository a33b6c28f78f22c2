/**
 * `npm start`'s prestart (src/bin/prestart.mjs) builds only what changed:
 * its decisions, on a folder laid out like this repository, with file times
 * set by the test. (--dry-run: it says what it would build.)
 */
import "./helpers/env.js";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import t from "tap";
import { ROOT } from "./helpers/process.js";
import { tmpDir, writeFiles } from "./helpers/tmp.js";

const prestart = (root: string, env: Record<string, string> = {}) =>
  execFileSync(process.execPath, [path.join(ROOT, "src/bin/prestart.mjs"), "--dry-run", "--root", root], { env: { ...process.env, ...env }, encoding: "utf8" });

/** Set a file's modification time, in seconds from now (negative: in the past). */
const age = (file: string, seconds: number) => {
  const when = new Date(Date.now() + seconds * 1000);
  fs.utimesSync(file, when, when);
};

t.test("prestart builds the server when a source is newer than its build, the dashboard when one of its sources is", async (t) => {
  const root = tmpDir(t);
  writeFiles(path.join(root, "src"), { "start.ts": "" });
  writeFiles(path.join(root, "src/dashboard"), { "main.tsx": "" });
  writeFiles(path.join(root, "src/scaffold/template"), { "index.ts": "" });
  writeFiles(path.join(root, "adapters"), { "fastify.ts": "" });
  writeFiles(path.join(root, "plugins"), { "tower.ts": "" });
  writeFiles(root, { "tsconfig.json": "{}" });
  writeFiles(path.join(root, "dist"), { "server.js": "", "cli.js": "" });
  writeFiles(path.join(root, "dist/dashboard"), { "index.html": "" });
  const sources = ["src/start.ts", "src/dashboard/main.tsx", "src/scaffold/template/index.ts", "adapters/fastify.ts", "plugins/tower.ts", "tsconfig.json"];
  for (const f of sources) age(path.join(root, f), -60);

  t.equal(prestart(root), "", "nothing changed: nothing built");

  age(path.join(root, "adapters/fastify.ts"), 0);
  t.equal(prestart(root), "would run: npm run build:server\n", "an adapter changed: the server only");
  age(path.join(root, "dist/server.js"), 1);
  t.equal(prestart(root), "would run: npm run build:server\n", "dist/cli.js is still older");
  age(path.join(root, "dist/cli.js"), 1);
  t.equal(prestart(root), "", "both outputs newer: up to date");

  age(path.join(root, "src/dashboard/main.tsx"), 5);
  t.equal(prestart(root), "would run: npm run build:dashboard\n", "a dashboard source changed: the dashboard only");
  age(path.join(root, "dist/dashboard/index.html"), 6);
  age(path.join(root, "src/scaffold/template/index.ts"), 10);
  t.equal(prestart(root), "", "the project template is no source of the server");

  fs.rmSync(path.join(root, "dist/cli.js"));
  t.equal(prestart(root), "would run: npm run build:server\n", "a missing output: built");
  t.equal(prestart(root, { HUB_REBUILD: "always" }), "would run: npm run build:server\nwould run: npm run build:dashboard\n", "HUB_REBUILD=always: both");
});
