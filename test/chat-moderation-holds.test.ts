/**
 * Moderation holds (an operator's mute outranks a mod; nobody lifts their own
 * mute), chat bodies are one line (every line and paragraph separator
 * refused), and an operator's mute over many experiences is one statement
 * whose reads hold on both instances. Two in-process hubs on one database,
 * real HTTP.
 */
import "./helpers/env.js";
import t from "tap";
import pg from "pg";
import { randomUUID } from "node:crypto";
import { startAndListen } from "@hubpkg/hub";
import { gql } from "./helpers/http.js";
import { makeOperator, makePlayer, type Player } from "./helpers/credentials.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";

const base = { port: 0, logLevel: "silent" as const, handleSignals: false };
const MUTE = "mutation($i: HubChatMuteUserInput!) { hubChatMuteUser(input: $i) { chatMute { id userId experienceId expiredAt reason revokedAt } } }";
const UNMUTE = "mutation($i: HubChatUnmuteUserInput!) { hubChatUnmuteUser(input: $i) { chatMute { id revokedAt } } }";
const ADD = "mutation($i: HubChatAddModInput!) { hubChatAddMod(input: $i) { chatMod { id } } }";
const POST = "mutation($i: HubChatCreateUserMessageInput!) { hubChatCreateUserMessage(input: $i) { result { __typename } } }";
const SYSTEM = "mutation($i: HubChatCreateSystemMessageInput!) { hubChatCreateSystemMessage(input: $i) { chatMessage { id } } }";

let A: string;
let B: string;
let url: string;
let pool: pg.Pool;
let hubs: { url: string; stop(): Promise<void> }[] = [];
let op: { authorization: string };

t.before(async () => {
  const db = await sharedClusterDatabase(t);
  url = db.SUPERUSER_DATABASE_URL;
  const options = { ...base, databaseUrl: db.DATABASE_URL, superuserDatabaseUrl: db.SUPERUSER_DATABASE_URL };
  hubs = [await startAndListen(options), await startAndListen(options)];
  [A, B] = hubs.map((h) => h.url) as [string, string];
  pool = new pg.Pool({ connectionString: url, max: 2 });
  pool.on("error", () => undefined);
  op = (await makeOperator(url)).header;
});
t.teardown(async () => {
  await pool?.end();
  for (const hub of hubs.reverse()) await hub.stop();
});

type Answer = Awaited<ReturnType<typeof gql>>;
const codes = (res: Answer) => (res.body.errors ?? []).map((e) => e.extensions?.code);
const post = async (on: string, who: Player, body: string) => {
  const res = await gql(on, POST, { i: { body, clientId: randomUUID() } }, who.header);
  return (res.body.data?.hubChatCreateUserMessage as { result?: { __typename: string } } | undefined)?.result?.__typename ?? JSON.stringify(res.body.errors);
};

/** The mutes in force of a player, as stored. */
async function activeMutes(userId: string): Promise<{ muted_by: string; expired_at: Date | null }[]> {
  const { rows } = await pool.query("select muted_by, expired_at from hub.chat_mute where user_id = $1 and revoked_at is null and (expired_at is null or expired_at > now())", [userId]);
  return rows;
}

