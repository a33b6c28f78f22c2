import "./helpers/env.js";
import t from "tap";
import fs from "node:fs";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { buildSchema, parse, isObjectType, isInputObjectType, isUnionType, isEnumType, type GraphQLField, type GraphQLSchema, type DefinitionNode, print } from "graphql";
import {
  startTestServer,
  createGraphQLClient,
  createCasino,
  createExperience,
  createPlayer,
  postChatMessage,
  postSystemChatMessage,
  readChatMessages,
  type ChatMessage,
  type GraphQLClient,
  type TestServer,
} from "@hubpkg/hub/test";
import { injectClient } from "./helpers/inject.js";
import { gql } from "./helpers/http.js";
import { startServerProcess, ROOT, type ServerProcess } from "./helpers/process.js";
import { feed, until, wsClient, type Feed } from "./helpers/ws.js";
import { tmpDir } from "./helpers/tmp.js";

/*
 * Two hub processes on one database: A is this process (the test kit's
 * server), B is `node dist/server.js` on A's database. Players:
 *   alice, bob, erin, frank: experience "room-a" of the playground casino
 *   carol: experience "room-b" of the same casino
 *   dave: an experience of another casino
 */
const ALERT = `subscription {
  hubChatAlert {
    __typename
    ... on HubChatSubscriptionNewMessage { chatMessage { id type body clientId userId experienceId hiddenAt } }
    ... on HubChatSubscriptionMuted { _ }
    ... on HubChatSubscriptionUnmuted { _ }
  }
}`;

interface Who {
  userId: string;
  experienceId: string;
  token: string;
  onA: GraphQLClient;
  onB: GraphQLClient;
}

let a: TestServer;
let b: ServerProcess;
let sdlPath: string;
let op: { onA: GraphQLClient; onB: GraphQLClient; key: string };
const players: Record<string, Who> = {};
let roomA: string;
let roomB: string;
let roomOther: string;

async function player(uname: string, casinoId: string, experienceId: string): Promise<Who> {
  const user = await createPlayer(a.dbPool, { casinoId, uname });
  const { token } = await a.authenticate(user.id, experienceId);
  // A (this process) through inject(), B (a process) over HTTP.
  return { userId: user.id, experienceId, token, onA: injectClient(a, { authorization: `session:${token}` }), onB: createGraphQLClient(b.url, { authorization: `session:${token}` }) };
}

t.before(async () => {
  sdlPath = path.join(tmpDir(t, "hub-chat-sdl-"), "schema.graphql");
  a = await startTestServer({ exportSchemaSDLPath: sdlPath });
  b = await startServerProcess({ DATABASE_URL: a.databaseUrl, SUPERUSER_DATABASE_URL: a.superuserDatabaseUrl });
  const casinoId = a.playgroundCasinoId;
  roomA = (await createExperience(a.dbPool, { casinoId, name: "room-a" })).id;
  roomB = (await createExperience(a.dbPool, { casinoId, name: "room-b" })).id;
  const other = await createCasino(a.dbPool, { name: "other casino" });
  roomOther = (await createExperience(a.dbPool, { casinoId: other.id, name: "room-other" })).id;
  for (const name of ["alice", "bob", "erin", "frank"]) players[name] = await player(name, casinoId, roomA);
  players.carol = await player("carol", casinoId, roomB);
  players.dave = await player("dave", other.id, roomOther);
  const operator = await a.authenticateOperator();
  op = { onA: injectClient(a, { authorization: `apikey:${operator.apiKey}` }), onB: createGraphQLClient(b.url, { authorization: `apikey:${operator.apiKey}` }), key: operator.apiKey };
});
t.teardown(async () => {
  b?.child.kill("SIGTERM");
  await b?.exited;
  await a?.stop();
});

const subscribers: { dispose(): unknown }[] = [];
t.afterEach(async () => {
  await Promise.all(subscribers.splice(0).map((c) => c.dispose()));
});

/** A player's hubChatAlert on hub A or B, once the subscription is in place. */
async function subscribe(who: Who, on: "A" | "B"): Promise<Feed> {
  const client = wsClient(on === "A" ? a.url : b.url, { authorization: `session:${who.token}` });
  subscribers.push(client);
  const f = feed(client, ALERT);
  // The subscription is in place once a message posted meanwhile reaches it: a system message to its room, every 300 ms.
  const started = Date.now();
  while (!f.events.some(isProbe)) {
    if (Date.now() - started > 10_000) throw new Error(`no probe message reached ${on}'s subscriber in 10 s: ${JSON.stringify(f.events)} ${JSON.stringify(f.errors)}`);
    await postSystemChatMessage(op.onA, who.experienceId, `probe ${randomUUID()}`);
    await until(() => f.events.some(isProbe), 300, () => "").catch(() => undefined);
  }
  return f;
}

const isProbe = (e: { data?: Record<string, any> | null | undefined }) => newMessage(e)?.body.startsWith("probe ") === true;
/** A feed's events but the probes of subscribe(). */
const real = (f: Feed) => f.events.filter((e) => !isProbe(e));
const waitReal = (f: Feed, n: number) => until(() => real(f).length >= n, 30_000, () => `expected ${n} events, got ${JSON.stringify(real(f))}`).then(() => real(f));

