import "./helpers/env.js";
import { createHash } from "node:crypto";
import pg from "pg";
import t from "tap";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
// Internal units, not part of the package's public API: the compiled files.
import { createIdentityResolver } from "../dist/src/auth/resolver.js";
import { MAX_CREDENTIAL_LENGTH } from "../dist/src/parse.js";
import { createApiKey, createSession, digest, ensurePlayer, newToken } from "../dist/src/auth/credentials.js";
import { migrate } from "../dist/src/db/migrate.js";
import { createLogger } from "../dist/src/logger.js";
import { GRAPHQL_ROLE, PG_SETTING, identityOf, pgSettingsFor, setIdentity } from "../dist/src/auth/identity.js";

const log = createLogger({ level: "error", pretty: false });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// A database of the test kit's shared cluster (a template copy): no initdb of its own.
const db = { superuserUrl: (await sharedClusterDatabase(t)).SUPERUSER_DATABASE_URL };
const pools: pg.Pool[] = [];
// Pools first. pool.end() resolves before its sockets are closed, so a client
// may still see Postgres's shutdown: each pool ignores errors of idle clients.
t.teardown(async () => {
  await Promise.all(pools.map((p) => p.end()));
});
/** For setting up rows and inspecting them: never counted. */
const admin = new pg.Pool({ connectionString: db.superuserUrl, max: 4 }).on("error", () => undefined);
pools.push(admin);
await migrate(admin, { log });

/**
 * The real pool with pool.query wrapped to count calls, and to fail the next
 * call on demand (a database outage, without stopping the database).
 */
function countingPool(): { pool: pg.Pool; count(): number; failNext(error: Error): void } {
  const pool = new pg.Pool({ connectionString: db.superuserUrl, max: 4 }).on("error", () => undefined);
  pools.push(pool);
  const real = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
  let calls = 0;
  let failure: Error | undefined;
  pool.query = ((...args: unknown[]) => {
    calls++;
    if (failure) {
      const error = failure;
      failure = undefined;
      return Promise.reject(error);
    }
    return real(...args);
  }) as typeof pool.query;
  return { pool, count: () => calls, failNext: (error) => (failure = error) };
}

const { casino, user, experience } = await ensurePlayer(admin, { uname: `player-${newToken().slice(0, 8)}` });
const newSession = (expiresInSeconds?: number) =>
  createSession(admin, { userId: user.id, casinoId: casino.id, experienceId: experience.id, expiresInSeconds });

t.test("credentials: opaque random tokens, stored as SHA-256 digests", async (t) => {
  const a = newToken();
  t.match(a, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, "a random UUID (version 4)");
  t.not(a, newToken());
  t.same(digest(a), createHash("sha256").update(a).digest());
  t.equal(digest(a).length, 32);

  const { key, id } = await createApiKey(admin);
  const { rows } = await admin.query("select * from hub.api_key where id = $1", [id]);
  t.same(rows[0].key_digest, digest(key), "the row holds the digest");
  t.notMatch(JSON.stringify(rows[0]), key, "and not the key");

  const { token, sessionId } = await newSession();
  const session = await admin.query("select token_digest, expired_at > now() + interval '29 days' as long from hub.session where id = $1", [sessionId]);
  t.same(session.rows[0].token_digest, digest(token));
  t.equal(session.rows[0].long, true, "30 days by default");
});

t.test("ensurePlayer creates what is missing and is idempotent under concurrency", async (t) => {
  const uname = `p-${newToken().slice(0, 8)}`;
  const casinoName = `c-${newToken().slice(0, 8)}`;
  const results = await Promise.all(Array.from({ length: 8 }, () => ensurePlayer(admin, { uname, casinoName, experienceName: "dice" })));
  const first = results[0]!;
  t.equal(first.casino.name, casinoName);
  t.equal(first.casino.is_playground, false, "a new casino is not a playground");
  t.equal(first.user.uname, uname);
  t.equal(first.user.casino_id, first.casino.id);
  t.equal(first.experience.name, "dice");
  t.equal(first.experience.casino_id, first.casino.id);
  for (const r of results) t.same(r, first, "every caller gets the same rows");
  const again = await ensurePlayer(admin, { uname, casinoName, experienceName: "dice" });
  t.same(again, first);

  const playground = await ensurePlayer(admin, { uname });
  t.equal(playground.casino.name, "playground");
  t.equal(playground.casino.is_playground, true, "the default casino is migration 0004's playground");
  t.equal(playground.experience.name, "default");
  t.not(playground.user.id, first.user.id, "a uname is per casino");
});

