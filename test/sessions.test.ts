import "./helpers/env.js";
import http from "node:http";
import t from "tap";
import { SignJWT, exportJWK, exportSPKI, generateKeyPair } from "jose";
import { startAndListen } from "@hubpkg/hub";
import { gql } from "./helpers/http.js";
import { makeOperator, makePlayer, withPool } from "./helpers/credentials.js";
import { dumpDatabase, findSecret, sha256 } from "./helpers/secrets.js";
import { createPlayer, startTestServer, type TestServer } from "@hubpkg/hub/test";
import { createHmac, randomUUID } from "node:crypto";

let hub: TestServer;
let op: { header: { authorization: string } };

t.before(async () => {
  // A database of the test kit's shared cluster (a template copy): no initdb of its own.
  hub = await startTestServer({ logLevel: (process.env.TEST_LOG_LEVEL as "silent") ?? "silent" });
  op = await makeOperator(hub.superuserDatabaseUrl);
});
t.teardown(() => hub?.stop());

const asOperator = (query: string, variables?: Record<string, unknown>) => gql(hub.url, query, variables, op.header);

async function countRows(table: string): Promise<number> {
  return withPool(hub.superuserDatabaseUrl, async (pool) => (await pool.query(`select count(*)::int as n from ${table}`)).rows[0].n as number);
}

const AUTHENTICATE = `mutation($casinoId: UUID!, $token: String!) {
  hubAuthenticate(input: { casinoId: $casinoId, userToken: $token }) { sessionToken user { id uname casinoId } experience { id name } }
}`;