/** Calls `seen` as each event of the feed arrives (before anyone polling the feed sees it). */
function onArrival(f: Feed, seen: (event: Feed["events"][number]) => void): void {
  const push = f.events.push.bind(f.events);
  f.events.push = (...events) => {
    for (const e of events) seen(e);
    return push(...events);
  };
}

function newMessage(event: { data?: Record<string, any> | null | undefined }): ChatMessage | undefined {
  const alert = event.data?.hubChatAlert;
  return alert?.__typename === "HubChatSubscriptionNewMessage" ? alert.chatMessage : undefined;
}

async function messageRows(where: string, params: unknown[]): Promise<number> {
  const { rows } = await a.dbPool.query<{ n: number }>(`select count(*)::int as n from hub.chat_message where ${where}`, params);
  return rows[0]!.n;
}

function codes(response: { body: { errors?: { extensions?: Record<string, unknown> }[] } }): unknown[] {
  return (response.body.errors ?? []).map((e) => e.extensions?.code);
}

const POST = "mutation($i: HubChatCreateUserMessageInput!) { hubChatCreateUserMessage(input: $i) { result { __typename } } }";

const RESUMED = ["HubChatSubscriptionNewMessage", "HubChatSubscriptionMuted", "HubChatSubscriptionUnmuted"];

t.test("the exported SDL has the original's chat types field for field, plus the live alerts' cursor and after", async (t) => {
  const ours = buildSchema(fs.readFileSync(sdlPath, "utf8"));
  const original = parse(fs.readFileSync(path.join(ROOT, "test/fixtures/original-chat-sdl.graphql"), "utf8"));
  const shape = (field: GraphQLField<unknown, unknown>) => `${field.args.map((arg) => `${arg.name}: ${String(arg.type)}`).join(", ")} -> ${String(field.type)}`;
  let compared = 0;
  for (const def of original.definitions as DefinitionNode[]) {
    if (!("name" in def) || !def.name) continue;
    const name = def.name.value;
    const type = ours.getType(name);
    t.ok(type, `${name} exists`);
    if (!type) continue;
    const expected = typeOf(buildSchema(`${print(def).replace(/^extend /, "")}\n${STUBS(def)}`), name);
    const actual = withoutResume(name, typeOf(ours, name));
    const extension = def.kind === "ObjectTypeExtension";
    if (extension) {
      // Types with other fields too: each chat field is there with the same arguments and type.
      const exp = expected as Record<string, string>;
      const act = actual as Record<string, string>;
      for (const field of Object.keys(exp)) t.equal(act[field], exp[field], `${name}.${field}`);
    } else {
      t.same(actual, expected, `${name} matches the original`);
    }
    compared++;
  }
  t.equal(compared, original.definitions.length, "every definition of the original's excerpt was compared");
  const extra = Object.keys(ours.getTypeMap()).filter((n) => n.startsWith("HubChat") && !original.definitions.some((d) => "name" in d && d.name?.value === n));
  t.same(extra.sort(), ["HubChatHideMessageInput", "HubChatHideMessagePayload"], "the only chat types the original lacks are the hub's own hubChatHideMessage's");

  // The hub's own additions to the original's live alerts (docs/live-updates.md): each member of the
  // subscription's union has a cursor, and hubChatAlert takes after. Nothing else may differ.
  function withoutResume(name: string, shape: unknown): unknown {
    if (RESUMED.includes(name)) {
      const { cursor, ...rest } = shape as Record<string, string>;
      t.equal(cursor, " -> String!", `${name}.cursor is the hub's addition`);
      return rest;
    }
    if (name !== "Subscription") return shape;
    const fields = { ...(shape as Record<string, string>) };
    t.equal(fields.hubChatAlert, "after: String -> HubChatSubscriptionPayload", "hubChatAlert(after) is the hub's addition");
    fields.hubChatAlert = " -> HubChatSubscriptionPayload";
    return fields;
  }
  function typeOf(schema: GraphQLSchema, name: string): unknown {
    const type = schema.getType(name)!;
    if (isObjectType(type)) return Object.fromEntries(Object.values(type.getFields()).map((f) => [f.name, shape(f)]));
    if (isInputObjectType(type)) return Object.fromEntries(Object.values(type.getFields()).map((f) => [f.name, String(f.type)]));
    if (isUnionType(type)) return type.getTypes().map(String).sort();
    if (isEnumType(type)) return type.getValues().map((v) => v.name).sort();
    return String(type);
  }
  // A lone definition builds into a schema once the names it uses exist.
  function STUBS(def: DefinitionNode): string {
    const own = "name" in def && def.name ? def.name.value : "";
    const used = new Set([...print(def).matchAll(/\b([A-Z][A-Za-z]+)\b/g)].map((m) => m[1]!));
    const builtIn = new Set(["String", "Int", "Boolean", "Float", "ID"]);
    const stubs = [...used].filter((n) => n !== own && !builtIn.has(n)).map((n) => {
      const real = ours.getType(n);
      if (isInputObjectType(real)) return `input ${n} { _: Int }`;
      if (isEnumType(real)) return `enum ${n} { _X }`;
      if (isUnionType(real) || isObjectType(real)) return `type ${n} { _: Int }`;
      return `scalar ${n}`;
    });
    const roots = own === "Query" ? "" : "type Query { _: Int }";
    return `${stubs.join("\n")}\n${roots}`;
  }
});

