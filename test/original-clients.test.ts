/**
 * Frontends, controllers and controller tests written for the original system, replayed as they
 * are written (only import paths changed): the requests frontends send (login, playground,
 * balances), the casino an operator registers, the names controllers import, the reset script
 * and the start-up of the newest controller template, and the schema clients were generated
 * against. Real Postgres (the test kit's cluster), real HTTP; the casino is a real HTTP server
 * that serves its token keys.
 */
import "./helpers/env.js";
import { randomBytes, randomUUID } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import t from "tap";
import pg from "pg";
import { buildSchema, parse, validate, type GraphQLField, type GraphQLInputField, type GraphQLSchema } from "graphql";
import { SignJWT, exportJWK, exportSPKI, generateKeyPair } from "jose";
import { runMigrations } from "@hubpkg/hub";
import { withPgClientTransaction, withPgPoolTransaction } from "@hubpkg/hub/db";
import {
  startTestServer,
  createPlayer,
  createExperience,
  createCurrency,
  createPlayerBalance,
  getPlayerBalance,
  createHouseBankroll,
  type HubTestServer,
  type TestServer,
} from "@hubpkg/hub/test";
import { gql } from "./helpers/http.js";
import { runServerExpectingFailure, startServerProcess } from "./helpers/process.js";
import { sha256 } from "./helpers/secrets.js";
import { tmpDir, writeFiles } from "./helpers/tmp.js";
import { until } from "./helpers/ws.js";

type Key = Awaited<ReturnType<typeof generateKeyPair>>["privateKey"];

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let server: HubTestServer;
let operator: { authorization: string };
let privateKey: Key;
let sdlDir: string;
/** The casino's own HTTP server: it serves the public key its tokens are signed with. */
let casino: { baseUrl: string; jwksRequests: number; close(): Promise<void> };

t.before(async () => {
  sdlDir = fs.mkdtempSync(path.join(os.tmpdir(), "hub-original-clients-"));
  server = await startTestServer({ logLevel: "silent", exportSchemaSDLPath: path.join(sdlDir, "schema.graphql") });
  operator = { authorization: `apikey:${(await server.authenticateOperator()).apiKey}` };
  const pair = await generateKeyPair("RS256");
  privateKey = pair.privateKey as Key;
  const jwk = { ...(await exportJWK(pair.publicKey)), kid: "casino-1", alg: "RS256", use: "sig" };
  const state = { jwksRequests: 0 };
  const httpServer = http.createServer((req, res) => {
    if (req.url === "/.well-known/jwks.json") {
      state.jwksRequests++;
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: [jwk] }));
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => httpServer.listen(0, "127.0.0.1", resolve));
  casino = {
    baseUrl: `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}`,
    get jwksRequests() {
      return state.jwksRequests;
    },
    close: () => new Promise<void>((resolve) => httpServer.close(() => resolve())),
  };
  // A second casino, registered with its key and a base URL in another case with a trailing slash:
  // frontends send the plain form.
  const added = await gql(
    server.url,
    `mutation($pem: String!) { hubAddCasino(input: { name: "normalised-casino", baseUrl: "HTTPS://Casino.Example/", jwtPublicKey: $pem }) { casinoId } }`,
    { pem: await exportSPKI(pair.publicKey) },
    operator,
  );
  if (added.body.errors) throw new Error(JSON.stringify(added.body.errors));
});
t.teardown(async () => {
  await server?.stop();
  await casino?.close();
  if (sdlDir) fs.rmSync(sdlDir, { recursive: true, force: true });
});

const sign = (claims: Record<string, unknown>, exp: string | number = "5m", key: Key = privateKey) =>
  new SignJWT(claims).setProtectedHeader({ alg: "RS256", kid: "casino-1" }).setExpirationTime(exp).sign(key);

/** The frontend's login mutation, literally: only the base URL and the token are put in. */
const frontendLogin = (baseUrl: string, token: string) =>
  `mutation { hubAuthenticate(input: { casinoBaseUrl: ${JSON.stringify(baseUrl)}, userToken: ${JSON.stringify(token)} }) { success { sessionKey uname experienceId userId } query { hubCurrentUser { id } } } }`;

const ADD_CASINO = `mutation ($input: HubAddCasinoInput!) { hubAddCasino(input: $input) { casinoId } }`;

const asSession = (key: string) => ({ authorization: `session:${key}` });

// ---------------------------------------------------------------------------------------------
// Login

t.test("an operator adds the casino in the original's shape; the frontend logs in by its base URL", async (t) => {
  const apiKey = randomUUID();
  const added = await gql(
    server.url,
    ADD_CASINO,
    { input: { name: "original-casino", baseUrl: casino.baseUrl, graphqlUrl: `${casino.baseUrl}/graphql`, apiKey } },
    operator,
  );
  t.same(added.body.errors, undefined);
  const casinoId = added.body.data!.hubAddCasino.casinoId as string;

  // No key given: the hub fetches the casino's keys from <baseUrl>/.well-known/jwks.json.
  const before = casino.jwksRequests;
  const res = await gql(server.url, frontendLogin(casino.baseUrl, await sign({ uname: "olga", experience: "dice" })));
  t.same(res.body.errors, undefined);
  t.ok(casino.jwksRequests > before, "the token was verified with the keys under the casino's base URL");
  const payload = res.body.data!.hubAuthenticate;
  const { sessionKey, uname, experienceId, userId } = payload.success;
  t.match(sessionKey, UUID_V4, "the session key is a random UUID (v4)");
  t.equal(uname, "olga");
  // The query field is the whole Query, read as the player who just logged in.
  t.same(payload.query, { hubCurrentUser: { id: userId } });

  t.same((await server.dbPool.query("select id, casino_id from hub.user where id = $1", [userId])).rows, [{ id: userId, casino_id: casinoId }]);
  const session = await server.dbPool.query("select token_digest from hub.session where user_id = $1", [userId]);
  t.equal(session.rowCount, 1);
  t.same(session.rows[0].token_digest, sha256(sessionKey), "only the SHA-256 digest of the key is stored");

  // Sent back as the original's clients send it.
  const me = await gql(server.url, "{ hubCurrentUser { id uname } hubCurrentExperience { id name } }", {}, asSession(sessionKey));
  t.same(me.body.data, { hubCurrentUser: { id: userId, uname: "olga" }, hubCurrentExperience: { id: experienceId, name: "dice" } });
});

