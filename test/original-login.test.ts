import "./helpers/env.js";
import { randomBytes, randomUUID } from "node:crypto";
import t from "tap";
import { SignJWT, exportSPKI, generateKeyPair } from "jose";
import { createPlayer, createExperience, startTestServer, type TestServer } from "@hubpkg/hub/test";
import { gql } from "./helpers/http.js";
import { sha256 } from "./helpers/secrets.js";

type Key = Awaited<ReturnType<typeof generateKeyPair>>["privateKey"];

// The requests of the original system's frontends, as they send them.

let server: TestServer;
let operator: { authorization: string };
let privateKey: Key;
let casinoId: string;

t.before(async () => {
  server = await startTestServer({ logLevel: (process.env.TEST_LOG_LEVEL as "silent") ?? "silent" });
  operator = { authorization: `apikey:${(await server.authenticateOperator()).apiKey}` };
  const pair = await generateKeyPair("RS256");
  privateKey = pair.privateKey as Key;
  // Registered in another case and with a trailing slash: the frontend sends the plain form.
  const added = await gql(
    server.url,
    `mutation($pem: String!) { hubAddCasino(input: { name: "original-casino", baseUrl: "HTTPS://Casino.Example/", jwtPublicKey: $pem }) { casinoId } }`,
    { pem: await exportSPKI(pair.publicKey) },
    operator,
  );
  if (added.body.errors) throw new Error(JSON.stringify(added.body.errors));
  casinoId = (added.body.data as any).hubAddCasino.casinoId;
});
t.teardown(() => server?.stop());

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const sign = (claims: Record<string, unknown>, exp: string | number = "5m", key: Key = privateKey) =>
  new SignJWT(claims).setProtectedHeader({ alg: "RS256" }).setExpirationTime(exp).sign(key);

/** The frontend's mutation, literally: only the token is put in. */
const frontendLogin = (baseUrl: string, token: string) =>
  `mutation { hubAuthenticate(input: { casinoBaseUrl: ${JSON.stringify(baseUrl)}, userToken: ${JSON.stringify(token)} }) { success { sessionKey uname experienceId userId } query { hubCurrentUser { id } } } }`;

t.test("the original frontend's hubAuthenticate, then Authorization: session:<sessionKey>", async (t) => {
  const res = await gql(server.url, frontendLogin("https://casino.example", await sign({ uname: "olga", experience: "dice" })));
  t.same(res.body.errors, undefined);
  const payload = (res.body.data as any).hubAuthenticate;
  const { sessionKey, uname, experienceId, userId } = payload.success;
  t.match(sessionKey, UUID_V4, "the session key is a random UUID (v4)");
  t.equal(uname, "olga");
  // The query field is the whole Query, read with the request's identity (none yet).
  t.same(payload.query, { hubCurrentUser: null });

  const user = await server.dbPool.query("select id, casino_id from hub.user where id = $1", [userId]);
  t.same(user.rows, [{ id: userId, casino_id: casinoId }]);
  const session = await server.dbPool.query("select token_digest from hub.session where user_id = $1", [userId]);
  t.equal(session.rowCount, 1);
  t.same(session.rows[0].token_digest, sha256(sessionKey), "only the SHA-256 digest of the key is stored");

  const me = await gql(server.url, "{ hubCurrentUser { id uname } hubCurrentExperience { id name } }", {}, { authorization: `session:${sessionKey}` });
  t.same(me.body.data, { hubCurrentUser: { id: userId, uname: "olga" }, hubCurrentExperience: { id: experienceId, name: "dice" } });
});