t.test("createSession refuses a user and an experience of different casinos", async (t) => {
  const other = await ensurePlayer(admin, { uname: "someone", casinoName: `c-${newToken().slice(0, 8)}` });
  await t.rejects(createSession(admin, { userId: user.id, casinoId: casino.id, experienceId: other.experience.id }), /must exist and both belong/);
  await t.rejects(createSession(admin, { userId: user.id, casinoId: casino.id, experienceId: experience.id, expiresInSeconds: 0 }), RangeError);
});

t.test("a valid session resolves to a user identity", async (t) => {
  const { pool, count } = countingPool();
  const resolver = createIdentityResolver(pool, { cacheTtlMs: 60_000 });
  const { token, sessionId } = await newSession();
  const identity = await resolver.resolve(`session:${token}`);
  t.ok(identity);
  if (identity?.kind !== "user") throw new Error("expected a user identity");
  t.equal(identity.sessionId, sessionId);
  t.same(identity.user, user, "the user row");
  t.same(
    { id: identity.session.id, user_id: identity.session.user_id, casino_id: identity.session.casino_id, experience_id: identity.session.experience_id },
    { id: sessionId, user_id: user.id, casino_id: casino.id, experience_id: experience.id },
  );
  t.type(identity.session.expired_at, Date);
  t.equal(count(), 1);

  const again = await resolver.resolve(`session:${token}`);
  t.same(again, identity, "a cache hit answers the same");
  t.equal(count(), 1, "without a second query");
  t.not(again, identity, "in an object of its own");
  t.equal(pgSettingsFor(again), pgSettingsFor(identity), "whose transaction settings are the credential's, built once, not once per request");
  t.same(Object.keys(again!), ["kind", "user", "sessionId", "session", "clientId"], "the identity's own keys only");
  t.same(JSON.parse(JSON.stringify(again)), JSON.parse(JSON.stringify({ ...identity })), "and it serialises as a plain object");
  const other = await newSession();
  const otherIdentity = await resolver.resolve(`session:${other.token}`);
  t.not(pgSettingsFor(otherIdentity), pgSettingsFor(identity), "another session: settings of its own");
  t.equal(pgSettingsFor(otherIdentity)[PG_SETTING.sessionId], other.sessionId);
  identity.user.uname = "changed by a caller";
  t.equal(((await resolver.resolve(`session:${token}`)) as typeof identity).user.uname, user.uname, "callers cannot alter the cache");

  t.equal(await resolver.resolve(`apikey:${token}`), undefined, "a session token is not an API key");
});

t.test("200 distinct credentials at once: each resolves to its own identity, read in a few queries, not one each", async (t) => {
  const { pool, count } = countingPool();
  const resolver = createIdentityResolver(pool, { cacheTtlMs: 60_000 });
  const sessions = await Promise.all(Array.from({ length: 150 }, () => newSession()));
  const keys = await Promise.all(Array.from({ length: 50 }, () => createApiKey(admin)));
  const unknown = Array.from({ length: 20 }, () => newToken());
  const [users, operators, nobody] = await Promise.all([
    Promise.all(sessions.map((s) => resolver.resolve(`session:${s.token}`))),
    Promise.all(keys.map((k) => resolver.resolve(`apikey:${k.key}`))),
    Promise.all(unknown.map((token) => resolver.resolve(`session:${token}`))),
  ]);
  t.same(users.map((i) => (i?.kind === "user" ? i.sessionId : i)), sessions.map((s) => s.sessionId), "each session token: its own session");
  t.same(operators.map((i) => (i?.kind === "operator" ? i.apiKeyId : i)), keys.map((k) => k.id), "each API key: its own key");
  t.same(nobody, unknown.map(() => undefined), "each unknown token: no identity");
  // Two go alone at once; the rest wait for them and leave in one query per kind (one before: 220).
  t.ok(count() <= 5, `${count()} queries for 220 credentials`);
  const before = count();
  await Promise.all(sessions.map((s) => resolver.resolve(`session:${s.token}`)));
  t.equal(count(), before, "and then all are cached");
});