t.test("the original's hubAddCasino input: URLs readable, the API key stored in hub_secret and shown nowhere", async (t) => {
  const apiKey = "3f2b1c4e-9d8a-4b7c-8e6f-5a4d3c2b1a09";
  const added = await gql(server.url, ADD_CASINO, {
    input: { name: "fields-casino", baseUrl: "https://casino.fields.example/", graphqlUrl: "https://casino.fields.example/graphql", apiKey },
  }, operator);
  t.same(added.body.errors, undefined);
  const casinoId = added.body.data!.hubAddCasino.casinoId as string;

  const read = await gql(server.url, `query ($id: UUID!) { hubCasinoById(id: $id) { id name baseUrl graphqlUrl } }`, { id: casinoId }, operator);
  t.same(read.body.errors, undefined);
  t.same(read.body.data!.hubCasinoById, { id: casinoId, name: "fields-casino", baseUrl: "https://casino.fields.example/", graphqlUrl: "https://casino.fields.example/graphql" });

  // Stored, in hub_secret only.
  t.same((await server.dbPool.query("select api_key from hub_secret.casino_api_key where casino_id = $1", [casinoId])).rows, [{ api_key: apiKey }]);
  // Only baseUrl given: the tokens' keys are looked up under it.
  const auth = await server.dbPool.query("select jwks_url, public_key from hub_secret.casino_auth where casino_id = $1", [casinoId]);
  t.same(auth.rows, [{ jwks_url: "https://casino.fields.example/.well-known/jwks.json", public_key: null }]);

  // A jwksUrl given overrides that default; no apiKey: nothing stored.
  const other = await gql(server.url, ADD_CASINO, { input: { name: "fields-casino-2", baseUrl: "https://c2.example", jwksUrl: "https://keys.example/jwks" } }, operator);
  t.same(other.body.errors, undefined);
  const otherId = other.body.data!.hubAddCasino.casinoId as string;
  t.same((await server.dbPool.query("select jwks_url from hub_secret.casino_auth where casino_id = $1", [otherId])).rows, [{ jwks_url: "https://keys.example/jwks" }]);
  t.same((await server.dbPool.query("select 1 from hub_secret.casino_api_key where casino_id = $1", [otherId])).rows, []);

  // The GraphQL role cannot select the key, whatever the schema says.
  const client = await server.dbPool.connect();
  try {
    await client.query("begin");
    await client.query("set local role app_postgraphile");
    await t.rejects(client.query("select api_key from hub_secret.casino_api_key"), { code: "42501" });
  } finally {
    await client.query("rollback");
    client.release();
  }

  // No output type of the schema has a field for it.
  const intro = await gql(server.url, `{ __schema { types { name kind fields { name } } } }`);
  const types = intro.body.data!.__schema.types as { name: string; kind: string; fields: { name: string }[] | null }[];
  const outputFields = types.filter((ty) => ty.kind === "OBJECT").flatMap((ty) => (ty.fields ?? []).map((f) => `${ty.name}.${f.name}`));
  // The exceptions: the hub's own new API key, shown once to the operator who created it, and the original's
  // HubCasinoSecret.apiKey, which always answers the nil UUID (test/original-surface.test.ts).
  const shown = new Set(["HubCreateApiKeyPayload.apiKey", "HubCasinoSecret.apiKey"]);
  t.same(outputFields.filter((f) => (/\.apiKey$/i.test(f) && !shown.has(f)) || /casinoApiKey/i.test(f)), [], "no apiKey field on any output type");
  t.same(types.filter((ty) => /CasinoApiKey/i.test(ty.name)).map((ty) => ty.name), [], "no type for the casino's key");

  // Bad input: clear codes, the key never echoed.
  const badUrl = await gql(server.url, ADD_CASINO, { input: { name: "bad-url", graphqlUrl: "ftp://casino.example/graphql" } }, operator);
  t.equal(badUrl.body.errors?.[0]?.extensions?.code, "BAD_USER_INPUT");
  t.match(badUrl.body.errors?.[0]?.message, /graphqlUrl must be/);
  const emptyKey = await gql(server.url, ADD_CASINO, { input: { name: "empty-key", apiKey: "" } }, operator);
  t.equal(emptyKey.body.errors?.[0]?.extensions?.code, "BAD_USER_INPUT");
  t.match(emptyKey.body.errors?.[0]?.message, /apiKey must be/);
  // A player may not add casinos.
  const player = await createPlayer(server.dbPool, { casinoId: server.playgroundCasinoId, uname: "fields-carol" });
  const exp = await createExperience(server.dbPool, { casinoId: server.playgroundCasinoId });
  const p = await server.authenticate(player.id, exp.id);
  const refused = await gql(server.url, ADD_CASINO, { input: { name: "by-player", apiKey } }, asSession(p.token));
  t.equal(refused.body.errors?.[0]?.extensions?.code, "FORBIDDEN");
});

