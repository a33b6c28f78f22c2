import "./helpers/env.js";
import t from "tap";
import WebSocket from "ws";
import { startTestServer, createPlayer, createExperience, createPlayerBalance, type TestServer } from "@hubpkg/hub/test";
import { gql } from "./helpers/http.js";
import { until } from "./helpers/ws.js";

/**
 * One identity policy for HTTP and WebSocket: a socket is re-validated at
 * connection_init (never the upgrade's answer reused), the revocation sweep
 * covers it from the moment it opens, a credential that is not valid is no
 * identity on both, and per-identity counts are kept per player on both.
 */

interface RawSocket {
  ws: WebSocket;
  messages: { type: string; id?: string; payload?: any }[];
  closed: { code: number; reason: string } | undefined;
  opened: Promise<void>;
  send(message: object): void;
}

/** A graphql-transport-ws socket driven by hand, so the test decides when (or whether) connection_init is sent. */
function rawSocket(url: string, headers: Record<string, string> = {}): RawSocket {
  const ws = new WebSocket(`${url.replace(/^http/, "ws")}/graphql`, "graphql-transport-ws", { headers });
  const socket: RawSocket = {
    ws,
    messages: [],
    closed: undefined,
    opened: new Promise((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    }),
    send: (message) => ws.send(JSON.stringify(message)),
  };
  ws.on("message", (data) => socket.messages.push(JSON.parse(String(data))));
  ws.on("close", (code, reason) => (socket.closed = { code, reason: String(reason) }));
  return socket;
}

const LONG_INIT = { websocket: { connectionInitTimeoutMs: 60_000 } };
const WAIT_MS = 10_000;

async function player(server: TestServer, uname: string) {
  const casinoId = server.playgroundCasinoId;
  const user = await createPlayer(server.dbPool, { casinoId, uname });
  const exp = await createExperience(server.dbPool, { casinoId, name: `exp-${uname}` });
  await createPlayerBalance(server.dbPool, { userId: user.id, experienceId: exp.id, currencyKey: "HOUSE", amount: 100 });
  return { userId: user.id, experienceId: exp.id };
}

