/**
 * What any process can learn about a postmaster from its pid file, and how
 * it is stopped. Node's built-ins only: the watchdogs (src/db/*-watchdog.ts)
 * import this module and nothing else, so they start fast and depend on no
 * package.
 */
import fs from "node:fs";
import path from "node:path";

/** Whether a process exists (EPERM: it does, under another user). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The pid on the first line of a pid file; 0 when there is none. */
export function readPidFile(file: string): number {
  try {
    return Number(fs.readFileSync(file, "utf8").split("\n")[0]) || 0;
  } catch {
    return 0;
  }
}

/** postmaster.pid: line 1 the pid, line 4 the port, line 8 the status ("ready" once it accepts connections). */
export function readPostmasterPid(clusterDir: string): { pid: number; port: number; status: string } | undefined {
  let text: string;
  try {
    text = fs.readFileSync(path.join(clusterDir, "postmaster.pid"), "utf8");
  } catch {
    return undefined;
  }
  const lines = text.split("\n");
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0 || !Number.isInteger(port)) return undefined;
  return { pid, port, status: (lines[7] ?? "").trim() };
}

/**
 * SIGINT is Postgres's "fast" shutdown (aborts open sessions, writes a
 * checkpoint); SIGQUIT after 15 s if it is still there (`onSlow` is told
 * first). Resolves once it is gone or SIGQUIT was sent.
 */
export async function stopPostmaster(pid: number, onSlow?: () => void): Promise<void> {
  if (!isAlive(pid)) return;
  try {
    process.kill(pid, "SIGINT");
  } catch {
    return;
  }
  const deadline = Date.now() + 15_000;
  while (isAlive(pid)) {
    if (Date.now() > deadline) {
      onSlow?.();
      try {
        process.kill(pid, "SIGQUIT");
      } catch {
        /* already gone */
      }
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