t.test("the casino's apiKey is never logged, even at trace level and when the insert fails", async (t) => {
  const proc = await startServerProcess({ DATABASE_URL: server.databaseUrl, SUPERUSER_DATABASE_URL: server.superuserDatabaseUrl, LOG_LEVEL: "trace", HOST: "127.0.0.1" });
  t.teardown(() => proc.child.kill("SIGKILL"));
  const apiKey = "secret-controller-key-7d41e0c2";
  const ok = await gql(proc.url, ADD_CASINO, { input: { name: "logged-casino", baseUrl: "https://logged.example", graphqlUrl: "https://logged.example/graphql", apiKey } }, operator);
  t.same(ok.body.errors, undefined);
  // The same name again: refused by the database (unique), which is logged at info.
  const dup = await gql(proc.url, ADD_CASINO, { input: { name: "logged-casino", apiKey } }, operator);
  t.ok(dup.body.errors?.length, "duplicate name refused");
  t.not(dup.body.errors?.[0]?.extensions?.code, "INTERNAL_SERVER_ERROR");
  // A last request, logged after the others (one process, one stream): once its line is in, theirs are.
  const fence = `/log-fence-${randomUUID()}`;
  await fetch(`${proc.url}${fence}`);
  await until(() => proc.output().includes(fence), 30_000, () => `the log line of ${fence} (log: ${proc.output().slice(-2000)})`);
  t.match(proc.output(), /request/i, "the server did log the requests");
  t.notOk(proc.output().includes(apiKey), "the key appears in no log line");
});

t.test("the base URL is compared normalised: scheme and host case, trailing slash", async (t) => {
  for (const url of ["https://casino.example", "https://casino.example/", "HTTPS://CASINO.EXAMPLE", "https://Casino.Example:443//"]) {
    const res = await gql(server.url, frontendLogin(url, await sign({ uname: "norm" })));
    t.same(res.body.errors, undefined, url);
    t.match(res.body.data?.hubAuthenticate?.success, { uname: "norm" }, url);
  }
  // A different host or scheme is a different casino.
  for (const url of ["http://casino.example", "https://casino.example.org", "https://casino.example/other"]) {
    const res = await gql(server.url, frontendLogin(url, await sign({ uname: "norm" })));
    t.match(res.body.errors?.[0], { message: /^No casino has the base URL/, extensions: { code: "UNKNOWN_CASINO" } }, url);
  }
});

t.test("login failures keep their distinct codes; exactly one of casinoBaseUrl and casinoId", async (t) => {
  const other = await generateKeyPair("RS256");
  const cases: [string, string, string, string][] = [
    ["another key", "https://casino.example", await sign({ uname: "m" }, "5m", other.privateKey as Key), "USER_TOKEN_BAD_SIGNATURE"],
    ["expired", "https://casino.example", await sign({ uname: "m" }, Math.floor(Date.now() / 1000) - 60), "USER_TOKEN_EXPIRED"],
    ["malformed", "https://casino.example", "not.a.jwt", "USER_TOKEN_MALFORMED"],
    ["no player named", "https://casino.example", await sign({}), "USER_TOKEN_CLAIM"],
    ["unknown casino", "https://nobody.example", await sign({ uname: "m" }), "UNKNOWN_CASINO"],
    ["not a URL", "casino.example", await sign({ uname: "m" }), "BAD_USER_INPUT"],
  ];
  for (const [name, url, token, code] of cases) {
    const res = await gql(server.url, frontendLogin(url, token));
    t.match(res.body.errors?.[0], { extensions: { code } }, name);
    t.equal(res.body.data?.hubAuthenticate ?? null, null, name);
  }
  const bad = await gql(server.url, frontendLogin("casino.example", "x"));
  t.match(bad.body.errors?.[0]?.message, /^casinoBaseUrl must be an http:\/\/ or https:\/\/ URL such as https:\/\/casino\.example; received "casino\.example"\.$/);

  const casinoId = (await server.dbPool.query<{ id: string }>("select id from hub.casino where name = 'normalised-casino'")).rows[0]!.id;
  const token = await sign({ uname: "m" });
  const both = await gql(server.url, `mutation($c: UUID!, $t: String!) { hubAuthenticate(input: { casinoBaseUrl: "https://casino.example", casinoId: $c, userToken: $t }) { success { sessionKey } } }`, { c: casinoId, t: token });
  t.match(both.body.errors?.[0], { message: "hubAuthenticate needs exactly one of casinoBaseUrl and casinoId; received both.", extensions: { code: "BAD_USER_INPUT" } });
  const neither = await gql(server.url, `mutation($t: String!) { hubAuthenticate(input: { userToken: $t }) { success { sessionKey } } }`, { t: token });
  t.match(neither.body.errors?.[0], { message: "hubAuthenticate needs exactly one of casinoBaseUrl and casinoId; received neither.", extensions: { code: "BAD_USER_INPUT" } });

  // This project's shape still works, and both payload shapes are there.
  const res = await gql(
    server.url,
    `mutation($c: UUID!, $t: String!) { hubAuthenticate(input: { casinoId: $c, userToken: $t }) { success { sessionKey uname experienceId userId } sessionToken user { id uname casinoId } experience { id name } } }`,
    { c: casinoId, t: await sign({ uname: "both" }) },
  );
  t.same(res.body.errors, undefined);
  const p = res.body.data!.hubAuthenticate;
  t.equal(p.sessionToken, p.success.sessionKey);
  t.equal(p.user.id, p.success.userId);
  t.equal(p.experience.id, p.success.experienceId);
  t.match(p.user, { uname: "both", casinoId });
});

