import "./helpers/env.js";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import t from "tap";
import { createCasino, createCurrency, createExperience, createPlayer, createPlayerBalance, startTestServer, type TestServer } from "@hubpkg/hub/test";
import { gql } from "./helpers/http.js";
import { startServerProcess } from "./helpers/process.js";
import { cliOn } from "./helpers/cli.js";
import { sha256 } from "./helpers/secrets.js";
import { tmpDir } from "./helpers/tmp.js";

let server: TestServer;
t.before(async () => {
  server = await startTestServer({ logLevel: "silent" });
});
t.teardown(() => server?.stop());

const BY_UNAME = `mutation($u: String!) { hubCreatePlaygroundSession(input: { uname: $u }) { sessionToken user { id uname casinoId } experience { id name } } }`;
const BY_ID = `mutation($u: UUID!, $e: UUID) { hubCreatePlaygroundSession(input: { userClientId: $u, experienceClientId: $e }) { sessionToken user { id uname casinoId } experience { id name casinoId } } }`;

interface Payload {
  sessionToken: string;
  user: { id: string; uname: string; casinoId: string };
  experience: { id: string; name: string; casinoId: string };
}

async function byId(userClientId: string, experienceClientId?: string): Promise<Payload> {
  const res = await gql(server.url, BY_ID, { u: userClientId, e: experienceClientId ?? null });
  if (res.body.errors) throw new Error(`hubCreatePlaygroundSession failed: ${JSON.stringify(res.body.errors)}`);
  return (res.body.data as { hubCreatePlaygroundSession: Payload }).hubCreatePlaygroundSession;
}

const as = (token: string) => ({ authorization: `session:${token}` });

/** `node dist/cli.js …` on the test server's database. */
const cli = (args: string[]) => cliOn(server)(args);

async function sessionsOf(userId: string): Promise<number> {
  return (await server.dbPool.query<{ n: number }>("select count(*)::int as n from hub.session where user_id = $1", [userId])).rows[0]!.n;
}

