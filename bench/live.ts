// Live updates: memory per idle subscribed WebSocket, and commit → alert latency across two hub processes.
//
//   npm run build && node --import tsx bench/live.ts [--connections 1000,10000] [--subscribers 1000] [--rate 500] [--seconds 20]
//                                                     [--idle-seconds 45] [--heap-snapshots DIR] [--hub-node-options "..."]
//
// Two `node dist/server.js` processes (NODE_ENV=production) share one embedded Postgres in a fresh data dir.
// Memory: RSS of process A (from /proc) before any socket, then with N idle connections each holding one
// hubBalanceAlert subscription (players × N/players sockets), each read 3 s after the last socket opened and
// again after --idle-seconds without traffic: opening thousands of sockets grows V8's young generation
// (32 MiB), and V8 returns that space, and compacts the old one, only once the process has been idle for
// some 30 s. The idle figure is the one an idle subscriber costs. Latency: `subscribers` players, one
// subscription each, alternately on A and B; this process changes a random player's balance `rate` times a
// second, each change its own transaction (`update hub.balance …`, the ledger trigger does the rest), and
// times each alert from the moment the UPDATE was sent (so its execution and commit are included). Every
// change must produce exactly one alert: missing and duplicated ones are counted. Writes bench/results/live.md.
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import pg from "pg";
import WebSocket from "ws";
import { createSession, ensurePlayer } from "../dist/src/auth/credentials.js";
import { NODE_FLAGS } from "./lib/util.js";
import { benchArgs, positiveOption } from "./lib/args.js";
import { stopChildrenOnSignal } from "./lib/children.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const USAGE = `Usage: npm run build && node --import tsx bench/live.ts [options]

  --connections LIST     idle subscribed connections on hub A, one measurement each (default 1000,10000)
  --subscribers N        players subscribed for the latency run (default 1000)
  --rate N               balance changes a second (default 500)
  --seconds S            length of the latency run (default 20)
  --idle-seconds S       idle time before the second memory reading (default 45)
  --heap-snapshots DIR   a heap snapshot of hub A at each memory reading
  --hub-node-options "…" the hubs' Node/V8 flags instead of the bench's own