t.test("a mute by the operator holds against the muted mod and their peers, on both instances", async (t) => {
  const experienceName = "holds";
  const [m, peer, player] = await Promise.all(["mod-m", "mod-peer", "plain"].map((u) => makePlayer(url, u, { experienceName })));
  for (const mod of [m!, peer!]) t.same(codes(await gql(A, ADD, { i: { experienceId: mod.experienceId, userId: mod.userId } }, op)), [], "the operator adds a mod");

  const muted = await gql(A, MUTE, { i: { userId: m!.userId, reason: "cool off" } }, op);
  t.same(codes(muted), [], "the operator mutes mod M");
  const held = await activeMutes(m!.userId);
  t.equal(held.length, 1);

  for (const [on, name] of [[A, "A"], [B, "B"]] as const) {
    t.same(codes(await gql(on, UNMUTE, { i: { userId: m!.userId } }, m!.header)), ["CHAT_MODERATION_FORBIDDEN"], `${name}: M cannot lift the operator's mute on themselves`);
    t.same(codes(await gql(on, MUTE, { i: { userId: m!.userId, expiredAt: new Date(Date.now() + 1000).toISOString() } }, m!.header)), ["CHAT_MODERATION_FORBIDDEN"], `${name}: nor shorten it by muting themselves again`);
    t.same(codes(await gql(on, UNMUTE, { i: { userId: m!.userId } }, peer!.header)), ["CHAT_MODERATION_FORBIDDEN"], `${name}: a peer mod cannot lift it`);
    t.same(codes(await gql(on, MUTE, { i: { userId: m!.userId, expiredAt: new Date(Date.now() + 1000).toISOString() } }, peer!.header)), ["CHAT_MODERATION_FORBIDDEN"], `${name}: nor change it`);
    t.equal(await post(on, m!, "am I back?"), "HubChatUserMuted", `${name}: M is still muted`);
  }
  t.same(await activeMutes(m!.userId), held, "the operator's mute is untouched");

  // Concurrent attempts on both instances change nothing either.
  const attempts = await Promise.all([A, B, A, B].map((on, i) => gql(on, i % 2 ? MUTE : UNMUTE, { i: { userId: m!.userId, ...(i % 2 ? { expiredAt: new Date(Date.now() + 1000).toISOString() } : {}) } }, (i < 2 ? m : peer)!.header)));
  t.same(attempts.map(codes), [["CHAT_MODERATION_FORBIDDEN"], ["CHAT_MODERATION_FORBIDDEN"], ["CHAT_MODERATION_FORBIDDEN"], ["CHAT_MODERATION_FORBIDDEN"]]);
  t.same(await activeMutes(m!.userId), held);

  // Mods still moderate each other's mutes of players, and the muted mod still moderates others.
  t.same(codes(await gql(B, MUTE, { i: { userId: player!.userId, reason: "spam" } }, peer!.header)), [], "the peer mutes a player");
  t.same(codes(await gql(A, UNMUTE, { i: { userId: player!.userId } }, m!.header)), [], "M (muted, still a mod) lifts a peer's mute of a player");
  t.equal(await post(B, player!, "thanks"), "HubChatCreateUserMessageSuccess");

  // A mod's mute of a mod: the muted mod cannot lift it either.
  t.same(codes(await gql(A, MUTE, { i: { userId: peer!.userId } }, m!.header)), [], "M mutes the peer");
  t.same(codes(await gql(B, UNMUTE, { i: { userId: peer!.userId } }, peer!.header)), ["CHAT_MODERATION_FORBIDDEN"], "the peer cannot lift their own mute");
  t.same(codes(await gql(B, UNMUTE, { i: { userId: peer!.userId } }, op)), [], "the operator can");

  t.same(codes(await gql(B, UNMUTE, { i: { userId: m!.userId } }, op)), [], "the operator lifts its own mute");
  t.equal(await post(A, m!, "back"), "HubChatCreateUserMessageSuccess", "and M posts again");
  t.same(codes(await gql(A, UNMUTE, { i: { userId: m!.userId } }, m!.header)), ["CHAT_NOT_MUTED"], "nothing left to lift");
});