t.test("one identity policy for HTTP and WebSocket", async (t) => {
  const server = await startTestServer(LONG_INIT);
  t.teardown(() => server.stop());
  const alice = await player(server, "alice");

  t.test("a session logged out before connection_init: the silent socket is closed 4401, never acknowledged", async (t) => {
    const { token } = await server.authenticate(alice.userId, alice.experienceId);
    const s = rawSocket(server.url, { authorization: `session:${token}` });
    t.teardown(() => s.ws.terminate());
    await s.opened;
    const out = await gql(server.url, "mutation { hubLogout { success } }", {}, { authorization: `session:${token}` });
    t.same(out.body, { data: { hubLogout: { success: true } } }, "logged out over HTTP");
    await until(() => s.closed !== undefined, WAIT_MS, () => "the socket of the logged-out session to be closed before it sent connection_init");
    t.match(s.closed, { code: 4401, reason: /revoked or has expired/ });
    t.same(s.messages, [], "nothing was sent to it");
  });

  t.test("connection_init right after the logout: closed 4401, whichever of the sweep and the re-check comes first", async (t) => {
    const { token } = await server.authenticate(alice.userId, alice.experienceId);
    const s = rawSocket(server.url, { authorization: `session:${token}` });
    t.teardown(() => s.ws.terminate());
    await s.opened;
    await gql(server.url, "mutation { hubLogout { success } }", {}, { authorization: `session:${token}` });
    if (s.closed === undefined) s.send({ type: "connection_init" });
    await until(() => s.closed !== undefined, WAIT_MS, () => `the socket to be closed (messages: ${JSON.stringify(s.messages)})`);
    t.match(s.closed, { code: 4401 });
    t.notOk(
      s.messages.some((m) => m.type === "connection_ack"),
      "never acknowledged",
    );
  });

  t.test("an operator key revoked before connection_init: its silent socket is closed 4401", async (t) => {
    const op = await server.authenticateOperator();
    const s = rawSocket(server.url, { authorization: `apikey:${op.apiKey}` });
    t.teardown(() => s.ws.terminate());
    await s.opened;
    await server.dbPool.query("update hub.api_key set revoked_at = now() where id = $1", [op.apiKeyId]);
    await until(() => s.closed !== undefined, WAIT_MS, () => "the socket of the revoked key to be closed before it sent connection_init");
    t.match(s.closed, { code: 4401, reason: /revoked or has expired/ });
  });

  t.test("a credential that is not valid is no identity, over HTTP and WebSocket alike", async (t) => {
    const { token } = await server.authenticate(alice.userId, alice.experienceId);
    await gql(server.url, "mutation { hubLogout { success } }", {}, { authorization: `session:${token}` });
    const stale = `session:${token}`;
    const http = await gql(server.url, "{ hubCurrentUser { uname } }", {}, { authorization: stale });
    t.same({ status: http.status, body: http.body }, { status: 200, body: { data: { hubCurrentUser: null } } }, "HTTP: anonymous");

    for (const [how, headers, params] of [
      ["in connectionParams", {}, { authorization: stale }],
      ["in the upgrade's header (never valid on this socket)", { authorization: stale }, undefined],
      ["malformed, in connectionParams", {}, { authorization: 42 }],
    ] as const) {
      const s = rawSocket(server.url, headers);
      t.teardown(() => s.ws.terminate());
      await s.opened;
      s.send({ type: "connection_init", ...(params ? { payload: params } : {}) });
      await until(() => s.messages.length > 0 || s.closed !== undefined, WAIT_MS, () => `an answer to connection_init (${how})`);
      // graphql-ws closes a socket that subscribes before its acknowledgement: wait for it.
      if (s.messages[0]?.type === "connection_ack") s.send({ id: "1", type: "subscribe", payload: { query: "subscription { hubBalanceAlert { currencyKey } }" } });
      await until(() => s.messages.some((m) => m.id === "1") || s.closed !== undefined, WAIT_MS, () => `an answer to the subscription (${how})`);
      t.equal(s.closed, undefined, `${how}: the socket stays open (${JSON.stringify([s.closed, s.messages])})`);
      t.equal(s.messages[0]?.type, "connection_ack", `${how}: acknowledged, as anonymous`);
      t.match(s.messages[1], { id: "1", type: "next", payload: { errors: [{ extensions: { code: "UNAUTHENTICATED" } }] } }, `${how}: the player's subscription answers UNAUTHENTICATED`);
    }
  });
});

t.test("sockets are counted per player, as HTTP requests are: a second session adds none", async (t) => {
  const server = await startTestServer({ websocket: { connectionsPerIdentity: 2 } });
  t.teardown(() => server.stop());
  const bob = await player(server, "bob");
  const sessions = [await server.authenticate(bob.userId, bob.experienceId), await server.authenticate(bob.userId, bob.experienceId)];
  const sockets = [sessions[0]!, sessions[1]!, sessions[0]!].map(({ token }) => rawSocket(server.url, { authorization: `session:${token}` }));
  t.teardown(() => sockets.forEach((s) => s.ws.terminate()));
  for (const s of sockets) {
    await s.opened;
    s.send({ type: "connection_init" });
    await until(() => s.messages.length > 0 || s.closed !== undefined, WAIT_MS, () => "an answer to connection_init");
  }
  t.equal(sockets[0]!.messages[0]?.type, "connection_ack", "first session: acknowledged");
  t.equal(sockets[1]!.messages[0]?.type, "connection_ack", "second session of the same player: acknowledged");
  await until(() => sockets[2]!.closed !== undefined, WAIT_MS, () => "the third socket of the player to be closed");
  t.match(sockets[2]!.closed, { code: 4429, reason: /this player already holds 2/ }, "a third socket of the player, whichever its session, is refused");
});
