/**
 * A project made by `hub init` from the package as `npm pack` ships it,
 * installed in a temporary folder: what test/scaffold.test.ts does, as
 * helpers for other tests of a user's project (test/scaffold-mistakes.test.ts).
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Test } from "tap";
import { runCli } from "./cli.js";
import { ROOT } from "./process.js";
import { tmpDir } from "./tmp.js";
import { roomyTmpfs } from "./memory-tmp.mjs";

export interface Done {
  code: number | null;
  output: string;
}

const npm = process.platform === "win32" ? "npm.cmd" : "npm";

/** Room for the installed projects of both scaffold files at once (some 430 MB each, the Dockerfile's stages two more). */
const MEMORY_NEEDED = 4 * 1024 ** 3;

/**
 * Where the installed projects go: /dev/shm when it is a tmpfs with room to
 * spare, else the system's temporary folder. An npm install writes some 23,000
 * files; on a disk's ext4 that is two to three times the CPU (kernel time) it
 * takes in memory, and so is removing them. /tmp is a tmpfs on many systems:
 * a place users install projects too.
 */
function projectsBase(): string {
  return roomyTmpfs("/dev/shm", MEMORY_NEEDED) ? "/dev/shm" : os.tmpdir();
}

/** A fresh folder for installed projects, removed when the test ends (see projectsBase). */
export function projectsDir(t: { teardown(fn: () => unknown): void }, prefix = "hub-scaffold-"): string {
  return tmpDir(t, prefix, projectsBase());
}

/** The environment of a user's shell: without what tap, npm or the hub's tests set. */
export function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(npm_|TAP|HUB_|NODE_OPTIONS$|NODE_ENV$|LOG_LEVEL$|PORT$|DATABASE_URL$|SUPERUSER_DATABASE_URL$)/i.test(key)) continue;
    env[key] = value;
  }
  return { ...env, ...extra };
}

/** Run a command to its end (killed after timeoutMs), with its output. */
export function run(command: string, args: string[], cwd: string, timeoutMs: number, env = userEnv()): Promise<Done> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => (output += c.toString()));
    const timer = setTimeout(() => {
      output += `\n[killed: still running after ${timeoutMs} ms]`;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** Pack this package, `hub init` a project on the tarball and install it; undefined (with failed assertions) when a step fails. */
export async function packedProject(t: Test, name = "my-game"): Promise<string | undefined> {
  const work = projectsDir(t);
  const pack = await run(npm, ["pack", "--pack-destination", work, "--silent"], ROOT, 120_000);
  t.equal(pack.code, 0, `npm pack:\n${pack.output}`);
  const tarball = path.join(work, pack.output.trim().split("\n").pop()!.trim());
  const dir = path.join(work, name);
  const init = await runCli(["init", dir, "--hub", tarball], {});
  t.equal(init.code, 0, `hub init:\n${init.stderr}`);
  const install = await run(npm, ["install", "--prefer-offline", "--no-audit", "--no-fund"], dir, 480_000);
  t.equal(install.code, 0, `npm install:\n${install.output}`);
  return pack.code === 0 && init.code === 0 && install.code === 0 && fs.existsSync(dir) ? dir : undefined;
}

export interface StartedProject {
  /** http://host:port, once it listens; undefined when it exited first. */
  url: string | undefined;
  /** Its output so far (stdout and stderr). */
  output(): string;
  /** The exit code, once it exited. */
  exited: Promise<number | null>;
  /** SIGTERM to its process group, then its exit. */
  stop(): Promise<number | null>;
}

/** `npm start` in the project, until it listens or exits (within 180 s). */
export async function npmStart(dir: string, env: Record<string, string> = {}): Promise<StartedProject> {
  // Its own process group: stop() reaches npm and the node it starts.
  const child = spawn(npm, ["start"], { cwd: dir, env: userEnv({ PORT: "0", ...env }), stdio: ["ignore", "pipe", "pipe"], detached: true });
  let output = "";
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, "SIGTERM");
    return exited;
  };
  const url = await new Promise<string | undefined>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm start neither listened nor exited within 180 s:\n${output}`)), 180_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /hub listening on (http:\/\/[^/\s"]+)\/graphql/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    void exited.then(() => {
      clearTimeout(timer);
      resolve(undefined);
    });
  });
  return { url, output: () => output, exited, stop };
}

export async function graphql(url: string, query: string, headers: Record<string, string> = {}): Promise<{ data?: Record<string, any>; errors?: unknown[] }> {
  const res = await fetch(`${url}/graphql`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ query }) });
  return (await res.json()) as { data?: Record<string, any>; errors?: unknown[] };
}