`;
const { values: opts } = benchArgs(USAGE, {
  options: {
    connections: { type: "string", default: "1000,10000" },
    subscribers: { type: "string", default: "1000" },
    rate: { type: "string", default: "500" },
    seconds: { type: "string", default: "20" },
    "idle-seconds": { type: "string", default: "45" },
    "heap-snapshots": { type: "string", default: "" },
    "hub-node-options": { type: "string" },
  },
});
const positive = (name: string, raw: string) => positiveOption(USAGE, name, raw);
const CONNECTIONS = opts.connections.split(",").map((c) => positive("connections", c));
const SUBSCRIBERS = positive("subscribers", opts.subscribers);
const RATE = positive("rate", opts.rate);
const SECONDS = positive("seconds", opts.seconds);
const IDLE_SECONDS = positive("idle-seconds", opts["idle-seconds"]);
const HEAP_SNAPSHOTS = opts["heap-snapshots"];
let dataDirToRemove: string | undefined;
const track = stopChildrenOnSignal(() => dataDirToRemove && fs.rmSync(dataDirToRemove, { recursive: true, force: true }));
const PLAYERS = Math.max(SUBSCRIBERS, Math.ceil(Math.max(...CONNECTIONS) / 10));

interface Mem {
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  /** V8 space name → [committed, used] MiB. */
  spaces?: Record<string, [number, number]>;
}

interface Hub {
  child: ChildProcess;
  /** Resolves with the next memory line the hub prints after SIGUSR2 (see lib/gc-on-signal.mjs). */
  memAfterGc(): Promise<Mem>;
  url: string;
  wsUrl: string;
}

function startHub(dataDir: string): Promise<Hub> {
  // --heap-snapshots DIR: the hub writes a heap snapshot there at each step (SIGUSR1), after the full GC.
  const snapshots = HEAP_SNAPSHOTS ? [`--heapsnapshot-signal=SIGUSR1`, `--diagnostic-dir=${HEAP_SNAPSHOTS}`] : [];
  // --hub-node-options "...": V8/Node flags for the hub processes instead of BENCH_NODE_FLAGS's (bench/lib/util.ts), to see what they change.
  const flags = opts["hub-node-options"] !== undefined ? opts["hub-node-options"].split(" ").filter(Boolean) : NODE_FLAGS;
  const child = spawn(process.execPath, ["--expose-gc", ...flags, ...snapshots, "--import", path.join(ROOT, "bench/lib/gc-on-signal.mjs"), path.join(ROOT, "dist/server.js")], {
    cwd: ROOT,
    env: { ...process.env, NODE_ENV: "production", HUB_EMBEDDED_POSTGRES: "on", HUB_EXAMPLES: "off", HUB_DATA_DIR: dataDir, PORT: "0", LOG_LEVEL: "info", LOG_PRETTY: "false" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  track(child);
  let output = "";
  let waiting: ((mem: Mem) => void) | undefined;
  let tail = "";
  const memAfterGc = () =>
    new Promise<Mem>((resolve) => {
      waiting = (mem) => {
        if (HEAP_SNAPSHOTS) child.kill("SIGUSR1");
        resolve(mem);
      };
      child.kill("SIGUSR2");
    });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`hub did not start:\n${output}`)), 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const m = /hub listening on (http:\/\/[^/\s"]+)\/graphql/.exec(output);
      if (m) {
        clearTimeout(timer);
        child.stdout!.off("data", onData);
        child.stdout!.on("data", (more: Buffer) => {
          tail = (tail + more.toString()).split("\n").slice(-2).join("\n");
          const mem = /live-mem (\{.*\})\n/.exec(tail);
          if (mem && waiting) {
            tail = "";
            const done = waiting;
            waiting = undefined;
            done(JSON.parse(mem[1]!) as Mem);
          }
        });
        child.stderr!.resume();
        resolve({ child, memAfterGc, url: m[1]!, wsUrl: `${m[1]!.replace(/^http/, "ws")}/graphql` });
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => reject(new Error(`hub exited ${code}:\n${output}`)));
  });
}

const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Player {
  userId: string;
  experienceId: string;
  token: string;
}

/** A graphql-transport-ws connection with one hubBalanceAlert subscription; resolves once subscribed. */
function subscribe(wsUrl: string, token: string, onAlert?: () => void): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(wsUrl, "graphql-transport-ws");
    ws.on("error", reject);
    ws.on("open", () => ws.send(JSON.stringify({ type: "connection_init", payload: { authorization: `session:${token}` } })));
    ws.on("message", (data) => {
      const msg = JSON.parse(String(data)) as { type: string; payload?: unknown };
      if (msg.type === "connection_ack") {
        ws.send(JSON.stringify({ id: "1", type: "subscribe", payload: { query: "subscription { hubBalanceAlert { currencyKey } }" } }));
        // The subscription is registered once the server has run its subscribe plan; a ping round trip after it proves that.
        ws.send(JSON.stringify({ type: "ping" }));
      } else if (msg.type === "pong") resolve(ws);
      else if (msg.type === "next") onAlert?.();
      else if (msg.type === "error") reject(new Error(JSON.stringify(msg.payload)));
    });
    ws.on("close", (code) => reject(new Error(`closed ${code}`)));
  });
}

async function inBatches<T, R>(items: T[], size: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += size) out.push(...(await Promise.all(items.slice(i, i + size).map((item, j) => fn(item, i + j)))));
  return out;
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;

async function main() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "hub-bench-live-"));
  dataDirToRemove = dataDir;
  const hubs: Hub[] = [];
  const lines: string[] = [];
  const log = (line: string) => {
    console.log(line);
    lines.push(line);
  };
  try {
    hubs.push(await startHub(dataDir));
    hubs.push(await startHub(dataDir)); // shares the running Postgres
    const [a, b] = hubs as [Hub, Hub];
    const { superuserPassword } = JSON.parse(fs.readFileSync(path.join(dataDir, "credentials.json"), "utf8")) as { superuserPassword: string };
    const port = fs.readFileSync(path.join(dataDir, "pg/postmaster.pid"), "utf8").split("\n")[3];
    const pool = new pg.Pool({ connectionString: `postgres://postgres:${superuserPassword}@127.0.0.1:${port}/hub`, max: 20 });
    // Interrupted, the hubs stop their Postgres under this pool's idle clients; a statement in flight still fails.
    pool.on("error", () => undefined);

    console.log(`seeding ${PLAYERS} players…`);
    const players: Player[] = await inBatches(Array.from({ length: PLAYERS }, (_, i) => i), 10, async (i) => {
      const { user, casino, experience } = await ensurePlayer(pool, { uname: `bench-${i}` });
      await pool.query("select hub_hidden.credit_balance($1, $2, $3, 'HOUSE', 1000000, 'bench', 'seed')", [user.id, casino.id, experience.id]);
      const { token } = await createSession(pool, { userId: user.id, casinoId: casino.id, experienceId: experience.id });
      return { userId: user.id, experienceId: experience.id, token };
    });

    log(`# Live updates bench (${new Date().toISOString()}, ${os.cpus().length} CPUs, load average before: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")})`);
    log("");
    log(
      `| idle subscribed connections on hub A | RSS of A 3 s after the last one opened | RSS of A after ${IDLE_SECONDS} s without traffic | per connection, idle (over none, idle) | after a full GC: RSS / V8 heap committed / used / external | per connection after GC: RSS / heap used |`,
    );
    log("|--:|--:|--:|--:|--:|--:|");
    const MiB = (bytes: number) => bytes / 2 ** 20;
    /** RSS now, then every 5 s for IDLE_SECONDS (V8 returns the young generation's space once the process has been idle a while). */
    const idleRss = async (label: string) => {
      await sleep(3000);
      const first = rssMiB(a.child.pid!);
      const samples: string[] = [];
      for (let t = 5; t <= IDLE_SECONDS; t += 5) {
        await sleep(5000);
        samples.push(rssMiB(a.child.pid!).toFixed(0));
      }
      console.log(`  ${label}: RSS 3 s in ${first.toFixed(0)} MiB, then every 5 s: ${samples.join(" ")} MiB`);
      return { first, idle: rssMiB(a.child.pid!) };
    };
    const spaces = (mem: Mem) => console.log(`  V8 spaces after the GC (committed, used MiB): ${JSON.stringify(mem.spaces)}`);
    const rss0 = await idleRss("no connection");
    const mem0 = await a.memAfterGc();
    spaces(mem0);
    log(
      `| 0 | ${rss0.first.toFixed(1)} MiB | ${rss0.idle.toFixed(1)} MiB | | ${MiB(mem0.rss).toFixed(1)} / ${MiB(mem0.heapTotal).toFixed(1)} / ${MiB(mem0.heapUsed).toFixed(1)} / ${MiB(mem0.external).toFixed(1)} MiB | |`,
    );
    const sockets: WebSocket[] = [];
    for (const n of CONNECTIONS.sort((x, y) => x - y)) {
      const more = n - sockets.length;
      sockets.push(...(await inBatches(Array.from({ length: more }, (_, i) => players[(sockets.length + i) % PLAYERS]!), 200, (p) => subscribe(a.wsUrl, p.token))));
      const rss = await idleRss(`${n} connections`);
      const mem = await a.memAfterGc();
      spaces(mem);
      log(
        `| ${n.toLocaleString("en")} | ${rss.first.toFixed(1)} MiB | ${rss.idle.toFixed(1)} MiB | ${(((rss.idle - rss0.idle) * 1024) / n).toFixed(1)} KiB | ${MiB(mem.rss).toFixed(1)} / ${MiB(mem.heapTotal).toFixed(1)} / ${MiB(mem.heapUsed).toFixed(1)} / ${MiB(mem.external).toFixed(1)} MiB | ${((mem.rss - mem0.rss) / 1024 / n).toFixed(1)} / ${((mem.heapUsed - mem0.heapUsed) / 1024 / n).toFixed(1)} KiB |`,
      );
    }
    for (const ws of sockets) ws.terminate();
    await sleep(2000);

    // Latency: one subscription per player, alternately on A and B.
    const pending = new Map<string, number[]>();
    /** When each change's UPDATE returned (its commit is done by then), by its send time. */
    const ackedAt = new Map<number, number>();
    const afterAck: number[] = [];
    const latencies: number[] = [];
    let duplicates = 0;
    const subs = players.slice(0, SUBSCRIBERS);
    const live = await inBatches(subs, 100, (p, i) =>
      subscribe((i % 2 === 0 ? a : b).wsUrl, p.token, () => {
        const q = pending.get(p.userId);
        const sent = q?.shift();
        if (sent === undefined) duplicates++;
        else {
          const now = performance.now();
          latencies.push(now - sent);
          const acked = ackedAt.get(sent);
          afterAck.push(acked === undefined ? 0 : now - acked);
          ackedAt.delete(sent);
        }
      }),
    );
    await sleep(1000);
    const total = RATE * SECONDS;
    let sent = 0;
    let failed = 0;
    const acked: number[] = [];
    const started = performance.now();
    const inFlight = new Set<Promise<unknown>>();
    while (sent < total) {
      const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * RATE));
      while (sent < due) {
        const p = subs[Math.floor(Math.random() * subs.length)]!;
        sent++;
        const q = pending.get(p.userId) ?? [];
        pending.set(p.userId, q);
        // Timed from the moment the statement goes out on its own connection (not from a wait for one).
        const work = pool.connect().then(async (client) => {
          const t0 = performance.now();
          q.push(t0);
          try {
            await client.query("update hub.balance set amount = amount + 1 where user_id = $1 and experience_id = $2 and currency_key = 'HOUSE'", [p.userId, p.experienceId]);
            const now = performance.now();
            acked.push(now - t0);
            // Only while the alert has not arrived yet (an alert may beat the UPDATE's answer).
            if (q.includes(t0)) ackedAt.set(t0, now);
          } catch {
            failed++;
            q.splice(q.indexOf(t0), 1);
          } finally {
            client.release();
          }
        });
        inFlight.add(work);
        void work.finally(() => inFlight.delete(work));
      }
      await sleep(1);
    }
    const sendSeconds = (performance.now() - started) / 1000;
    await Promise.all(inFlight);
    await sleep(3000);
    const missing = [...pending.values()].reduce((n, q) => n + q.length, 0);
    latencies.sort((x, y) => x - y);
    log("");
    log(`| commit → alert, ${SUBSCRIBERS} subscribers over 2 processes, ${RATE} changes/s for ${SECONDS} s | value |`);
    log("|---|--:|");
    log(`| changes sent (achieved rate) | ${sent - failed} (${((sent - failed) / sendSeconds).toFixed(0)}/s; ${failed} failed) |`);
    log(`| alerts received | ${latencies.length} |`);
    log(`| missing / duplicated | ${missing} / ${duplicates} |`);
    afterAck.sort((x, y) => x - y);
    log(`| alert after the UPDATE was sent, p50 / p99 / max (an upper bound of commit → alert) | ${pct(latencies, 50).toFixed(1)} / ${pct(latencies, 99).toFixed(1)} / ${(latencies.at(-1) ?? NaN).toFixed(1)} ms |`);
    log(`| alert after the UPDATE's answer came back, p50 / p99 / max (a lower bound; 0 when the alert came first) | ${pct(afterAck, 50).toFixed(1)} / ${pct(afterAck, 99).toFixed(1)} / ${(afterAck.at(-1) ?? NaN).toFixed(1)} ms |`);
    acked.sort((x, y) => x - y);
    log(`| for comparison: p50 / p99 of the UPDATE's own round trip (statement + commit) | ${pct(acked, 50).toFixed(1)} / ${pct(acked, 99).toFixed(1)} ms |`);
    log("");
    log(`Load average after: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`);
    for (const ws of live) ws.terminate();
    await pool.end();
    fs.mkdirSync(path.join(ROOT, "bench/results"), { recursive: true });
    fs.writeFileSync(path.join(ROOT, "bench/results/live.md"), `${lines.join("\n")}\n`);
  } finally {
    for (const hub of hubs.reverse()) {
      hub.child.kill("SIGTERM");
      await new Promise((r) => hub.child.once("exit", r));
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
