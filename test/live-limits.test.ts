import "./helpers/env.js";
import t from "tap";
import net from "node:net";
import path from "node:path";
import WebSocket from "ws";
import { defaultPlugins, serverStats, type ServerStats } from "@hubpkg/hub";
import { extendSchema, gql as graphql } from "@hubpkg/hub/graphile";
import { access, context, lambda, listen } from "@hubpkg/hub/grafast";
import { startTestServer, createPlayer, createExperience } from "@hubpkg/hub/test";
import { connected, feed, live, sleep, until, wsClient } from "./helpers/ws.js";
import { tmpDir, writeFiles } from "./helpers/tmp.js";

// A plugin's own subscription, written as a user writes it: a NOTIFY from the plugin's table feeds it.
const ChatPlugin = extendSchema((build) => {
  const users = build.input.pgRegistry.pgResources.hub_user!;
  return {
    typeDefs: graphql`
      type ChatMessage { id: Int!, body: String!, "The user the message is about, as the subscriber may see it." about: HubUser }
      extend type Subscription { chatMessage: ChatMessage }
    `,
    objects: {
      Subscription: {
        plans: {
          chatMessage: {
            subscribePlan: () => listen(context().get("pgSubscriber"), "app_chat", ($payload) => lambda($payload, (text) => JSON.parse(text as string))),
            plan: ($message: any) => $message,
          },
        },
      },
      ChatMessage: {
        plans: {
          // Read under the subscriber's row-level security settings, per event.
          about: ($message: any) => users.get({ id: access($message, "userId") }),
        },
      },
    },
  };
}, "ChatPlugin");

const CHAT_MIGRATION = `
create schema if not exists app;
create table app.chat (id serial primary key, body text not null, user_id uuid);
create function app.notify_chat() returns trigger language plpgsql as $$
begin
  perform pg_notify('app_chat', json_build_object('id', new.id, 'body', new.body, 'userId', new.user_id)::text);
  return null;
end $$;
create trigger chat_notify after insert on app.chat for each row execute function app.notify_chat();
`;

const BALANCE = "subscription { hubBalanceAlert { currencyKey } }";

/** A raw WebSocket on the GraphQL path; resolves once open. */
function rawSocket(url: string, options: WebSocket.ClientOptions = {}, pathName = "/graphql"): Promise<WebSocket> {
  const ws = new WebSocket(`${url.replace(/^http/, "ws")}${pathName}`, "graphql-transport-ws", options);
  return new Promise((resolve, reject) => {
    ws.once("open", () => resolve(ws));
    ws.once("error", reject);
  });
}
/** The socket's close, when it comes; fails after a generous 30 s (a bound on the wait, not a speed requirement). */
const closeOf = (ws: WebSocket) =>
  new Promise<{ code: number; reason: string; at: number }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the server did not close the socket within 30 s")), 30_000);
    ws.once("close", (code, reason) => {
      clearTimeout(timer);
      resolve({ code, reason: reason.toString(), at: Date.now() });
    });
  });