t.test("casino token exchange with a registered PEM key", async (t) => {
  const { publicKey, privateKey } = await generateKeyPair("RS256");
  const other = await generateKeyPair("RS256");
  const added = await asOperator(
    `mutation($pem: String!) { hubAddCasino(input: { name: "acme", baseUrl: "https://acme.example", jwtPublicKey: $pem, jwtAudience: "hub" }) { casinoId } }`,
    { pem: await exportSPKI(publicKey) },
  );
  t.same(added.body.errors, undefined);
  const casinoId = (added.body.data as any).hubAddCasino.casinoId as string;
  const sign = (claims: Record<string, unknown>, key = privateKey, exp: string | number = "5m") =>
    new SignJWT(claims).setProtectedHeader({ alg: "RS256" }).setExpirationTime(exp).setAudience("hub").sign(key);

  const ok = await gql(hub.url, AUTHENTICATE, { casinoId, token: await sign({ uname: "zoe", experience: "dice" }) });
  t.same(ok.body.errors, undefined);
  const payload = (ok.body.data as any).hubAuthenticate;
  t.match(payload, { user: { uname: "zoe", casinoId }, experience: { name: "dice" } });
  t.match(payload.sessionToken, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  const me = await gql(hub.url, "{ hubCurrentUser { uname } hubCurrentExperience { name } hubCurrentCasino { name } }", {}, { authorization: `session:${payload.sessionToken}` });
  t.same(me.body.data, { hubCurrentUser: { uname: "zoe" }, hubCurrentExperience: { name: "dice" }, hubCurrentCasino: { name: "acme" } });

  // A second login of the same player reuses the user, with a new session.
  const again = await gql(hub.url, AUTHENTICATE, { casinoId, token: await sign({ uname: "zoe", experience: "dice" }) });
  t.equal((again.body.data as any).hubAuthenticate.user.id, payload.user.id);
  t.not((again.body.data as any).hubAuthenticate.sessionToken, payload.sessionToken);

  const users = await countRows("hub.user");
  const sessions = await countRows("hub.session");
  const failures: [string, string, RegExp, string][] = [
    ["another key", await sign({ uname: "mallory" }, other.privateKey), /not signed by the key registered/, "USER_TOKEN_BAD_SIGNATURE"],
    ["expired", await sign({ uname: "mallory" }, privateKey, Math.floor(Date.now() / 1000) - 60), /has expired/, "USER_TOKEN_EXPIRED"],
    ["malformed", "not.a.jwt", /not a valid signed JWT/, "USER_TOKEN_MALFORMED"],
    ["wrong audience", await new SignJWT({ uname: "mallory" }).setProtectedHeader({ alg: "RS256" }).setExpirationTime("5m").setAudience("other").sign(privateKey), /"aud" claim/, "USER_TOKEN_CLAIM"],
    ["no exp", await new SignJWT({ uname: "mallory" }).setProtectedHeader({ alg: "RS256" }).setAudience("hub").sign(privateKey), /"exp" claim/, "USER_TOKEN_CLAIM"],
    ["no player named", await sign({ experience: "dice" }), /names no player/, "USER_TOKEN_CLAIM"],
    ["HMAC with the public key as secret", await new SignJWT({ uname: "mallory" }).setProtectedHeader({ alg: "HS256" }).setExpirationTime("5m").setAudience("hub").sign(new TextEncoder().encode(await exportSPKI(publicKey))), /algorithm is not accepted/, "USER_TOKEN_MALFORMED"],
  ];
  for (const [name, token, message, code] of failures) {
    const res = await gql(hub.url, AUTHENTICATE, { casinoId, token });
    t.match(res.body.errors?.[0], { message, extensions: { code } }, name);
  }
  const unknown = await gql(hub.url, AUTHENTICATE, { casinoId: "00000000-0000-7000-8000-000000000000", token: await sign({ uname: "mallory" }) });
  t.match(unknown.body.errors?.[0], { message: /No casino has the id/, extensions: { code: "UNKNOWN_CASINO" } });
  t.equal(await countRows("hub.user"), users, "failed exchanges create no user");
  t.equal(await countRows("hub.session"), sessions, "and no session");
});

t.test("casino token exchange with a JWKS URL", async (t) => {
  const { publicKey, privateKey } = await generateKeyPair("ES256");
  const jwk = { ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256", use: "sig" };
  const server = http.createServer((_req, res) => {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => server.close());
  const jwksUrl = `http://127.0.0.1:${(server.address() as import("node:net").AddressInfo).port}/jwks.json`;
  const added = await asOperator(`mutation($u: String!) { hubAddCasino(input: { name: "jwks-casino", jwksUrl: $u, jwtIssuer: "jwks-casino" }) { casinoId } }`, { u: jwksUrl });
  const casinoId = (added.body.data as any).hubAddCasino.casinoId as string;
  const token = await new SignJWT({ username: "yuki" }).setProtectedHeader({ alg: "ES256", kid: "k1" }).setIssuer("jwks-casino").setExpirationTime("1m").sign(privateKey);
  const res = await gql(hub.url, AUTHENTICATE, { casinoId, token });
  t.same(res.body.errors, undefined);
  t.match(res.body.data, { hubAuthenticate: { user: { uname: "yuki" }, experience: { name: "default" } } });
  const wrongIssuer = await new SignJWT({ username: "yuki" }).setProtectedHeader({ alg: "ES256", kid: "k1" }).setIssuer("someone-else").setExpirationTime("1m").sign(privateKey);
  t.match((await gql(hub.url, AUTHENTICATE, { casinoId, token: wrongIssuer })).body.errors?.[0]?.message, /"iss" claim/);
});

t.test("operator mutations need an API key and say what is wrong", async (t) => {
  const player = await makePlayer(hub.superuserDatabaseUrl, "pat");
  const mutation = `mutation { hubAddCasino(input: { name: "nope" }) { casinoId } }`;
  // No credential: UNAUTHENTICATED; a player's session, the wrong kind of identity: FORBIDDEN.
  for (const [headers, code] of [[{}, "UNAUTHENTICATED"], [player.header, "FORBIDDEN"]] as const) {
    t.match((await gql(hub.url, mutation, {}, headers)).body.errors?.[0], { message: /Unauthorized: this mutation needs an operator API key/, extensions: { code } });
  }
  const dup = await asOperator(`mutation { hubAddCasino(input: { name: "playground" }) { casinoId } }`);
  t.match(dup.body.errors?.[0]?.message, /already exists/);
  const badKey = await asOperator(`mutation { hubAddCasino(input: { name: "x", jwtPublicKey: "hello" }) { casinoId } }`);
  t.match(badKey.body.errors?.[0]?.message, /jwtPublicKey is not usable: expected a PEM public key/);
});

t.test("casino URLs follow the command line's rule: http(s), at most 2000 characters, no control characters", async (t) => {
  const add = (input: Record<string, string>) =>
    asOperator(`mutation($input: HubAddCasinoInput!) { hubAddCasino(input: $input) { casinoId } }`, { input: { name: `url-${randomUUID()}`, ...input } });
  const refused: [Record<string, string>, RegExp][] = [
    [{ baseUrl: "ftp://files.example" }, /^baseUrl must be an http:\/\/ or https:\/\/ URL such as https:\/\/casino\.example; received "ftp:\/\/files\.example"\.$/],
    [{ baseUrl: "not a url" }, /^baseUrl must be an http:\/\/ or https:\/\/ URL/],
    [{ baseUrl: `https://casino.example/${"a".repeat(2000)}` }, /^baseUrl must be an http:\/\/ or https:\/\/ URL/],
    // The URL parser drops a newline silently: the stored text would not be the URL fetched.
    [{ jwksUrl: "https://casino.example/\njwks.json" }, /^jwksUrl must be an http:\/\/ or https:\/\/ URL .*received "https:\/\/casino\.example\/\\njwks\.json"/],
    [{ jwksUrl: "file:///etc/passwd" }, /^jwksUrl must be an http:\/\/ or https:\/\/ URL/],
  ];
  const before = await countRows("hub.casino");
  for (const [input, message] of refused) {
    const res = await add(input);
    t.match(res.body.errors?.[0], { message, extensions: { code: "BAD_USER_INPUT" } }, JSON.stringify(input).slice(0, 80));
  }
  t.equal(await countRows("hub.casino"), before, "no casino was added");
  const fine = await add({ baseUrl: "https://fine.example", jwksUrl: "http://127.0.0.1:1/jwks.json" });
  t.same(fine.body.errors, undefined, "http and https URLs are taken");
});

t.test("operator money movements are ledgered; the ledger sums to every balance", async (t) => {
  const player = await makePlayer(hub.superuserDatabaseUrl, "lena");
  const casino = (await asOperator(`mutation { hubAddCasino(input: { name: "money" }) { casinoId } }`)).body.data as any;
  t.ok(casino);
  const input = (amount: number) => ({ userId: player.userId, experienceId: player.experienceId, currencyKey: "HOUSE", amount, reason: "test" });
  const credit = await asOperator("mutation($i: HubBalanceChangeInput!) { hubCreditBalance(input: $i) { amount } }", { i: input(50) });
  t.same(credit.body, { data: { hubCreditBalance: { amount: 50 } } });
  const debit = await asOperator("mutation($i: HubBalanceChangeInput!) { hubDebitBalance(input: $i) { amount } }", { i: input(20) });
  t.same(debit.body, { data: { hubDebitBalance: { amount: 30 } } });
  const overdraw = await asOperator("mutation($i: HubBalanceChangeInput!) { hubDebitBalance(input: $i) { amount } }", { i: input(31) });
  t.match(overdraw.body.errors?.[0]?.message, /insufficient/i, "a debit beyond the balance is refused");
  const negative = await asOperator("mutation($i: HubBalanceChangeInput!) { hubCreditBalance(input: $i) { amount } }", { i: input(-5) });
  t.match(negative.body.errors?.[0], { message: /^amount must be a whole number of base units from 1 to 9007199254740991; received -5\./, extensions: { code: "INVALID_AMOUNT" } });
  const bankroll = await asOperator(`mutation { hubCreditBankroll(input: { casinoId: "${player.casinoId}", currencyKey: "HOUSE", amount: 1000, reason: "seed" }) { amount } }`);
  t.same(bankroll.body.errors, undefined);

  const sums = await withPool(hub.superuserDatabaseUrl, async (pool) =>
    (await pool.query(
      `select b.amount, (select coalesce(sum(amount_delta), 0) from hub.ledger l
                          where l.account = 'player' and l.user_id = b.user_id and l.experience_id = b.experience_id and l.currency_key = b.currency_key) as ledger
         from hub.balance b`,
    )).rows,
  );
  t.ok(sums.length > 0);
  for (const row of sums) t.equal(Number(row.ledger), Number(row.amount), "ledger sums to the balance");
  const players = await gql(hub.url, "{ hubCurrentUser { uname } allHubBalances { nodes { amount } } }", {}, player.header);
  t.same(players.body.data, { hubCurrentUser: { uname: "lena" }, allHubBalances: { nodes: [{ amount: 30 }] } }, "the player sees their balance through RLS");
});

t.test("hubLogout revokes the current session", async (t) => {
  const player = await makePlayer(hub.superuserDatabaseUrl, "otto");
  const out = await gql(hub.url, "mutation { hubLogout { success sessionId } }", {}, player.header);
  t.same(out.body, { data: { hubLogout: { success: true, sessionId: player.sessionId } } });
  const after = await gql(hub.url, "{ hubCurrentUser { uname } }", {}, player.header);
  t.same(after.body, { data: { hubCurrentUser: null } }, "the token no longer works on this instance");
  t.same((await gql(hub.url, "mutation { hubLogout { success } }")).body, { data: { hubLogout: { success: false } } }, "without a session: nothing to revoke");
});

t.test("hubLogout: the token stops working on this instance at once, without the notification or the cache TTL", async (t) => {
  // A 60 s identity cache and no revocation notifications (the trigger that
  // sends them is disabled in this test's own database): only the local
  // revocation hubLogout does itself can make the next request fail.
  const server = await startTestServer({ identityCacheTtlMs: 60_000, logLevel: "silent" });
  t.teardown(() => server.stop());
  await server.dbPool.query("alter table hub.session disable trigger session_credentials_changed");
  const user = await createPlayer(server.dbPool, { casinoId: server.playgroundCasinoId, uname: "logout-local" });
  const experience = (await server.dbPool.query<{ id: string }>("select id from hub.experience where casino_id = $1 and name = 'default'", [server.playgroundCasinoId])).rows[0]
    ?? (await server.dbPool.query<{ id: string }>("insert into hub.experience (casino_id, name) values ($1, 'default') returning id", [server.playgroundCasinoId])).rows[0]!;
  for (let i = 0; i < 3; i++) {
    const { token } = await server.authenticate(user.id, experience.id);
    const header = { authorization: `session:${token}` };
    t.same((await gql(server.url, "{ hubCurrentUser { uname } }", {}, header)).body, { data: { hubCurrentUser: { uname: "logout-local" } } }, "cached as valid");
    t.same((await gql(server.url, "mutation { hubLogout { success } }", {}, header)).body, { data: { hubLogout: { success: true } } });
    t.same((await gql(server.url, "{ hubCurrentUser { uname } }", {}, header)).body, { data: { hubCurrentUser: null } }, "refused by the next request");
  }
  // The control: without hubLogout, a session revoked in SQL is still served from the 60 s cache here.
  const { token } = await server.authenticate(user.id, experience.id);
  const header = { authorization: `session:${token}` };
  t.same((await gql(server.url, "{ hubCurrentUser { uname } }", {}, header)).body.data, { hubCurrentUser: { uname: "logout-local" } });
  await server.dbPool.query("update hub.session set revoked_at = now() where token_digest = $1", [sha256(token)]);
  t.same((await gql(server.url, "{ hubCurrentUser { uname } }", {}, header)).body.data, { hubCurrentUser: { uname: "logout-local" } }, "control: nothing else evicts the cached session in this setup");
});

t.test("playground sessions: on with the embedded database, 1000 HOUSE to start", async (t) => {
  const res = await gql(hub.url, `mutation { hubCreatePlaygroundSession(input: { uname: "newbie" }) { sessionToken user { uname } } }`);
  t.same(res.body.errors, undefined);
  const token = (res.body.data as any).hubCreatePlaygroundSession.sessionToken as string;
  const me = await gql(hub.url, "{ hubCurrentCasino { name isPlayground } allHubBalances { nodes { amount currencyKey } } }", {}, { authorization: `session:${token}` });
  t.same(me.body.data, { hubCurrentCasino: { name: "playground", isPlayground: true }, allHubBalances: { nodes: [{ amount: 1000, currencyKey: "HOUSE" }] } });
  const second = await gql(hub.url, `mutation { hubCreatePlaygroundSession(input: { uname: "newbie" }) { sessionToken } }`);
  t.match(second.body, { data: null, errors: [{ extensions: { code: "UNAME_TAKEN" } }] }, "the uname form never returns an existing player");

  const byId = `mutation($id: UUID!) { hubCreatePlaygroundSession(input: { userClientId: $id }) { sessionToken user { id } } }`;
  const id = randomUUID();
  const first = (await gql(hub.url, byId, { id })).body.data as any;
  const again = (await gql(hub.url, byId, { id })).body.data as any;
  t.equal(again.hubCreatePlaygroundSession.user.id, first.hubCreatePlaygroundSession.user.id, "the same client id is the same player");
  const me2 = await gql(hub.url, "{ allHubBalances { nodes { amount } } }", {}, { authorization: `session:${again.hubCreatePlaygroundSession.sessionToken}` });
  t.same(me2.body.data, { allHubBalances: { nodes: [{ amount: 1000 }] } }, "a returning player is not credited again");
  const bankroll = await withPool(hub.superuserDatabaseUrl, (pool) => pool.query("select b.amount from hub.bankroll b join hub.casino c on c.id = b.casino_id where c.name = 'playground' and b.currency_key = 'HOUSE'"));
  t.equal(bankroll.rowCount, 1, "a house bankroll for HOUSE exists");
});

t.test("playground off: the field is absent", async (t) => {
  const off = await startTestServer({ logLevel: "silent", playground: false });
  t.teardown(() => off.stop());
  const res = await gql(off.url, `mutation { hubCreatePlaygroundSession(input: { uname: "x" }) { sessionToken } }`);
  t.match(res.body.errors?.[0]?.message, /Cannot query field "hubCreatePlaygroundSession"/);
});

t.test("no token or key is stored in the database, only digests", async (t) => {
  const player = await makePlayer(hub.superuserDatabaseUrl, "dumped");
  const key = await makeOperator(hub.superuserDatabaseUrl);
  const clientId = randomUUID();
  const playground = await gql(hub.url, `mutation($id: UUID!) { hubCreatePlaygroundSession(input: { userClientId: $id }) { sessionToken } }`, { id: clientId });
  const playgroundToken = (playground.body.data as any).hubCreatePlaygroundSession.sessionToken as string;
  const dump = await withPool(hub.superuserDatabaseUrl, (pool) => dumpDatabase(pool));
  t.ok(dump.tables.includes("hub.session") && dump.tables.includes("hub.api_key") && dump.tables.includes("hub_secret.migration"), "every schema's tables were read");
  for (const [name, secret] of [["session token", player.token], ["API key", key.key], ["playground session token", playgroundToken], ["playground client id", clientId]] as const) {
    t.same(findSecret(dump, secret), [], `no ${name}, in any form`);
    t.not(findSecret(dump, sha256(secret)).length, 0, `control: the ${name}'s SHA-256 (computed here) is found, as bytes`);
  }
  // The session does keep the id, for its player to read back (HubUser.clientId), but only sealed with the session key:
  // the id XOR HMAC-SHA256(session key, "hub:user-client-id"), computed here with node:crypto.
  const sealed = await withPool(hub.superuserDatabaseUrl, async (pool) =>
    (await pool.query("select user_client_id_sealed from hub.session where token_digest = $1", [sha256(playgroundToken)])).rows[0].user_client_id_sealed as Buffer,
  );
  t.equal(sealed.length, 16);
  t.ok(dump.bytes.some((b) => b.equals(sealed)), "control: the sealed copy is in the dump");
  const pad = createHmac("sha256", playgroundToken).update("hub:user-client-id").digest();
  const opened = Buffer.from(sealed.map((byte, i) => byte ^ pad[i]!)).toString("hex");
  t.equal(opened, clientId.replace(/-/g, ""), "control: the session key (which the dump lacks) opens it");
  const stored = await withPool(hub.superuserDatabaseUrl, async (pool) => ({
    session: (await pool.query("select token_digest from hub.session where id = $1", [player.sessionId])).rows[0].token_digest as Buffer,
    key: (await pool.query("select key_digest from hub.api_key where id = $1", [key.id])).rows[0].key_digest as Buffer,
  }));
  t.same(stored, { session: sha256(player.token), key: sha256(key.key) }, "each stored digest is the SHA-256 of its credential");
});

t.test("API key use is stamped in last_used_at without a write per request", async (t) => {
  // A second hub on the same database (stopping it leaves the first's database as it is).
  const second = await startAndListen({ port: 0, logLevel: "silent", handleSignals: false, databaseUrl: hub.databaseUrl, superuserDatabaseUrl: hub.superuserDatabaseUrl });
  const key = await makeOperator(hub.superuserDatabaseUrl);
  const lastUsed = () => withPool(hub.superuserDatabaseUrl, async (pool) => (await pool.query("select last_used_at from hub.api_key where key_digest = sha256($1::bytea)", [Buffer.from(key.key)])).rows[0].last_used_at as Date | null);
  const before = Date.now();
  for (let i = 0; i < 20; i++) t.equal((await gql(second.url, "{ allHubApiKeys { totalCount } }", {}, key.header)).status, 200);
  t.equal(await lastUsed(), null, "20 requests wrote nothing yet (stamped in batches every 10 s)");
  await second.stop(); // flushes what it recorded
  const stamped = await lastUsed();
  t.ok(stamped && stamped.getTime() >= before - 1000, "stamped once, at the flush");
});