t.test("a session created from a playground client id resolves with it, unsealed by the request's key only", async (t) => {
  const { pool, count } = countingPool();
  const resolver = createIdentityResolver(pool, { cacheTtlMs: 60_000 });
  const clientId = newToken();
  const player = await ensurePlayer(admin, { uname: `client-${newToken().slice(0, 8)}` });
  await admin.query("update hub.user set client_id_digest = $1 where id = $2", [createHash("sha256").update(clientId).digest(), player.user.id]);
  const make = (userClientId?: string) =>
    createSession(admin, { userId: player.user.id, casinoId: player.casino.id, experienceId: player.experience.id, userClientId });
  const sealedOf = async (token: string) =>
    (await admin.query("select user_client_id_sealed as s from hub.session where token_digest = $1", [digest(token)])).rows[0].s as Buffer | null;

  const withId = await make(clientId);
  const sealed = await sealedOf(withId.token);
  t.equal(sealed?.length, 16, "16 sealed bytes are stored");
  t.notOk(sealed!.equals(Buffer.from(clientId.replace(/-/g, ""), "hex")), "not the id's bytes");
  const first = await resolver.resolve(`session:${withId.token}`);
  t.match(first, { kind: "user", clientId });
  const cachedOnce = await resolver.resolve(`session:${withId.token}`);
  t.match(cachedOnce, { kind: "user", clientId }, "a cache hit unseals it again");
  t.equal(count(), 1, "without a second query");

  const plain = await make();
  t.equal(await sealedOf(plain.token), null, "a session made without a client id keeps nothing");
  t.match(await resolver.resolve(`session:${plain.token}`), { kind: "user", clientId: null });

  // The sealed copy moved to another session: that session's key opens it to a value whose digest is not the player's.
  const moved = await make();
  await admin.query("update hub.session set user_client_id_sealed = $1 where token_digest = $2", [sealed, digest(moved.token)]);
  t.match(await resolver.resolve(`session:${moved.token}`), { kind: "user", clientId: null }, "another key: null");
});

t.test("a valid API key resolves to an operator identity", async (t) => {
  const { pool, count } = countingPool();
  const resolver = createIdentityResolver(pool, { cacheTtlMs: 60_000 });
  const { key, id } = await createApiKey(admin);
  t.same(await resolver.resolve(`apikey:${key}`), { kind: "operator", apiKey: key, apiKeyId: id });
  t.same(await resolver.resolve(`apikey:${key}`), { kind: "operator", apiKey: key, apiKeyId: id });
  t.equal(count(), 1, "the second one came from the cache");
  t.equal(await resolver.resolve(`session:${key}`), undefined, "an API key is not a session token");
});

t.test("expired, revoked and unknown credentials are unauthenticated", async (t) => {
  const { pool } = countingPool();
  const resolver = createIdentityResolver(pool, { cacheTtlMs: 0 });
  const expired = await newSession();
  await admin.query("update hub.session set expired_at = now() - interval '1 second' where id = $1", [expired.sessionId]);
  t.equal(await resolver.resolve(`session:${expired.token}`), undefined, "expired session");

  const revoked = await newSession();
  await admin.query("update hub.session set revoked_at = now() where id = $1", [revoked.sessionId]);
  t.equal(await resolver.resolve(`session:${revoked.token}`), undefined, "revoked session");

  const key = await createApiKey(admin);
  await admin.query("update hub.api_key set revoked_at = now() where id = $1", [key.id]);
  t.equal(await resolver.resolve(`apikey:${key.key}`), undefined, "revoked API key");

  t.equal(await resolver.resolve(`session:${newToken()}`), undefined, "unknown session token");
  t.equal(await resolver.resolve(`apikey:${newToken()}`), undefined, "unknown API key");
});

t.test("revocation takes effect once the cache entry is older than cacheTtlMs, or at clear()", async (t) => {
  const { pool } = countingPool();
  const ttl = 300;
  const resolver = createIdentityResolver(pool, { cacheTtlMs: ttl });
  const session = await newSession();
  const key = await createApiKey(admin);
  t.ok(await resolver.resolve(`session:${session.token}`));
  t.ok(await resolver.resolve(`apikey:${key.key}`));
  await admin.query("update hub.session set revoked_at = now() where id = $1", [session.sessionId]);
  await admin.query("update hub.api_key set revoked_at = now() where id = $1", [key.id]);
  await sleep(ttl + 50);
  t.equal(await resolver.resolve(`session:${session.token}`), undefined, "revoked session");
  t.equal(await resolver.resolve(`apikey:${key.key}`), undefined, "revoked API key");

  const long = createIdentityResolver(pool, { cacheTtlMs: 60_000 });
  const other = await newSession();
  t.ok(await long.resolve(`session:${other.token}`));
  await admin.query("update hub.session set revoked_at = now() where id = $1", [other.sessionId]);
  long.clear();
  t.equal(await long.resolve(`session:${other.token}`), undefined, "clear() forgets at once");
});