t.test("the base URL is compared normalised: scheme and host case, trailing slash", async (t) => {
  for (const url of ["https://casino.example", "https://casino.example/", "HTTPS://CASINO.EXAMPLE", "https://Casino.Example:443//"]) {
    const res = await gql(server.url, frontendLogin(url, await sign({ uname: "norm" })));
    t.same(res.body.errors, undefined, url);
    t.match((res.body.data as any)?.hubAuthenticate?.success, { uname: "norm" }, url);
  }
  // A different host or scheme is a different casino.
  for (const url of ["http://casino.example", "https://casino.example.org", "https://casino.example/other"]) {
    const res = await gql(server.url, frontendLogin(url, await sign({ uname: "norm" })));
    t.match(res.body.errors?.[0], { message: /^No casino has the base URL/, extensions: { code: "UNKNOWN_CASINO" } }, url);
  }
});

t.test("failures keep their distinct codes", async (t) => {
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

  // Exactly one of casinoBaseUrl and casinoId.
  const token = await sign({ uname: "m" });
  const both = await gql(server.url, `mutation($c: UUID!, $t: String!) { hubAuthenticate(input: { casinoBaseUrl: "https://casino.example", casinoId: $c, userToken: $t }) { success { sessionKey } } }`, { c: casinoId, t: token });
  t.match(both.body.errors?.[0], { message: "hubAuthenticate needs exactly one of casinoBaseUrl and casinoId; received both.", extensions: { code: "BAD_USER_INPUT" } });
  const neither = await gql(server.url, `mutation($t: String!) { hubAuthenticate(input: { userToken: $t }) { success { sessionKey } } }`, { t: token });
  t.match(neither.body.errors?.[0], { message: "hubAuthenticate needs exactly one of casinoBaseUrl and casinoId; received neither.", extensions: { code: "BAD_USER_INPUT" } });
});

t.test("casinoId still works, and both payload shapes are there", async (t) => {
  const res = await gql(
    server.url,
    `mutation($c: UUID!, $t: String!) { hubAuthenticate(input: { casinoId: $c, userToken: $t }) { success { sessionKey uname experienceId userId } sessionToken user { id uname casinoId } experience { id name } } }`,
    { c: casinoId, t: await sign({ uname: "both" }) },
  );
  t.same(res.body.errors, undefined);
  const p = (res.body.data as any).hubAuthenticate;
  t.equal(p.sessionToken, p.success.sessionKey);
  t.equal(p.user.id, p.success.userId);
  t.equal(p.experience.id, p.success.experienceId);
  t.match(p.user, { uname: "both", casinoId });
});

t.test("the playground form returns the same payload", async (t) => {
  const userClientId = randomUUID();
  const query = `mutation($u: UUID!) { hubCreatePlaygroundSession(input: { userClientId: $u, experienceClientId: null }) { success { sessionKey uname experienceId userId } query { hubCurrentUser { id } } sessionToken } }`;
  const res = await gql(server.url, query, { u: userClientId });
  t.same(res.body.errors, undefined);
  const p = (res.body.data as any).hubCreatePlaygroundSession;
  t.match(p.success.sessionKey, UUID_V4);
  t.equal(p.sessionToken, p.success.sessionKey);
  t.same(p.query, { hubCurrentUser: null });
  const me = await gql(server.url, "{ hubCurrentUser { id uname } }", {}, { authorization: `session:${p.success.sessionKey}` });
  t.same(me.body.data, { hubCurrentUser: { id: p.success.userId, uname: p.success.uname } });
});

t.test("credentials issued before UUIDs (43 base64url characters) keep working", async (t) => {
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

  const me = await gql(server.url, "{ hubCurrentUser { id } }", {}, { authorization: `session:${oldSession}` });
  t.same(me.body.data, { hubCurrentUser: { id: user.id } });
  const asOldOperator = await gql(server.url, `mutation { hubAddCasino(input: { name: "${`c-${randomBytes(3).toString("hex")}`}" }) { casinoId } }`, {}, { authorization: `apikey:${oldKey}` });
  t.same(asOldOperator.body.errors, undefined, "an API key of the old form is still an operator");

  // New API keys are UUIDs too.
  const { apiKey } = await server.authenticateOperator();
  t.match(apiKey, UUID_V4);
});
