/**
 * The fleet as docs/deployment.md runs it: HAProxy (Debian's, started here on
 * 127.0.0.1) with the configuration of that page, read from its `haproxy`
 * block with only the addresses replaced, in front of three
 * `node dist/server.js` on one database. Each instance in turn gets SIGTERM,
 * exits, starts again and is back in rotation, while a few clients send
 * GraphQL requests through HAProxy: not one fails. WebSockets opened through
 * HAProxy reconnect when their instance stops, and afterwards every instance
 * holds between half and twice its share of them (the socket rebalance).
 */
import "./helpers/env.js";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import pg from "pg";
import t from "tap";
import WebSocket from "ws";
import { createClient, type Client } from "graphql-ws";
import { ROOT, startServerProcess, type ServerProcess } from "./helpers/process.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
import { makePlayer } from "./helpers/credentials.js";
import { tmpDir } from "./helpers/tmp.js";
import { until } from "./helpers/ws.js";
import { deploymentHaproxyConfig, HAPROXY, startHaproxy } from "./helpers/haproxy.js";
import { freePort } from "./helpers/ports.js";
import { pacer } from "./helpers/load.js";

const INSTANCES = 3;
const SOCKETS = 9;
const CLIENTS = 4;
/**
 * Each busy client sends a request at most this often: with the pausing ones, about 500 a second in all,
 * as in test/nginx.test.ts. Unpaced, the load took every core a quiet machine had (37,000 requests).
 */
const BUSY_GAP_MS = 5;


interface Failure {
  at: number;
  what: string;
}

