/**
 * The drain at stop() and SIGTERM: readiness turns 503 at once, requests keep
 * being answered (on keep-alive connections too) for drainMs, each with
 * `Connection: close`; WebSocket upgrades are refused with 503 meanwhile, and
 * the open sockets are closed afterwards with 1001, which the graphql-ws
 * client reconnects on. Real HTTP and WebSockets: they are what is tested.
 */
import "./helpers/env.js";
import http from "node:http";
import t from "tap";
import WebSocket from "ws";
import { startTestServer } from "@hubpkg/hub/test";
import { until } from "./helpers/ws.js";
import { startServerProcess } from "./helpers/process.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";

/** Long enough for every step the tests take inside it; the tests wait for events, never for the drain itself. */
const DRAIN_MS = 4000;

interface Answer {
  status: number;
  connection: string | undefined;
  reusedSocket: boolean;
  body: string;
}

function request(agent: http.Agent, url: string, path: string, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}${path}`, {
      method: body === undefined ? "GET" : "POST",
      agent,
      headers: body === undefined ? {} : { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
    });
    req.on("response", (res) => {
      let text = "";
      res.on("data", (c: Buffer) => (text += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, reusedSocket: req.reusedSocket, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const TYPENAME = JSON.stringify({ query: "{ __typename }" });

/** An upgrade's answer: "open", or the status of the HTTP response that refused it. */
function upgrade(url: string): Promise<number | "open"> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${url.replace(/^http/, "ws")}/graphql`, "graphql-transport-ws");
    socket.on("open", () => {
      socket.terminate();
      resolve("open");
    });
    socket.on("unexpected-response", (_req, res) => {
      resolve(res.statusCode ?? 0);
      res.resume();
    });
    socket.on("error", reject);
  });
}

/** A graphql-transport-ws socket, acknowledged, whose close codes are recorded. */
function openSocket(url: string): Promise<{ socket: WebSocket; closes: { code: number; reason: string }[] }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${url.replace(/^http/, "ws")}/graphql`, "graphql-transport-ws");
    const closes: { code: number; reason: string }[] = [];
    socket.on("close", (code, reason) => closes.push({ code, reason: String(reason) }));
    socket.on("open", () => socket.send(JSON.stringify({ type: "connection_init" })));
    socket.on("message", (data) => {
      if ((JSON.parse(String(data)) as { type: string }).type === "connection_ack") resolve({ socket, closes });
    });
    socket.on("error", reject);
  });
}

t.test("stop(): readiness 503 at once, keep-alive requests answered with Connection: close, upgrades 503, then sockets closed with 1001", async (t) => {
  const server = await startTestServer({ drainMs: DRAIN_MS });
  let stopped = false;
  t.teardown(() => (stopped ? undefined : server.stop()));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const held = await openSocket(server.url);
  t.teardown(() => held.socket.terminate());
  const closes = held.closes;

  const before = await request(agent, server.url, "/graphql", TYPENAME);
  t.equal(before.status, 200);
  t.not(before.connection, "close", "before the drain, connections are kept alive");
  t.equal(await upgrade(server.url), "open", "before the drain, upgrades are accepted");

  const stopping = server.stop().then(() => (stopped = true));
  const ready = await request(agent, server.url, "/readyz");
  t.equal(ready.status, 503, "readiness answers 503 as soon as stop() is called");
  t.same(JSON.parse(ready.body), { status: "draining", database: "reachable" });
  t.ok(ready.reusedSocket, "on the keep-alive connection opened before the drain");
  t.equal(ready.connection, "close", "which the answer closes");

  const during = await request(agent, server.url, "/graphql", TYPENAME);
  t.equal(during.status, 200, "a request during the drain is served");
  t.same(JSON.parse(during.body), { data: { __typename: "Query" } });
  t.equal(during.connection, "close", "with Connection: close, so a proxy opens its next connection elsewhere");
  t.equal(await upgrade(server.url), 503, "a WebSocket upgrade during the drain is refused with 503 (a proxy retries it elsewhere)");
  t.same(closes, [], "the open socket is still open during the drain");
  t.notOk(stopped, "stop() has not finished: the drain is still on");

  await stopping;
  await until(() => closes.length > 0, 10_000, () => "the socket to be closed");
  t.equal(closes[0]!.code, 1001, "the socket was closed with 1001 (going away), which the graphql-ws client reconnects on");
  await t.rejects(request(agent, server.url, "/healthz"), "no longer accepting afterwards");
});

t.test("drainMs 0: stop() closes at once, without answering readiness first", async (t) => {
  const server = await startTestServer();
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  t.equal((await request(agent, server.url, "/readyz")).status, 200);
  await server.stop();
  await t.rejects(request(agent, server.url, "/readyz"), "the test kit's default drain is 0: closed");
});

t.test("SIGTERM to a server process: the drain's timeline, logged, and requests answered during it", async (t) => {
  const db = await sharedClusterDatabase(t);
  const server = await startServerProcess({ ...db, HUB_EXAMPLES: "off", HUB_DRAIN_MS: String(DRAIN_MS) });
  let exited = false;
  void server.exited.then(() => (exited = true));
  t.teardown(async () => {
    if (!exited) server.child.kill("SIGKILL");
    await server.exited;
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  t.equal((await request(agent, server.url, "/readyz")).status, 200);

  server.child.kill("SIGTERM");
  await until(() => /drain started/.test(server.output()), 30_000, () => "the server to log the start of the drain");
  const ready = await request(agent, server.url, "/readyz");
  t.equal(ready.status, 503, "readiness 503 once the drain has started");
  const during = await request(agent, server.url, "/graphql", TYPENAME);
  t.equal(during.status, 200, "requests still answered");
  t.equal(during.connection, "close");
  t.equal(await server.exited, 0, "exit status 0");
  // The process's last lines may still be in the pipe when its exit is reported.
  await until(() => server.output().includes('"msg":"stopped"'), 10_000, () => "the last line of the log");
  const steps = ["received signal", "drain started", "stopping: no longer accepting", "WebSocket connections closed", "stopped"];
  const at = steps.map((step) => server.output().indexOf(`"msg":"${step}`));
  t.ok(at.every((i) => i >= 0), `every step is logged: ${steps.join(", ")}`, { positions: at });
  t.same([...at].sort((a, b) => a - b), at, "in that order", { log: server.output().slice(at[0]! - 200) });
  t.match(server.output(), new RegExp(`"drainMs":${DRAIN_MS}`), "the drain's length is logged");
});