t.test("credentials issued before UUIDs (43 base64url characters) keep working; new API keys are UUIDs", async (t) => {
  const user = await createPlayer(server.dbPool, { casinoId: server.playgroundCasinoId, uname: `old-${randomBytes(3).toString("hex")}` });
  const experience = await createExperience(server.dbPool, { casinoId: server.playgroundCasinoId, name: `old-${randomBytes(3).toString("hex")}` });
  // Stored the way earlier versions issued them.
  const oldSession = randomBytes(32).toString("base64url");
  await server.dbPool.query("insert into hub.session (user_id, casino_id, experience_id, token_digest) values ($1, $2, $3, $4)", [
    user.id,
    server.playgroundCasinoId,
    experience.id,
    sha256(oldSession),
  ]);
  const oldKey = randomBytes(32).toString("base64url");
  await server.dbPool.query("insert into hub.api_key (key_digest) values ($1)", [sha256(oldKey)]);

  const me = await gql(server.url, "{ hubCurrentUser { id } }", {}, asSession(oldSession));
  t.same(me.body.data, { hubCurrentUser: { id: user.id } });
  const asOldOperator = await gql(server.url, `mutation { hubAddCasino(input: { name: "${`c-${randomBytes(3).toString("hex")}`}" }) { casinoId } }`, {}, { authorization: `apikey:${oldKey}` });
  t.same(asOldOperator.body.errors, undefined, "an API key of the old form is still an operator");
  t.match((await server.authenticateOperator()).apiKey, UUID_V4);
});

// ---------------------------------------------------------------------------------------------
// Playground and the fields frontends read

/** The frontend's playground mutation: the ids it generated once and keeps, and the fields it reads. */
const PLAYGROUND = `mutation($userClientId: UUID!, $experienceClientId: UUID) {
  hubCreatePlaygroundSession(input: { userClientId: $userClientId, experienceClientId: $experienceClientId }) {
    success { sessionKey uname experienceId userId } query { hubCurrentUser { id } } } }`;
/** What it reads once logged in. */
const ME = `{ hubCurrentUser { id uname clientId hubBalanceByCurrency(currency: "HOUSE") { amount currencyKey } } hubCurrentExperience { id clientId } }`;

async function playground(userClientId: string, experienceClientId: string | null = null) {
  const res = await gql(server.url, PLAYGROUND, { userClientId, experienceClientId });
  if (res.body.errors) throw new Error(`hubCreatePlaygroundSession failed: ${JSON.stringify(res.body.errors)}`);
  return res.body.data!.hubCreatePlaygroundSession as {
    success: { sessionKey: string; uname: string; experienceId: string; userId: string };
    query: unknown;
  };
}

t.test("the original's playground session: the same userClientId is the same player, who alone reads it back as clientId", async (t) => {
  const userClientId = randomUUID();
  const experienceClientId = randomUUID();
  const first = await playground(userClientId, experienceClientId);
  t.match(first.success, { sessionKey: UUID_V4, uname: /^player-[0-9a-f]{12}$/ }, "a random UUID key and a generated name");
  t.same(first.query, { hubCurrentUser: { id: first.success.userId } }, "query is read as the new session's player");
  const again = await playground(userClientId, experienceClientId);
  t.equal(again.success.userId, first.success.userId, "the same id: the same player");
  t.equal(again.success.experienceId, first.success.experienceId, "the same experience id: the same experience");
  t.not(again.success.sessionKey, first.success.sessionKey, "with a new session");
  // This project's payload fields beside the original's, and the experience id left out (the default experience).
  const shapes = await gql(
    server.url,
    `mutation($u: UUID!) { hubCreatePlaygroundSession(input: { userClientId: $u, experienceClientId: null }) { success { sessionKey userId } sessionToken user { id } experience { name } } }`,
    { u: userClientId },
  );
  const p = shapes.body.data!.hubCreatePlaygroundSession;
  t.equal(p.sessionToken, p.success.sessionKey);
  t.same([p.success.userId, p.user.id, p.experience.name], [first.success.userId, first.success.userId, "default"]);

  const me = await gql(server.url, ME, {}, asSession(again.success.sessionKey));
  t.same(me.body, {
    data: {
      hubCurrentUser: { id: first.success.userId, uname: first.success.uname, clientId: userClientId, hubBalanceByCurrency: { amount: 1000, currencyKey: "HOUSE" } },
      hubCurrentExperience: { id: first.success.experienceId, clientId: experienceClientId },
    },
  }, "the player reads its own clientId, its experience's, and 1000 HOUSE there");

  // Another player, in the same experience: its own id, never the first one's.
  const otherClientId = randomUUID();
  const other = await playground(otherClientId, experienceClientId);
  t.not(other.success.userId, first.success.userId, "a new id: a new player");
  const otherMe = await gql(server.url, `query($id: UUID!) { hubCurrentUser { clientId } hubUserById(id: $id) { id clientId } }`, { id: first.success.userId }, asSession(other.success.sessionKey));
  t.same(otherMe.body, { data: { hubCurrentUser: { clientId: otherClientId }, hubUserById: null } });

  // An operator sees every player, and no player's client id; the experience's id is not a secret.
  const asOperator = await gql(
    server.url,
    `query($u: UUID!, $e: UUID!) { hubUserById(id: $u) { id clientId } hubExperienceById(id: $e) { clientId } allHubUsers { nodes { clientId } } }`,
    { u: first.success.userId, e: first.success.experienceId },
    operator,
  );
  t.same(asOperator.body.errors, undefined);
  t.same(asOperator.body.data!.hubUserById, { id: first.success.userId, clientId: null }, "an operator gets null");
  t.same(asOperator.body.data!.hubExperienceById, { clientId: experienceClientId });
  t.ok(asOperator.body.data!.allHubUsers.nodes.length >= 2 && asOperator.body.data!.allHubUsers.nodes.every((n: { clientId: unknown }) => n.clientId === null), "null for every player");

  // Sessions without a sealed id: made by the test kit, or by the playground before the id was kept (digest only).
  const kitPlayer = await createPlayer(server.dbPool, { casinoId: server.playgroundCasinoId, uname: "kit-no-client-id" });
  const kitSession = await server.authenticate(kitPlayer.id, first.success.experienceId);
  t.same((await gql(server.url, "{ hubCurrentUser { id clientId } }", {}, asSession(kitSession.token))).body.data, { hubCurrentUser: { id: kitPlayer.id, clientId: null } });
  const earlierClientId = randomUUID();
  const earlier = await server.dbPool.query<{ id: string }>(
    "insert into hub.user (casino_id, uname, client_id_digest) values ($1, 'player-0123456789ab', $2) returning id",
    [server.playgroundCasinoId, sha256(earlierClientId)],
  );
  const earlierKey = randomUUID();
  await server.dbPool.query("insert into hub.session (user_id, casino_id, experience_id, token_digest) values ($1, $2, $3, $4)", [
    earlier.rows[0]!.id,
    server.playgroundCasinoId,
    first.success.experienceId,
    sha256(earlierKey),
  ]);
  t.same((await gql(server.url, "{ hubCurrentUser { id clientId } }", {}, asSession(earlierKey))).body.data, { hubCurrentUser: { id: earlier.rows[0]!.id, clientId: null } }, "a session from before: null");
  const back = await playground(earlierClientId);
  t.equal(back.success.userId, earlier.rows[0]!.id, "an earlier playground player is found by its digest");
  t.same((await gql(server.url, "{ hubCurrentUser { clientId } }", {}, asSession(back.success.sessionKey))).body.data, { hubCurrentUser: { clientId: earlierClientId } }, "logging in again with the id: the new session carries it");

  // Stored: the digest finds the player; each session keeps the id only sealed with its own key, and the GraphQL role cannot read that.
  t.same((await server.dbPool.query("select client_id_digest from hub.user where id = $1", [first.success.userId])).rows, [{ client_id_digest: sha256(userClientId) }]);
  const sealed = await server.dbPool.query<{ s: Buffer }>("select user_client_id_sealed as s from hub.session where token_digest = any($1::bytea[])", [
    [sha256(first.success.sessionKey), sha256(again.success.sessionKey)],
  ]);
  t.equal(sealed.rows.length, 2);
  const idBytes = Buffer.from(userClientId.replace(/-/g, ""), "hex");
  t.ok(sealed.rows.every((r) => r.s.length === 16 && !r.s.equals(idBytes)), "16 sealed bytes, not the id's");
  t.notOk(sealed.rows[0]!.s.equals(sealed.rows[1]!.s), "sealed differently by each session key");
  const client = await server.dbPool.connect();
  try {
    await client.query("begin");
    await client.query("set local role app_postgraphile");
    await t.rejects(client.query("select user_client_id_sealed from hub.session"), { code: "42501" }, "app_postgraphile may not select the sealed copy");
  } finally {
    await client.query("rollback");
    client.release();
  }
});