t.test("the uname form never returns a session for an existing player", async (t) => {
  // Existing players: one made by the CLI, others by the test kit, one in another casino.
  const made = await cli(["session", "create", "--uname", "alice"]);
  t.equal(made.code, 0, made.stderr);
  const alice = (await server.dbPool.query<{ id: string }>("select id from hub.user where casino_id = $1 and uname = 'alice'", [server.playgroundCasinoId])).rows[0]!;
  const bob = await createPlayer(server.dbPool, { casinoId: server.playgroundCasinoId, uname: "Bob" });
  // Stored names using Unicode look-alikes of plain ones.
  const carol = await createPlayer(server.dbPool, { casinoId: server.playgroundCasinoId, uname: "ｃａｒｏｌ" });
  const dave = await createPlayer(server.dbPool, { casinoId: server.playgroundCasinoId, uname: "da\u200Bve" });
  const acme = await createCasino(server.dbPool, { name: "acme" });
  await createCurrency(server.dbPool, { casinoId: acme.id, key: "ACME" });
  const erin = await createPlayer(server.dbPool, { casinoId: acme.id, uname: "erin" });
  const erinExperience = await createExperience(server.dbPool, { casinoId: acme.id });
  await createPlayerBalance(server.dbPool, { userId: erin.id, experienceId: erinExperience.id, currencyKey: "ACME", amount: 500 });
  const existing = [alice.id, bob.id, carol.id, dave.id, erin.id];
  const sessionsBefore = await Promise.all(existing.map(sessionsOf));

  const taken: [string, string][] = [
    ["alice", "the CLI's player"],
    [" alice ", "with spaces"],
    ["\talice\n", "with tab and newline"],
    ["ALICE", "upper case"],
    ["Alice", "capitalised"],
    ["bob", "the test kit's Bob, lower case"],
    ["Bob", "exactly"],
    ["carol", "fullwidth letters stored"],
    ["CAROL", "fullwidth letters stored, upper case"],
    ["dave", "a zero-width space stored"],
  ];
  for (const [uname, why] of taken) {
    const res = await gql(server.url, BY_UNAME, { u: uname });
    t.match(res.body, { data: null, errors: [{ message: /is taken/, extensions: { code: "UNAME_TAKEN" } }] }, `${JSON.stringify(uname)}: ${why}`);
  }
  const refused: [string, string][] = [
    ["ａｌｉｃｅ", "fullwidth letters sent"],
    ["al\u200Bice", "a zero-width space sent"],
    ["ali\u0301ce", "a combining accent sent"],
    ["alic\u0435", "a Cyrillic e sent"],
    ["", "empty"],
    ["   ", "spaces only"],
    ["x".repeat(51), "too long"],
  ];
  // A NUL byte never reaches the resolver: the hub refuses it in the variables.
  const nul = await gql(server.url, BY_UNAME, { u: "alice\u0000" });
  t.match(nul.body, { errors: [{ message: /contains a NUL character/, extensions: { code: "BAD_USER_INPUT" } }] }, "a NUL byte sent");
  for (const [uname, why] of refused) {
    const res = await gql(server.url, BY_UNAME, { u: uname });
    t.match(res.body, { data: null, errors: [{ message: /uname must be 1 to 50 characters of A-Z, a-z, 0-9/, extensions: { code: "BAD_USER_INPUT" } }] }, `${JSON.stringify(uname)}: ${why}`);
  }
  t.same(await Promise.all(existing.map(sessionsOf)), sessionsBefore, "no session was created for any existing player");

  // A name taken only in another casino: a NEW playground player, never acme's erin.
  const res = await gql(server.url, BY_UNAME, { u: "erin" });
  t.same(res.body.errors, undefined);
  const payload = (res.body.data as { hubCreatePlaygroundSession: Payload }).hubCreatePlaygroundSession;
  t.not(payload.user.id, erin.id, "not acme's erin");
  t.equal(payload.user.casinoId, server.playgroundCasinoId);
  const me = await gql(server.url, "{ hubCurrentUser { id uname } allHubBalances { nodes { amount currencyKey } } }", {}, as(payload.sessionToken));
  t.same(me.body.data, { hubCurrentUser: { id: payload.user.id, uname: "erin" }, allHubBalances: { nodes: [{ amount: 1000, currencyKey: "HOUSE" }] } });
  t.equal((await server.dbPool.query("select amount from hub.balance where user_id = $1", [erin.id])).rows[0].amount, 500, "acme's erin is untouched");

  // A new name works once; the same name again, in any case, is taken.
  const fresh = await gql(server.url, BY_UNAME, { u: " Frank " });
  t.match(fresh.body, { data: { hubCreatePlaygroundSession: { user: { uname: "Frank" } } } }, "a new name: trimmed, a new player");
  t.match((await gql(server.url, BY_UNAME, { u: "frank" })).body, { errors: [{ extensions: { code: "UNAME_TAKEN" } }] });

  // Concurrent requests for the same name in different cases: exactly one player.
  const racing = await Promise.all(["Gina", "gina", "GINA", "gInA", " gina"].map((u) => gql(server.url, BY_UNAME, { u })));
  t.equal(racing.filter((r) => !r.body.errors).length, 1, "one request created the player");
  t.equal(racing.filter((r) => r.body.errors?.[0]?.extensions?.code === "UNAME_TAKEN").length, 4, "the others were told the name is taken");
  const ginas = await server.dbPool.query("select uname from hub.user where casino_id = $1 and lower(uname) = 'gina'", [server.playgroundCasinoId]);
  t.equal(ginas.rowCount, 1);
});

