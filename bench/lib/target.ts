/**
 * The parent side of a target server: spawn it (own process group, IPC
 * channel), wait for "ready", read its counters, profile it, stop it.
 */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import type { ChildMessage, ChildStats, ParentMessage } from "./protocol.js";
import { NODE_FLAGS, ROOT, childEnv } from "./util.js";

export type TargetName = "hub" | "baseline" | "bare";

export class Target {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (m: ChildMessage) => void; reject: (e: Error) => void }>();
  private output = "";
  readonly exited: Promise<number | null>;

  private constructor(
    readonly name: TargetName,
    readonly child: ChildProcess,
    public url = "",
    public superuserDatabaseUrl = "",
  ) {
    this.exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve(code ?? (signal ? -1 : null))));
    child.on("message", (message: ChildMessage) => {
      if (message.type === "ready") return;
      const waiter = this.pending.get(message.id);
      if (!waiter) return;
      this.pending.delete(message.id);
      waiter.resolve(message);
    });
    void this.exited.then((code) => {
      for (const waiter of this.pending.values()) waiter.reject(new Error(`${name} exited (${code}) while the bench waited for it:\n${this.tail()}`));
      this.pending.clear();
    });
  }

  /** The last lines the server printed (its warnings and errors). */
  tail(lines = 40): string {
    return this.output.split("\n").slice(-lines).join("\n");
  }

  static start(name: TargetName, script: string, env: Record<string, string>, timeoutMs = 120_000, verbose = false): Promise<Target> {
    const child = spawn(process.execPath, [...NODE_FLAGS, "--import", "tsx", path.join(ROOT, script)], {
      cwd: ROOT,
      // tsx without the tsconfig `paths` that point @hubpkg/hub at src/: the targets load dist/ (bench/tsconfig.child.json).
      env: childEnv({ TSX_TSCONFIG_PATH: path.join(ROOT, "bench/tsconfig.child.json"), ...env }),
      stdio: ["ignore", "pipe", "pipe", "ipc"],
      detached: true, // its own process group: a Ctrl-C reaches only bench/run.ts, which stops the targets in order
    });
    const target = new Target(name, child);
    const onData = (chunk: Buffer) => {
      const text = chunk.toString();
      target.output = (target.output + text).slice(-20_000);
      if (verbose) process.stderr.write(text.replace(/^(?=.)/gm, `[${name}] `));
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error(`${name} did not start within ${timeoutMs} ms:\n${target.tail()}`));
      }, timeoutMs);
      child.on("message", (message: ChildMessage) => {
        if (message.type !== "ready") return;
        clearTimeout(timer);
        target.url = message.url;
        target.superuserDatabaseUrl = message.superuserDatabaseUrl;
        resolve(target);
      });
      void target.exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`${name} exited with ${code} before it was ready:\n${target.tail()}`));
      });
    });
  }

  private request(message: ParentMessage & { id: number }): Promise<ChildMessage> {
    return new Promise((resolve, reject) => {
      this.pending.set(message.id, { resolve, reject });
      this.child.send(message, (error) => {
        if (error) {
          this.pending.delete(message.id);
          reject(error);
        }
      });
    });
  }

  async stats(): Promise<ChildStats> {
    const answer = await this.request({ type: "stats", id: this.nextId++ });
    if (answer.type !== "stats") throw new Error(`${this.name}: unexpected answer ${answer.type}`);
    return answer.stats;
  }

  async profileStart(): Promise<void> {
    const answer = await this.request({ type: "profile-start", id: this.nextId++ });
    if (answer.type === "done" && answer.error) throw new Error(`${this.name}: profile-start: ${answer.error}`);
  }

  async profileStop(file: string): Promise<void> {
    const answer = await this.request({ type: "profile-stop", id: this.nextId++, file });
    if (answer.type === "done" && answer.error) throw new Error(`${this.name}: profile-stop: ${answer.error}`);
  }

  /** Ask it to stop (it closes HTTP, pools and, for the hub, Postgres); SIGKILL after timeoutMs. */
  async stop(timeoutMs = 20_000): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    if (this.child.connected) this.child.send({ type: "stop" } satisfies ParentMessage);
    else this.child.kill("SIGTERM");
    const timer = setTimeout(() => {
      process.stderr.write(`${this.name} did not stop within ${timeoutMs} ms; killing it\n`);
      this.child.kill("SIGKILL");
    }, timeoutMs);
    await this.exited;
    clearTimeout(timer);
  }
}