t.test("HubUser.hubBalanceByCurrency: the session's experience, the asked currency, null when none", async (t) => {
  const db = server.dbPool;
  const casinoId = server.playgroundCasinoId;
  await createCurrency(db, { casinoId, key: "BTC" });
  const alice = await createPlayer(db, { casinoId, uname: "fields-alice" });
  const bob = await createPlayer(db, { casinoId, uname: "fields-bob" });
  const exp1 = await createExperience(db, { casinoId });
  const exp2 = await createExperience(db, { casinoId });
  await createPlayerBalance(db, { userId: alice.id, experienceId: exp1.id, currencyKey: "HOUSE", amount: 11 });
  await createPlayerBalance(db, { userId: alice.id, experienceId: exp1.id, currencyKey: "BTC", amount: 12 });
  await createPlayerBalance(db, { userId: alice.id, experienceId: exp2.id, currencyKey: "HOUSE", amount: 21 });
  await createPlayerBalance(db, { userId: bob.id, experienceId: exp1.id, currencyKey: "HOUSE", amount: 31 });
  const a1 = await server.authenticate(alice.id, exp1.id);
  const a2 = await server.authenticate(alice.id, exp2.id);
  const b1 = await server.authenticate(bob.id, exp1.id);

  const BALANCE = `query ($c: String!) { hubCurrentUser { id hubBalanceByCurrency(currency: $c) { amount currencyKey experienceId userId } } }`;
  const read = async (token: string, currency: string) => {
    const res = await gql(server.url, BALANCE, { c: currency }, asSession(token));
    t.same(res.body.errors, undefined, `no errors for ${currency}`);
    return res.body.data!.hubCurrentUser.hubBalanceByCurrency;
  };
  t.same(await read(a1.token, "HOUSE"), { amount: 11, currencyKey: "HOUSE", experienceId: exp1.id, userId: alice.id });
  t.same(await read(a1.token, "BTC"), { amount: 12, currencyKey: "BTC", experienceId: exp1.id, userId: alice.id });
  t.same(await read(a2.token, "HOUSE"), { amount: 21, currencyKey: "HOUSE", experienceId: exp2.id, userId: alice.id });
  t.equal(await read(a2.token, "BTC"), null, "no BTC balance in experience 2");
  t.equal(await read(a1.token, "NOPE"), null, "unknown currency");
  t.same(await read(b1.token, "HOUSE"), { amount: 31, currencyKey: "HOUSE", experienceId: exp1.id, userId: bob.id });

  // Another player's user row is not visible to alice at all, so neither is its balance.
  const BY_ID = `query ($id: UUID!) { hubUserById(id: $id) { id hubBalanceByCurrency(currency: "HOUSE") { amount } } }`;
  const other = await gql(server.url, BY_ID, { id: bob.id }, asSession(a1.token));
  t.same(other.body, { data: { hubUserById: null } });
  // An operator has no session's experience: the field is null, the user row is visible.
  const asOp = await gql(server.url, BY_ID, { id: alice.id }, operator);
  t.same(asOp.body, { data: { hubUserById: { id: alice.id, hubBalanceByCurrency: null } } });
  // The argument is required.
  const missing = await gql(server.url, `{ hubCurrentUser { hubBalanceByCurrency { amount } } }`, undefined, asSession(a1.token));
  t.match(missing.body.errors?.[0], { message: /argument "currency" of type "String!" is required/, extensions: { code: "GRAPHQL_VALIDATION_FAILED" } });
});

