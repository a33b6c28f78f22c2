import "./helpers/env.js";
import t from "tap";
import WebSocket from "ws";
import { startTestServer, createExperience, createPlayerBalance, createCurrency, type TestServer } from "@hubpkg/hub/test";
import { gql } from "./helpers/http.js";
// Internal helper (not a public sub-path): a session with a short life.
import { createSession } from "../dist/src/auth/credentials.js";
import { connected, feed, live, sleep, until, wsClient, type Feed } from "./helpers/ws.js";
import { livePlayer, type LivePlayer } from "./helpers/live-player.js";

const BALANCE = "subscription { hubBalanceAlert { currencyKey } }";

type PlayerCtx = LivePlayer;
const player = (server: TestServer, uname: string, experienceId?: string): Promise<PlayerCtx> =>
  livePlayer(server, uname, { amount: 1000, ...(experienceId === undefined ? {} : { experienceId }) });

const credit = (server: TestServer, p: PlayerCtx, amount = 5, currencyKey = "HOUSE") =>
  server.dbPool.query("update hub.balance set amount = amount + $4 where user_id = $1 and casino_id = $2 and experience_id = $3 and currency_key = $5", [
    p.userId,
    p.casinoId,
    p.experienceId,
    amount,
    currencyKey,
  ]);

const HOUSE_ALERT = { data: { hubBalanceAlert: { currencyKey: "HOUSE" } } };
const BTC_ALERT = { data: { hubBalanceAlert: { currencyKey: "BTC" } } };

/** A deposit notification for `p`, as the transfer worker sends one. */
const putAlert = (server: TestServer, p: PlayerCtx, mpTransferId: string) =>
  server.dbPool.query(
    "select pg_notify('hub_put_alert', json_build_object('userId', $1::uuid, 'casinoId', $2::uuid, 'experienceId', $3::uuid, 'currencyKey', 'HOUSE', 'mpTransferId', $4::text)::text)",
    [p.userId, p.casinoId, p.experienceId, mpTransferId],
  );

let betCount = 0;
/** A bet of `p` in the ledger: one row changing their HOUSE balance by `delta`; returns the bet's id. */
async function ledgerBet(server: TestServer, p: PlayerCtx, delta: number): Promise<string> {
  const betId = `01900000-0000-7000-9000-${String(++betCount).padStart(12, "0")}`;
  const client = await server.dbPool.connect();
  try {
    await client.query("begin");
    await client.query("select hub_hidden.ledger_begin('test', 'test:bets', 'probe bet', $1)", [betId]);
    await client.query("update hub.balance set amount = amount + $3 where user_id = $1 and experience_id = $2 and currency_key = 'HOUSE'", [p.userId, p.experienceId, delta]);
    await client.query("commit");
  } finally {
    client.release();
  }
  return betId;
}

const betIds = (f: Feed, from = 0) => f.events.slice(from).map((e) => (e.data as { hubBetAlert: { betId: string } }).hubBetAlert.betId);

