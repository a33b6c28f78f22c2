/**
 * One expiry policy: an open socket is held to its credential's current
 * validity, on every instance. Two in-process hubs on one database, real
 * HTTP and WebSocket; expiry and revocation are changed by plain SQL, as an
 * operator's tool or a casino's logout would.
 */
import "./helpers/env.js";
import t from "tap";
import type * as Tap from "tap";
import pg from "pg";
import { startAndListen } from "@hubpkg/hub";
import { createPlayerBalance } from "../dist/src/exports/test.js";
import { gql } from "./helpers/http.js";
import { connected, feed, until, wsClient } from "./helpers/ws.js";
import { makeOperator, makePlayer } from "./helpers/credentials.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";

// A long identity cache: any refusal before it ages out comes from the policy, not from the cache.
const base = { port: 0, logLevel: "silent" as const, handleSignals: false, identityCacheTtlMs: 60_000 };
const BALANCE = "subscription { hubBalanceAlert { currencyKey } }";
const WAIT_MS = 15_000;

let url: string;
let pool: pg.Pool;
let hubs: { url: string; stop(): Promise<void> }[] = [];

t.before(async () => {
  const db = await sharedClusterDatabase(t);
  url = db.SUPERUSER_DATABASE_URL;
  const options = { ...base, databaseUrl: db.DATABASE_URL, superuserDatabaseUrl: db.SUPERUSER_DATABASE_URL };
  hubs = [await startAndListen(options), await startAndListen(options)];
  pool = new pg.Pool({ connectionString: url, max: 2 });
  // The database is dropped at the end, idle connections included.
  pool.on("error", () => undefined);
});
t.teardown(async () => {
  await pool?.end();
  for (const hub of hubs.reverse()) await hub.stop();
});

async function currentUser(hubUrl: string, header: Record<string, string>): Promise<unknown> {
  const out = await gql(hubUrl, "{ hubCurrentUser { id } }", {}, header);
  if (out.status !== 200 || out.body.errors) throw new Error(`unexpected answer ${out.status} ${JSON.stringify(out.body)}`);
  return out.body.data?.hubCurrentUser ?? null;
}

/** A player with a HOUSE balance and a balance subscription on each hub, each seen to deliver one alert. */
async function subscribedPlayer(t: Tap.Test, uname: string) {
  const player = await makePlayer(url, uname);
  await createPlayerBalance(pool, { userId: player.userId, experienceId: player.experienceId, currencyKey: "HOUSE", amount: 100 });
  const sockets = hubs.map(() => ({ closes: [] as { code: number; reason: string }[] }));
  const feeds = await Promise.all(
    hubs.map(async (hub, i) => {
      const client = wsClient(hub.url, { authorization: player.header.authorization }, { closes: sockets[i]!.closes });
      t.teardown(() => client.dispose());
      const ready = connected(client);
      const f = feed(client, BALANCE);
      await ready;
      return f;
    }),
  );
  // The subscriptions are in place once a change reaches both.
  for (let n = 1; !feeds.every((f) => f.events.length > 0); n++) {
    if (n > 50) throw new Error("no balance alert reached both subscriptions");
    await pool.query("update hub.balance set amount = amount + 1 where user_id = $1", [player.userId]);
    await until(() => feeds.every((f) => f.events.length > 0), 300, () => "").catch(() => undefined);
  }
  return { player, sockets, feeds };
}

t.test("an expiry moved earlier by SQL closes the session's sockets on both instances when it passes, as HTTP refuses it", async (t) => {
  const { player, sockets, feeds } = await subscribedPlayer(t, "moved-earlier");
  for (const hub of hubs) t.ok(await currentUser(hub.url, player.header), "HTTP accepts the session (and caches it for 60 s)");

  await pool.query("update hub.session set expired_at = now() + interval '2 seconds' where id = $1", [player.sessionId]);
  await until(() => sockets.every((s) => s.closes.length > 0), WAIT_MS, () => `both sockets to close (closes ${JSON.stringify(sockets)})`);
  for (const [i, s] of sockets.entries()) t.match(s.closes[0], { code: 4401, reason: /expired|revoked/ }, `hub ${i}: closed as unauthorised`);
  for (const [i, hub] of hubs.entries()) t.equal(await currentUser(hub.url, player.header), null, `hub ${i}: HTTP refuses the session too`);

  const seen = feeds.map((f) => f.events.length);
  await pool.query("update hub.balance set amount = amount + 1 where user_id = $1", [player.userId]);
  // Another player's alert on the same instances shows the change was announced.
  const witness = await subscribedPlayer(t, "witness");
  t.same(feeds.map((f) => f.events.length), seen, "no event reached the closed sockets");
  t.ok(witness.feeds.every((f) => f.events.length > 0));
});

