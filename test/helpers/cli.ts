import { spawn } from "node:child_process";
import path from "node:path";
import { ROOT } from "./process.js";

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The last non-empty line of stdout: the command's result. */
  last: string;
}

/**
 * `node dist/cli.js …` as a user runs it (`hub …`), with the test's environment
 * plus `env` (NODE_ENV=test; LOG_LEVEL left to the CLI's own default unless
 * `env` sets it). Killed after a minute so a hung command fails the test.
 */
export function runCli(args: string[], env: Record<string, string | undefined> = {}): Promise<CliRun> {
  const childEnv: Record<string, string | undefined> = { ...process.env, NODE_ENV: "test", ...env };
  if (!("LOG_LEVEL" in env)) delete childEnv.LOG_LEVEL;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(ROOT, "dist/cli.js"), ...args], { cwd: ROOT, env: childEnv, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      const lines = stdout.split("\n").filter((l) => l !== "");
      resolve({ code, stdout, stderr, last: lines[lines.length - 1] ?? "" });
    });
  });
}

/** The CLI on a given database (both URLs). */
export const cliOn = (urls: { databaseUrl: string; superuserDatabaseUrl: string }) => (args: string[]) =>
  runCli(args, { DATABASE_URL: urls.databaseUrl, SUPERUSER_DATABASE_URL: urls.superuserDatabaseUrl });
