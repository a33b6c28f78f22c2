import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  output(): string;
  /** Resolves with the exit code once the process has ended. */
  exited: Promise<number | null>;
}

/**
 * `node dist/server.js` as operators run it, resolved once it logs its URL.
 * Rejects with the whole output if it exits first.
 */
export function startServerProcess(env: Record<string, string>, timeoutMs = 60_000): Promise<ServerProcess> {
  const child = spawn(process.execPath, [path.join(ROOT, "dist/server.js")], {
    cwd: ROOT,
    env: { ...process.env, NODE_ENV: "test", LOG_LEVEL: "info", PORT: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  let listening = false;
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start within ${timeoutMs} ms:\n${output}`)), timeoutMs);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      // Searched until found only: a regular expression flattens the whole output each time, and a
      // server that logs every request would make that quadratic.
      if (listening) return;
      const match = /hub listening on (http:\/\/[^/\s"]+)\/graphql/.exec(output);
      if (match) {
        listening = true;
        clearTimeout(timer);
        resolve({ child, url: match[1]!, output: () => output, exited });
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with code ${code} before listening:\n${output}`));
    });
  });
}

/** Run `node dist/server.js [args]` expecting it to exit without serving; returns exit code, stdout and stderr. */
export function runServerExpectingFailure(env: Record<string, string>, args: string[] = []): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, "dist/server.js"), ...args], {
      cwd: ROOT,
      env: { ...process.env, PORT: "0", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Pids whose parent is ppid (Linux /proc). */
export function childrenOf(ppid: number): number[] {
  const found: number[] = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === ppid) found.push(Number(name));
    } catch {
      /* gone meanwhile */
    }
  }
  return found;
}

/**
 * A line of `node --test`'s summary: "# pass 2" from the TAP reporter, "ℹ pass 2" from the spec reporter,
 * which is the default without a terminal from Node 23 on. `count` is a regular expression ("[1-9]").
 */
export function nodeTestSummary(what: "pass" | "fail", count: string): RegExp {
  return new RegExp(`^\\s*(?:#|ℹ) ${what} ${count}\\b`, "m");
}
