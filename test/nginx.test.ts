/**
 * docs/deployment.md's nginx configuration, read from its `nginx` block with
 * only the addresses replaced, run by Debian's nginx (on 127.0.0.1, every
 * path in a temporary folder) in front of three `node dist/server.js` on one
 * database, over real HTTP and WebSockets: GraphQL over POST and GET, a
 * subscription receiving an event, X-Forwarded-For and X-Request-ID reaching
 * the hub from the trusted proxy; then a rolling restart under load, where
 * no GET fails, no POST reaches two instances, and the POSTs nginx may not
 * retry are counted (the page reports how many fail).
 */
import "./helpers/env.js";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import t, { type Test } from "tap";
import { ROOT, startServerProcess, type ServerProcess } from "./helpers/process.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
import { makeOperator, makePlayer } from "./helpers/credentials.js";
import { tmpDir } from "./helpers/tmp.js";
import { feed, until, wsClient } from "./helpers/ws.js";
import { deploymentNginxConfig, NGINX, startNginx } from "./helpers/nginx.js";
import { freePort } from "./helpers/ports.js";
import { pacer } from "./helpers/load.js";

const INSTANCES = 3;
const CLIENTS = 4;
/**
 * Each busy client sends a request at most this often: with the pausing ones, about 500 a second in all,
 * the load docs/deployment.md reports for the nginx test (9,000 to 10,000 requests in about 20 s).
 * Unpaced, the load took every core a quiet machine had (30,000 requests).
 */
const BUSY_GAP_MS = 5;
/** The client's own address, distinct from nginx's 127.0.0.1 (the trusted one) so the forwarded address shows. */
const CLIENT_ADDRESS = "127.0.0.2";


interface Answer {
  status: number;
  text: string;
  requestId: string | undefined;
}

function request(url: string, options: { method?: string; body?: string; headers?: Record<string, string>; agent?: http.Agent } = {}): Promise<Answer> {
  const { method = "GET", body, headers = {}, agent } = options;
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method,
      localAddress: CLIENT_ADDRESS,
      ...(agent ? { agent } : {}),
      headers: { ...(body === undefined ? {} : { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) }), ...headers },
    });
    req.on("response", (res) => {
      let text = "";
      res.on("data", (c: Buffer) => (text += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text, requestId: res.headers["x-request-id"] as string | undefined }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

interface Failure {
  method: string;
  what: string;
}

/** CLIENTS loops through nginx on keep-alive connections until stopped, alternating POST and GET queries; every answer checked. */
function startLoad(url: string, authorization: string, userId: string) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS });
  const failures: Failure[] = [];
  const sent = { POST: 0, GET: 0 };
  let running = true;
  const expected = JSON.stringify({ data: { hubCurrentUser: { id: userId } } });
  const query = "{ hubCurrentUser { id } }";
  const paced = pacer(CLIENTS, BUSY_GAP_MS);
  const loop = async (n: number) => {
    for (let i = 0; running; i++) {
      // Half the clients pause between requests, so nginx also holds idle keep-alive connections to the instances;
      // the others one at most every BUSY_GAP_MS, so the load does not grow with the cores a quiet machine leaves idle.
      if (n >= CLIENTS / 2) await new Promise((r) => setTimeout(r, Math.random() * 50));
      else await paced(n);
      const method = (n + i) % 2 === 0 ? "POST" : "GET";
      sent[method]++;
      try {
        const answer =
          method === "POST"
            ? await request(`${url}/graphql`, { method, agent, body: JSON.stringify({ query }), headers: { authorization } })
            : await request(`${url}/graphql?query=${encodeURIComponent(query)}`, { agent, headers: { authorization } });
        if (answer.status !== 200 || answer.text !== expected) failures.push({ method, what: `${answer.status} ${answer.text.slice(0, 200)}` });
      } catch (error) {
        failures.push({ method, what: String((error as NodeJS.ErrnoException).code ?? error) });
      }
    }
  };
  const loops = Array.from({ length: CLIENTS }, (_, n) => loop(n));
  return {
    failures,
    sent,
    async stop() {
      running = false;
      await Promise.all(loops);
      agent.destroy();
    },
  };
}

