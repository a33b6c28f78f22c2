import "./helpers/env.js";
import t from "tap";
import WebSocket from "ws";
import { startTestServer, createPlayer, createExperience } from "@hubpkg/hub/test";

/** A WebSocket on /graphql, acknowledged (connection_ack) with the upgrade's Authorization header as its credential. */
async function acknowledgedSocket(url: string, authorization: string): Promise<WebSocket> {
  const ws = new WebSocket(`${url.replace(/^http/, "ws")}/graphql`, "graphql-transport-ws", { headers: { authorization } });
  await new Promise<void>((resolve, reject) => {
    ws.once("error", reject);
    ws.once("close", (code, reason) => reject(new Error(`closed ${code} ${reason.toString()}`)));
    ws.once("open", () => ws.send(JSON.stringify({ type: "connection_init" })));
    ws.on("message", (data) => {
      if ((JSON.parse(data.toString()) as { type: string }).type === "connection_ack") resolve();
    });
  });
  return ws;
}

t.test("an open WebSocket does not hold one of its identity's requests in progress", async (t) => {
  // One request in progress per identity at most: a socket holding it would refuse every HTTP request of its player.
  const server = await startTestServer({ perIdentityConnections: 1, perIdentityQueue: 0 });
  t.teardown(() => server.stop());
  const casinoId = server.playgroundCasinoId;
  const user = await createPlayer(server.dbPool, { casinoId, uname: "wendy" });
  const exp = await createExperience(server.dbPool, { casinoId, name: "e" });
  const { token } = await server.authenticate(user.id, exp.id);
  const authorization = `session:${token}`;
  const ask = async () => {
    const res = await fetch(`${server.url}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization },
      body: JSON.stringify({ query: "{ hubCurrentUser { uname } }" }),
    });
    return { status: res.status, body: (await res.json()) as unknown };
  };

  const first = await acknowledgedSocket(server.url, authorization);
  t.same(await ask(), { status: 200, body: { data: { hubCurrentUser: { uname: "wendy" } } } }, "an HTTP request while one socket is open");
  const second = await acknowledgedSocket(server.url, authorization);
  t.pass("a second socket's upgrade was admitted while the first is open");
  t.same(await ask(), { status: 200, body: { data: { hubCurrentUser: { uname: "wendy" } } } }, "an HTTP request while two sockets are open");

  const closed = Promise.all([first, second].map((ws) => new Promise((resolve) => ws.once("close", resolve))));
  first.close();
  second.close();
  await closed;
  t.same(await ask(), { status: 200, body: { data: { hubCurrentUser: { uname: "wendy" } } } }, "and after they closed");
});
