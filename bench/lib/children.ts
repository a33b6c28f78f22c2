import type { ChildProcess } from "node:child_process";

/**
 * Servers a bench script spawned without an IPC channel (plain `node
 * dist/server.js`) outlive the script when it is interrupted, and keep their
 * embedded Postgres running. On SIGINT or SIGTERM this stops every child
 * handed to the returned `track` and still running, waits for them, runs
 * `cleanup`, and exits 130.
 */
export function stopChildrenOnSignal(cleanup: () => void = () => undefined): (child: ChildProcess) => void {
  const children = new Set<ChildProcess>();
  const stop = () => {
    const exits = [...children].filter((c) => c.exitCode === null && c.signalCode === null).map((c) => new Promise((r) => c.once("exit", r)));
    for (const child of children) child.kill("SIGTERM");
    void Promise.all(exits).then(() => {
      cleanup();
      process.exit(130);
    });
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  return (child) => {
    children.add(child);
    child.once("exit", () => children.delete(child));
  };
}