t.test("a cached session stops working the moment it expires", async (t) => {
  const { pool } = countingPool();
  const resolver = createIdentityResolver(pool, { cacheTtlMs: 60_000 });
  const { token, expiredAt } = await newSession(2);
  const identity = await resolver.resolve(`session:${token}`);
  t.equal(identity?.kind, "user", "valid before it expires");
  await sleep(Math.max(0, expiredAt.getTime() - Date.now()) + 20);
  t.equal(await resolver.resolve(`session:${token}`), undefined, "refused after expired_at, though cached for 60 s");
});

t.test("malformed headers are unauthenticated without a query", async (t) => {
  const { pool, count } = countingPool();
  const resolver = createIdentityResolver(pool);
  const token = newToken();
  const malformed: (string | undefined)[] = [
    undefined,
    "",
    "session:",
    "apikey:",
    "session",
    "apikey",
    token,
    `Session:${token}`,
    `SESSION:${token}`,
    `ApiKey:${token}`,
    `APIKEY:${token}`,
    `Bearer ${token}`,
    `Bearer session:${token}`,
    `session ${token}`,
    `session=${token}`,
    `api-key:${token}`,
    `api_key:${token}`,
    `sessions:${token}`,
    `session: ${token}`,
    ` session:${token}`,
    `session:${token} `,
    `session:${token}\t`,
    `session:${token}\n`,
    `session:${token}\r\n`,
    `session:${token.slice(0, 10)} ${token.slice(10)}`,
    `session:${token}\u0000`,
    `session:${token}\u007f`,
    `session:${token}\u00a0`,
    `session:t\u00f6ken`,
    `apikey:${token}\u200b`,
    `apikey:\u{1f511}`,
    `session:${"a".repeat(MAX_CREDENTIAL_LENGTH + 1)}`,
    `apikey:${"a".repeat(MAX_CREDENTIAL_LENGTH + 1)}`,
    `session:${"a".repeat(100_000)}`,
  ];
  for (const header of malformed) {
    t.equal(await resolver.resolve(header), undefined, `${JSON.stringify(header)?.slice(0, 60)} is unauthenticated`);
  }
  for (const header of [42, null, [`session:${token}`], { toString: () => `session:${token}` }]) {
    t.equal(await resolver.resolve(header as unknown as string), undefined, `a ${typeof header} header is unauthenticated`);
  }
  t.equal(count(), 0, "no query for any of them");

  t.equal(await resolver.resolve(`session:${"a".repeat(MAX_CREDENTIAL_LENGTH)}`), undefined, "the longest accepted credential is looked up");
  t.equal(count(), 1);
});

t.test("unknown credentials are cached too, within maxEntries", async (t) => {
  const { pool, count } = countingPool();
  const resolver = createIdentityResolver(pool, { cacheTtlMs: 60_000, maxEntries: 3 });
  const valid = await newSession();
  t.ok(await resolver.resolve(`session:${valid.token}`));
  t.equal(count(), 1);

  const unknown = Array.from({ length: 5 }, () => `session:${newToken()}`);
  for (const header of unknown) t.equal(await resolver.resolve(header), undefined);
  t.equal(count(), 6, "one query per distinct unknown credential");
  t.equal(await resolver.resolve(unknown[4]), undefined);
  t.equal(await resolver.resolve(unknown[2]), undefined);
  t.equal(count(), 6, "the newest unknown ones are answered from the cache");
  t.equal(await resolver.resolve(unknown[0]), undefined);
  t.equal(count(), 7, "the oldest was evicted");

  t.ok(await resolver.resolve(`session:${valid.token}`));
  t.equal(count(), 7, "a flood of unknown credentials does not evict valid identities");
});

t.test("concurrent lookups of one credential share one query", async (t) => {
  const { pool, count } = countingPool();
  const resolver = createIdentityResolver(pool);
  const { token, sessionId } = await newSession();
  const results = await Promise.all(Array.from({ length: 20 }, () => resolver.resolve(`session:${token}`)));
  t.equal(count(), 1);
  for (const r of results) t.equal(r?.kind === "user" && r.sessionId, sessionId);

  const unknown = `apikey:${newToken()}`;
  const misses = await Promise.all(Array.from({ length: 20 }, () => resolver.resolve(unknown)));
  t.equal(count(), 2, "unknown ones too");
  t.same(misses, Array(20).fill(undefined));
});

