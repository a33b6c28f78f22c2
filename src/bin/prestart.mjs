// `npm start`'s prestart: build only what changed since the last build, so a
// warm start costs no compiler. Plain JavaScript: it runs before anything is built.
//   server (tsc): a file of src/, adapters/, plugins/ or tsconfig.json newer
//     than dist/server.js and dist/cli.js, which every build writes last;
//   dashboard (tsc + vite): a file of src/dashboard newer than dist/dashboard/index.html.
// HUB_REBUILD=always builds both whatever the times say. `--dry-run [--root DIR]`
// only prints what it would build (for its test).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

const args = process.argv.slice(2);
const dryRun = args.includes("--dry-run");
const rootArg = args.indexOf("--root");
const here = path.dirname(new URL(import.meta.url).pathname);
const root = rootArg === -1 ? path.resolve(here, "../..") : path.resolve(args[rootArg + 1] ?? ".");
const skip = new Set([path.join(root, "src/dashboard"), path.join(root, "src/scaffold/template")]);

/** The newest modification time of the files under these paths (0 when none). */
function newest(paths, skipped = new Set()) {
  let latest = 0;
  const walk = (p) => {
    if (skipped.has(p)) return;
    let stat;
    try {
      stat = fs.statSync(p);
    } catch {
      return;
    }
    if (stat.isDirectory()) for (const name of fs.readdirSync(p)) walk(path.join(p, name));
    else latest = Math.max(latest, stat.mtimeMs);
  };
  for (const p of paths) walk(path.join(root, p));
  return latest;
}

/** The oldest modification time of these outputs; 0 when one is missing. */
function built(paths) {
  let oldest = Infinity;
  for (const p of paths) {
    try {
      oldest = Math.min(oldest, fs.statSync(path.join(root, p)).mtimeMs);
    } catch {
      return 0;
    }
  }
  return oldest;
}

function npmRun(script) {
  if (dryRun) {
    process.stdout.write(`would run: npm run ${script}\n`);
    return;
  }
  const npm = process.env.npm_execpath;
  // Under npm, its own CLI script; otherwise whatever npm is on PATH.
  const [command, args] = npm ? [process.execPath, [npm, "run", script, "--silent"]] : ["npm", ["run", script, "--silent"]];
  const result = spawnSync(command, args, { cwd: root, stdio: "inherit", shell: !npm && process.platform === "win32" });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

const always = process.env.HUB_REBUILD === "always";
if (always || newest(["src", "adapters", "plugins", "tsconfig.json"], skip) > built(["dist/server.js", "dist/cli.js"])) npmRun("build:server");
if (always || newest(["src/dashboard"]) > built(["dist/dashboard/index.html"])) npmRun("build:dashboard");
