/**
 * Live alerts carry a cursor, and a subscription with `after` resumes without
 * loss: the alerts of its topic committed since are delivered first, then the
 * live ones, none twice, on whichever instance the client reconnects to.
 */
import "./helpers/env.js";
import t from "tap";
import { randomUUID } from "node:crypto";
import { startTestServer, type TestServer } from "@hubpkg/hub/test";
import { startAndListen } from "../dist/src/start.js";
import { feed, until, wsClient, type Feed } from "./helpers/ws.js";
import { livePlayer, type LivePlayer } from "./helpers/live-player.js";

type PlayerCtx = LivePlayer;
const player = (server: TestServer, uname: string, experienceId?: string): Promise<PlayerCtx> =>
  livePlayer(server, uname, { amount: 1_000_000, ...(experienceId === undefined ? {} : { experienceId }) });

/** One committed transaction moving the player's balance by `delta`, as a bet when betId is given. */
async function move(server: TestServer, p: PlayerCtx, delta: number, betId?: string): Promise<void> {
  const client = await server.dbPool.connect();
  try {
    await client.query("begin");
    if (betId) await client.query("select hub_hidden.ledger_begin('test', 'test:bets', 'resume bet', $1)", [betId]);
    await client.query("update hub.balance set amount = amount + $3 where user_id = $1 and experience_id = $2", [p.userId, p.experienceId, delta]);
    await client.query("commit");
  } finally {
    client.release();
  }
}

const put = (server: TestServer, p: PlayerCtx, mpTransferId: string) =>
  server.dbPool.query("select hub_hidden.notify_put_alert($1, $2, $3, 'HOUSE', $4)", [p.userId, p.casinoId, p.experienceId, mpTransferId]);

const chatMessage = async (server: TestServer, p: PlayerCtx, body: string): Promise<string> =>
  (
    await server.dbPool.query<{ id: string }>(
      "insert into hub.chat_message (casino_id, experience_id, type, client_id, body) values ($1, $2, 'system', gen_random_uuid(), $3) returning id",
      [p.casinoId, p.experienceId, body],
    )
  ).rows[0]!.id;

const mute = (server: TestServer, p: PlayerCtx) =>
  server.dbPool.query("insert into hub.chat_mute (casino_id, experience_id, user_id, muted_by) values ($1, $2, $3, 'test')", [p.casinoId, p.experienceId, p.userId]);

const Q = {
  balance: "subscription($after: String) { hubBalanceAlert(after: $after) { currencyKey cursor } }",
  put: "subscription($after: String) { hubPutAlert(after: $after) { mpTransferId cursor } }",
  bet: "subscription($after: String, $u: UUID) { hubBetAlert(userId: $u, after: $after) { betId userId amountDelta cursor } }",
  chat: `subscription($after: String) { hubChatAlert(after: $after) { __typename
    ... on HubChatSubscriptionNewMessage { cursor chatMessage { id body } }
    ... on HubChatSubscriptionMuted { cursor } ... on HubChatSubscriptionUnmuted { cursor } } }`,
};
type Kind = keyof typeof Q;
const FIELD: Record<Kind, string> = { balance: "hubBalanceAlert", put: "hubPutAlert", bet: "hubBetAlert", chat: "hubChatAlert" };

/** The alerts of a feed, as the payload objects. */
const alerts = (f: Feed, kind: Kind) => f.events.map((e) => (e.data as Record<string, Record<string, any>>)[FIELD[kind]]!);

/** A feed that is live: commits `probe` until an alert arrives, then answers the alerts' count. */
async function live(f: Feed, probe: () => Promise<unknown>): Promise<void> {
  const by = Date.now() + 30_000;
  while (f.events.length === 0) {
    if (Date.now() > by) throw new Error(`no alert within 30 s (errors ${JSON.stringify(f.errors)})`);
    await probe();
    await until(() => f.events.length > 0, 2000, () => "").catch(() => undefined);
  }
}