t.test("WebSocket limits, other paths, the Express app, and a plugin's subscription", async (t) => {
  const seenByExpress: string[] = [];
  const server = await startTestServer({
    plugins: [...defaultPlugins, ChatPlugin],
    userDatabaseMigrationsPath: writeFiles(path.join(tmpDir(t), "m"), { "001-chat.sql": CHAT_MIGRATION }),
    websocket: { connectionInitTimeoutMs: 300, maxOperations: 2, maxMessageBytes: 4096, keepAliveMs: 300, connectionsPerIdentity: 2 },
    configureApp: (app) => {
      // Before the middleware that records what Express saw: reading the counters is not one of the requests under test.
      app.get("/stats", (req, res) => res.json(serverStats(req).requests));
      app.use((req, _res, next) => {
        seenByExpress.push(req.url);
        next();
      });
      app.get("/bets", (_req, res) => res.json([]));
    },
  });
  t.teardown(() => server.stop());
  const casinoId = server.playgroundCasinoId;
  const user = await createPlayer(server.dbPool, { casinoId, uname: "erin" });
  const exp = await createExperience(server.dbPool, { casinoId, name: "e" });
  const { token } = await server.authenticate(user.id, exp.id);
  const auth = { authorization: `session:${token}` };

  t.test("a plugin's subscription fed by NOTIFY from its table, read under the subscriber's row-level security", async (t) => {
    const other = await createPlayer(server.dbPool, { casinoId, uname: "mallory" });
    const c = wsClient(server.url, auth);
    const anon = wsClient(server.url);
    t.teardown(() => Promise.all([c.dispose(), anon.dispose()]));
    const q = "subscription { chatMessage { id body about { uname } } }";
    const f = feed(c, q);
    const fa = feed(anon, q);
    await Promise.all([connected(c), connected(anon)]);
    // Live once each has announced a probe message; the probes are left out of what is compared.
    const probe = () => server.dbPool.query("insert into app.chat (body, user_id) values ('probe', $1)", [user.id]);
    await live(f, probe, "erin's chat subscription");
    await live(fa, probe, "the anonymous chat subscription");
    const { rows } = await server.dbPool.query<{ id: number }>("insert into app.chat (body, user_id) values ('hello', $1), ('world', $2) returning id", [user.id, other.id]);
    const [hello, world] = rows.map((r) => r.id);
    const said = (of: typeof f) => of.events.filter((e) => (e.data as { chatMessage: { body: string } }).chatMessage.body !== "probe");
    await until(() => said(f).length >= 2 && said(fa).length >= 2, 30_000, () => `the two messages on both subscriptions (erin: ${JSON.stringify(f.events)}; anonymous: ${JSON.stringify(fa.events)})`);
    t.same(said(f), [
      { data: { chatMessage: { id: hello, body: "hello", about: { uname: "erin" } } } },
      { data: { chatMessage: { id: world, body: "world", about: null } } },
    ], "erin sees her own user row, not mallory's");
    t.same(said(fa), [
      { data: { chatMessage: { id: hello, body: "hello", about: null } } },
      { data: { chatMessage: { id: world, body: "world", about: null } } },
    ], "an anonymous subscriber sees no user row");
  });

  t.test("connection-init timeout: a socket that never sends connection_init is closed with 4408", async (t) => {
    const ws = await rawSocket(server.url);
    const opened = Date.now();
    const { code, at } = await closeOf(ws);
    t.equal(code, 4408);
    t.ok(at - opened >= 250, `not before the limit (300 ms): closed after ${at - opened} ms`);
  });

  t.test("operations per connection: one more than the limit is refused with TOO_MANY_OPERATIONS", async (t) => {
    const c = wsClient(server.url, auth);
    t.teardown(() => c.dispose());
    const f1 = feed(c, BALANCE);
    const f2 = feed(c, BALANCE);
    // graphql-ws counts an operation as its subscribe message arrives, and a socket's messages arrive in order.
    const f3 = feed(c, BALANCE);
    await f3.ended();
    t.match(f3.errors[0], [{ message: /Too many operations on this connection: 2 are running \(at most 2\)/, extensions: { code: "TOO_MANY_OPERATIONS" } }]);
    t.same([f1.errors, f2.errors], [[], []], "the first two still run");
  });

  t.test("message size: a message over the limit closes the connection with 1009", async (t) => {
    const ws = await rawSocket(server.url);
    const closed = closeOf(ws);
    ws.send(JSON.stringify({ type: "connection_init", payload: auth }));
    ws.send(JSON.stringify({ id: "1", type: "subscribe", payload: { query: `subscription { hubBalanceAlert { currencyKey } } # ${"x".repeat(5000)}` } }));
    t.equal((await closed).code, 1009);
  });

  // The tests below that count connections per credential each take a session of their own: a socket another test
  // closed may still be counted for a moment, until the server has seen it go.
  const ownSession = async () => ({ authorization: `session:${(await server.authenticate(user.id, exp.id)).token}` });

  t.test("keep-alive: a peer that answers no ping is cut; one that does stays", async (t) => {
    const own = await ownSession();
    const dead = await rawSocket(server.url, { autoPong: false });
    const alive = await rawSocket(server.url);
    let aliveClosed: number | undefined;
    alive.once("close", (code) => (aliveClosed = code));
    for (const ws of [dead, alive]) ws.send(JSON.stringify({ type: "connection_init", payload: own }));
    const opened = Date.now();
    const { code, at } = await closeOf(dead);
    t.equal(code, 1006, `the silent peer was terminated after ${at - opened} ms (a ping every 300 ms; a peer silent since the previous one is cut: 300–600 ms)`);
    await sleep(700);
    t.equal(alive.readyState, WebSocket.OPEN, `the answering peer is still connected (closed with: ${aliveClosed ?? "none"})`);
    alive.close();
  });

  t.test("keep-alive: a peer whose answer waits behind a busy server is not cut", async (t) => {
    const own = await ownSession();
    const ws = await rawSocket(server.url);
    let closedWith: number | undefined;
    ws.once("close", (code) => (closedWith = code));
    ws.send(JSON.stringify({ type: "connection_init", payload: own }));
    // Client and server share this process: blocking it right after the client answered a ping leaves that answer
    // unread by the server until after its next keep-alive round, which comes late.
    const blocked = new Promise<void>((resolve) =>
      ws.once("ping", () => {
        const end = Date.now() + 800;
        while (Date.now() < end);
        resolve();
      }),
    );
    await blocked;
    await sleep(900);
    t.equal(closedWith, undefined, "still connected after the server's late round and the ones after it");
    t.equal(ws.readyState, WebSocket.OPEN);
    ws.close();
  });

  t.test("connections per identity: one more than the limit closes with 4429", async (t) => {
    const closes: { code: number; reason: string }[] = [];
    const own = await ownSession();
    const clients = [0, 1, 2].map(() => wsClient(server.url, own, { closes }));
    t.teardown(() => Promise.all(clients.map((c) => c.dispose())));
    const feeds = [];
    for (const c of clients) {
      feeds.push(feed(c, BALANCE));
      // One after another: the connection holds its slot once acknowledged (the third is refused instead).
      await connected(c).catch(() => undefined);
    }
    await until(() => closes.length > 0, 30_000, () => "nothing closed");
    t.match(closes, [{ code: 4429, reason: /Too many connections: this player already holds 2 \(at most 2\)/ }]);
    t.same(feeds.slice(0, 2).map((f) => f.errors), [[], []], "the first two connections are untouched");
  });

  t.test("a peer that leaves while its credential is being checked gives its slot back", async (t) => {
    const own = await ownSession();
    // Hold the credential check: a lock on the sessions table keeps the lookup waiting until the peer has gone.
    const locker = await server.dbPool.connect();
    // Should the test stop half-way, the lock must not go back to the pool with its connection.
    t.teardown(() => locker.query("rollback").finally(() => locker.release()));
    await locker.query("begin");
    await locker.query("lock table hub.session in access exclusive mode");
    const ws = await rawSocket(server.url);
    ws.send(JSON.stringify({ type: "connection_init", payload: own }));
    const waiting = async () =>
      (await server.dbPool.query("select count(*)::int as n from pg_locks where not granted and relation = 'hub.session'::regclass")).rows[0].n > 0;
    for (let i = 0; i < 300 && !(await waiting()); i++) await sleep(10);
    t.ok(await waiting(), "the credential check is waiting on the lock");
    ws.terminate();
    await closeOf(ws);
    await sleep(200);
    await locker.query("commit");
    await sleep(200);

    const closes: { code: number; reason: string }[] = [];
    const clients = [0, 1].map(() => wsClient(server.url, own, { closes }));
    t.teardown(() => Promise.all(clients.map((c) => c.dispose())));
    const feeds = clients.map((c) => feed(c, BALANCE));
    // Acknowledged: a connection over the limit is closed before its acknowledgement.
    await Promise.all(clients.map((c) => connected(c)));
    t.same(closes, [], "both connections the limit allows are accepted");
    t.same(feeds.map((f) => f.errors), [[], []]);
  });

  t.test("upgrades on other paths are refused with 404 before any route runs; Express never sees an upgrade", async (t) => {
    for (const p of ["/bets", "/nowhere"]) {
      const ws = new WebSocket(`${server.url.replace(/^http/, "ws")}${p}`, "graphql-transport-ws");
      const status = await new Promise<number>((resolve, reject) => {
        ws.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
        ws.once("open", () => reject(new Error(`upgraded on ${p}`)));
      });
      t.equal(status, 404, `${p}: 404`);
    }
    t.same(seenByExpress, [], "the Express app saw none of the upgrades, /graphql ones included");
    const res = await fetch(`${server.url}/bets`);
    t.equal(res.status, 200);
    t.same(seenByExpress, ["/bets"], "while it does see its plain requests");

    // An Upgrade header that is not WebSocket's (h2c): answered as the plain request it also is.
    const counted = async () => (await (await fetch(`${server.url}/stats`)).json()) as ServerStats["requests"];
    const before = await counted();
    const { port } = new URL(server.url);
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(port), "127.0.0.1", () =>
        socket.write("GET /bets HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n"),
      );
      let text = "";
      socket.on("data", (chunk) => (text += chunk.toString()));
      socket.once("end", () => resolve(text));
      socket.once("error", reject);
    });
    t.match(raw, /^HTTP\/1\.1 200 /, "an h2c upgrade is answered as plain HTTP, without upgrading");
    t.match(raw, /\r\n\r\n\[\]$/, "by the Express route");
    t.same(seenByExpress, ["/bets", "/bets"], "which the Express app sees as a plain request");
    const after = await counted();
    // The first /stats read, then the h2c request: both the Express app's, both 200.
    t.same(
      { total: after.total - before.total, express: after.express - before.express, status2xx: after.status2xx - before.status2xx },
      { total: 2, express: 2, status2xx: 2 },
      "and serverStats counts it once, as the Express app's",
    );

    // Peers that reset the connection right after asking: refused (404) or still being checked (a credential). None may
    // become an uncaught socket error; the server keeps answering.
    const resetAfterAsking = (pathName: string, extra = "") =>
      new Promise<void>((resolve) => {
        const socket = net.connect(Number(port), "127.0.0.1", () => {
          socket.write(
            `GET ${pathName} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n${extra}\r\n`,
            () => socket.resetAndDestroy(),
          );
        });
        socket.once("close", () => resolve());
        socket.on("error", () => undefined);
      });
    await Promise.all(Array.from({ length: 40 }, (_, i) => resetAfterAsking(i % 2 === 0 ? "/nowhere" : "/graphql", `Authorization: session:not-a-real-key-${i}\r\n`)));
    t.equal((await fetch(`${server.url}/bets`)).status, 200, "after 40 peers reset mid-upgrade, the server still answers");
  });
});