/** CLIENTS loops of GraphQL POSTs through the proxy on keep-alive connections, until stopped; every answer checked. */
function startLoad(url: string, authorization: string, userId: string) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS });
  const failures: Failure[] = [];
  let sent = 0;
  let running = true;
  const post = (body: string, headers: Record<string, string>) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request(`${url}/graphql`, { method: "POST", agent, headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)), ...headers } });
      req.on("response", (res) => {
        let text = "";
        res.on("data", (c: Buffer) => (text += c.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(body);
    });
  const paced = pacer(CLIENTS, BUSY_GAP_MS);
  const loop = async (n: number) => {
    while (running) {
      // Half the clients pause between requests, so HAProxy also holds idle keep-alive connections to the instances;
      // the others one at most every BUSY_GAP_MS, so the load does not grow with the cores a quiet machine leaves idle.
      if (n >= CLIENTS / 2) await new Promise((r) => setTimeout(r, Math.random() * 50));
      else await paced(n);
      const mine = n % 2 === 0;
      const expected = mine ? JSON.stringify({ data: { hubCurrentUser: { id: userId } } }) : JSON.stringify({ data: { __typename: "Query" } });
      sent++;
      try {
        const answer = await post(JSON.stringify({ query: mine ? "{ hubCurrentUser { id } }" : "{ __typename }" }), mine ? { authorization } : {});
        if (answer.status !== 200 || answer.text !== expected) failures.push({ at: Date.now(), what: `${answer.status} ${answer.text.slice(0, 200)}` });
      } catch (error) {
        failures.push({ at: Date.now(), what: String((error as NodeJS.ErrnoException).code ?? error) });
      }
    }
  };
  const loops = Array.from({ length: CLIENTS }, (_, n) => loop(n));
  return {
    failures,
    sent: () => sent,
    async stop() {
      running = false;
      await Promise.all(loops);
      agent.destroy();
    },
  };
}

/** graphql-ws clients through the proxy, reconnecting as a frontend does; which are connected. */
function openSockets(url: string) {
  const connected = new Set<Client>();
  const clients: Client[] = [];
  for (let i = 0; i < SOCKETS; i++) {
    const client: Client = createClient({
      url: `${url.replace(/^http/, "ws")}/graphql`,
      webSocketImpl: WebSocket,
      lazy: false,
      retryAttempts: Infinity,
      retryWait: () => new Promise((r) => setTimeout(r, 100 + Math.random() * 400)),
      onNonLazyError: () => undefined,
      on: { connected: () => void connected.add(client), closed: () => void connected.delete(client) },
    });
    clients.push(client);
  }
  return { connected, dispose: () => Promise.all(clients.map((c) => c.dispose())) };
}

t.test("a rolling restart of three instances behind HAProxy: no request fails, and the sockets spread again", { skip: fs.existsSync(HAPROXY) ? false : `${HAPROXY} is not installed` }, async (t) => {
  const db = await sharedClusterDatabase(t);
  const player = await makePlayer(db.SUPERUSER_DATABASE_URL, "rolling");
  const ports = await Promise.all(Array.from({ length: INSTANCES }, freePort));
  const proxyPort = await freePort();
  const start = (i: number) =>
    startServerProcess({
      ...db,
      NODE_ENV: "production",
      HOST: "127.0.0.1",
      PORT: String(ports[i]),
      HUB_CONFIG: path.join(ROOT, "test/fixtures/config-rolling-restart.mjs"),
      HUB_DRAIN_MS: "3000",
    });
  const servers: ServerProcess[] = await Promise.all(Array.from({ length: INSTANCES }, (_, i) => start(i)));
  t.teardown(async () => {
    for (const server of servers) {
      if (server.child.exitCode === null) server.child.kill("SIGKILL");
      await server.exited;
    }
  });

  const proxy = startHaproxy(deploymentHaproxyConfig(proxyPort, ports), path.join(tmpDir(t), "haproxy.cfg"));
  t.teardown(async () => {
    if (proxy.child.exitCode === null) proxy.child.kill("SIGTERM");
    await proxy.exited;
  });
  const url = `http://127.0.0.1:${proxyPort}`;
  const waitingForProxy = Date.now();
  while ((await fetch(`${url}/readyz`).then((r) => r.status, () => 0)) !== 200) {
    if (Date.now() - waitingForProxy > 30_000) throw new Error(`HAProxy did not answer ${url}/readyz within 30 s:\n${proxy.output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }

  const sockets = openSockets(url);
  t.teardown(() => sockets.dispose());
  await until(() => sockets.connected.size === SOCKETS, 30_000, () => `the ${SOCKETS} WebSockets to connect through HAProxy (${sockets.connected.size})`);
  const load = startLoad(url, player.header.authorization, player.userId);
  t.teardown(() => load.stop());

  const upCount = (name: string) => proxy.output().split(`Server hubs/${name} is UP`).length - 1;
  for (let i = 0; i < INSTANCES; i++) {
    const name = `h${i + 1}`;
    const ups = upCount(name);
    servers[i]!.child.kill("SIGTERM");
    t.equal(await servers[i]!.exited, 0, `${name} drained and exited 0`);
    servers[i] = await start(i);
    await until(() => upCount(name) > ups, 30_000, () => `HAProxy to put ${name} back in rotation:\n${proxy.output().slice(-2000)}`);
  }
  const sent = load.sent();
  await load.stop();
  t.ok(sent > 0, `requests were sent throughout (${sent})`);
  t.same(load.failures.slice(0, 5), [], `no request failed during the rolling restart (${load.failures.length} of ${sent})`);
  for (let i = 1; i <= INSTANCES; i++) {
    // Its readiness answered 503 while it still served: the proxy saw the drain before the instance closed.
    t.match(proxy.output(), new RegExp(`Server hubs/h${i} is DOWN, reason: Layer7 wrong status, code: 503`), `HAProxy took h${i} out of rotation on its readiness's 503`);
  }
  t.comment(proxy.output().split("\n").filter((line) => /Server hubs/.test(line)).join("\n"));

  // Every instance records its sockets in hub_hidden.instance: read what the three hold.
  const pool = new pg.Pool({ connectionString: db.SUPERUSER_DATABASE_URL, max: 1 });
  t.teardown(() => pool.end());
  let counts: number[] = [];
  const share = SOCKETS / INSTANCES;
  const read = async () => {
    const { rows } = await pool.query<{ sockets: number }>("select sockets from hub_hidden.instance where seen_at > now() - interval '3 seconds' order by id");
    counts = rows.map((r) => r.sockets);
  };
  const balanced = () => counts.length === INSTANCES && counts.reduce((a, b) => a + b, 0) === SOCKETS && counts.every((n) => n >= share / 2 && n <= share * 2);
  const waiting = Date.now();
  while ((await read(), !balanced())) {
    if (Date.now() - waiting > 60_000) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  t.ok(balanced(), `within a minute, every instance holds between half and twice its share of the ${SOCKETS} sockets (${counts.join(", ")})`);
});
