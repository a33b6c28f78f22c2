import "./helpers/env.js";
import net from "node:net";
import t from "tap";
import { startAndListen, type RunningServer } from "@hubpkg/hub";
import type { HubRequest, Response } from "@hubpkg/hub/express";
import { gql } from "./helpers/http.js";
import { makeOperator, makePlayer, withPool, type Player } from "./helpers/credentials.js";
import { tmpDir } from "./helpers/tmp.js";

let hub: RunningServer;
let alice: Player;
let op: Awaited<ReturnType<typeof makeOperator>>;

t.before(async () => {
  hub = await startAndListen({
    port: 0,
    logLevel: "silent",
    handleSignals: false,
    dataDir: tmpDir(t),
    configureApp: (app) => {
      app.get("/whoami", (req: HubRequest, res: Response) => {
        res.json({ kind: req.identity?.kind ?? null });
      });
    },
  });
  alice = await makePlayer(hub.superuserDatabaseUrl, "alice");
  op = await makeOperator(hub.superuserDatabaseUrl);
});
t.teardown(() => hub?.stop());

async function kinds(headers: Record<string, string>): Promise<{ express: unknown; graphql: unknown; statuses: number[] }> {
  const express = await fetch(`${hub.url}/whoami`, { headers });
  const graphql = await gql(hub.url, "{ hubCurrentUser { uname } }", {}, headers);
  return {
    express: ((await express.json()) as { kind: unknown }).kind,
    graphql: graphql.body.data?.hubCurrentUser ?? null,
    statuses: [express.status, graphql.status],
  };
}

t.test("the same identity reaches Express and GraphQL", async (t) => {
  t.same(await kinds(alice.header), { express: "user", graphql: { uname: "alice" }, statuses: [200, 200] });
  t.same(await kinds(op.header), { express: "operator", graphql: null, statuses: [200, 200] });
  t.same(await kinds({}), { express: null, graphql: null, statuses: [200, 200] });
});

t.test("anything but a valid credential is unauthenticated, never a 401 or 5xx from the hub", async (t) => {
  const cases: Record<string, string> = {
    empty: "",
    "prefix only": "session:",
    "apikey prefix only": "apikey:",
    "wrong case": `Session:${alice.token}`,
    "unknown prefix": `bearer:${alice.token}`,
    "Bearer scheme": `Bearer ${alice.token}`,
    "space after colon": `session: ${alice.token}`,
    "trailing garbage": `session:${alice.token} x`,
    "tab inside": `session:${alice.token.slice(0, 5)}\t${alice.token.slice(5)}`,
    "10 KB value": `session:${"a".repeat(10_000)}`,
    "non-ASCII": "session:tökén",
    "SQL metacharacters": "session:' or 1=1; --",
    "session token as an api key": `apikey:${alice.token}`,
    "api key as a session": `session:${op.key}`,
    "unknown token": "session:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
  };
  for (const [name, value] of Object.entries(cases)) {
    t.same(await kinds({ authorization: value }), { express: null, graphql: null, statuses: [200, 200] }, name);
  }
});

t.test("non-UTF-8 bytes in the header over a raw socket", async (t) => {
  const { port } = new URL(hub.url);
  const response = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(Number(port), "127.0.0.1");
    let data = "";
    socket.on("data", (c) => (data += c.toString("latin1")));
    socket.on("end", () => resolve(data));
    socket.on("error", reject);
    socket.write(Buffer.concat([Buffer.from("GET /whoami HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: session:"), Buffer.from([0xff, 0xfe, 0x80]), Buffer.from("\r\n\r\n")]));
  });
  t.match(response, /^HTTP\/1\.1 200/);
  t.match(response, /\{"kind":null\}/);
});

t.test("expired and revoked sessions stop working within 1 s", async (t) => {
  const shortLived = await makePlayer(hub.superuserDatabaseUrl, "bob", { expiresInSeconds: 1 });
  t.same((await kinds(shortLived.header)).express, "user", "valid before expiry");
  await new Promise((r) => setTimeout(r, 1100));
  t.same((await kinds(shortLived.header)).express, null, "refused once expired, even though it was cached");

  const carol = await makePlayer(hub.superuserDatabaseUrl, "carol");
  t.same((await kinds(carol.header)).express, "user");
  await withPool(hub.superuserDatabaseUrl, (pool) => pool.query("update hub.session set revoked_at = now() where id = $1", [carol.sessionId]));
  await new Promise((r) => setTimeout(r, 1100));
  t.same(await kinds(carol.header), { express: null, graphql: null, statuses: [200, 200] }, "revocation honoured within the 1 s cache bound");

  const op2 = await makeOperator(hub.superuserDatabaseUrl);
  t.same((await kinds(op2.header)).express, "operator");
  await withPool(hub.superuserDatabaseUrl, (pool) => pool.query("update hub.api_key set revoked_at = now() where id = $1", [op2.id]));
  await new Promise((r) => setTimeout(r, 1100));
  t.same((await kinds(op2.header)).express, null, "a revoked API key stops working");
});

t.test("the database keeps digests only", async (t) => {
  const rows = await withPool(hub.superuserDatabaseUrl, async (pool) => {
    const s = await pool.query("select encode(token_digest, 'hex') as d from hub.session where id = $1", [alice.sessionId]);
    const k = await pool.query("select encode(key_digest, 'hex') as d from hub.api_key where id = $1", [op.id]);
    return [s.rows[0].d as string, k.rows[0].d as string];
  });
  const { createHash } = await import("node:crypto");
  t.equal(rows[0], createHash("sha256").update(alice.token).digest("hex"));
  t.equal(rows[1], createHash("sha256").update(op.key).digest("hex"));
});