t.test("cursors and resuming with after, across two instances", async (t) => {
  const a = await startTestServer();
  t.teardown(() => a.stop());
  const b = await startAndListen({ port: 0, handleSignals: false, logLevel: "warn", databaseUrl: a.databaseUrl, superuserDatabaseUrl: a.superuserDatabaseUrl });
  t.teardown(() => b.stop());
  const alice = await player(a, "alice");
  const bob = await player(a, "bob", alice.experienceId);
  const op = await a.authenticateOperator();
  const auth: Record<Kind, Record<string, string>> = {
    balance: { authorization: `session:${alice.token}` },
    put: { authorization: `session:${alice.token}` },
    bet: { authorization: `apikey:${op.apiKey}` },
    chat: { authorization: `session:${alice.token}` },
  };
  // One alert of each topic for alice (bob's in between, which her topics must not carry).
  let n = 0;
  const make: Record<Kind, () => Promise<string>> = {
    balance: async () => (await move(a, alice, 1), "HOUSE"),
    put: async () => {
      const id = `mp-${++n}`;
      await put(a, bob, `bob-${id}`);
      await put(a, alice, id);
      return id;
    },
    bet: async () => {
      const id = randomUUID();
      await move(a, alice, -1, id);
      return id;
    },
    chat: async () => chatMessage(a, alice, `hello ${++n}`),
  };
  const keyOf: Record<Kind, (x: Record<string, any>) => string> = {
    balance: (x) => x.currencyKey,
    put: (x) => x.mpTransferId,
    bet: (x) => x.betId,
    chat: (x) => x.chatMessage?.id ?? x.__typename,
  };

  for (const kind of Object.keys(Q) as Kind[]) {
    t.test(`${FIELD[kind]}: cursors increase; after replays exactly what was missed, on the other instance, then live`, async (t) => {
      const onA = wsClient(a.url, auth[kind]);
      t.teardown(() => onA.dispose());
      const first = feed(onA, Q[kind], {});
      await live(first, make[kind]);
      const expected: string[] = [];
      for (let i = 0; i < 3; i++) expected.push(await make[kind]());
      await first.waitFor(4);
      const seen = alerts(first, kind);
      for (const x of seen) t.match(x.cursor, /^\d{19}$/, "a 19-digit cursor");
      t.ok(seen.every((x, i) => i === 0 || x.cursor > seen[i - 1]!.cursor), "cursors increase");
      t.same(seen.slice(1).map(keyOf[kind]), expected, "each alert once, in order");
      const last = seen[seen.length - 1]!.cursor as string;
      await onA.dispose();

      // Missed while disconnected; one more after resuming on B.
      const missed: string[] = [];
      for (let i = 0; i < 3; i++) missed.push(await make[kind]());
      if (kind === "chat") missed.push((await mute(a, alice), "HubChatSubscriptionMuted"));
      const onB = wsClient(b.url, auth[kind]);
      t.teardown(() => onB.dispose());
      const resumed = feed(onB, Q[kind], { after: last });
      await resumed.waitFor(missed.length);
      const after = await make[kind]();
      await resumed.waitFor(missed.length + 1);
      // A last one: anything duplicated would come before it.
      const sentinel = await make[kind]();
      await resumed.waitFor(missed.length + 2);
      const got = alerts(resumed, kind);
      t.same(got.map(keyOf[kind]), [...missed, after, sentinel], "the missed alerts, then the live ones, none twice");
      t.ok(got.every((x, i) => x.cursor > (i === 0 ? last : got[i - 1]!.cursor)), "every cursor after the last one seen, increasing");
    });
  }

  t.test("a player's replay holds only their own alerts", async (t) => {
    const mallory = await player(a, "mallory", alice.experienceId);
    const elsewhere = await player(a, "elsewhere");
    const start = "0".repeat(19);
    const m = wsClient(a.url, { authorization: `session:${mallory.token}` });
    const e = wsClient(a.url, { authorization: `session:${elsewhere.token}` });
    t.teardown(() => Promise.all([m.dispose(), e.dispose()]));
    const subs = { balance: feed(m, Q.balance, { after: start }), put: feed(m, Q.put, { after: start }), chat: feed(e, Q.chat, { after: start }) };
    // Everything alice and bob did above is in the log; the replay holds the subscriber's own alerts only.
    await move(a, mallory, 1);
    await put(a, mallory, "mallory-1");
    await chatMessage(a, elsewhere, "elsewhere-1");
    const { rows } = await a.dbPool.query<{ n: number }>("select count(*)::int as n from hub_hidden.live_alert where channel = 'balance' and user_id = $1", [mallory.userId]);
    await subs.balance.waitFor(rows[0]!.n);
    await move(a, mallory, 1); // a last one: anything of another player's would come before it
    await subs.balance.waitFor(rows[0]!.n + 1);
    t.equal(subs.balance.events.length, rows[0]!.n + 1, "mallory's balance alerts only");
    await put(a, mallory, "mallory-2");
    await subs.put.waitFor(2);
    t.same(alerts(subs.put, "put").map((x) => x.mpTransferId), ["mallory-1", "mallory-2"], "mallory's deposits only");
    await chatMessage(a, elsewhere, "elsewhere-2");
    await subs.chat.waitFor(2);
    t.same(alerts(subs.chat, "chat").map((x) => x.chatMessage.body), ["elsewhere-1", "elsewhere-2"], "only the messages of the subscriber's experience");
  });

  t.test("hubChatAlert's replay leaves out a message hidden since", async (t) => {
    const c = wsClient(a.url, auth.chat);
    t.teardown(() => c.dispose());
    const opening = feed(c, Q.chat, {});
    await live(opening, () => chatMessage(a, alice, "opening"));
    const from = alerts(opening, "chat").at(-1)!.cursor as string;
    opening.stop();
    const hidden = await chatMessage(a, alice, "to be hidden");
    await a.dbPool.query("update hub.chat_message set hidden_at = now() where id = $1", [hidden]);
    await chatMessage(a, alice, "kept");
    // Both sequenced before resuming: a message hidden before it was sequenced would reach the resumed
    // subscription live (as to any subscriber then), not through the replay this test is about.
    for (const by = Date.now() + 30_000; ; ) {
      const { rows } = await a.dbPool.query<{ n: number }>("select count(*)::int as n from hub_hidden.live_alert where seq is null");
      if (rows[0]!.n === 0) break;
      if (Date.now() > by) throw new Error(`${rows[0]!.n} alerts still unsequenced after 30 s`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const resumed = feed(c, Q.chat, { after: from });
    await resumed.waitFor(1);
    await chatMessage(a, alice, "live");
    await resumed.waitFor(2);
    t.same(alerts(resumed, "chat").map((x) => x.chatMessage.body), ["kept", "live"]);
  });

  t.test("malformed and unknown cursors are BAD_USER_INPUT; pruned ones LIVE_CURSOR_EXPIRED", async (t) => {
    const c = wsClient(a.url, auth.balance);
    t.teardown(() => c.dispose());
    const refusal = refusalOf;
    for (const after of ["abc", "123", "9".repeat(20), "-000000000000000001", "x".repeat(30_000)]) {
      const f = feed(c, Q.balance, { after });
      await f.ended();
      t.match(refusal(f), [{ message: /after must be the cursor/, extensions: { code: "BAD_USER_INPUT" } }], `${JSON.stringify(after.slice(0, 24))} is refused`);
    }
    const nul = feed(c, Q.balance, { after: `${"0".repeat(18)}\u0000` });
    await nul.ended();
    t.match(refusal(nul), [{ extensions: { code: "BAD_USER_INPUT" } }], "a NUL character is refused");
    for (const after of [5, { cursor: "0".repeat(19) }]) {
      const f = feed(c, Q.balance, { after });
      await f.ended();
      t.match(refusal(f), [{ message: /"\$after" got invalid value/ }], `${JSON.stringify(after)} is refused as the variable's type`);
    }
    const future = feed(c, Q.balance, { after: "0000000009999999999" });
    await future.ended();
    t.match(refusal(future), [{ message: /no alert has been given cursor/, extensions: { code: "BAD_USER_INPUT" } }], "a cursor never given");
  });
});

/** An error of the operation (an event with errors), or of the request (graphql-ws's error message). */
const refusalOf = (f: Feed) => (f.events[0]?.errors ?? (f.errors[0] as unknown[] | undefined) ?? []) as { message: string; extensions?: { code?: string } }[];

t.test("pruning: the log keeps an hour's alerts and the last 10,000; a cursor before them is LIVE_CURSOR_EXPIRED", async (t) => {
  const server = await startTestServer();
  t.teardown(() => server.stop());
  const p = await player(server, "pruned");
  const db = server.dbPool;
  const cursor = (seq: number) => String(seq).padStart(19, "0");
  // 12,000 alerts of nobody's topic, sequenced; then their marks made two hours old, as if time had passed.
  const log = (n: number) =>
    db.query("insert into hub_hidden.live_alert (channel, user_id, casino_id, experience_id, payload) select 'balance', gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), '{}' from generate_series(1, $1)", [n]);
  await log(12_000);
  const seq = async () => Number((await db.query<{ s: string }>("select hub_hidden.live_alert_sequence()::text as s")).rows[0]!.s);
  const base = (await seq()) - 12_000;
  await db.query("update hub_hidden.live_alert_mark set at = at - interval '2 hours'");
  const counter = async () => (await db.query<{ pruned_through: string }>("select pruned_through::text from hub_hidden.live_alert_counter")).rows[0]!.pruned_through;
  t.equal(Number(await counter()) <= base, true, "nothing of the 12,000 pruned yet: they are not an hour old");
  await log(1000); // crossing the next thousand prunes
  const last = await seq();
  const pruned = Number(await counter());
  t.equal(pruned, last - 10_000, "pruned through 10,000 behind the last: the two-hour-old ones that are not among the last 10,000");
  const { rows } = await db.query<{ n: number }>("select count(*)::int as n from hub_hidden.live_alert where seq <= $1", [pruned]);
  t.equal(rows[0]!.n, 0, "those rows are gone");

  const c = wsClient(server.url, { authorization: `session:${p.token}` });
  t.teardown(() => c.dispose());
  const expired = feed(c, Q.balance, { after: cursor(pruned - 1) });
  await expired.ended();
  t.match(refusalOf(expired), [{ message: /no longer kept.*refetch the state, then subscribe without after/, extensions: { code: "LIVE_CURSOR_EXPIRED" } }], "a cursor before the window");
  const kept = feed(c, Q.balance, { after: cursor(pruned) });
  await move(server, p, 1);
  await kept.waitFor(1);
  t.same(kept.errors, [], "the oldest cursor still in the window resumes");

  // A replay longer than one page of the log (2,000 rows) comes whole, in order, then the live alerts.
  const op = await server.authenticateOperator();
  const o = wsClient(server.url, { authorization: `apikey:${op.apiKey}` });
  t.teardown(() => o.dispose());
  const from = await seq();
  await db.query(
    `insert into hub_hidden.live_alert (channel, user_id, casino_id, experience_id, payload)
     select 'bet', $1, $2, $3, jsonb_build_object('betId', gen_random_uuid(), 'userId', $1::uuid, 'amountDelta', -i) from generate_series(1, 4500) i`,
    [p.userId, p.casinoId, p.experienceId],
  );
  await seq();
  const long = feed(o, Q.bet, { after: cursor(from), u: p.userId });
  await long.waitFor(4500, 60_000);
  const liveBet = randomUUID();
  await move(server, p, -1, liveBet);
  await long.waitFor(4501, 60_000);
  const got = alerts(long, "bet");
  t.same(got.slice(0, 4500).map((x) => x.amountDelta), Array.from({ length: 4500 }, (_, i) => -(i + 1)), "the 4,500 logged bets, in order, each once");
  t.equal(got[4500]!.betId, liveBet, "then the live one");
});

t.test("concurrent bettors while a subscriber keeps reconnecting with after, to either instance: every bet alert once", async (t) => {
  const a = await startTestServer();
  t.teardown(() => a.stop());
  const b = await startAndListen({ port: 0, handleSignals: false, logLevel: "warn", databaseUrl: a.databaseUrl, superuserDatabaseUrl: a.superuserDatabaseUrl });
  t.teardown(() => b.stop());
  const op = await a.authenticateOperator();
  const first = await player(a, "bettor-0");
  const players = [first, ...(await Promise.all(Array.from({ length: 19 }, (_, i) => player(a, `bettor-${i + 1}`, first.experienceId))))];
  const auth = { authorization: `apikey:${op.apiKey}` };

  // The starting point: the cursor of a first bet's alert.
  const opening = wsClient(a.url, auth);
  const f0 = feed(opening, Q.bet, {});
  await live(f0, () => move(a, first, -1, randomUUID()));
  let after = alerts(f0, "bet").at(-1)!.cursor as string;
  await opening.dispose();

  const BETS = 15;
  const committed: string[] = [];
  let betting = true;
  const bets = Promise.all(
    players.map(async (p) => {
      for (let i = 0; i < BETS; i++) {
        const id = randomUUID();
        await move(a, p, -1, id);
        committed.push(id);
      }
    }),
  ).finally(() => (betting = false));

  const received: { betId: string; cursor: string }[] = [];
  let round = 0;
  for (;;) {
    const server = round++ % 2 === 0 ? a : b;
    const client = wsClient(server.url, auth);
    const f = feed(client, Q.bet, { after });
    // A few alerts on each connection, then away (a closed socket, as when an instance stops).
    await until(() => f.events.length >= 10 || f.errors.length > 0 || (!betting && received.length + f.events.length >= committed.length), 30_000, () => `round ${round}: ${received.length + f.events.length} of ${committed.length}`);
    t.same(f.errors, [], `round ${round}: no error`);
    await client.dispose();
    for (const x of alerts(f, "bet")) received.push({ betId: x.betId, cursor: x.cursor });
    if (received.length > 0) after = received.at(-1)!.cursor;
    if (!betting && received.length >= committed.length) break;
  }
  await bets;
  t.ok(round > 3, `the subscriber reconnected ${round} times`);
  t.ok(received.every((x, i) => i === 0 || x.cursor > received[i - 1]!.cursor), "cursors only increase across reconnections");
  t.equal(new Set(received.map((x) => x.betId)).size, received.length, "no bet alert twice");
  t.same(received.map((x) => x.betId).sort(), [...committed].sort(), "exactly the bets committed");
});

t.test("the LISTEN connection lost and back: bet, balance and put alerts committed meanwhile are delivered", async (t) => {
  const server = await startTestServer();
  t.teardown(() => server.stop());
  const p = await player(server, "gap");
  const op = await server.authenticateOperator();
  const o = wsClient(server.url, { authorization: `apikey:${op.apiKey}` });
  const s = wsClient(server.url, { authorization: `session:${p.token}` });
  t.teardown(() => Promise.all([o.dispose(), s.dispose()]));
  const betsFeed = feed(o, Q.bet, { u: p.userId });
  const balances = feed(s, Q.balance, {});
  const puts = feed(s, Q.put, {});
  await live(betsFeed, () => move(server, p, -1, randomUUID()));
  await live(balances, () => move(server, p, 1));
  await live(puts, () => put(server, p, `probe-${randomUUID()}`));

  // Cut the hub's listening connection, and commit while it is away (the reconnection waits 100 ms first).
  const listening = "select pid from pg_stat_activity where application_name = 'hub:live-notifications' and datname = current_database()";
  const { rows } = await server.dbPool.query<{ ok: boolean }>(`select pg_terminate_backend(pid) as ok from (${listening}) l`);
  t.same(rows, [{ ok: true }], "the hub's one listening connection was cut");
  const ids = [randomUUID(), randomUUID(), randomUUID()];
  for (const id of ids) await move(server, p, -1, id);
  await put(server, p, "during-the-gap");
  const sentinel = randomUUID();
  await move(server, p, -1, sentinel);
  await until(() => alerts(betsFeed, "bet").some((x) => x.betId === sentinel), 30_000, () => "the last bet's alert");
  const bets = alerts(betsFeed, "bet").map((x) => x.betId);
  t.same(bets.slice(bets.indexOf(ids[0]!)), [...ids, sentinel], "the bet alerts of the gap, in order, each once, then the next one");
  await until(() => alerts(puts, "put").some((x) => x.mpTransferId === "during-the-gap"), 30_000, () => "the deposit of the gap");

  // Every balance alert of the log since the first one received, each once: none lost, none re-announced.
  const logged = async (channel: string, from: string) =>
    (
      await server.dbPool.query<{ c: string }>(
        "select lpad(seq::text, 19, '0') as c from hub_hidden.live_alert where channel = $1 and user_id = $2 and seq >= $3::bigint order by seq",
        [channel, p.userId, from],
      )
    ).rows.map((r) => r.c);
  for (const [f, kind] of [[balances, "balance"], [puts, "put"], [betsFeed, "bet"]] as const) {
    const expected = await logged(kind, alerts(f, kind)[0]!.cursor);
    await f.waitFor(expected.length);
    t.same(alerts(f, kind).map((x) => x.cursor), expected, `${FIELD[kind]}: exactly the log's alerts since the first one received`);
  }
});

t.test("an instance stops (1001) mid-stream: the client resumes on another with after, nothing lost", async (t) => {
  const a = await startTestServer();
  t.teardown(() => a.stop());
  const c = await startAndListen({ port: 0, handleSignals: false, logLevel: "warn", databaseUrl: a.databaseUrl, superuserDatabaseUrl: a.superuserDatabaseUrl });
  let cStopped = false;
  t.teardown(() => (cStopped ? undefined : c.stop()));
  const p = await player(a, "rolling");
  const op = await a.authenticateOperator();
  const closes: { code: number; reason: string }[] = [];
  const onC = wsClient(c.url, { authorization: `apikey:${op.apiKey}` }, { closes });
  t.teardown(() => onC.dispose());
  const first = feed(onC, Q.bet, { u: p.userId });
  await live(first, () => move(a, p, -1, randomUUID()));
  // Bets keep coming while C stops.
  const ids: string[] = [];
  const betting = (async () => {
    for (let i = 0; i < 30; i++) {
      const id = randomUUID();
      await move(a, p, -1, id);
      ids.push(id);
    }
  })();
  await until(() => first.events.length > 1 || ids.length >= 5, 30_000, () => "bets during the stream");
  cStopped = true;
  await c.stop();
  await until(() => closes.length > 0, 30_000, () => "C's socket is still open");
  t.equal(closes[0]!.code, 1001, "C closed the socket with 1001");
  const before = alerts(first, "bet");
  const onA = wsClient(a.url, { authorization: `apikey:${op.apiKey}` });
  t.teardown(() => onA.dispose());
  const resumed = feed(onA, Q.bet, { u: p.userId, after: before.at(-1)!.cursor });
  await betting;
  await until(() => alerts(resumed, "bet").some((x) => x.betId === ids.at(-1)), 30_000, () => "the last bet on A");
  const { rows } = await a.dbPool.query<{ bet: string }>(
    "select payload->>'betId' as bet from hub_hidden.live_alert where channel = 'bet' and user_id = $1 and seq > $2::bigint order by seq",
    [p.userId, before.at(-1)!.cursor],
  );
  t.same(alerts(resumed, "bet").map((x) => x.betId), rows.map((r) => r.bet), "every bet after the last seen on C, in order, once");
  t.ok(ids.every((id) => [...before, ...alerts(resumed, "bet")].some((x) => x.betId === id)), "so every bet reached the client");
});