t.test("an expiry moved into the past, or a revocation by SQL, closes the sockets on both instances", async (t) => {
  for (const [what, sql] of [
    ["expired_at in the past", "update hub.session set expired_at = now() - interval '1 second' where id = $1"],
    ["revoked_at set", "update hub.session set revoked_at = now() where id = $1"],
    ["the session deleted", "delete from hub.session where id = $1"],
    ["the session's digest changed (its key no longer names it)", "update hub.session set token_digest = sha256(token_digest) where id = $1"],
  ] as const) {
    const { player, sockets } = await subscribedPlayer(t, `past-${what.length}-${Date.now()}`);
    await pool.query(sql, [player.sessionId]);
    await until(() => sockets.every((s) => s.closes.length > 0), WAIT_MS, () => `${what}: both sockets to close (closes ${JSON.stringify(sockets)})`);
    for (const s of sockets) t.match(s.closes[0], { code: 4401 }, `${what}: closed 4401`);
    for (const hub of hubs) t.equal(await currentUser(hub.url, player.header), null, `${what}: HTTP refuses it`);
  }
});

t.test("an expiry moved later keeps the socket open past the old expiry", async (t) => {
  const player = await makePlayer(url, "extended", { expiresInSeconds: 3 });
  const closes: { code: number; reason: string }[] = [];
  const client = wsClient(hubs[1]!.url, { authorization: player.header.authorization }, { closes });
  t.teardown(() => client.dispose());
  const ready = connected(client);
  feed(client, BALANCE);
  await ready;
  await pool.query("update hub.session set expired_at = now() + interval '1 hour' where id = $1", [player.sessionId]);
  // Past the original expiry: HTTP still accepts it, and the socket is still open.
  const { rows } = await pool.query<{ wait: number }>("select extract(epoch from (now() + interval '4 seconds')) * 1000 as wait");
  await until(() => Date.now() > Number(rows[0]!.wait), 10_000, () => "the original expiry to pass");
  t.ok(await currentUser(hubs[1]!.url, player.header), "HTTP accepts the extended session");
  // A revocation of another credential runs the sweep; this socket must survive it.
  const other = await makeOperator(url);
  await pool.query("update hub.api_key set revoked_at = now() where id = $1", [other.id]);
  t.ok(await currentUser(hubs[1]!.url, player.header));
  t.same(closes, [], "the socket is still open");
});

t.test("TRUNCATE of the API keys closes every operator socket on both instances", async (t) => {
  const operator = await makeOperator(url);
  const closes = hubs.map(() => [] as { code: number; reason: string }[]);
  await Promise.all(
    hubs.map(async (hub, i) => {
      const client = wsClient(hub.url, { authorization: operator.header.authorization }, { closes: closes[i]! });
      t.teardown(() => client.dispose());
      const ready = connected(client);
      feed(client, "subscription { hubBetAlert { __typename } }");
      await ready;
    }),
  );
  for (const hub of hubs) t.ok(await isOperator(hub.url, operator.header), "HTTP accepts the key (and caches it for 60 s)");
  await pool.query("truncate hub.api_key");
  await until(() => closes.every((c) => c.length > 0), WAIT_MS, () => `both operator sockets to close (${JSON.stringify(closes)})`);
  for (const c of closes) t.match(c[0], { code: 4401 });
  for (const hub of hubs) t.notOk(await isOperator(hub.url, operator.header), "HTTP refuses it too");
});

async function isOperator(hubUrl: string, header: Record<string, string>): Promise<boolean> {
  // Anonymous requests see no hub rows; an operator sees every casino (the playground one at least).
  const out = await gql(hubUrl, "{ allHubCasinos { totalCount } }", {}, header);
  if (out.body.errors) throw new Error(JSON.stringify(out.body.errors));
  return (out.body.data?.allHubCasinos as { totalCount: number }).totalCount > 0;
}
