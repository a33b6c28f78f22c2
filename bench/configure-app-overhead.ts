/**
 * Issue 3's requirement: with a configureApp that registers middleware and
 * routes, POST /graphql {__typename} stays within 10% of the same server with
 * no configureApp. Both servers run in this process's children on one
 * embedded Postgres; rounds interleave A B A B; we report median req/s.
 *
 *   npm run build && node --import tsx bench/configure-app-overhead.ts [--seconds 5] [--connections 20]
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import { benchArgs, positiveOption } from "./lib/args.js";
import { stopChildrenOnSignal } from "./lib/children.js";

const USAGE = "Usage: npm run build && node --import tsx bench/configure-app-overhead.ts [--seconds 5] [--connections 20]\n";
const { values: opts } = benchArgs(USAGE, { options: { seconds: { type: "string", default: "5" }, connections: { type: "string", default: "20" } } });
const positive = (name: string, raw: string) => positiveOption(USAGE, name, raw);
const seconds = positive("seconds", opts.seconds);
const connections = positive("connections", opts.connections);
const rounds = 3;

const serverScript = (withApp: boolean) => `
import { startAndListen } from "@hubpkg/hub";
import express from "@hubpkg/hub/express";
const hub = await startAndListen({ port: 0, logLevel: "warn", dataDir: process.env.DATA_DIR, handleSignals: true,
  ${withApp ? `configureApp: ({ app }) => {
    app.use(express.json());
    app.use(express.urlencoded({ extended: false }));
    app.use((req, res, next) => { res.setHeader("x-served-by", "hub"); next(); });
    const router = express.Router();
    router.get("/:id", (req, res) => res.json({ id: req.params.id }));
    app.use("/items", router);
    app.get("/health", (req, res) => res.json({ status: "ok" }));
  },` : ""}
});
process.stdout.write("READY " + hub.url + "\\n");
`;

function start(withApp: boolean, dataDir: string): Promise<{ child: ChildProcess; url: string }> {
  const file = path.join(dataDir, `server-${withApp ? "app" : "bare"}.mjs`);
  fs.writeFileSync(file, serverScript(withApp));
  // The script must resolve @hubpkg/hub: run it from inside the package.
  const local = path.join(process.cwd(), `.bench-${withApp ? "app" : "bare"}.mjs`);
  fs.copyFileSync(file, local);
  const child = spawn(process.execPath, [local], {
    env: { ...process.env, DATA_DIR: dataDir, NODE_ENV: "production", HUB_EMBEDDED_POSTGRES: "on", GRAPHILE_ENV: "production", LOG_LEVEL: "warn" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  track(child);
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (c: Buffer) => {
      out += c.toString();
      const m = /READY (\S+)/.exec(out);
      if (m) {
        fs.rmSync(local, { force: true });
        resolve({ child, url: m[1]! });
      }
    });
    child.on("exit", (code) => reject(new Error(`server exited ${code}`)));
  });
}

async function measure(url: string, duration: number): Promise<{ rps: number; p99: number; errors: number; non2xx: number }> {
  const result = await autocannon({
    url: `${url}/graphql`,
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ query: "{__typename}" }),
    connections,
    duration,
  });
  return { rps: result.requests.average, p99: result.latency.p99, errors: result.errors, non2xx: result.non2xx };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "hub-bench-"));
const track = stopChildrenOnSignal(() => fs.rmSync(dataDir, { recursive: true, force: true }));
const bare = await start(false, dataDir);
const withApp = await start(true, dataDir);
try {
  const check = await fetch(`${withApp.url}/items/7`);
  if (check.status !== 200) throw new Error(`configureApp route answered ${check.status}`);
  const results: Record<string, number[]> = { bare: [], app: [] };
  await measure(bare.url, 2);
  await measure(withApp.url, 2); // warm-up, discarded
  for (let r = 0; r < rounds; r++) {
    for (const [name, target] of [["bare", bare], ["app", withApp]] as const) {
      const m = await measure(target.url, seconds);
      if (m.errors || m.non2xx) throw new Error(`${name}: ${m.errors} errors, ${m.non2xx} non-2xx`);
      results[name]!.push(m.rps);
    }
  }
  const b = median(results.bare!);
  const a = median(results.app!);
  console.log(`POST /graphql {__typename}, ${connections} connections, ${seconds}s x ${rounds} rounds`);
  console.log(`no configureApp:   ${b.toFixed(0)} req/s`);
  console.log(`with configureApp: ${a.toFixed(0)} req/s  (ratio ${(a / b).toFixed(3)})`);
} finally {
  bare.child.kill("SIGTERM");
  withApp.child.kill("SIGTERM");
  await new Promise((r) => setTimeout(r, 1500));
  fs.rmSync(dataDir, { recursive: true, force: true });
}
