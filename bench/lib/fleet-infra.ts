/**
 * The parts of the fleet scenario (bench/fleet.ts) that are processes: one
 * Postgres the hubs do not own (the test helper's external Postgres: the
 * embedded binaries on a tmp data dir, stoppable and restartable on the same
 * port), hub processes on fixed ports (`node dist/server.js` in production, so
 * a restarted instance comes back where the proxy expects it), and HAProxy
 * (Debian's) with the configuration of docs/deployment.md (test/helpers/haproxy.ts). Only processes
 * started here are ever signalled.
 */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { startExternalPostgres, type ExternalPostgres } from "../../test/helpers/external-postgres.js";
import { deploymentHaproxyConfig, startHaproxy, type Haproxy } from "../../test/helpers/haproxy.js";
import { childEnv, freePort, ROOT, sleep } from "./util.js";

export interface Teardowns {
  teardown(fn: () => unknown): void;
  run(): Promise<void>;
}

/** Cleanup steps run in reverse order, each whatever the others did. */
export function teardowns(): Teardowns {
  const steps: (() => unknown)[] = [];
  return {
    teardown: (fn) => void steps.push(fn),
    async run() {
      for (const step of steps.reverse()) await Promise.resolve().then(step).catch((e: unknown) => process.stderr.write(`cleanup: ${String(e)}\n`));
    },
  };
}

export function startPostgres(t: Teardowns, dir: string): Promise<ExternalPostgres> {
  return startExternalPostgres(t, dir);
}

export interface Hub {
  name: string;
  port: number;
  url: string;
  child: ChildProcess | undefined;
  /** The process's output so far (every start appended), for the report when something fails. */
  log: string[];
  exited: Promise<number | null> | undefined;
}

/** Resolve once `url` + path answers 200, or reject after timeoutMs. */
export async function waitFor200(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await response.arrayBuffer();
      if (response.status === 200) return;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`${url} did not answer 200 within ${timeoutMs} ms`);
    await sleep(100);
  }
}

export async function makeHub(name: string): Promise<Hub> {
  const port = await freePort();
  return { name, port, url: `http://127.0.0.1:${port}`, child: undefined, log: [], exited: undefined };
}

/** `node dist/server.js` on the hub's port, resolved once its readiness path answers 200. */
export async function startHub(hub: Hub, env: Record<string, string>, readinessPath: string): Promise<void> {
  const child = spawn(process.execPath, [path.join(ROOT, "dist/server.js")], {
    cwd: ROOT,
    env: childEnv({ ...env, PORT: String(hub.port), HOST: "127.0.0.1" }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  hub.child = child;
  const keep = (chunk: Buffer) => {
    hub.log.push(chunk.toString());
    if (hub.log.length > 400) hub.log.splice(0, hub.log.length - 400);
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  hub.exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  const early = hub.exited.then((code) => Promise.reject(new Error(`${hub.name} exited with ${code} before it was ready:\n${hub.log.join("").slice(-4000)}`)));
  await Promise.race([waitFor200(`${hub.url}${readinessPath}`, 90_000), early]);
  early.catch(() => undefined);
}

/** SIGTERM, as an orchestrator sends it, and wait for the exit; SIGKILL if it is still there after `graceMs`. */
export async function stopHub(hub: Hub, graceMs = 30_000): Promise<number | null> {
  const child = hub.child;
  if (!child || child.exitCode !== null || child.signalCode !== null) return child?.exitCode ?? null;
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  const code = await hub.exited!;
  clearTimeout(timer);
  hub.child = undefined;
  return code;
}

/** HAProxy (Debian's) on docs/deployment.md's configuration, its addresses replaced by the scenario's; stopped at teardown. */
export async function startProxy(t: Teardowns, dir: string, proxyPort: number, hubs: Hub[]): Promise<Haproxy> {
  const proxy = startHaproxy(deploymentHaproxyConfig(proxyPort, hubs.map((hub) => hub.port)), path.join(dir, "haproxy.cfg"));
  t.teardown(() => {
    if (proxy.child.exitCode === null) proxy.child.kill("SIGTERM");
    return proxy.exited;
  });
  return proxy;
}

export { freePort };
