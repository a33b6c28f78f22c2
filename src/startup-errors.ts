/**
 * Start-up failures an operator can act on without reading the hub's code:
 * where in their own files a module failed to load or a plugin threw, and
 * which setting to change when the port is taken.
 */
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { HubError } from "./errors.js";

/** The first frame of a stack in the user's code: not Node's own, not a dependency's. */
export function userFrame(error: unknown): string | undefined {
  const stack = typeof (error as Error | undefined)?.stack === "string" ? (error as Error).stack! : "";
  for (const line of stack.split("\n").slice(1)) {
    const at = /\(?((?:file:\/\/)?\/[^()\s]+?):(\d+):(\d+)\)?\s*$/.exec(line.trim());
    if (!at) continue;
    const file = at[1]!.startsWith("file://") ? fileURLToPath(at[1]!) : at[1]!;
    if (file.includes(`${path.sep}node_modules${path.sep}`)) continue;
    return `${file}:${at[2]}:${at[3]}`;
  }
  return undefined;
}

/** The relative imports of a JavaScript module's text (static and dynamic with a literal). */
function relativeImports(text: string): string[] {
  const found = new Set<string>();
  for (const m of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)["'](\.{1,2}\/[^"']+)["']/g)) found.add(m[1]!);
  return [...found];
}

/**
 * Node does not say which file a SyntaxError of an ES module is in. This
 * finds it: `node --check` on the module, then on each JavaScript file it
 * imports by a relative path, until one fails; the answer is the file, line
 * and column with the offending line, as Node prints them.
 */
export function locateSyntaxError(entry: string, limit = 200): string | undefined {
  const seen = new Set<string>();
  const queue = [path.resolve(entry)];
  while (queue.length > 0 && seen.size < limit) {
    const file = queue.shift()!;
    if (seen.has(file) || !/\.(m|c)?js$/.test(file) || !fs.existsSync(file)) continue;
    seen.add(file);
    try {
      execFileSync(process.execPath, ["--check", file], { stdio: ["ignore", "ignore", "pipe"], timeout: 10_000 });
    } catch (error) {
      const stderr = String((error as { stderr?: Buffer }).stderr ?? "");
      const where = /^(\/.+?|file:\/\/.+?):(\d+)$/m.exec(stderr);
      const source = stderr.split("\n")[1]?.trim();
      if (where) return `${where[1]}:${where[2]}${source ? ` (${source})` : ""}`;
      return file;
    }
    for (const spec of relativeImports(fs.readFileSync(file, "utf8"))) queue.push(path.resolve(path.dirname(file), spec));
  }
  return undefined;
}

/** Where a module failed to load, for a message: "at FILE:LINE:COL", or "" when unknown. */
export function whereLoadFailed(error: unknown, entry: string): string {
  // A SyntaxError may also be thrown at run time (JSON.parse): then its stack has the place.
  const where = (error instanceof SyntaxError ? locateSyntaxError(entry) : undefined) ?? userFrame(error);
  return where ? ` at ${where}` : "";
}

/** A plugin (or anything else) failed while the GraphQL schema was built: say where. */
export function schemaBuildFailed(error: unknown): HubError {
  if (error instanceof HubError) return error;
  const message = (error as Error | undefined)?.message ?? String(error);
  const where = userFrame(error);
  return new HubError(
    "HUB_PLUGIN_FAILED",
    `Building the GraphQL schema failed: ${message}${where ? ` (thrown at ${where})` : ""}. A plugin of the plugins option, or a table or function of extraPgSchemas it reads, is the usual cause.`,
    { cause: error },
  );
}

/** Listening failed: a taken port names the port and the setting to change. */
export function listenFailed(error: unknown, port: number, host: string, portFromOption: boolean): unknown {
  const code = (error as { code?: unknown } | undefined)?.code;
  const setting = portFromOption ? "the port option of startAndListen" : "the environment variable PORT";
  if (code === "EADDRINUSE") {
    return new HubError(
      "HUB_PORT_IN_USE",
      `Port ${port} on ${host} is already in use (another hub, or another program, listens there). Stop it, or choose another port with ${setting}, e.g. PORT=${port + 1} (0 picks a free one).`,
      { cause: error },
    );
  }
  if (code === "EACCES") {
    return new HubError("HUB_PORT_IN_USE", `Not allowed to listen on port ${port} on ${host} (ports below 1024 need privileges). Choose another port with ${setting}, e.g. PORT=4000.`, { cause: error });
  }
  return error;
}
