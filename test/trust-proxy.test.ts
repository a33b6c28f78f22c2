/**
 * Behind a proxy (trustProxy, HUB_TRUST_PROXY): X-Forwarded-For gives the
 * client's address (logs, Fastify's request.ip, Express's req.ip) and
 * X-Request-ID the request id only when the peer is a trusted proxy; a client
 * sending them directly is not believed. The response always carries the id
 * in x-request-id, a WebSocket upgrade's too. Over real HTTP: the "proxy" is this test connecting from
 * 127.0.0.2, the trusted address, and the "client" connecting from 127.0.0.1.
 */
import "./helpers/env.js";
import http from "node:http";
import path from "node:path";
import t from "tap";
import WebSocket from "ws";
import { readConfig } from "../dist/src/config.js";
import { trustFunction } from "../dist/src/trust-proxy.js";
import { ROOT, startServerProcess } from "./helpers/process.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
import { until } from "./helpers/ws.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function get(url: string, from: string, headers: Record<string, string>, method = "GET", body?: string): Promise<{ status: number; requestId: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, localAddress: from, headers: { ...headers, ...(body ? { "content-type": "application/json" } : {}) } });
    req.on("response", (res) => {
      let text = "";
      res.on("data", (c: Buffer) => (text += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, requestId: res.headers["x-request-id"] as string | undefined, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** The "incoming request" log line of a request id, parsed. */
function incoming(output: string, reqId: string): { req?: { remoteAddress?: string } } | undefined {
  for (const line of output.split("\n")) {
    if (!line.includes('"incoming request"') || !line.includes(JSON.stringify(reqId))) continue;
    return JSON.parse(line) as { req?: { remoteAddress?: string } };
  }
  return undefined;
}

t.test("X-Forwarded-For and X-Request-ID believed from the trusted proxy only, over real HTTP", async (t) => {
  const db = await sharedClusterDatabase(t);
  const server = await startServerProcess({ ...db, HUB_CONFIG: path.join(ROOT, "test/fixtures/config-trust-proxy.mjs"), HUB_TRUST_PROXY: "127.0.0.2", LOG_LEVEL: "info" });
  t.teardown(async () => {
    server.child.kill("SIGTERM");
    await server.exited;
  });
  const forwarded = { "x-forwarded-for": "203.0.113.7", "x-request-id": "edge-4f1c" };

  const direct = await get(`${server.url}/whoami`, "127.0.0.1", forwarded);
  t.equal(direct.status, 200);
  t.same(JSON.parse(direct.body), { ip: "127.0.0.1" }, "a client's own X-Forwarded-For is ignored: req.ip is its address");
  t.match(direct.requestId, UUID, "a client's own X-Request-ID is not taken: the id is generated, and echoed");

  const proxied = await get(`${server.url}/whoami`, "127.0.0.2", forwarded);
  t.same(JSON.parse(proxied.body), { ip: "203.0.113.7" }, "through the trusted proxy, req.ip is the forwarded client");
  t.equal(proxied.requestId, "edge-4f1c", "and the proxy's X-Request-ID is the request id, echoed");

  const graphql = await get(`${server.url}/graphql`, "127.0.0.2", { "x-request-id": "edge-graphql" }, "POST", JSON.stringify({ query: "{ __typename }" }));
  t.equal(graphql.status, 200);
  t.equal(graphql.requestId, "edge-graphql", "GraphQL's responses echo it too");
  const bad = await get(`${server.url}/whoami`, "127.0.0.2", { "x-request-id": "two words" });
  t.match(bad.requestId, UUID, "an id that is not one printable token is replaced, even from the proxy");

  const upgradeId = (from: string, path: string) =>
    new Promise<string | undefined>((resolve, reject) => {
      const socket = new WebSocket(`${server.url.replace(/^http/, "ws")}${path}`, "graphql-transport-ws", { localAddress: from, headers: { "x-request-id": "edge-ws" } });
      socket.on("upgrade", (res) => resolve(res.headers["x-request-id"] as string | undefined));
      socket.on("unexpected-response", (_req, res) => {
        resolve(res.headers["x-request-id"] as string | undefined);
        res.resume();
      });
      socket.on("open", () => socket.terminate());
      socket.on("error", reject);
    });
  t.equal(await upgradeId("127.0.0.2", "/graphql"), "edge-ws", "a WebSocket upgrade through the proxy takes its id, and the 101 echoes it");
  t.match(await upgradeId("127.0.0.1", "/graphql"), UUID, "one sent directly gets its own");
  t.equal(await upgradeId("127.0.0.2", "/elsewhere"), "edge-ws", "a refused upgrade (404) echoes it too");

  await until(() => incoming(server.output(), "edge-4f1c") !== undefined && incoming(server.output(), direct.requestId!) !== undefined, 10_000, () => "the request lines in the log");
  t.equal(incoming(server.output(), "edge-4f1c")!.req?.remoteAddress, "203.0.113.7", "the log gives the forwarded client's address for the proxied request");
  t.equal(incoming(server.output(), direct.requestId!)!.req?.remoteAddress, "127.0.0.1", "and the peer's own for the direct one");
});

t.test("without trustProxy, even a loopback peer's headers are not believed", async (t) => {
  const db = await sharedClusterDatabase(t);
  const server = await startServerProcess({ ...db, HUB_CONFIG: path.join(ROOT, "test/fixtures/config-trust-proxy.mjs") });
  t.teardown(async () => {
    server.child.kill("SIGTERM");
    await server.exited;
  });
  const answer = await get(`${server.url}/whoami`, "127.0.0.2", { "x-forwarded-for": "203.0.113.7", "x-request-id": "edge-1" });
  t.same(JSON.parse(answer.body), { ip: "127.0.0.2" });
  t.match(answer.requestId, UUID);
});

t.test("the setting's forms: true, hops, addresses and ranges; refused with what is expected", async (t) => {
  const trust = (raw: string) => trustFunction(readConfig({ HUB_TRUST_PROXY: raw }, {}).trustProxy);
  t.equal(trust("false"), undefined, "false trusts nobody");
  t.equal(trust("0"), undefined, "0 hops trusts nobody");
  t.ok(trust("true")!("198.51.100.1", 5), "true trusts every peer");
  const oneHop = trust("1")!;
  t.ok(oneHop("198.51.100.1", 0), "1: the peer is trusted");
  t.notOk(oneHop("198.51.100.1", 1), "but not the address it forwards for");
  const ranges = trust("10.0.0.0/8, 192.168.1.5,::1")!;
  t.ok(ranges("10.20.30.40", 0), "a CIDR range");
  t.ok(ranges("::ffff:10.1.2.3", 0), "an IPv4 peer on an IPv6 socket");
  t.ok(ranges("192.168.1.5", 0), "an address");
  t.notOk(ranges("192.168.1.6", 0));
  t.ok(ranges("::1", 0), "an IPv6 address");
  t.ok(trust("loopback")!("127.0.0.1", 0), "loopback, as Fastify names it");
  t.ok(trustFunction(readConfig({}, { trustProxy: ["172.16.0.0/12"] }).trustProxy)!("172.20.0.1", 0), "an array as the option");
  t.equal(readConfig({}, {}).trustProxy, false, "the default trusts nobody");
  t.throws(() => readConfig({ HUB_TRUST_PROXY: "10.0.0.0/40" }, {}), { code: "HUB_CONFIG_INVALID", message: /HUB_TRUST_PROXY is invalid: received "10\.0\.0\.0\/40", expected true, false, a number of hops, or comma-separated IP addresses/ });
  t.throws(() => readConfig({}, { trustProxy: "proxy.example" }), { code: "HUB_OPTION_INVALID", message: /"trustProxy" is invalid: received "proxy\.example"/ });
  t.throws(() => readConfig({}, { trustProxy: -1 }), { code: "HUB_OPTION_INVALID" });
});