t.test("a post reaches every subscriber of the experience on both hubs, as sent, and nobody else", async (t) => {
  const { alice, bob, carol, dave } = players as Record<string, Who>;
  const aliceOnA = await subscribe(alice!, "A");
  const bobOnB = await subscribe(bob!, "B");
  const carolOnB = await subscribe(carol!, "B");
  const daveOnA = await subscribe(dave!, "A");

  const body = `<script>alert("x")</script> & <b>bold</b> 'quoted' 🎲 ünïcödé  two  spaces `;
  const arrived: Record<string, number> = {};
  onArrival(aliceOnA, (e) => void (isProbe(e) || (arrived.A ??= performance.now())));
  onArrival(bobOnB, (e) => void (isProbe(e) || (arrived.B ??= performance.now())));
  const posted = performance.now();
  const result = await postChatMessage(alice!.onB, body);
  t.equal(result.__typename, "HubChatCreateUserMessageSuccess", "posted through B");
  if (result.__typename !== "HubChatCreateUserMessageSuccess") return;
  t.equal(result.chatMessage.body, body, "stored exactly as sent");
  t.match(result.chatMessage, { type: "user", userId: alice!.userId, experienceId: roomA, hiddenAt: null });

  await waitReal(aliceOnA, 1);
  await waitReal(bobOnB, 1);
  // Reported against the goal of 1 s, never asserted (the suite runs on loaded machines too).
  t.comment(`posted on B; delivered ${(arrived.A! - posted).toFixed(0)} ms after it was sent on A, ${(arrived.B! - posted).toFixed(0)} ms on B`);
  for (const [who, f] of [["alice on A", aliceOnA], ["bob on B", bobOnB]] as const) {
    t.same(newMessage(real(f)[0]!), { id: result.chatMessage.id, type: "user", body, clientId: result.chatMessage.clientId, userId: alice!.userId, experienceId: roomA, hiddenAt: null }, `${who} got it as sent`);
  }

  // Another room's and another casino's subscribers get their own next message first: so nothing came before.
  const forCarol = await postChatMessage(carol!.onA, "room b only");
  const forDave = await postChatMessage(dave!.onB, "other casino only");
  await waitReal(carolOnB, 1);
  await waitReal(daveOnA, 1);
  t.same(real(carolOnB).map((e) => newMessage(e)?.body), ["room b only"], "carol (another experience) received only her room's message");
  t.same(real(daveOnA).map((e) => newMessage(e)?.body), ["other casino only"], "dave (another casino) received only his room's message");
  t.ok(forCarol.__typename === "HubChatCreateUserMessageSuccess" && forDave.__typename === "HubChatCreateUserMessageSuccess");
  t.equal(real(aliceOnA).length, 1, "and alice did not receive theirs");
});