t.test("live updates over one hub", async (t) => {
  const server = await startTestServer();
  t.teardown(() => server.stop());
  const alice = await player(server, "alice");
  const bob = await player(server, "bob");
  // alice again, in another experience: her session there must not hear about this one.
  const otherExp = (await createExperience(server.dbPool, { casinoId: alice.casinoId, name: "elsewhere" })).id;
  await createPlayerBalance(server.dbPool, { userId: alice.userId, experienceId: otherExp, currencyKey: "HOUSE", amount: 10 });
  const aliceElsewhere = (await server.authenticate(alice.userId, otherExp)).token;
  const aliceThere: PlayerCtx = { ...alice, experienceId: otherExp };
  // A second currency of alice's: a change of it is announced while a HOUSE change waits in an open transaction.
  await createCurrency(server.dbPool, { casinoId: alice.casinoId, key: "BTC" });
  await createPlayerBalance(server.dbPool, { userId: alice.userId, experienceId: alice.experienceId, currencyKey: "BTC", amount: 3 });

  t.test("hubBalanceAlert: committed changes only, to their player only, whatever made them", async (t) => {
    const a = wsClient(server.url, { authorization: `session:${alice.token}` });
    const b = wsClient(server.url, { authorization: `session:${bob.token}` });
    const a2 = wsClient(server.url, { authorization: `session:${aliceElsewhere}` });
    t.teardown(() => Promise.all([a.dispose(), b.dispose(), a2.dispose()]));
    const fa = feed(a, BALANCE);
    const fb = feed(b, BALANCE);
    const fa2 = feed(a2, BALANCE);
    await Promise.all([connected(a), connected(b), connected(a2)]).catch(() => undefined);
    // Bob's and alice's other session first: alice's changes from here on must not reach them.
    const b0 = await live(fb, () => credit(server, bob), "bob's balance alerts");
    const c0 = await live(fa2, () => credit(server, aliceThere), "alice's balance alerts in the other experience");
    const a0 = await live(fa, () => credit(server, alice), "alice's balance alerts");

    // A transaction: nothing before its commit, one alert after it (two changes of one currency fold into one).
    const client = await server.dbPool.connect();
    try {
      await client.query("begin");
      await client.query("update hub.balance set amount = amount + 1 where user_id = $1 and experience_id = $2 and currency_key = 'HOUSE'", [alice.userId, alice.experienceId]);
      await client.query("update hub.balance set amount = amount + 1 where user_id = $1 and experience_id = $2 and currency_key = 'HOUSE'", [alice.userId, alice.experienceId]);
      // Committed meanwhile, and announced: alerts come in commit order, so one of the open transaction would have come first.
      await credit(server, alice, 1, "BTC");
      t.same((await fa.waitFor(a0 + 1)).slice(a0), [BTC_ALERT], "nothing of the open transaction is announced before its commit");
      await client.query("commit");
    } finally {
      client.release();
    }
    t.same((await fa.waitFor(a0 + 2)).slice(a0 + 1), [HOUSE_ALERT], "one alert after the commit");

    // Rolled back: nothing.
    await server.dbPool.query("begin; update hub.balance set amount = amount + 1 where user_id = '" + alice.userId + "'; rollback;");
    // An operator mutation through GraphQL.
    const op = await server.authenticateOperator();
    await op.graphqlClient.request(
      "mutation($i: HubBalanceChangeInput!) { hubCreditBalance(input: $i) { amount } }",
      { i: { userId: alice.userId, experienceId: alice.experienceId, currencyKey: "HOUSE", amount: 7, reason: "goodwill" } },
    );
    // The last change, so everything before it has been announced by the time it is.
    await credit(server, alice, 1, "BTC");
    t.same((await fa.waitFor(a0 + 4)).slice(a0 + 2), [HOUSE_ALERT, BTC_ALERT], "the rolled-back change announced nothing; the operator credit one alert");
    await credit(server, bob);
    t.same((await fb.waitFor(b0 + 1)).slice(b0), [HOUSE_ALERT], "bob heard nothing of alice's balance, then his own credit");
    await credit(server, aliceThere);
    t.same((await fa2.waitFor(c0 + 1)).slice(c0), [HOUSE_ALERT], "alice's session in another experience heard nothing of this one's");
  });

  t.test("identity: the upgrade's Authorization header works too; none or a bad one is anonymous", async (t) => {
    const byHeader = wsClient(server.url, undefined, { headers: { authorization: `session:${bob.token}` } });
    t.teardown(() => byHeader.dispose());
    const f = feed(byHeader, BALANCE);
    await connected(byHeader);
    await live(f, () => credit(server, bob), "bob's balance alerts on the socket authenticated by its upgrade header");
    t.same(f.events[0], HOUSE_ALERT, "an alert reached the socket authenticated by its upgrade header");

    const anonymous = wsClient(server.url);
    t.teardown(() => anonymous.dispose());
    const fa = feed(anonymous, BALANCE);
    await fa.ended();
    t.match(fa.events, [{ errors: [{ message: /needs a player's session.*received no valid credential/, extensions: { code: "UNAUTHENTICATED" } }] }], "anonymous: an UNAUTHENTICATED error, then the operation ends");
    t.notOk(fa.events[0]?.data?.hubBalanceAlert, "and no data");

    const closes: { code: number; reason: string }[] = [];
    const bad = wsClient(server.url, { authorization: "session:00000000-0000-4000-8000-000000000000" }, { closes });
    t.teardown(() => bad.dispose());
    const fbad = feed(bad, BALANCE);
    await fbad.ended();
    t.match(fbad.events, [{ errors: [{ extensions: { code: "UNAUTHENTICATED" } }] }], "a bad credential is no identity, as over HTTP: UNAUTHENTICATED");
    t.notOk(closes.some((c) => c.code === 4401), `and the socket was not closed for it (closes: ${JSON.stringify(closes)})`);
  });

  t.test("hubPutAlert: the deposit notification reaches its player only", async (t) => {
    const a = wsClient(server.url, { authorization: `session:${alice.token}` });
    const b = wsClient(server.url, { authorization: `session:${bob.token}` });
    t.teardown(() => Promise.all([a.dispose(), b.dispose()]));
    const q = "subscription { hubPutAlert { currencyKey mpTransferId } }";
    const fa = feed(a, q);
    const fb = feed(b, q);
    await Promise.all([connected(a), connected(b)]);
    // Bob's first: alice's deposits from here on must not reach him.
    const b0 = await live(fb, () => putAlert(server, bob, "probe"), "bob's deposit alerts");
    const a0 = await live(fa, () => putAlert(server, alice, "probe"), "alice's deposit alerts");
    await putAlert(server, alice, "mp-42");
    t.same((await fa.waitFor(a0 + 1)).slice(a0), [{ data: { hubPutAlert: { currencyKey: "HOUSE", mpTransferId: "mp-42" } } }]);
    await putAlert(server, bob, "mp-43");
    t.same((await fb.waitFor(b0 + 1)).slice(b0), [{ data: { hubPutAlert: { currencyKey: "HOUSE", mpTransferId: "mp-43" } } }], "bob heard nothing of alice's, then his own");
  });

  t.test("hubBetAlert: operators only, one per bet row of the ledger, filtered by userId on request", async (t) => {
    const op = await server.authenticateOperator();
    const o = wsClient(server.url, { authorization: `apikey:${op.apiKey}` });
    const s = wsClient(server.url, { authorization: `session:${alice.token}` });
    t.teardown(() => Promise.all([o.dispose(), s.dispose()]));
    const q = "subscription($u: UUID) { hubBetAlert(userId: $u) { betId userId casinoId experienceId currencyKey amountDelta reason createdAt } }";
    const all = feed(o, q);
    const bobs = feed(o, q, { u: bob.userId });
    const denied = feed(s, q);
    await denied.ended();
    t.match(denied.events, [{ errors: [{ message: /needs an operator API key.*received a player's session/, extensions: { code: "FORBIDDEN" } }] }], "a session gets FORBIDDEN");
    await live(bobs, () => ledgerBet(server, bob, 1), "the operator's bet alerts of bob");
    await live(all, () => ledgerBet(server, bob, 1), "the operator's bet alerts");
    // Alerts come in commit order: once this bet's have come, no earlier probe's is still on its way.
    const fence = await ledgerBet(server, bob, 1);
    await until(() => betIds(all).includes(fence) && betIds(bobs).includes(fence), 30_000, () => `the alerts of bet ${fence} on both subscriptions (all: ${betIds(all)}; bob's: ${betIds(bobs)})`);
    const a0 = all.events.length;
    const b0 = bobs.events.length;
    const betId = "01900000-0000-7000-8000-000000000001";
    const client = await server.dbPool.connect();
    try {
      await client.query("begin");
      await client.query("select hub_hidden.ledger_begin('test', 'test:bets', 'coinflip bet', $1)", [betId]);
      await client.query("update hub.balance set amount = amount - 3 where user_id = $1 and experience_id = $2 and currency_key = 'HOUSE'", [alice.userId, alice.experienceId]);
      await client.query("update hub.balance set amount = amount + 2 where user_id = $1 and experience_id = $2 and currency_key = 'HOUSE'", [alice.userId, alice.experienceId]);
      await client.query("commit");
    } finally {
      client.release();
    }
    const events = (await all.waitFor(a0 + 2)).slice(a0);
    const rows = events.map((e) => (e.data as { hubBetAlert: Record<string, unknown> }).hubBetAlert);
    t.same(rows.map((r) => r.amountDelta), [-3, 2], "one alert per ledger row, in order");
    t.match(rows[0], { betId, userId: alice.userId, casinoId: alice.casinoId, experienceId: alice.experienceId, currencyKey: "HOUSE", reason: "coinflip bet", createdAt: /^\d{4}-/ });
    await credit(server, alice); // no bet id: no bet alert
    const last = await ledgerBet(server, bob, 1);
    await all.waitFor(a0 + 3);
    t.same(betIds(all, a0), [betId, betId, last], "a change without a bet id is no bet alert");
    await bobs.waitFor(b0 + 1);
    t.same(betIds(bobs, b0), [last], "the userId filter kept alice's bets out");
  });

  t.test("a subscription over POST or GET is a GraphQL error naming the WebSocket endpoint", async (t) => {
    const post = await gql(server.url, BALANCE, {}, { authorization: `session:${alice.token}` });
    t.equal(post.status, 400);
    t.match(post.body, { errors: [{ message: /WebSocket.*ws:\/\/127\.0\.0\.1:\d+\/graphql.*HTTP POST/, extensions: { code: "SUBSCRIPTION_NEEDS_WEBSOCKET" } }] });
    const res = await fetch(`${server.url}/graphql?query=${encodeURIComponent(BALANCE)}`, { headers: { accept: "application/json" } });
    t.equal(res.status, 400);
    t.match(await res.json(), { errors: [{ message: /HTTP GET/, extensions: { code: "SUBSCRIPTION_NEEDS_WEBSOCKET" } }] });
  });

  t.test("revoking the session closes its sockets with 4401", async (t) => {
    const p = await player(server, "carol");
    const closes: { code: number; reason: string }[] = [];
    const c = wsClient(server.url, { authorization: `session:${p.token}` }, { closes });
    t.teardown(() => c.dispose());
    const f = feed(c, BALANCE);
    await connected(c);
    await live(f, () => credit(server, p), "carol's balance alerts");
    const started = Date.now();
    t.same(closes, [], "open until the revocation");
    await server.dbPool.query("update hub.session set revoked_at = now() where user_id = $1", [p.userId]);
    // Nothing but the revocation's notification closes it (no expiry, no cache TTL applies to an open socket).
    await until(() => closes.length > 0, 30_000, () => "the socket of the revoked session to be closed (still open after 30 s)");
    t.match(closes[0], { code: 4401, reason: /revoked/ }, "closed with 4401");
    t.comment(`closed ${Date.now() - started} ms after the revocation (not asserted)`);
  });

  t.test("revoking an API key closes its sockets; an expiring session closes at its expiry", async (t) => {
    const op = await server.authenticateOperator();
    const closes: { code: number; reason: string }[] = [];
    const o = wsClient(server.url, { authorization: `apikey:${op.apiKey}` }, { closes });
    t.teardown(() => o.dispose());
    const bets = feed(o, "subscription { hubBetAlert { betId } }");
    await connected(o);
    await live(bets, () => ledgerBet(server, alice, 1), "the API key's bet alerts");
    t.same(closes, [], "open while the key is valid");
    const revokedAt = Date.now();
    await server.dbPool.query("update hub.api_key set revoked_at = now() where id = $1", [op.apiKeyId]);
    await until(() => closes.length > 0, 30_000, () => "the socket of the revoked API key to be closed (still open after 30 s)");
    t.match(closes[0], { code: 4401 });
    t.comment(`closed ${Date.now() - revokedAt} ms after the revocation (not asserted)`);

    const { sessionId, token, expiredAt } = await createSession(server.dbPool, { userId: alice.userId, casinoId: alice.casinoId, experienceId: alice.experienceId, expiresInSeconds: 1.5 });
    t.ok(sessionId);
    const expiring: { code: number; reason: string }[] = [];
    const s = wsClient(server.url, { authorization: `session:${token}` }, { closes: expiring });
    t.teardown(() => s.dispose());
    feed(s, BALANCE);
    await until(() => expiring.length > 0, 30_000, () => "the socket of the expiring session to be closed (still open 30 s after it opened)");
    const closedAt = Date.now();
    t.match(expiring[0], { code: 4401, reason: /expired/ });
    t.ok(closedAt >= expiredAt.getTime() - 50, "not before the expiry");
    t.comment(`closed ${closedAt - expiredAt.getTime()} ms after the expiry (not asserted)`);
  });
});

t.test("after the LISTEN connection drops and comes back, what was committed meanwhile is delivered once, and revocations arrive again", async (t) => {
  // A 60 s identity cache: only the credential NOTIFY, on the same connection, can make a revocation take effect at once.
  const server = await startTestServer({ identityCacheTtlMs: 60_000 });
  t.teardown(() => server.stop());
  const dave = await player(server, "dave");
  await createCurrency(server.dbPool, { casinoId: dave.casinoId, key: "BTC" });
  await createPlayerBalance(server.dbPool, { userId: dave.userId, experienceId: dave.experienceId, currencyKey: "BTC", amount: 3 });
  const c = wsClient(server.url, { authorization: `session:${dave.token}` });
  t.teardown(() => c.dispose());
  const f = feed(c, BALANCE);
  const currencyOf = (e: (typeof f.events)[number]) => (e.data as { hubBalanceAlert: { currencyKey: string; amount: number } }).hubBalanceAlert;
  // The subscription is live once a credit is announced (one made before it was registered is not: credit
  // again until one is). Alerts come in commit order, so an alert of the BTC balance made above, if
  // this subscription gets one at all, has come before it.
  const liveBy = Date.now() + 30_000;
  while (!f.events.some((e) => currencyOf(e).currencyKey === "HOUSE")) {
    if (Date.now() > liveBy) throw new Error(`the subscription announced no credit within 30 s (events: ${JSON.stringify(f.events)})`);
    await credit(server, dave, 7);
    // Long enough that a credit's alert is not still on its way when the next credit is made.
    await until(() => f.events.some((e) => currencyOf(e).currencyKey === "HOUSE"), 5000, () => "").catch(() => undefined);
  }
  const before = f.events.length;
  const { rows } = await server.dbPool.query<{ ok: boolean }>(
    "select pg_terminate_backend(pid) as ok from pg_stat_activity where application_name = 'hub:live-notifications' and datname = current_database()",
  );
  t.same(rows, [{ ok: true }], "the hub's one listening connection was cut");
  // Committed while it is away (it reconnects after 100 ms): delivered from the alert log once it is back.
  await server.dbPool.query("update hub.balance set amount = amount + 1 where user_id = $1 and experience_id = $2 and currency_key = 'BTC'", [dave.userId, dave.experienceId]);
  const events = (await f.waitFor(before + 1, 30_000)).slice(before);
  t.same(events.map((e) => currencyOf(e).currencyKey), ["BTC"], "the BTC change of the gap");
  await credit(server, dave);
  await f.waitFor(before + 2);
  t.same(f.events.slice(before).map((e) => currencyOf(e).currencyKey), ["BTC", "HOUSE"], "nothing re-announced: the next alert is the next change");
  const { rows: listeners } = await server.dbPool.query(
    "select application_name from pg_stat_activity where datname = current_database() and application_name in ('hub:live-notifications', 'hub:credential-events')",
  );
  t.same(listeners, [{ application_name: "hub:live-notifications" }], "still one listening connection, for every subscriber and for credential changes");

  // Revocations travel on the new connection too: an HTTP identity cached for 60 s and the open socket both end.
  const whoami = async () => (await gql(server.url, "{ hubCurrentUser { id } }", undefined, { authorization: `session:${dave.token}` })).body;
  t.match(await whoami(), { data: { hubCurrentUser: { id: dave.userId } } }, "the session is valid, and now cached");
  const closes: { code: number; reason: string }[] = [];
  const s = wsClient(server.url, { authorization: `session:${dave.token}` }, { closes });
  t.teardown(() => s.dispose());
  const fs = feed(s, BALANCE);
  await connected(s);
  await live(fs, () => credit(server, dave), "balance alerts on a socket opened after the reconnection");
  t.same(fs.events[0], HOUSE_ALERT, "a live alert reaches a socket opened after the reconnection");
  await server.dbPool.query("update hub.session set revoked_at = now() where user_id = $1", [dave.userId]);
  await until(() => closes.length > 0, 5000, () => "the socket is still open 5 s after the revocation");
  t.match(closes[0], { code: 4401 }, "the open socket is closed with 4401");
  const deadline = Date.now() + 5000;
  let body = await whoami();
  while (body.data?.hubCurrentUser !== null && Date.now() < deadline) {
    await sleep(50);
    body = await whoami();
  }
  t.match(body, { data: { hubCurrentUser: null } }, "the revoked session is no identity over HTTP within 5 s, despite the 60 s cache");
});
