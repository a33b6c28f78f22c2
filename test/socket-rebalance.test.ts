/**
 * The socket rebalance: instances sharing a database record their socket
 * counts (hub_hidden.instance), and one holding more than its share closes
 * the excess with 1013, oldest first; graphql-ws clients reconnect, here to
 * the other instance (what a proxy balancing by least connections does).
 * Two in-process servers on one database, real WebSockets.
 */
import "./helpers/env.js";
import t from "tap";
import WebSocket from "ws";
import { createClient, type Client } from "graphql-ws";
import { startAndListen } from "@hubpkg/hub";
import { startTestServer } from "@hubpkg/hub/test";
import { targetOf } from "../dist/src/live/rebalance.js";
import { until } from "./helpers/ws.js";

t.test("targetOf: the share to come down to, only when holding too much or another instance too little", async (t) => {
  t.equal(targetOf(10, { instances: 0, sockets: 0, fewest: 0 }, 1.5), Infinity, "alone: nothing to move");
  t.equal(targetOf(8, { instances: 1, sockets: 0, fewest: 0 }, 1.5), 4, "8 and 0: down to 4");
  t.equal(targetOf(5, { instances: 1, sockets: 3, fewest: 3 }, 1.5), Infinity, "5 and 3: within the share's bounds");
  t.equal(targetOf(11, { instances: 2, sockets: 11, fewest: 1 }, 1.5), 8, "11, 10 and 1 (a rolling restart): the full ones come down to 8");
  t.equal(targetOf(10, { instances: 2, sockets: 12, fewest: 1 }, 1.5), 8);
  t.equal(targetOf(1, { instances: 2, sockets: 21, fewest: 10 }, 1.5), Infinity, "the empty one sheds nothing");
  t.equal(targetOf(2, { instances: 1, sockets: 1, fewest: 1 }, 1.5), Infinity, "2 and 1: as even as it gets");
});

const REBALANCE = { heartbeatMs: 200, maxShare: 1.5, closePerSecond: 50 };
const SOCKETS = 8;

t.test("two instances on one database: sockets all opened on one move until each holds between half and twice its share", async (t) => {
  const a = await startTestServer({ socketRebalance: REBALANCE });
  t.teardown(() => a.stop());
  const b = await startAndListen({ port: 0, logLevel: "silent", handleSignals: false, databaseUrl: a.databaseUrl, superuserDatabaseUrl: a.superuserDatabaseUrl, socketRebalance: REBALANCE });
  t.teardown(() => b.stop());
  const ws = (url: string) => `${url.replace(/^http/, "ws")}/graphql`;

  // Each client connects to A first; once closed, it reconnects to B.
  const on = new Map<Client, string>();
  const closes: number[] = [];
  const clients: Client[] = [];
  for (let i = 0; i < SOCKETS; i++) {
    let attempts = 0;
    const client: Client = createClient({
      url: () => (attempts++ === 0 ? ws(a.url) : ws(b.url)),
      webSocketImpl: WebSocket,
      lazy: false,
      retryAttempts: 5,
      retryWait: () => new Promise((r) => setTimeout(r, 50)),
      onNonLazyError: () => undefined,
      on: {
        connected: (socket) => void on.set(client, (socket as WebSocket).url),
        closed: (event) => {
          on.delete(client);
          closes.push((event as { code: number }).code);
        },
      },
    });
    clients.push(client);
  }
  let disposed = false;
  const dispose = async () => {
    if (disposed) return;
    disposed = true;
    await Promise.all(clients.map((c) => c.dispose()));
  };
  t.teardown(dispose);
  const count = (url: string) => [...on.values()].filter((u) => u === ws(url)).length;
  await until(() => count(a.url) === SOCKETS, 30_000, () => `every client connected to A (${count(a.url)})`);

  const share = SOCKETS / 2;
  const balanced = () => on.size === SOCKETS && [count(a.url), count(b.url)].every((n) => n >= share / 2 && n <= share * 2);
  await until(balanced, 30_000, () => `each instance to hold between ${share / 2} and ${share * 2} sockets (A ${count(a.url)}, B ${count(b.url)}, connected ${on.size})`);
  t.pass(`balanced: A ${count(a.url)}, B ${count(b.url)}`);
  t.ok(closes.length > 0 && closes.every((code) => code === 1013), `the sockets moved were closed with 1013, which the client reconnects on (${closes.join(", ")})`);

  await dispose();
  const rows = async () => (await a.dbPool.query<{ n: number }>("select count(*)::int as n from hub_hidden.instance")).rows[0]!.n;
  t.equal(await rows(), 2, "each instance has its row");
  await b.stop();
  t.equal(await rows(), 1, "a clean stop removes the instance's row");
});