/** Each "incoming request" the instances logged: its id (nginx's $request_id, trusted) and method. */
function incomingRequests(outputs: string[]): { instance: number; reqId: string; method: string }[] {
  const found: { instance: number; reqId: string; method: string }[] = [];
  outputs.forEach((output, instance) => {
    for (const line of output.split("\n")) {
      if (!line.includes('"incoming request"')) continue;
      const entry = JSON.parse(line) as { reqId?: string; req?: { method?: string } };
      found.push({ instance, reqId: String(entry.reqId), method: String(entry.req?.method) });
    }
  });
  return found;
}

t.test("three instances behind the page's nginx configuration", { skip: fs.existsSync(NGINX) ? false : `${NGINX} is not installed` }, async (t) => {
  const db = await sharedClusterDatabase(t);
  const player = await makePlayer(db.SUPERUSER_DATABASE_URL, "nginx");
  const operator = await makeOperator(db.SUPERUSER_DATABASE_URL);
  const ports = await Promise.all(Array.from({ length: INSTANCES }, freePort));
  const proxyPort = await freePort();
  // Every process started, restarted ones included: their logs show which requests reached them.
  const started: ServerProcess[] = [];
  const start = async (i: number) => {
    const server = await startServerProcess({
      ...db,
      NODE_ENV: "production",
      HOST: "127.0.0.1",
      PORT: String(ports[i]),
      HUB_CONFIG: path.join(ROOT, "test/fixtures/config-trust-proxy.mjs"),
      HUB_TRUST_PROXY: "127.0.0.1",
      // nginx does not see the drain (no readiness checks): it need only cover requests in flight.
      HUB_DRAIN_MS: "1000",
    });
    started.push(server);
    return server;
  };
  const servers: ServerProcess[] = await Promise.all(Array.from({ length: INSTANCES }, (_, i) => start(i)));
  t.teardown(async () => {
    for (const server of started) {
      if (server.child.exitCode === null) server.child.kill("SIGKILL");
      await server.exited;
    }
  });

  const proxy = startNginx(deploymentNginxConfig(proxyPort, ports), tmpDir(t, "hub-nginx-"));
  t.teardown(async () => {
    if (proxy.child.exitCode === null) proxy.child.kill("SIGQUIT");
    await proxy.exited;
  });
  const url = `http://127.0.0.1:${proxyPort}`;
  const waiting = Date.now();
  while ((await request(`${url}/readyz`).then((r) => r.status, () => 0)) !== 200) {
    if (Date.now() - waiting > 30_000) throw new Error(`nginx did not answer ${url}/readyz within 30 s:\n${proxy.output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }

  await t.test("GraphQL over POST and GET, the client's address and nginx's request id", async (t) => {
    const expected = { data: { hubCurrentUser: { id: player.userId } } };
    const post = await request(`${url}/graphql`, { method: "POST", body: JSON.stringify({ query: "{ hubCurrentUser { id } }" }), headers: player.header });
    t.same([post.status, JSON.parse(post.text)], [200, expected], "a POST through nginx");
    const get = await request(`${url}/graphql?query=${encodeURIComponent("{ hubCurrentUser { id } }")}`, { headers: player.header });
    t.same([get.status, JSON.parse(get.text)], [200, expected], "a GET through nginx");
    t.match(post.requestId, /^[0-9a-f]{32}$/, "the hub took nginx's $request_id as the request's id, and echoed it");
    const whoami = await request(`${url}/whoami`, { headers: { "x-forwarded-for": "203.0.113.7", "x-request-id": "chosen-by-client" } });
    t.same(JSON.parse(whoami.text), { ip: CLIENT_ADDRESS }, "req.ip is the client's address, as nginx forwarded it; the client's own X-Forwarded-For is not believed");
    t.not(whoami.requestId, "chosen-by-client", "nor its X-Request-ID: nginx sets its own");
  });

  await t.test("a subscription through nginx receives an event", async (t) => {
    const client = wsClient(url, player.header);
    t.teardown(() => client.dispose());
    const alerts = feed(client, "subscription { hubBalanceAlert { currencyKey } }");
    // The subscription is live once the hub has acknowledged the socket; credit until the alert arrives.
    const credit = JSON.stringify({
      query: "mutation($i: HubBalanceChangeInput!) { hubCreditBalance(input: $i) { amount } }",
      variables: { i: { userId: player.userId, experienceId: player.experienceId, currencyKey: "HOUSE", amount: 5, reason: "through nginx" } },
    });
    const started = Date.now();
    while (alerts.events.length === 0 && Date.now() - started < 30_000) {
      const answer = await request(`${url}/graphql`, { method: "POST", body: credit, headers: operator.header });
      t.notOk(JSON.parse(answer.text).errors, "the operator's credit through nginx succeeded");
      await until(() => alerts.events.length > 0, 2000, () => "no alert yet").catch(() => undefined);
    }
    t.same(alerts.events[0], { data: { hubBalanceAlert: { currencyKey: "HOUSE" } } }, "the player's socket, upgraded through nginx, heard of it");
  });

  await t.test("a rolling restart under load", (t) => rollingRestart(t, { url, servers, start, started, proxy, player }));
});

interface Fleet {
  url: string;
  servers: ServerProcess[];
  start(i: number): Promise<ServerProcess>;
  started: ServerProcess[];
  proxy: { output(): string };
  player: { header: { authorization: string }; userId: string };
}

/** Each instance in turn stops (SIGTERM), exits 0, starts again and serves a request through nginx, while CLIENTS send queries. */
async function rollingRestart(t: Test, fleet: Fleet) {
  const { url, servers, start, started, proxy, player } = fleet;
  const load = startLoad(url, player.header.authorization, player.userId);
  t.teardown(() => load.stop());
  const served = (server: ServerProcess) => server.output().split("\n").some((line) => line.includes('"incoming request"') && line.includes('"url":"/graphql'));
  await until(() => servers.every(served), 30_000, () => "every instance to serve a query through nginx");
  for (let i = 0; i < INSTANCES; i++) {
    servers[i]!.child.kill("SIGTERM");
    t.equal(await servers[i]!.exited, 0, `instance ${i + 1} drained and exited 0`);
    servers[i] = await start(i);
    // No readiness check to wait on: the instance is back once nginx sends it a request.
    await until(() => served(servers[i]!), 30_000, () => `nginx to send instance ${i + 1} a request again:\n${proxy.output().slice(-2000)}`);
  }
  await load.stop();
  const { POST, GET } = load.sent;
  const failed = (method: string) => load.failures.filter((f) => f.method === method);
  t.ok(POST > 0 && GET > 0, `requests were sent throughout (${POST} POST, ${GET} GET)`);
  t.same(failed("GET"), [], `no GET failed: nginx retries them on another instance (${GET} sent)`);
  // A POST sent to an instance as it stops is answered 502 (connection lost) or 503 (the hub's) and not retried.
  t.same(
    failed("POST").filter((f) => !/^50[23] /.test(f.what)),
    [],
    `every failed POST is one nginx may not retry: ${failed("POST").length} of ${POST} (${failed("POST").map((f) => f.what.slice(0, 40)).join("; ") || "none"})`,
  );
  const seen = new Map<string, number>();
  // nginx's $request_id is the same on every try of one request: a POST retried elsewhere would show under one id twice.
  for (const { instance, reqId, method } of incomingRequests(started.map((s) => s.output()))) {
    if (method !== "POST") continue;
    if (seen.has(reqId) && seen.get(reqId) !== instance) t.fail(`POST ${reqId} reached two instances`);
    seen.set(reqId, instance);
  }
  t.pass(`no POST reached two instances (${seen.size} POSTs in the instances' logs)`);
  t.comment(`nginx's error log during the restart:\n${proxy.output().split("\n").slice(-15).join("\n")}`);
}