t.test("a chat body is one line: every control character and line or paragraph separator is refused, on both instances", async (t) => {
  const who = await makePlayer(url, "one-liner", { experienceName: "lines" });
  const { rows: before } = await pool.query<{ n: number }>("select count(*)::int as n from hub.chat_message");
  const refused = ["\n", "\r", "\r\n", "\t", "\v", "\f", "\u007f", "\u0085", "\u009b", "\u2028", "\u2029"];
  for (const [i, sep] of refused.entries()) {
    const on = i % 2 ? B : A;
    const hex = [...sep].map((c) => c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0"));
    // Named by position and code point: a raw separator in a test's name would break the TAP stream itself.
    for (const [where, body] of [["inside", `one${sep}two`], ["leading", `${sep}lead`], ["trailing", `trail${sep}`]] as const) {
      const res = await gql(on, POST, { i: { body, clientId: randomUUID() } }, who.header);
      t.equal(res.status, 200);
      t.same(codes(res), ["CHAT_BODY_CONTROL_CHARACTER"], `U+${hex.join(" U+")} ${where}: refused`);
      t.match(res.body.errors?.[0]?.message, `U+${hex[0]}`, "the message names the character");
    }
    const system = await gql(on, SYSTEM, { i: { body: `system${sep}message`, clientId: randomUUID(), experienceId: who.experienceId } }, op);
    t.same(codes(system), ["CHAT_BODY_CONTROL_CHARACTER"], `U+${hex.join(" U+")}: refused in a system message too`);
  }
  // A NUL byte in any variable is refused before the body is read, as everywhere in the hub.
  for (const on of [A, B]) {
    const res = await gql(on, POST, { i: { body: "nul\u0000byte", clientId: randomUUID() } }, who.header);
    t.same({ status: res.status, codes: codes(res) }, { status: 400, codes: ["BAD_USER_INPUT"] }, "a NUL byte: BAD_USER_INPUT");
  }
  const { rows: after } = await pool.query<{ n: number }>("select count(*)::int as n from hub.chat_message");
  t.equal(after[0]!.n, before[0]!.n, "nothing was stored");
  for (const sep of ["\n", "\u2028", "\u2029", "\u0085"]) {
    const res = await gql(B, MUTE, { i: { userId: who.userId, reason: `two${sep}lines` } }, op);
    t.same(codes(res), ["CHAT_MUTE_INVALID"], `a mute reason with U+${sep.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}: refused`);
  }
  t.equal((await activeMutes(who.userId)).length, 0, "and nobody was muted");
  for (const body of ["no\u00a0break space", "zero\u200bwidth", "emoji 🎲 ok"]) t.equal(await post(B, who, body), "HubChatCreateUserMessageSuccess", `${JSON.stringify(body)}: one line, accepted`);
});

t.test("an operator's mute over many experiences: written at once, read the same on both instances, lifted everywhere", async (t) => {
  const who = await makePlayer(url, "wanderer", { casinoName: "many-rooms", experienceName: "room-0" });
  const { rows } = await pool.query<{ id: string }>(
    "insert into hub.experience (casino_id, name) select $1, 'room-' || n from generate_series(1, 60) n returning id",
    [who.casinoId],
  );
  const muted = await gql(A, MUTE, { i: { userId: who.userId, reason: "everywhere" } }, op);
  t.same(codes(muted), []);
  t.match(muted.body.data, { hubChatMuteUser: { chatMute: { experienceId: who.experienceId, reason: "everywhere" } } }, "answered in the experience of the player's session");
  t.equal((await activeMutes(who.userId)).length, rows.length + 1, "one mute in force per experience of the casino");
  const again = await gql(B, MUTE, { i: { userId: who.userId, reason: "still" } }, op);
  t.equal((again.body.data?.hubChatMuteUser as { chatMute: { id: string } }).chatMute.id, (muted.body.data?.hubChatMuteUser as { chatMute: { id: string } }).chatMute.id, "muting again changes the same mute");
  t.equal((await activeMutes(who.userId)).length, rows.length + 1, "and adds none");
  for (const on of [A, B]) {
    const own = await gql(on, "{ hubCurrentUser { hubChatMutesByUserId { nodes { reason experienceId } } } }", {}, who.header);
    t.same((own.body.data?.hubCurrentUser as { hubChatMutesByUserId: { nodes: unknown[] } }).hubChatMutesByUserId.nodes, [{ reason: "still", experienceId: who.experienceId }], "the player reads the mute of their session's experience");
    t.equal(await post(on, who, "hello?"), "HubChatUserMuted");
  }
  t.same(codes(await gql(B, UNMUTE, { i: { userId: who.userId } }, op)), []);
  t.equal((await activeMutes(who.userId)).length, 0, "lifted in every experience");
  t.equal(await post(A, who, "hello!"), "HubChatCreateUserMessageSuccess");
});

t.test("bad input to moderation: wrong types, huge values and NUL bytes are refused with a client code, never a 5xx", async (t) => {
  const who = await makePlayer(url, "target", { experienceName: "bad-input" });
  const cases: [string, string, Record<string, unknown>][] = [
    ["userId a number", MUTE, { userId: 42 }],
    ["userId huge", MUTE, { userId: "x".repeat(100_000) }],
    ["userId with NUL", UNMUTE, { userId: `${who.userId}\u0000` }],
    ["userId null", UNMUTE, { userId: null }],
    ["reason an object", MUTE, { userId: who.userId, reason: { a: 1 } }],
    ["reason huge", MUTE, { userId: who.userId, reason: "r".repeat(100_000) }],
    ["reason with NUL", MUTE, { userId: who.userId, reason: "a\u0000b" }],
    ["expiredAt a number", MUTE, { userId: who.userId, expiredAt: 1e300 }],
    ["expiredAt huge", MUTE, { userId: who.userId, expiredAt: "9".repeat(10_000) }],
    ["expiredAt with NUL", MUTE, { userId: who.userId, expiredAt: "2999-01-01T00:00:00Z\u0000" }],
  ];
  for (const [what, query, input] of cases) {
    for (const on of [A, B]) {
      const res = await gql(on, query, { i: input }, op);
      t.equal(res.status < 500, true, `${what}: no 5xx (${res.status})`);
      const code = codes(res)[0];
      t.ok(typeof code === "string" && code !== "INTERNAL_SERVER_ERROR", `${what}: a client code (${code})`);
    }
  }
  t.equal((await activeMutes(who.userId)).length, 0, "nothing was muted");
});