t.test("the client-id form: the same id is the same player, a new id a new player", async (t) => {
  const id = randomUUID();
  const first = await byId(id);
  t.match(first, { user: { uname: /^player-[0-9a-f]{12}$/, casinoId: server.playgroundCasinoId }, experience: { name: "default" } }, "a generated name");
  t.notMatch(first.user.uname, id.slice(0, 8), "the name shows nothing of the id");
  const again = await byId(id);
  t.equal(again.user.id, first.user.id, "the same id: the same player");
  t.not(again.sessionToken, first.sessionToken, "with a new session");
  const sameIdOtherSpelling = await byId(id.toUpperCase().replace(/-/g, ""));
  t.equal(sameIdOtherSpelling.user.id, first.user.id, "the id upper-case without hyphens is the same id");
  const other = await byId(randomUUID());
  t.not(other.user.id, first.user.id, "a new id: a new player");
  t.not(other.user.uname, first.user.uname);

  const balances = await gql(server.url, "{ allHubBalances { nodes { amount } } }", {}, as(again.sessionToken));
  t.same(balances.body.data, { allHubBalances: { nodes: [{ amount: 1000 }] } }, "credited once, not at each session");
  const ledger = await server.dbPool.query("select count(*)::int as n from hub.ledger where user_id = $1", [first.user.id]);
  t.equal(ledger.rows[0].n, 1, "one ledger entry: the starting balance");

  // Ten first calls at once with one new id: one player, credited once.
  const racing = randomUUID();
  const results = await Promise.all(Array.from({ length: 10 }, () => byId(racing)));
  t.equal(new Set(results.map((r) => r.user.id)).size, 1, "one player");
  const raced = await server.dbPool.query("select sum(amount)::float8 as total, count(*)::int as n from hub.balance where user_id = $1", [results[0]!.user.id]);
  t.same(raced.rows[0], { total: 1000, n: 1 }, "one balance of 1000");

  // A player created by the CLI or the test kit has no client id: no id can reach it.
  const kit = await createPlayer(server.dbPool, { casinoId: server.playgroundCasinoId, uname: "kit-player" });
  const guesses = await Promise.all([randomUUID(), "00000000-0000-4000-8000-000000000001"].map((g) => byId(g)));
  for (const g of guesses) t.not(g.user.id, kit.id);
});

t.test("experienceClientId picks or creates a playground experience", async (t) => {
  const user = randomUUID();
  const exp = randomUUID();
  const a = await byId(user, exp);
  t.match(a.experience, { name: /^experience-[0-9a-f]{12}$/, casinoId: server.playgroundCasinoId });
  const b = await byId(user, exp);
  t.equal(b.experience.id, a.experience.id, "the same experience id: the same experience");
  const c = await byId(randomUUID(), exp);
  t.equal(c.experience.id, a.experience.id, "shared by other players");
  const d = await byId(user, randomUUID());
  t.not(d.experience.id, a.experience.id, "a new id: a new experience");
  const seen = await gql(server.url, "{ hubCurrentExperience { id clientId } allHubBalances { nodes { amount } } }", {}, as(a.sessionToken));
  t.same(seen.body.data, { hubCurrentExperience: { id: a.experience.id, clientId: exp }, allHubBalances: { nodes: [{ amount: 1000 }] } }, "the player reads its experience's client id; 1000 HOUSE there");
  const inD = await gql(server.url, "{ allHubBalances { nodes { amount } } }", {}, as(d.sessionToken));
  t.same(inD.body.data, { allHubBalances: { nodes: [{ amount: 1000 }] } }, "and 1000 in each new experience");
});