// ---------------------------------------------------------------------------------------------
// What a controller imports and runs

const count = async (pool: pg.Pool, sql: string): Promise<number> => Number((await pool.query<{ n: string }>(sql)).rows[0]!.n);

t.test("@hubpkg/hub/test: HubTestServer is TestServer, and the template's helpers exist under its names", async (t) => {
  const own: HubTestServer = await startTestServer({ logLevel: "silent" });
  const same: TestServer = own;
  t.teardown(() => same.stop());
  const casinoId = own.playgroundCasinoId;
  const player = await createPlayer(own.dbPool, { casinoId, uname: "template-alice" });
  const experience = await createExperience(own.dbPool, { casinoId });
  await createPlayerBalance(own.dbPool, { userId: player.id, experienceId: experience.id, currencyKey: "HOUSE", amount: 70 });
  await createHouseBankroll(own.dbPool, { casinoId, currencyKey: "HOUSE", amount: 1000 });
  const balance = await getPlayerBalance(own.dbPool, { userId: player.id, experienceId: experience.id, currencyKey: "HOUSE" });
  t.equal(balance?.amount, 70);
  const { token } = await own.authenticate(player.id, experience.id);
  const read = await gql(own.url, `{ hubCurrentUser { hubBalanceByCurrency(currency: "HOUSE") { amount } } }`, {}, asSession(token));
  t.same(read.body.data, { hubCurrentUser: { hubBalanceByCurrency: { amount: 70 } } }, "what the helpers wrote is what GraphQL shows");
});

t.test("withPgClientTransaction: commit, rollback and refused nesting on a client the caller holds", async (t) => {
  await server.dbPool.query("create table public.tx_log (n int not null)");
  t.teardown(() => server.dbPool.query("drop table public.tx_log"));
  const client = await server.dbPool.connect();
  t.teardown(() => client.release());
  const n = (where: string) => count(server.dbPool, `select count(*) as n from public.tx_log where ${where}`);

  // Commit: the row is visible from another connection, fn's value is returned.
  const value = await withPgClientTransaction(client, async (pgClient) => {
    t.equal(pgClient, client, "fn gets the same client");
    await pgClient.query("insert into public.tx_log values (1)");
    return "committed";
  });
  t.equal(value, "committed");
  t.equal(await n("n = 1"), 1, "committed row seen by another connection");

  // Rollback: fn's error comes back as it was thrown, nothing of fn is kept.
  const boom = new Error("boom");
  await t.rejects(
    withPgClientTransaction(client, async (pgClient) => {
      await pgClient.query("insert into public.tx_log values (2)");
      throw boom;
    }),
    boom,
  );
  t.equal(await n("n = 2"), 0, "rolled back");

  // Nesting on the same client is refused with a clear error; the outer transaction then rolls back as a whole.
  let nestedError: (Error & { code?: string }) | undefined;
  await t.rejects(
    withPgClientTransaction(client, async (pgClient) => {
      await pgClient.query("insert into public.tx_log values (3)");
      try {
        await withPgClientTransaction(pgClient, async (inner) => inner.query("insert into public.tx_log values (4)"));
      } catch (error) {
        nestedError = error as Error & { code?: string };
        throw error;
      }
    }),
    { code: "HUB_NESTED_TRANSACTION" },
  );
  t.equal(nestedError?.code, "HUB_NESTED_TRANSACTION");
  t.match(nestedError?.message, /already inside a transaction/);
  t.equal(await n("n in (3, 4)"), 0, "neither the outer nor the inner insert was kept");

  // The refusal happens before any statement: an outer transaction that catches it still commits its own work.
  await withPgClientTransaction(client, async (pgClient) => {
    await pgClient.query("insert into public.tx_log values (5)");
    await t.rejects(withPgClientTransaction(pgClient, async () => "never"), { code: "HUB_NESTED_TRANSACTION" });
  });
  t.equal(await n("n = 5"), 1, "outer work committed");

  // Two different clients are independent, and withPgPoolTransaction still rolls back.
  const other = await server.dbPool.connect();
  t.teardown(() => other.release());
  await withPgClientTransaction(client, async (a) => {
    await withPgClientTransaction(other, async (b) => {
      await a.query("insert into public.tx_log values (6)");
      await b.query("insert into public.tx_log values (7)");
    });
  });
  t.equal(await n("n in (6, 7)"), 2);
  await t.rejects(
    withPgPoolTransaction(server.dbPool, async (pgClient) => {
      await pgClient.query("insert into public.tx_log values (8)");
      throw new Error("pool boom");
    }),
    /pool boom/,
  );
  t.equal(await n("n = 8"), 0);
});