t.test("hubChatAlert needs a player's session", async (t) => {
  const anonymous = wsClient(a.url);
  const operator = wsClient(b.url, { authorization: `apikey:${op.key}` });
  subscribers.push(anonymous, operator);
  const fa = feed(anonymous, ALERT);
  const fo = feed(operator, ALERT);
  await fa.ended();
  await fo.ended();
  t.match(fa.events, [{ errors: [{ message: /hubChatAlert needs a player's session.*received no valid credential/, extensions: { code: "UNAUTHENTICATED" } }] }], "anonymous: UNAUTHENTICATED");
  t.match(fo.events, [{ errors: [{ message: /received an operator API key/, extensions: { code: "FORBIDDEN" } }] }], "an operator key: FORBIDDEN");
});

t.test("clientId makes a post idempotent: the same id twice, or at once, stores and announces one message", async (t) => {
  const { alice, bob } = players as Record<string, Who>;
  const bobOnA = await subscribe(bob!, "A");
  const clientId = randomUUID();
  const first = await postChatMessage(alice!.onA, "once", clientId);
  const again = await Promise.all([postChatMessage(alice!.onB, "once", clientId), postChatMessage(alice!.onA, "once, changed", clientId)]);
  t.equal(first.__typename, "HubChatCreateUserMessageSuccess");
  for (const r of again) t.same(r, first, "the same message answered");
  t.equal(await messageRows("user_id = $1 and client_id = $2", [alice!.userId, clientId]), 1, "one row stored");
  // A later message arrives after any duplicate would have.
  const marker = await postSystemChatMessage(op.onB, roomA, "marker");
  await until(() => bobOnA.events.some((e) => newMessage(e)?.id === marker.id), 30_000, () => "the marker never arrived");
  t.same(real(bobOnA).map((e) => newMessage(e)?.body), ["once", "marker"], "bob heard of it once");

  const elsewhere = (await a.authenticate(alice!.userId, roomB)).token;
  const reused = await gql(a.url, POST, { i: { body: "once", clientId } }, { authorization: `session:${elsewhere}` });
  t.same(codes(reused), ["BAD_USER_INPUT"], "the same clientId from the player's session in another experience is refused");
  t.match(reused.body.errors?.[0]?.message, /already used for a message in another experience/);

  const concurrent = randomUUID();
  const racing = await Promise.all([postChatMessage(bob!.onA, "race", concurrent), postChatMessage(bob!.onB, "race", concurrent)]);
  t.same(racing[0], racing[1], "two concurrent posts with one clientId answer one message");
  t.equal(await messageRows("user_id = $1 and client_id = $2", [bob!.userId, concurrent]), 1);
});

t.test("history: newest first, paginated, under row-level security", async (t) => {
  const { carol, dave } = players as Record<string, Who>;
  const posted: string[] = [];
  for (let i = 0; i < 5; i++) posted.push((await postSystemChatMessage(op.onA, roomB, `history ${i}`)).id);
  const page1 = await readChatMessages(carol!.onB, roomB, { first: 3 });
  t.same(page1.messages.map((m) => m.body), ["history 4", "history 3", "history 2"], "newest first");
  t.equal(page1.hasNextPage, true);
  const page2 = await readChatMessages(carol!.onB, roomB, { first: 3, after: page1.endCursor });
  t.same(page2.messages.slice(0, 2).map((m) => m.body), ["history 1", "history 0"], "the next page goes on from there");

  const after = await carol!.onA.request<{ hubChatMessageById: unknown; hubCurrentExperience: { hubChatMessagesByExperienceId: { nodes: { body: string }[] } } }>(
    `query($id: UUID!, $after: UUID!) {
      hubChatMessageById(id: $id) { id }
      hubCurrentExperience { hubChatMessagesByExperienceId(condition: { afterId: $after }, orderBy: ID_ASC) { nodes { body } } }
    }`,
    { id: posted[0], after: posted[2] },
  );
  t.ok(after.hubChatMessageById, "carol reads a message of her experience by id");
  t.same(after.hubCurrentExperience.hubChatMessagesByExperienceId.nodes.map((n) => n.body), ["history 3", "history 4"], "condition afterId: the messages after an id");

  t.same((await readChatMessages(dave!.onA, roomB)).messages, [], "a player of another casino reads nothing of it");
  const byId = await dave!.onA.request<{ hubChatMessageById: unknown }>("query($id: UUID!) { hubChatMessageById(id: $id) { id } }", { id: posted[0] });
  t.equal(byId.hubChatMessageById, null, "not even by id");
  const { alice } = players as Record<string, Who>;
  const mine = await alice!.onA.request<{ hubChatMessageById: unknown }>("query($id: UUID!) { hubChatMessageById(id: $id) { id } }", { id: posted[0] });
  t.equal(mine.hubChatMessageById, null, "nor a player of another experience of the same casino");
  t.equal((await readChatMessages(op.onB, roomB, { first: 10 })).messages.length >= 5, true, "an operator reads every experience's chat");
});

t.test("bad input is refused with its code and stores nothing", async (t) => {
  const { frank } = players as Record<string, Who>;
  const before = await messageRows("true", []);
  const cases: [string, unknown, string][] = [
    ["an empty body", "", "CHAT_BODY_EMPTY"],
    ["only spaces", "   ", "CHAT_BODY_EMPTY"],
    ["501 characters", "é".repeat(501), "CHAT_BODY_TOO_LONG"],
    ["a line break", "one\ntwo", "CHAT_BODY_CONTROL_CHARACTER"],
    ["a bell", "ding\u0007", "CHAT_BODY_CONTROL_CHARACTER"],
    ["a C1 control", "next\u0085line", "CHAT_BODY_CONTROL_CHARACTER"],
  ];
  for (const [what, body, code] of cases) {
    const res = await gql(b.url, POST, { i: { body, clientId: randomUUID() } }, { authorization: `session:${frank!.token}` });
    t.same(codes(res), [code], `${what}: ${code}`);
    if (code === "CHAT_BODY_TOO_LONG") t.match(res.body.errors?.[0], { message: /at most 500 characters; received 501/, extensions: { limit: 500 } });
  }
  const anonymous = await gql(a.url, POST, { i: { body: "hi", clientId: randomUUID() } });
  t.same(codes(anonymous), ["UNAUTHENTICATED"], "an anonymous caller: UNAUTHENTICATED");
  const operator = await gql(a.url, POST, { i: { body: "hi", clientId: randomUUID() } }, { authorization: `apikey:${op.key}` });
  t.same(codes(operator), ["FORBIDDEN"], "an operator cannot post as a player");
  const system = await gql(a.url, "mutation($i: HubChatCreateSystemMessageInput!) { hubChatCreateSystemMessage(input: $i) { chatMessage { id } } }", {
    i: { body: "hi", clientId: randomUUID(), experienceId: roomA },
  }, { authorization: `session:${frank!.token}` });
  t.same(codes(system), ["FORBIDDEN"], "a player cannot post system messages");
  t.equal(await messageRows("true", []), before, "nothing was stored");

  const longest = "é".repeat(500);
  const ok = await postChatMessage(frank!.onA, longest);
  t.ok(ok.__typename === "HubChatCreateUserMessageSuccess" && ok.chatMessage.body === longest, "500 characters are accepted");
});

t.test("mods mute and unmute in their experience; the player's subscription hears it; a muted post stores nothing", async (t) => {
  const { alice, bob, carol, dave, frank } = players as Record<string, Who>;
  const MUTE = "mutation($i: HubChatMuteUserInput!) { hubChatMuteUser(input: $i) { chatMute { id userId experienceId expiredAt reason revokedAt } } }";
  const UNMUTE = "mutation($i: HubChatUnmuteUserInput!) { hubChatUnmuteUser(input: $i) { chatMute { id revokedAt } } }";
  const ADD = "mutation($i: HubChatAddModInput!) { hubChatAddMod(input: $i) { chatMod { id userId experienceId } } }";
  const REMOVE = "mutation($i: HubChatRemoveModInput!) { hubChatRemoveMod(input: $i) { _ } }";
  const bobHeader = { authorization: `session:${bob!.token}` };

  t.same(codes(await gql(a.url, MUTE, { i: { userId: alice!.userId } }, bobHeader)), ["FORBIDDEN"], "bob is not a mod yet");
  t.same(codes(await gql(a.url, ADD, { i: { experienceId: roomA, userId: bob!.userId } }, bobHeader)), ["FORBIDDEN"], "a player cannot add mods");
  const added = await op.onA.request("mutation($i: HubChatAddModInput!) { hubChatAddMod(input: $i) { chatMod { id userId experienceId } } }", { i: { experienceId: roomA, userId: bob!.userId } });
  t.match(added, { hubChatAddMod: { chatMod: { userId: bob!.userId, experienceId: roomA } } }, "the operator made bob a mod of room-a");
  t.same(codes(await gql(a.url, ADD, { i: { experienceId: roomA, userId: dave!.userId } }, { authorization: `apikey:${op.key}` })), ["CHAT_NOT_FOUND"], "a player of another casino cannot be its mod");

  const aliceOnB = await subscribe(alice!, "B");
  const expiredAt = new Date(Date.now() + 3_600_000).toISOString();
  const muted = await gql(a.url, MUTE, { i: { userId: alice!.userId, expiredAt, reason: "spam" } }, bobHeader);
  t.notOk(muted.body.errors, "bob muted alice");
  t.match(muted.body.data, { hubChatMuteUser: { chatMute: { userId: alice!.userId, experienceId: roomA, reason: "spam", revokedAt: null } } });
  await waitReal(aliceOnB, 1);
  t.same(real(aliceOnB)[0]!.data, { hubChatAlert: { __typename: "HubChatSubscriptionMuted", _: null } }, "alice's own subscription on the other hub heard of it");

  const MUTES = "{ hubCurrentExperience { hubChatMutesByExperienceId { nodes { userId reason } } } }";
  const modView = await gql(b.url, MUTES, {}, bobHeader);
  t.match(modView.body.data, { hubCurrentExperience: { hubChatMutesByExperienceId: { nodes: [{ userId: alice!.userId, reason: "spam" }] } } }, "a mod reads the experience's mutes");
  const otherView = await gql(b.url, MUTES, {}, { authorization: `session:${frank!.token}` });
  t.same(otherView.body.data, { hubCurrentExperience: { hubChatMutesByExperienceId: { nodes: [] } } }, "another player of the room reads none of them");
  const ownView = await gql(b.url, "{ hubCurrentUser { hubChatMutesByUserId { nodes { reason expiredAt } } } }", {}, { authorization: `session:${alice!.token}` });
  t.match(ownView.body.data, { hubCurrentUser: { hubChatMutesByUserId: { nodes: [{ reason: "spam", expiredAt: String }] } } }, "the muted player reads their own mute");

  const before = await messageRows("user_id = $1", [alice!.userId]);
  const refused = await postChatMessage(alice!.onA, "can you hear me?");
  t.equal(refused.__typename, "HubChatUserMuted", "a muted post answers HubChatUserMuted");
  t.match(refused, { message: /muted.*spam/ });
  t.equal(await messageRows("user_id = $1", [alice!.userId]), before, "and stores nothing");

  t.same(codes(await gql(a.url, MUTE, { i: { userId: dave!.userId } }, bobHeader)), ["CHAT_NOT_FOUND"], "a mod cannot mute a player of another casino");
  t.same(codes(await gql(a.url, MUTE, { i: { userId: carol!.userId, expiredAt: new Date(Date.now() - 1000).toISOString() } }, { authorization: `apikey:${op.key}` })), ["CHAT_MUTE_INVALID"], "an expiry in the past is refused");
  t.same(codes(await gql(a.url, MUTE, { i: { userId: alice!.userId } }, { authorization: `session:${carol!.token}` })), ["FORBIDDEN"], "a player who is no mod cannot mute");

  const unmuted = await gql(b.url, UNMUTE, { i: { userId: alice!.userId } }, bobHeader);
  t.match(unmuted.body.data, { hubChatUnmuteUser: { chatMute: { revokedAt: String } } }, "bob unmuted alice");
  await waitReal(aliceOnB, 2);
  t.same(real(aliceOnB)[1]!.data, { hubChatAlert: { __typename: "HubChatSubscriptionUnmuted", _: null } }, "alice heard of that too");
  t.same(codes(await gql(b.url, UNMUTE, { i: { userId: alice!.userId } }, bobHeader)), ["CHAT_NOT_MUTED"], "unmuting again: CHAT_NOT_MUTED");
  t.equal((await postChatMessage(alice!.onA, "back")).__typename, "HubChatCreateUserMessageSuccess", "alice posts again");

  // An operator's mute holds in every experience of the player's casino.
  const carolMuted = await op.onB.request("mutation($i: HubChatMuteUserInput!) { hubChatMuteUser(input: $i) { chatMute { experienceId expiredAt } } }", { i: { userId: carol!.userId } });
  t.match(carolMuted, { hubChatMuteUser: { chatMute: { experienceId: roomB, expiredAt: null } } }, "answered with the experience of carol's session");
  t.equal((await postChatMessage(carol!.onA, "hello?")).__typename, "HubChatUserMuted");
  await op.onA.request(UNMUTE, { i: { userId: carol!.userId } });
  t.equal((await postChatMessage(carol!.onA, "hello!")).__typename, "HubChatCreateUserMessageSuccess", "and the operator's unmute ends it");

  // A mute with an expiry ends by itself.
  await op.onA.request(MUTE, { i: { userId: frank!.userId, expiredAt: new Date(Date.now() + 1500).toISOString(), reason: "a moment" } });
  t.equal((await postChatMessage(frank!.onB, "muted for a moment")).__typename, "HubChatUserMuted", "frank is muted until his mute expires");
  const started = Date.now();
  let after = "";
  // Muted posts store nothing and do not count against the rate limit: try every 300 ms.
  while (after !== "HubChatCreateUserMessageSuccess" && Date.now() - started < 10_000) {
    await new Promise((r) => setTimeout(r, 300));
    after = (await postChatMessage(frank!.onA, "back after a moment")).__typename;
  }
  t.equal(after, "HubChatCreateUserMessageSuccess", "and posts again once it expired (waited up to 10 s)");

  t.same((await op.onA.request(REMOVE, { i: { experienceId: roomA, userId: bob!.userId } })) as unknown, { hubChatRemoveMod: { _: true } }, "the operator removed bob");
  t.same(codes(await gql(a.url, MUTE, { i: { userId: alice!.userId } }, bobHeader)), ["FORBIDDEN"], "bob mutes no more");
});

t.test("a mod added while another request removes it: every add answers the row it wrote, never a null chatMod", async (t) => {
  const { erin } = players as Record<string, Who>;
  const ADD = "mutation($i: HubChatAddModInput!) { hubChatAddMod(input: $i) { chatMod { id userId experienceId hubUserByUserId { uname } } } }";
  const REMOVE = "mutation($i: HubChatRemoveModInput!) { hubChatRemoveMod(input: $i) { _ } }";
  const input = { i: { experienceId: roomA, userId: erin!.userId } };
  const operator = { authorization: `apikey:${op.key}` };
  const adds: Awaited<ReturnType<typeof gql>>[] = [];
  // Each add's payload used to be read again after its commit: a removal in between left it null.
  for (let round = 0; round < 50; round++) {
    const answers = await Promise.all([0, 1, 2, 3].map((k) => gql(k % 2 ? b.url : a.url, k % 2 ? REMOVE : ADD, input, operator)));
    adds.push(answers[0]!, answers[2]!);
    t.same(answers.flatMap((r) => r.body.errors ?? []), [], `round ${round + 1}: no errors`);
  }
  const wrong = adds.filter((r) => (r.body.data as any)?.hubChatAddMod?.chatMod?.userId !== erin!.userId);
  t.same(wrong.map((r) => r.body), [], `all ${adds.length} adds answered erin's mod row, her user included`);
  await gql(a.url, REMOVE, input, operator);
});

t.test("operators post system messages and hide messages; players stop reading hidden ones", async (t) => {
  const { alice, erin } = players as Record<string, Who>;
  const aliceOnA = await subscribe(alice!, "A");
  const clientId = randomUUID();
  const system = await postSystemChatMessage(op.onB, roomA, "Welcome to room A", clientId);
  t.match(system, { type: "system", userId: null, body: "Welcome to room A", experienceId: roomA });
  t.same(await postSystemChatMessage(op.onA, roomA, "Welcome to room A", clientId), system, "idempotent by clientId too");
  await waitReal(aliceOnA, 1);
  t.match(newMessage(real(aliceOnA)[0]!), { id: system.id, type: "system", userId: null }, "subscribers receive it");

  const post = await postChatMessage(erin!.onA, "something rude");
  if (post.__typename !== "HubChatCreateUserMessageSuccess") throw new Error("erin could not post");
  const HIDE = "mutation($i: HubChatHideMessageInput!) { hubChatHideMessage(input: $i) { chatMessage { id hiddenAt } } }";
  t.same(codes(await gql(a.url, HIDE, { i: { chatMessageId: post.chatMessage.id } }, { authorization: `session:${erin!.token}` })), ["FORBIDDEN"], "players cannot hide");
  const hidden = await op.onA.request<{ hubChatHideMessage: { chatMessage: { hiddenAt: string | null } } }>(HIDE, { i: { chatMessageId: post.chatMessage.id } });
  t.ok(hidden.hubChatHideMessage.chatMessage.hiddenAt, "hiddenAt is set");
  const seen = (await readChatMessages(alice!.onB, roomA)).messages.map((m) => m.id);
  t.notOk(seen.includes(post.chatMessage.id), "players no longer read it");
  t.ok(seen.includes(system.id));
  const opView = await op.onA.request<{ hubChatMessageById: { hiddenAt: string | null } }>("query($id: UUID!) { hubChatMessageById(id: $id) { hiddenAt } }", { id: post.chatMessage.id });
  t.ok(opView.hubChatMessageById.hiddenAt, "operators still read it, with hiddenAt");
  await op.onA.request(HIDE, { i: { chatMessageId: post.chatMessage.id, hidden: false } });
  t.ok((await readChatMessages(alice!.onB, roomA)).messages.some((m) => m.id === post.chatMessage.id), "shown again");
  t.same(codes(await gql(a.url, HIDE, { i: { chatMessageId: randomUUID() } }, { authorization: `apikey:${op.key}` })), ["CHAT_NOT_FOUND"]);
  await op.onA.request(HIDE, { i: { chatMessageId: post.chatMessage.id } });
  const again = await gql(a.url, POST, { i: { body: "something rude", clientId: post.chatMessage.clientId } }, { authorization: `session:${erin!.token}` });
  t.same(codes(again), ["BAD_USER_INPUT"], "reposting a hidden message's clientId is refused");
});

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;

/** Erin's posts at once on each hub: fewer than the 259 requests a player may have in progress per hub, so none is refused on arrival. */
const FLOOD_PER_HUB = 200;
const POST_ANSWER = "mutation($i: HubChatCreateUserMessageInput!) { hubChatCreateUserMessage(input: $i) { result { __typename ... on HubChatCreateUserMessageSuccess { chatMessage { id } } ... on HubChatUserRateLimited { message } } } }";

t.test("the rate limit answers HubChatUserRateLimited, and one player's flood does not hold up another's message", async (t) => {
  const { erin, frank, alice } = players as Record<string, Who>;
  const aliceOnB = await subscribe(alice!, "B");
  await a.dbPool.query("delete from hub_hidden.chat_rate_bucket where user_id = any($1::uuid[])", [[erin!.userId, frank!.userId]]);
  const before = await messageRows("user_id = $1", [erin!.userId]);

  // When each message reached alice on B, and how many of erin's posts on each hub had been answered by then.
  const answered = { A: 0, B: 0 };
  const arrivals = new Map<string, { at: number; answered: { A: number; B: number } }>();
  onArrival(aliceOnB, (e) => {
    const m = newMessage(e);
    if (m) arrivals.set(m.id, { at: performance.now(), answered: { ...answered } });
  });
  const post = (who: Who, on: "A" | "B", body: string) =>
    gql(on === "A" ? a.url : b.url, POST_ANSWER, { i: { body, clientId: randomUUID() } }, { authorization: `session:${who.token}` });
  /** Frank posts on A; alice hears it on B. Undefined when his post was not accepted. */
  const delivery = async (body: string) => {
    const sent = performance.now();
    const res = await Promise.race([
      post(frank!, "A", body),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`frank's post "${body}" was not answered within 30 s`)), 30_000).unref()),
    ]);
    const result = res.body.data?.hubChatCreateUserMessage?.result;
    t.equal(result?.__typename ?? codes(res)[0], "HubChatCreateUserMessageSuccess", `frank's post "${body}" is accepted`);
    const id: string | undefined = result?.chatMessage?.id;
    if (!id) return undefined;
    await until(() => arrivals.has(id), 30_000, () => `frank's "${body}" never reached alice`);
    return { ms: arrivals.get(id)!.at - sent, answered: arrivals.get(id)!.answered };
  };

  // Unflooded first (3 of frank's 5 posts of the window).
  const quiet: number[] = [];
  for (let i = 0; i < 3; i++) quiet.push((await delivery(`frank, quiet ${i}`))?.ms ?? NaN);

  // Erin's flood, held: the test takes her rate bucket's row first, so none of
  // her posts can finish until it lets go, once frank's message was heard. A
  // flood stuck with all its work in flight is the worst case, and what is
  // checked is what waits on what, not how fast anything runs: were frank's
  // post queued behind hers (one queue, bound or lock per hub rather than per
  // player), or alice's delivery on B behind erin's posts there, his message
  // could not arrive while hers are held, and his post would be refused
  // (TOO_MANY_REQUESTS after 10 s) or go unanswered.
  const floodSent = Date.now();
  const holder = await a.dbPool.connect();
  let held = true;
  const letGo = async () => {
    if (!held) return;
    held = false;
    try {
      await holder.query("commit");
    } finally {
      holder.release();
    }
  };
  t.teardown(letGo);
  await holder.query("begin");
  await holder.query("insert into hub_hidden.chat_rate_bucket (user_id, experience_id, window_start, posts) values ($1, $2, now(), 0)", [erin!.userId, roomA]);
  const answers: { hub: "A" | "B"; typename?: string; message?: string; code?: unknown }[] = [];
  const flood = (hub: "A" | "B") =>
    Promise.all(
      Array.from({ length: FLOOD_PER_HUB }, async (_, i) => {
        const res = await post(erin!, hub, `flood ${hub} ${i}`);
        answered[hub]++;
        const result = res.body.data?.hubChatCreateUserMessage?.result;
        answers.push({ hub, typename: result?.__typename, message: result?.message, code: codes(res)[0] });
      }),
    );
  const flooding = Promise.all([flood("A"), flood("B")]);
  let heldFlood: Awaited<ReturnType<typeof delivery>>;
  try {
    // Jammed: each hub's 3 connections for erin wait in Postgres on the held row (her other posts wait in memory).
    const BLOCKED = "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and application_name = 'hub:superuser'";
    const started = Date.now();
    let blocked = (await a.dbPool.query<{ n: number }>(BLOCKED)).rows[0]!.n;
    while (blocked < 6 && Date.now() - started < 30_000) {
      await new Promise((r) => setTimeout(r, 20));
      blocked = (await a.dbPool.query<{ n: number }>(BLOCKED)).rows[0]!.n;
    }
    t.equal(blocked, 6, "erin's flood holds all 3 of her connections on each hub, each waiting on a lock");
    heldFlood = await delivery("frank, while erin's flood is held");
    t.same(heldFlood?.answered, { A: 0, B: 0 }, "frank's message reached alice on B while every post of erin's still waited");
  } finally {
    await letGo();
  }
  // And while her flood drains (all 400 posts at once on her row).
  const draining = await delivery("frank, while erin's flood drains");
  await flooding;
  const floodMs = Date.now() - floodSent;
  t.comment(`frank (hub A) -> alice (hub B): unflooded ${quiet.map((m) => m.toFixed(0)).join(", ")} ms (median ${median(quiet).toFixed(0)}); while erin's ${FLOOD_PER_HUB} + ${FLOOD_PER_HUB} posts were held ${heldFlood?.ms.toFixed(0)} ms; while they drained ${draining?.ms.toFixed(0)} ms (${FLOOD_PER_HUB - (draining?.answered.A ?? 0)} + ${FLOOD_PER_HUB - (draining?.answered.B ?? 0)} of hers still unanswered then)`);

  // Erin's answers: her first 5 posts of the window, then the rate limit (or, were a post to wait over 10 s for her connections, TOO_MANY_REQUESTS).
  const outcomes: Record<string, number> = {};
  for (const x of answers) outcomes[x.typename ?? String(x.code)] = (outcomes[x.typename ?? String(x.code)] ?? 0) + 1;
  t.comment(`erin's outcomes, all answered ${floodMs} ms after the flood began: ${JSON.stringify(outcomes)}`);
  t.same(Object.keys(outcomes).filter((k) => !["HubChatCreateUserMessageSuccess", "HubChatUserRateLimited", "TOO_MANY_REQUESTS"].includes(k)), [], "erin's posts were accepted or refused for her rate");
  const accepted = outcomes.HubChatCreateUserMessageSuccess ?? 0;
  t.ok(accepted >= 5, `erin's first 5 posts of the window were accepted (${accepted} in all)`);
  t.ok((outcomes.HubChatUserRateLimited ?? 0) > 0, "the flood hit the rate limit");
  const limited = answers.filter((x) => x.typename === "HubChatUserRateLimited");
  const floodOver = Date.now();
  // Her window began with the flood (her bucket row was made just before): each answer's time to post again is 10 s after a window's start.
  const retryAt = (message?: string) => Date.parse(/^At most 5 messages every 10 seconds; post again after (\S+)\.$/.exec(message ?? "")?.[1] ?? "");
  const wrong = limited.filter((x) => !(retryAt(x.message) >= floodSent + 9_000 && retryAt(x.message) <= floodOver + 10_000));
  t.same(wrong, [], `every rate-limited answer says when to post again (${limited.length} of them)`);
  t.match(limited[0], { typename: "HubChatUserRateLimited", message: /^At most 5 messages every 10 seconds; post again after \d{4}-\d\d-\d\dT[\d:.]+Z\.$/ }, "answered with the limit and when to post again");
  t.equal(await messageRows("user_id = $1", [erin!.userId]), before + accepted, "only the accepted posts were stored");
});