t.test("one client cannot read another's client id", async (t) => {
  const aliceId = randomUUID();
  const a = await byId(aliceId);
  const bobId = randomUUID();
  const b = await byId(bobId);
  const op = await server.authenticateOperator();

  // The player is found by the SHA-256 (computed here) of the id in lower case with hyphens.
  const stored = await server.dbPool.query("select client_id_digest from hub.user where id = $1", [a.user.id]);
  t.same(stored.rows[0].client_id_digest, sha256(aliceId));

  // HubUser.clientId answers the player itself only; the digest has no field.
  const userType = await gql(server.url, `{ __type(name: "HubUser") { fields { name } } }`);
  const fields = (userType.body.data as any).__type.fields.map((f: { name: string }) => f.name) as string[];
  t.same(fields.filter((f) => /client/i.test(f)), ["clientId"], "HubUser has clientId and nothing else about the id");
  t.same((await gql(server.url, "{ allHubUsers { nodes { id clientId } } }", {}, as(a.sessionToken))).body.data, { allHubUsers: { nodes: [{ id: a.user.id, clientId: aliceId }] } });
  const BOTH = "query($a: UUID!, $b: UUID!) { a: hubUserById(id: $a) { clientId } b: hubUserById(id: $b) { clientId } }";
  const ids = { a: a.user.id, b: b.user.id };
  t.same((await gql(server.url, BOTH, ids, as(b.sessionToken))).body.data, { a: null, b: { clientId: bobId } }, "another player: not even the row");
  t.same((await gql(server.url, BOTH, ids, { authorization: `apikey:${op.apiKey}` })).body.data, { a: { clientId: null }, b: { clientId: null } }, "an operator: the rows, no ids");
  for (const headers of [as(b.sessionToken), { authorization: `apikey:${op.apiKey}` }]) {
    const res = await gql(server.url, "{ allHubUsers { nodes { id clientIdDigest } } }", {}, headers);
    t.match(res.body.errors?.[0]?.message, /Cannot query field "clientIdDigest"/);
  }
  const lookups = await gql(server.url, `{ __schema { queryType { fields { name } } } }`);
  t.same(((lookups.body.data as any).__schema.queryType.fields as { name: string }[]).filter((f) => /ClientId/i.test(f.name)), [], "no lookup by client id");
  const players = await gql(server.url, "{ allHubUsers { nodes { id } } }", {}, as(b.sessionToken));
  t.same(players.body.data, { allHubUsers: { nodes: [{ id: b.user.id }] } }, "a player sees only itself");

  // Below GraphQL: the role every GraphQL request runs as may not select the column at all.
  const client = await server.dbPool.connect();
  try {
    await client.query("begin");
    await client.query("set local role app_postgraphile");
    await t.rejects(client.query("select client_id_digest from hub.user"), { code: "42501" }, "permission denied for app_postgraphile");
    await client.query("rollback");
  } finally {
    client.release();
  }
});

t.test("only the session key the id was sealed with opens it: another player's key, or another key of the same player, reads null", async (t) => {
  const aliceId = randomUUID();
  const a = await byId(aliceId);
  const aliceSealed = (await server.dbPool.query<{ s: Buffer }>("select user_client_id_sealed as s from hub.session where token_digest = $1", [sha256(a.sessionToken)])).rows[0]!.s;
  t.equal(aliceSealed.length, 16, "alice's session keeps a sealed copy");
  const ME = "{ hubCurrentUser { id clientId } }";
  t.same((await gql(server.url, ME, {}, as(a.sessionToken))).body.data, { hubCurrentUser: { id: a.user.id, clientId: aliceId } }, "control: alice's own key opens it");

  // Alice's sealed copy put on a fresh session of another playground player (before its first use, so nothing is cached).
  const bobId = randomUUID();
  await byId(bobId);
  const bob = await byId(bobId);
  await server.dbPool.query("update hub.session set user_client_id_sealed = $1 where token_digest = $2", [aliceSealed, sha256(bob.sessionToken)]);
  const bobMe = await gql(server.url, `query($a: UUID!) { hubCurrentUser { id clientId } hubUserById(id: $a) { clientId } }`, { a: a.user.id }, as(bob.sessionToken));
  t.same(bobMe.body, { data: { hubCurrentUser: { id: bob.user.id, clientId: null }, hubUserById: null } }, "bob's key opens it to nothing: neither alice's id nor a wrong one");

  // And on another session of alice herself, made otherwise (a different key): null too.
  const other = await server.authenticate(a.user.id, a.experience.id);
  await server.dbPool.query("update hub.session set user_client_id_sealed = $1 where token_digest = $2", [aliceSealed, sha256(other.token)]);
  t.same((await gql(server.url, ME, {}, as(other.token))).body.data, { hubCurrentUser: { id: a.user.id, clientId: null } }, "another key of alice's: null");
  t.same((await gql(server.url, ME, {}, as(a.sessionToken))).body.data, { hubCurrentUser: { id: a.user.id, clientId: aliceId } }, "alice's first session still reads it");
});