t.test("a reset script: drop the schemas, then runMigrations on a client it holds", async (t) => {
  const dir = writeFiles(path.join(tmpDir(t), "migrations"), {
    "001-app.sql": "create schema app; create table app.game (id int primary key);",
    "skip-002-coinflip.sql": "this file is a disabled example and is not sql;",
  });
  const own = await startTestServer({ logLevel: "silent", userDatabaseMigrationsPath: dir });
  t.teardown(() => own.stop());
  await createPlayer(own.dbPool, { casinoId: own.playgroundCasinoId, uname: "before-reset" });
  await own.dbPool.query("insert into app.game values (1)");

  // The template's reset script, as written.
  const pgClient = new pg.Client({ connectionString: own.superuserDatabaseUrl });
  await pgClient.connect();
  t.teardown(() => pgClient.end());
  await pgClient.query("drop schema app, hub, hub_hidden, hub_secret cascade");
  const { applied } = await runMigrations({ pgClient, userDatabaseMigrationsPath: dir });
  t.ok(applied.length > 1, `applied ${applied.join(", ")}`);
  t.equal(applied.at(-1), "001-app.sql", "the user's migrations after the core ones");
  t.notOk(applied.some((name) => name.startsWith("skip-")), "the skip- file is not a migration");
  t.equal(await count(own.dbPool, "select count(*) as n from hub.user where uname = 'before-reset'"), 0, "the old data is gone");
  t.equal(await count(own.dbPool, "select count(*) as n from app.game"), 0, "the user's schema is back, empty");
  t.equal(await count(own.dbPool, "select count(*) as n from hub.casino"), 1, "the core migrations ran again (the playground casino)");

  // Once each: a second run applies nothing; the advisory lock was released on the client.
  t.same((await runMigrations({ pgClient, userDatabaseMigrationsPath: dir })).applied, []);
  t.same((await pgClient.query("select count(*)::int as n from pg_locks where locktype = 'advisory' and pid = pg_backend_pid()")).rows[0].n, 0, "no advisory lock left on the client");

  // Each migration commits on its own: inside a transaction of the caller it is refused before any statement.
  await t.rejects(
    withPgClientTransaction(pgClient, () => runMigrations({ pgClient, userDatabaseMigrationsPath: dir })),
    { code: "HUB_INVALID_ARGUMENT", message: /inside a withPgClientTransaction transaction/ },
  );
  await t.rejects(runMigrations({ pgClient: undefined as never }), { code: "HUB_INVALID_ARGUMENT" });
});

