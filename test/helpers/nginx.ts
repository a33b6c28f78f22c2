import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { ROOT } from "./process.js";

export const NGINX = "/usr/sbin/nginx";

/**
 * The first ```nginx block of docs/deployment.md, as the page gives it, with
 * only its addresses replaced: the server's `listen` is 127.0.0.1:`port`, and
 * the n-th `server` line of the upstream points at 127.0.0.1:`ports[n]`.
 * Throws when the block is missing or declares another number of servers.
 */
export function deploymentNginxConfig(port: number, ports: readonly number[]): string {
  const doc = fs.readFileSync(path.join(ROOT, "docs/deployment.md"), "utf8");
  const block = /^```nginx\n([\s\S]*?)^```/m.exec(doc)?.[1];
  if (!block) throw new Error("docs/deployment.md has no ```nginx block");
  let server = 0;
  const config = block
    .replace(/^(\s*listen\s+)[^;\s]+/m, `$1127.0.0.1:${port}`)
    .replace(/^(\s*server\s+)[^;\s{]+(?=[\s;])/gm, (_m, head: string) => `${head}127.0.0.1:${ports[server++]}`);
  if (server !== ports.length) throw new Error(`docs/deployment.md's nginx block declares ${server} servers; ${ports.length} were given`);
  return config;
}

export interface Nginx {
  child: ChildProcess;
  /** Its error log so far (stderr, at warn): upstreams that failed and were left out are reported there. */
  output(): string;
  exited: Promise<unknown>;
}

/**
 * nginx in the foreground on the `http`-level configuration given, wrapped as
 * Debian's nginx.conf would hold it, with every path (pid, logs, temporary
 * files) under `dir`, so it runs without touching /etc, /var or /run.
 */
export function startNginx(httpConfig: string, dir: string): Nginx {
  const temp = (name: string) => path.join(dir, name);
  const file = temp("nginx.conf");
  fs.writeFileSync(
    file,
    [
      "events {}",
      "http {",
      `    access_log ${temp("access.log")};`,
      ...["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map((t) => `    ${t}_temp_path ${temp(t)};`),
      httpConfig,
      "}",
      "",
    ].join("\n"),
  );
  const child = spawn(NGINX, ["-e", "stderr", "-p", dir, "-c", file, "-g", `daemon off; pid ${temp("nginx.pid")}; error_log stderr warn;`], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  return { child, output: () => output, exited };
}