t.test("bad input: one form per call, and a clear code", async (t) => {
  const cases: [string, Record<string, unknown>, RegExp, string][] = [
    ["both forms", { uname: "hank", userClientId: randomUUID() }, /either \{ userClientId, experienceClientId \}.*or \{ uname \}, not both; received userClientId, uname/, "BAD_USER_INPUT"],
    ["uname with an experience id", { uname: "hank", experienceClientId: randomUUID() }, /not both/, "BAD_USER_INPUT"],
    ["the nil UUID as the only experience id", { experienceClientId: "00000000-0000-0000-0000-000000000000" }, /experienceClientId must be a random UUID.*nil UUID/, "BAD_USER_INPUT"],
    ["the nil UUID", { userClientId: "00000000-0000-0000-0000-000000000000" }, /userClientId must be a random UUID.*nil UUID/, "BAD_USER_INPUT"],
    ["the max UUID as experience", { userClientId: randomUUID(), experienceClientId: "ffffffff-ffff-ffff-ffff-ffffffffffff" }, /experienceClientId must be a random UUID.*max UUID/, "BAD_USER_INPUT"],
  ];
  const mutation = "mutation($i: HubCreatePlaygroundSessionInput!) { hubCreatePlaygroundSession(input: $i) { sessionToken } }";
  const users = (await server.dbPool.query("select count(*)::int as n from hub.user")).rows[0].n as number;
  for (const [name, input, message, code] of cases) {
    const res = await gql(server.url, mutation, { i: input });
    t.match(res.body.errors?.[0], { message, extensions: { code } }, name);
  }
  const notUuid = await gql(server.url, mutation, { i: { userClientId: "alice" } });
  t.match(notUuid.body.errors?.[0]?.message, /Invalid UUID/, "not a UUID: refused by the UUID type");
  t.equal((await server.dbPool.query("select count(*)::int as n from hub.user")).rows[0].n, users, "nothing was created");
});

t.test("the other revision's forms: {} and { experienceClientId } make a new player, and the payload's query answers as that player", async (t) => {
  const LOGIN = `mutation($i: HubCreatePlaygroundSessionInput!) { hubCreatePlaygroundSession(input: $i) {
    success { sessionKey userId experienceId uname }
    query { hubCurrentUser { id uname hubBalanceByCurrency(currency: "HOUSE") { amount } activeHashChain { id } } hubCurrentExperience { id } } } }`;
  const login = async (input: Record<string, unknown>) => {
    const res = await gql(server.url, LOGIN, { i: input });
    t.same(res.body.errors, undefined, JSON.stringify(input));
    return (res.body.data as any).hubCreatePlaygroundSession as {
      success: { sessionKey: string; userId: string; experienceId: string; uname: string };
      query: {
        hubCurrentUser: { id: string; uname: string; hubBalanceByCurrency: { amount: number } | null; activeHashChain: { id: string } | null } | null;
        hubCurrentExperience: { id: string } | null;
      };
    };
  };
  const first = await login({});
  const second = await login({});
  t.not(second.success.userId, first.success.userId, "{} twice: two players");
  t.not(second.success.experienceId, first.success.experienceId, "{} twice: two experiences");
  for (const p of [first, second]) {
    t.same(p.query, {
      hubCurrentUser: { id: p.success.userId, uname: p.success.uname, hubBalanceByCurrency: { amount: 1000 }, activeHashChain: null },
      hubCurrentExperience: { id: p.success.experienceId },
    }, "the login answer shows the new player, its experience, its starting balance and no hash chain yet");
  }

  const experienceClientId = randomUUID();
  const third = await login({ experienceClientId });
  const fourth = await login({ experienceClientId });
  t.not(fourth.success.userId, third.success.userId, "a new player each time");
  t.equal(fourth.success.experienceId, third.success.experienceId, "in the experience the id names");
  t.same(fourth.query.hubCurrentExperience, { id: third.success.experienceId });

  // A player who made a hash chain finds it in the next login's answer (read in that login's experience).
  const userClientId = randomUUID();
  const before = await login({ userClientId });
  t.equal(before.query.hubCurrentUser?.activeHashChain, null, "no chain before the player makes one");
  const made = await gql(server.url, "mutation { hubCreateHashChain { hashChain { id } } }", {}, as(before.success.sessionKey));
  t.same(made.body.errors, undefined, "hubCreateHashChain");
  const chainId = (made.body.data as { hubCreateHashChain: { hashChain: { id: string } } }).hubCreateHashChain.hashChain.id;
  const again = await login({ userClientId });
  t.equal(again.success.userId, before.success.userId, "the same player again");
  t.same(again.query.hubCurrentUser?.activeHashChain, { id: chainId }, "the login answer shows the player's active hash chain");

  // The session works afterwards too, and the anonymous request that logged in stays anonymous for the next one.
  const me = await gql(server.url, "{ hubCurrentUser { id } }", {}, as(third.success.sessionKey));
  t.same(me.body.data, { hubCurrentUser: { id: third.success.userId } });
  t.same((await gql(server.url, "{ hubCurrentUser { id } }")).body.data, { hubCurrentUser: null });
});