t.test("a database error propagates and is not cached", async (t) => {
  const { pool, count, failNext } = countingPool();
  const resolver = createIdentityResolver(pool, { cacheTtlMs: 60_000 });
  const { token } = await newSession();
  failNext(new Error("connection terminated unexpectedly"));
  const attempts = await Promise.allSettled([resolver.resolve(`session:${token}`), resolver.resolve(`session:${token}`)]);
  t.same(
    attempts.map((a) => a.status),
    ["rejected", "rejected"],
    "every caller waiting on the failed query sees the error",
  );
  t.match((attempts[0] as PromiseRejectedResult).reason, { message: "connection terminated unexpectedly" });
  t.equal(count(), 1);
  t.equal((await resolver.resolve(`session:${token}`))?.kind, "user", "the next request asks the database again");
  t.equal(count(), 2);
});

t.test("options are checked", async (t) => {
  const { pool } = countingPool();
  t.throws(() => createIdentityResolver(pool, { cacheTtlMs: -1 }), { code: "HUB_OPTION_INVALID", message: /cacheTtlMs.*-1/ });
  t.throws(() => createIdentityResolver(pool, { maxEntries: 1.5 }), { code: "HUB_OPTION_INVALID", message: /maxEntries/ });
  const uncached = createIdentityResolver(pool, { cacheTtlMs: 0 });
  const { token } = await newSession();
  t.equal((await uncached.resolve(`session:${token}`))?.kind, "user", "cacheTtlMs 0 still resolves");
});

t.test("the settings pgSettingsFor gives are the ones the row-level security functions read", async (t) => {
  const resolver = createIdentityResolver(admin, { cacheTtlMs: 0 });
  const { token, sessionId } = await newSession();
  const player = await resolver.resolve(`session:${token}`);
  const { key, id: apiKeyId } = await createApiKey(admin);
  const operator = await resolver.resolve(`apikey:${key}`);
  /** What the SQL side of the contract sees under these settings, as a GraphQL request would run. */
  const asSeenBySql = async (settings: Record<string, string>) => {
    const client = await admin.connect();
    try {
      await client.query("begin");
      await client.query("select set_config(el->>0, el->>1, true) from json_array_elements($1::json) el", [JSON.stringify(Object.entries(settings))]);
      const { rows } = await client.query<Record<string, string | boolean | null>>(
        `select current_user as role, current_setting('statement_timeout') as timeout,
                hub_hidden.current_user_id()::text as user_id, hub_hidden.current_casino_id()::text as casino_id,
                hub_hidden.current_experience_id()::text as experience_id, hub_hidden.current_session_id()::text as session_id,
                hub_hidden.is_operator() as operator`,
      );
      return rows[0];
    } finally {
      await client.query("rollback");
      client.release();
    }
  };
  t.same(await asSeenBySql(pgSettingsFor(player, 2500)), {
    role: GRAPHQL_ROLE,
    timeout: "2500ms",
    user_id: user.id,
    casino_id: casino.id,
    experience_id: experience.id,
    session_id: sessionId,
    operator: false,
  });
  t.same(await asSeenBySql(pgSettingsFor(operator)), { role: GRAPHQL_ROLE, timeout: "0", user_id: null, casino_id: null, experience_id: null, session_id: null, operator: true });
  t.same(await asSeenBySql(pgSettingsFor(undefined)), { role: GRAPHQL_ROLE, timeout: "0", user_id: null, casino_id: null, experience_id: null, session_id: null, operator: false });
  t.equal(pgSettingsFor(operator)[PG_SETTING.operatorApiKey], apiKeyId, "the key's id, never the key itself");
  t.notOk(Object.values(pgSettingsFor(operator)).includes(key));
  // Built once per identity object and frozen (every request of a cached identity shares them); a timeout of its own is its own object.
  t.equal(pgSettingsFor(player, 2500), pgSettingsFor(player, 2500), "one settings object per identity");
  t.ok(Object.isFrozen(pgSettingsFor(player, 2500)), "frozen: nothing downstream can change another request's settings");
  t.same(await asSeenBySql(pgSettingsFor(player)), { role: GRAPHQL_ROLE, timeout: "0", user_id: user.id, casino_id: casino.id, experience_id: experience.id, session_id: sessionId, operator: false }, "the same identity without a timeout");
  t.not(pgSettingsFor(player), pgSettingsFor(operator), "another identity, other settings");

  // The hand-off from the auth hook: what setIdentity leaves, identityOf finds, and Express reads as req.identity.
  const { IncomingMessage } = await import("node:http");
  const { Socket } = await import("node:net");
  const req = new IncomingMessage(new Socket());
  t.equal(identityOf(req), undefined, "no identity until the auth hook sets one");
  setIdentity(req, player);
  t.equal(identityOf(req), player);
  t.equal((req as { identity?: unknown }).identity, player, "req.identity, as Express handlers read it");
});