t.test("the newest template's start: POSTGRAPHILE_DATABASE_URL with SUPERUSER_DATABASE_URL, a skip- migration, LOG_PRETTY=true", async (t) => {
  // A database of the test kit's cluster, and its two URLs as the template's .env names them.
  const db = await startTestServer({ logLevel: "silent" });
  t.teardown(() => db.stop());
  const dir = tmpDir(t);
  const migrations = writeFiles(path.join(dir, "migrations"), {
    "001-note.sql": "create schema app; create table app.note (id int primary key, body text not null);",
    // The template's disabled example: it would fail if it ran.
    "skip-002-coinflip.sql": "this is a disabled example, not sql;",
  });
  const config = path.join(dir, "hub.config.mjs");
  fs.writeFileSync(config, `export default { userDatabaseMigrationsPath: ${JSON.stringify(migrations)} };\n`);
  const proc = await startServerProcess({
    POSTGRAPHILE_DATABASE_URL: db.databaseUrl,
    SUPERUSER_DATABASE_URL: db.superuserDatabaseUrl,
    DATABASE_URL: "",
    HUB_CONFIG: config,
    // Pretty whatever NODE_ENV is: production would otherwise log JSON.
    NODE_ENV: "production",
    HOST: "127.0.0.1",
    LOG_PRETTY: "true",
    // No drain at stop (5 s in production): nothing here is behind a proxy.
    HUB_DRAIN_MS: "0",
  });
  t.teardown(() => proc.child.kill("SIGKILL"));

  const res = await gql(proc.url, "{ hubCurrentUser { id } }");
  t.same(res.body, { data: { hubCurrentUser: null } }, "GraphQL served over the POSTGRAPHILE_DATABASE_URL connection");
  const recorded = await db.dbPool.query<{ name: string }>("select name from hub_secret.migration where kind = 'user' order by name");
  t.same(recorded.rows.map((r) => r.name), ["001-note.sql"], "the numbered file applied, the skip- file not");

  proc.child.kill("SIGTERM");
  t.equal(await proc.exited, 0, "stops cleanly");
  const output = proc.output();
  t.equal(output.match(/skipped a migration file whose name does not start with a number/g)?.length, 1, "one line about the skipped file");
  t.match(output, /skip-002-coinflip\.sql/, "naming it");
  t.match(output, /INFO.*hub listening on/, "human-readable lines (pino-pretty)");
  t.notMatch(output, /^\{"level"/m, "no JSON lines");
});

t.test("a GraphQL connection named POSTGRAPHILE_DATABASE_URL is named so when it fails", async (t) => {
  const { code, stderr } = await runServerExpectingFailure({
    POSTGRAPHILE_DATABASE_URL: "postgres://someone:secretpw@127.0.0.1:1/db",
    SUPERUSER_DATABASE_URL: server.superuserDatabaseUrl,
    DATABASE_URL: "",
    HUB_EXAMPLES: "off",
  });
  t.equal(code, 1);
  t.match(stderr, /Cannot connect to POSTGRAPHILE_DATABASE_URL \(postgres:\/\/someone:\*\*\*@127\.0\.0\.1:1\/db\)/);
  t.match(stderr, /HUB_DB_CONNECT/);
  t.notMatch(stderr, /secretpw/);
});

// ---------------------------------------------------------------------------------------------
// The exported schema

/**
 * The fields clients of the original read, with the original's names and nullability, as
 * `field` or `field(arg: Type)` → type. Other fields may exist beside them.
 */
const ORIGINAL_FIELDS: Record<string, Record<string, string>> = {
  Query: {
    hubCurrentUser: "HubUser",
    hubCurrentSession: "HubSession",
    hubCurrentCasino: "HubCasino",
    hubCurrentExperience: "HubExperience",
    "hubUserById(id: UUID!)": "HubUser",
  },
  Mutation: {
    "hubAuthenticate(input: HubAuthenticateInput!)": "HubAuthenticatePayload!",
    "hubCreatePlaygroundSession(input: HubCreatePlaygroundSessionInput!)": "HubAuthenticatePayload!",
    "hubAddCasino(input: HubAddCasinoInput!)": "HubAddCasinoPayload!",
  },
  HubUser: {
    id: "UUID!",
    uname: "String!",
    casinoId: "UUID!",
    createdAt: "Datetime!",
    clientId: "UUID",
    "hubBalanceByCurrency(currency: String!)": "HubBalance",
    hubCasinoByCasinoId: "HubCasino",
  },
  HubBalance: {
    id: "UUID!",
    amount: "Float!",
    currencyKey: "String!",
    userId: "UUID!",
    casinoId: "UUID!",
    experienceId: "UUID!",
    hubUserByUserId: "HubUser",
    hubCasinoByCasinoId: "HubCasino",
    hubExperienceByExperienceId: "HubExperience",
    hubCurrencyByCurrencyKeyAndCasinoId: "HubCurrency",
  },
  HubCurrency: {
    key: "String!",
    casinoId: "UUID!",
    displayUnitName: "String!",
    displayUnitScale: "Int!",
    hubCasinoByCasinoId: "HubCasino",
  },
  HubBankroll: {
    id: "UUID!",
    amount: "Float!",
    currencyKey: "String!",
    casinoId: "UUID!",
    bets: "BigInt!",
    wagered: "Float!",
    expectedValue: "Float!",
    hubCasinoByCasinoId: "HubCasino",
    hubCurrencyByCurrencyKeyAndCasinoId: "HubCurrency",
  },
  HubCasino: {
    id: "UUID!",
    name: "String!",
    // Non-null as in the original: a casino without an address answers "".
    baseUrl: "String!",
    graphqlUrl: "String!",
    isPlayground: "Boolean!",
    createdAt: "Datetime!",
  },
  HubExperience: {
    id: "UUID!",
    name: "String!",
    casinoId: "UUID!",
    clientId: "UUID",
    createdAt: "Datetime!",
    hubCasinoByCasinoId: "HubCasino",
  },
  HubSession: {
    id: "UUID!",
    userId: "UUID!",
    casinoId: "UUID!",
    experienceId: "UUID!",
    createdAt: "Datetime!",
    expiredAt: "Datetime!",
    revokedAt: "Datetime",
    hubUserByUserId: "HubUser",
    hubCasinoByCasinoId: "HubCasino",
    hubExperienceByExperienceId: "HubExperience",
  },
  HubAuthenticatePayload: {
    success: "HubAuthenticateSuccess",
    query: "Query",
  },
  HubAuthenticateSuccess: {
    sessionKey: "UUID!",
    uname: "String!",
    experienceId: "UUID!",
    userId: "UUID!",
  },
  HubAuthenticateInput: {
    // The original has String!; nullable here because casinoId may name the casino instead.
    // Every document written for String! is valid against String (checked below).
    casinoBaseUrl: "String",
    userToken: "String!",
  },
  HubCreatePlaygroundSessionInput: {
    userClientId: "UUID",
    experienceClientId: "UUID",
  },
  HubAddCasinoInput: {
    name: "String!",
    baseUrl: "String",
    graphqlUrl: "String",
    apiKey: "String",
  },
};

/** Every field of the type as `name` or `name(arg: Type, …)` → its type. */
function fieldsOf(schema: GraphQLSchema, typeName: string): Record<string, string> | undefined {
  const type = schema.getType(typeName);
  if (!type || !("getFields" in type)) return undefined;
  const out: Record<string, string> = {};
  for (const field of Object.values(type.getFields()) as (GraphQLField<unknown, unknown> | GraphQLInputField)[]) {
    const args = "args" in field && field.args.length ? `(${field.args.map((a) => `${a.name}: ${String(a.type)}`).join(", ")})` : "";
    out[`${field.name}${args}`] = String(field.type);
  }
  return out;
}

/** The original clients' documents, as they declare their variables. */
const ORIGINAL_DOCUMENTS = [
  `mutation Login($casinoBaseUrl: String!, $userToken: String!) { hubAuthenticate(input: { casinoBaseUrl: $casinoBaseUrl, userToken: $userToken }) {
    success { sessionKey uname experienceId userId } query { hubCurrentUser { id } } } }`,
  PLAYGROUND,
  ME,
  `query Balance($currency: String!) { hubCurrentUser { id uname hubBalanceByCurrency(currency: $currency) { id amount currencyKey } } }`,
  `mutation AddCasino($name: String!, $baseUrl: String!, $graphqlUrl: String!, $apiKey: String!) {
    hubAddCasino(input: { name: $name, baseUrl: $baseUrl, graphqlUrl: $graphqlUrl, apiKey: $apiKey }) { casinoId } }`,
  `{ hubCurrentCasino { id name baseUrl graphqlUrl } hubCurrentSession { id userId experienceId expiredAt } hubCurrentExperience { id name clientId } }`,
];

t.test("the exported SDL has the original's types and fields, names and nullability", async (t) => {
  const sdl = fs.readFileSync(path.join(sdlDir, "schema.graphql"), "utf8");
  const schema = buildSchema(sdl);
  for (const [typeName, expected] of Object.entries(ORIGINAL_FIELDS)) {
    const actual = fieldsOf(schema, typeName);
    t.ok(actual, `${typeName} is in the SDL`);
    const got = Object.fromEntries(Object.keys(expected).map((field) => [field, actual?.[field] ?? "(missing)"]));
    t.same(got, expected, typeName);
  }
  for (const document of ORIGINAL_DOCUMENTS) {
    t.same(validate(schema, parse(document)).map((e) => e.message), [], document.slice(0, 60));
  }
  // The secrets have no field: not the user's digest, not the casino's key.
  // HubHash.digest is a provably fair chain's public hash; no credential digest (key, token, client id) shows.
  t.notMatch(sdl, /(key|token|client_?id)_?digest/i, "no field named after a credential digest");
  t.same(Object.keys(fieldsOf(schema, "HubCasino") ?? {}).filter((f) => /apiKey/i.test(f)), []);
});
