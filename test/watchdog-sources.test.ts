import "./helpers/env.js";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import t from "tap";
import { isAlive, readPostmasterPid, stopPostmasterOf } from "./helpers/external-postgres.js";
import { childrenOf, ROOT } from "./helpers/process.js";
import { tmpDir } from "./helpers/tmp.js";

// The watchdogs are modules of their own, run as `node <file>`: the compiled file when the hub runs
// from dist, the TypeScript source through tsx when the hub's sources run under tsx.
const modes = [
  { from: "the compiled files", dir: "dist/src", loader: [] as string[], script: "dist/src/db/owner-watchdog.js" },
  { from: "the TypeScript sources under tsx", dir: "src", loader: ["--import", "tsx"], script: "src/db/owner-watchdog.ts" },
];

const ext = (dir: string) => (dir === "src" ? "ts" : "js");

const argvOf = (pid: number) => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {
    return [];
  }
};

for (const mode of modes) {
  t.test(`the owner's watchdog runs from ${mode.from} and stops the postmaster when its owner is SIGKILLed`, async (t) => {
    const dataDir = tmpDir(t);
    const clusterDir = path.join(dataDir, "pg");
    t.teardown(() => stopPostmasterOf(clusterDir));
    const url = (file: string) => JSON.stringify(pathToFileURL(path.join(ROOT, mode.dir, `${file}.${ext(mode.dir)}`)).href);
    // A process that starts the embedded Postgres and so owns it, as a hub does.
    const code = `
      const { startEmbeddedPostgres } = await import(${url("db/embedded")});
      const { createLogger } = await import(${url("logger")});
      await startEmbeddedPostgres({ dataDir: ${JSON.stringify(dataDir)}, log: createLogger({ level: "warn", pretty: false }), fastInit: true });
      console.log("ready");
      setInterval(() => {}, 1000);`;
    const owner = spawn(process.execPath, [...mode.loader, "--input-type=module", "-e", code], {
      cwd: ROOT,
      env: { ...process.env, NODE_OPTIONS: "" },
      stdio: ["ignore", "pipe", "inherit"],
    });
    t.teardown(() => owner.kill("SIGKILL"));
    await new Promise<void>((resolve, reject) => {
      let out = "";
      owner.stdout!.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes("ready")) resolve();
      });
      owner.on("exit", (status) => reject(new Error(`the owner exited (${status}) before its Postgres was ready: ${out}`)));
    });
    const pid = readPostmasterPid(clusterDir)!.pid;
    // Its other children: the postmaster, and under tsx esbuild's service.
    const watchdogs = childrenOf(owner.pid!).filter((child) => child !== pid && argvOf(child)[0] === process.execPath);
    t.equal(watchdogs.length, 1, "the owner runs one node process: its watchdog");
    const watchdogPid = watchdogs[0]!;
    const argv = argvOf(watchdogPid);
    t.ok(argv.includes(path.join(ROOT, mode.script)), `the watchdog runs ${mode.script} (${argv.slice(1, -3).join(" ")})`);

    owner.kill("SIGKILL");
    const start = Date.now();
    while (isAlive(pid) && Date.now() - start < 10_000) await new Promise((r) => setTimeout(r, 50));
    t.notOk(isAlive(pid), `the watchdog stopped the postmaster ${Date.now() - start} ms after its owner died (bound 10000 ms)`);
    while (isAlive(watchdogPid) && Date.now() - start < 15_000) await new Promise((r) => setTimeout(r, 50));
    t.notOk(isAlive(watchdogPid), "and exited");
  });
}