/** `node dist/server.js` (the bare hub) with this environment, on its own data dir. */
async function serverProcess(t: { teardown(fn: () => unknown): void }, dataDir: string, env: Record<string, string>) {
  // No drain at stop (5 s in production): nothing here is behind a proxy.
  const proc = await startServerProcess({ HUB_DATA_DIR: dataDir, HUB_EXAMPLES: "off", HOST: "127.0.0.1", LOG_LEVEL: "info", HUB_DRAIN_MS: "0", ...env });
  t.teardown(() => {
    if (proc.child.exitCode === null) proc.child.kill("SIGKILL");
  });
  return proc;
}

async function stopProcess(proc: Awaited<ReturnType<typeof serverProcess>>): Promise<number | null> {
  proc.child.kill("SIGINT");
  return proc.exited;
}

const WARNING = /"level":40,[^\n]*"msg":"the playground is on in production/;
const CREATE = `mutation { hubCreatePlaygroundSession(input: { userClientId: "${randomUUID()}" }) { user { uname } } }`;

t.test("production: the playground is off unless enabled, and a warning is logged when it is on", async (t) => {
  // Its own embedded cluster (one, for the four starts): the playground's default depends on the database being the embedded one.
  const dataDir = tmpDir(t);
  const off = await serverProcess(t, dataDir, { NODE_ENV: "production", HUB_EMBEDDED_POSTGRES: "on" });
  const res = await gql(off.url, CREATE);
  t.match(res.body.errors?.[0]?.message, /Cannot query field "hubCreatePlaygroundSession"/, "off by default, even with the embedded database");
  t.notMatch(off.output(), /playground is on/, "no warning when off");
  t.equal(await stopProcess(off), 0);

  const on = await serverProcess(t, dataDir, { NODE_ENV: "production", HUB_EMBEDDED_POSTGRES: "on", HUB_PLAYGROUND: "on" });
  t.match(on.output(), WARNING, "HUB_PLAYGROUND=on in production: a warning at start");
  t.match((await gql(on.url, CREATE)).body, { data: { hubCreatePlaygroundSession: { user: { uname: /^player-/ } } } }, "and the playground works");
  t.equal(await stopProcess(on), 0);

  const config = path.join(tmpDir(t), "playground-on.mjs");
  fs.writeFileSync(config, "export default { playground: true };\n");
  const option = await serverProcess(t, dataDir, { NODE_ENV: "production", HUB_EMBEDDED_POSTGRES: "on", HUB_CONFIG: config });
  t.match(option.output(), WARNING, "the playground option in production: the same warning");
  t.same((await gql(option.url, CREATE)).body.errors, undefined);
  t.equal(await stopProcess(option), 0);

  const development = await serverProcess(t, dataDir, { NODE_ENV: "development" });
  t.same((await gql(development.url, CREATE)).body.errors, undefined, "development with the embedded database: on by default");
  t.notMatch(development.output(), /playground is on/, "no warning outside production");
  t.equal(await stopProcess(development), 0);
});
