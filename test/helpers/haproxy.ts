import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { ROOT } from "./process.js";

export const HAPROXY = "/usr/sbin/haproxy";

/**
 * The first ```haproxy block of docs/deployment.md, as the page gives it,
 * with only its addresses replaced: the frontend's `bind` listens on
 * 127.0.0.1:`port`, and the n-th `server` line points at 127.0.0.1:`ports[n]`.
 * Throws when the block is missing or declares another number of servers.
 */
export function deploymentHaproxyConfig(port: number, ports: readonly number[]): string {
  const doc = fs.readFileSync(path.join(ROOT, "docs/deployment.md"), "utf8");
  const block = /^```haproxy\n([\s\S]*?)^```/m.exec(doc)?.[1];
  if (!block) throw new Error("docs/deployment.md has no ```haproxy block");
  let server = 0;
  const config = block
    .replace(/^(\s*bind\s+)\S+/m, `$1127.0.0.1:${port}`)
    .replace(/^(\s*server\s+\S+\s+)\S+/gm, (_m, head: string) => `${head}127.0.0.1:${ports[server++]}`);
  if (server !== ports.length) throw new Error(`docs/deployment.md's haproxy block declares ${server} servers; ${ports.length} were given`);
  return config;
}

export interface Haproxy {
  child: ChildProcess;
  /** Its stdout and stderr so far: in the foreground (-db) it reports servers going DOWN and UP there. */
  output(): string;
  exited: Promise<unknown>;
}

/** HAProxy in the foreground on the configuration text given (written to `file`). */
export function startHaproxy(config: string, file: string): Haproxy {
  fs.writeFileSync(file, config);
  const child = spawn(HAPROXY, ["-db", "-f", file], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  return { child, output: () => output, exited };
}
