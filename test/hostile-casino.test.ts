/**
 * A hostile or broken casino's key set: read with a size and a time limit,
 * refused with a code that blames the casino (CASINO_KEYS_UNAVAILABLE), never
 * the player's token; nothing stored but the failure, which operators read.
 * Two in-process hubs on one database, a real JWKS server written for the test.
 */
import "./helpers/env.js";
import t from "tap";
import http from "node:http";
import type { AddressInfo } from "node:net";
import pg from "pg";
import { SignJWT, exportJWK, generateKeyPair } from "jose";
import { startAndListen } from "@hubpkg/hub";
import { gql } from "./helpers/http.js";
import { makeOperator, makePlayer } from "./helpers/credentials.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
import { JWK_SET_SNAPSHOTS_KEPT, recordJwkSet } from "../dist/src/auth/jwk-sets.js";
import { KEY_SET_MAX_BYTES } from "../dist/src/auth/remote-key-set.js";
import { CASINO_ANSWER_MAX_BYTES } from "../dist/src/bounded-fetch.js";
import { createHttpConnector } from "../dist/src/transfers/http-connector.js";

// Transfers polled often, so the test sees a poll's outcome quickly.
const base = { port: 0, logLevel: "silent" as const, handleSignals: false, transfers: { pollIntervalMs: 20, casinoPollIntervalMs: 40, requestTimeoutMs: 2000, backoffBaseMs: 30, backoffMaxMs: 250 } };
const PADDING_BYTES = 64 * 1024 * 1024;

let hubs: { url: string; stop(): Promise<void> }[] = [];
let pool: pg.Pool;
let op: { header: { authorization: string } };
let jwksBase: string;
let privateKey: Awaited<ReturnType<typeof generateKeyPair>>["privateKey"];
let jwk: Record<string, unknown>;
/** Per mode, the bytes the JWKS server wrote of its answers (what the hub made it send). */
const written = new Map<string, number>();
const requests = new Map<string, number>();

/** The JWKS server: /<mode>/jwks.json answers as the mode says. */
function jwksServer(): http.Server {
  return http.createServer((req, res) => {
    const mode = req.url!.split("/")[1]!;
    requests.set(mode, (requests.get(mode) ?? 0) + 1);
    const valid = JSON.stringify({ keys: [jwk] });
    switch (mode) {
      case "valid":
        res.setHeader("content-type", "application/json");
        res.end(valid);
        return;
      case "padded-declared":
        // Declares its 64 MB: refused before reading.
        res.writeHead(200, { "content-type": "application/json", "content-length": String(valid.length + PADDING_BYTES + 20) });
        streamPadding(res, mode, valid);
        return;
      case "padded-chunked":
        res.writeHead(200, { "content-type": "application/json" });
        streamPadding(res, mode, valid);
        return;
      case "silent":
        return; // never answers
      case "trickle":
        res.writeHead(200, { "content-type": "application/json" });
        res.write('{"keys":[');
        return; // the rest never comes
      case "not-json":
        res.end("<html>maintenance</html>");
        return;
      case "not-a-set":
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ keys: "none" }));
        return;
      case "deep":
        res.setHeader("content-type", "application/json");
        res.end(`{"keys":[${JSON.stringify(jwk).slice(0, -1)},"x":${"[".repeat(50_000)}${"]".repeat(50_000)}}]}`);
        return;
      case "empty":
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ keys: [] }));
        return;
      case "private":
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ keys: [{ ...jwk, d: "c2VjcmV0" }] }));
        return;
      case "many-keys":
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ keys: Array.from({ length: 101 }, () => jwk) }));
        return;
      case "error":
        res.statusCode = 503;
        res.end("{}");
        return;
      case "transfers-declared":
        res.writeHead(200, { "content-type": "application/json", "content-length": String(PADDING_BYTES + 40) });
        streamPadding(res, mode, '{"takeRequests":[],"transfers":[]}');
        return;
      case "transfers-chunked":
        res.writeHead(200, { "content-type": "application/json" });
        streamPadding(res, mode, '{"takeRequests":[],"transfers":[]}');
        return;
      case "redirect":
        res.writeHead(302, { location: `${jwksBase}/valid/jwks.json` });
        res.end();
        return;
      default:
        res.statusCode = 404;
        res.end();
    }
  });
}

/** One valid key, then padding inside a JSON string, written as fast as the reader takes it. */
function streamPadding(res: http.ServerResponse, mode: string, valid: string): void {
  const head = `${valid.slice(0, -1)},"padding":"`;
  const chunk = "x".repeat(64 * 1024);
  let sent = 0;
  const count = (n: number) => written.set(mode, (written.get(mode) ?? 0) + n);
  res.write(head);
  count(head.length);
  const pump = () => {
    while (sent < PADDING_BYTES) {
      sent += chunk.length;
      count(chunk.length);
      if (!res.write(chunk)) {
        res.once("drain", pump);
        return;
      }
    }
    res.end('"}');
  };
  res.on("close", () => res.off("drain", pump));
  pump();
}

t.before(async () => {
  const db = await sharedClusterDatabase(t);
  const options = { ...base, databaseUrl: db.DATABASE_URL, superuserDatabaseUrl: db.SUPERUSER_DATABASE_URL };
  hubs = [await startAndListen(options), await startAndListen(options)];
  pool = new pg.Pool({ connectionString: db.SUPERUSER_DATABASE_URL, max: 2 });
  pool.on("error", () => undefined);
  op = await makeOperator(db.SUPERUSER_DATABASE_URL);
  const pair = await generateKeyPair("ES256");
  privateKey = pair.privateKey;
  jwk = { ...(await exportJWK(pair.publicKey)), kid: "k1", alg: "ES256", use: "sig" };
  const server = jwksServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  jwksBase = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
});
t.teardown(async () => {
  await pool?.end();
  for (const hub of hubs.reverse()) await hub.stop();
});

async function casinoFor(name: string, jwksUrl: string): Promise<string> {
  const added = await gql(hubs[0]!.url, `mutation($n: String!, $u: String!) { hubAddCasino(input: { name: $n, jwksUrl: $u }) { casinoId } }`, { n: name, u: jwksUrl }, op.header);
  if (added.body.errors) throw new Error(JSON.stringify(added.body.errors));
  return added.body.data!.hubAddCasino.casinoId as string;
}

async function login(hubUrl: string, casinoId: string, uname: string) {
  const token = await new SignJWT({ uname }).setProtectedHeader({ alg: "ES256", kid: "k1" }).setExpirationTime("5m").sign(privateKey);
  return gql(hubUrl, "mutation($c: UUID!, $t: String!) { hubAuthenticate(input: { casinoId: $c, userToken: $t }) { user { uname } } }", { c: casinoId, t: token });
}

const FAILURE = "query($c: UUID!) { hubJwkSetFailureByCasinoId(casinoId: $c) { jwksUrl message failedAt } hubJwkSetByCasinoId(casinoId: $c) { casinoId } }";

t.test("a valid key set logs players in on both instances, and is stored once", async (t) => {
  const casinoId = await casinoFor("valid", `${jwksBase}/valid/jwks.json`);
  for (const [i, hub] of hubs.entries()) {
    const out = await login(hub.url, casinoId, `p${i}`);
    t.same(out.body, { data: { hubAuthenticate: { user: { uname: `p${i}` } } } });
  }
  const read = await gql(hubs[1]!.url, FAILURE, { c: casinoId }, op.header);
  t.same(read.body.data, { hubJwkSetFailureByCasinoId: null, hubJwkSetByCasinoId: { casinoId } }, "no failure, the set stored");
});

t.test("an unusable key set answers CASINO_KEYS_UNAVAILABLE on both instances, stores no set, and records the failure for operators", async (t) => {
  const cases: [string, RegExp, boolean][] = [
    ["padded-declared", /too large.*declares \d+ bytes/, true],
    ["padded-chunked", /too large.*reading stopped/, true],
    ["silent", /no whole answer within 3000 ms/, false],
    ["trickle", /no whole answer within 3000 ms/, false],
    ["not-json", /not JSON/, false],
    ["not-a-set", /not a key set/, false],
    ["deep", /nested deeper than 8 levels/, false],
    ["empty", /no RSA, EC or OKP public key/, false],
    ["private", /private key material/, false],
    ["many-keys", /101 keys, more than the 100/, false],
    ["error", /HTTP 503/, false],
    ["redirect", /HTTP 302/, false],
    ["refused", /could not be reached/, false],
  ];
  // A port nobody listens on: a server opened and closed again.
  const closed = http.createServer();
  await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
  const closedPort = (closed.address() as AddressInfo).port;
  await new Promise((r) => closed.close(r));

  await Promise.all(
    cases.map(async ([mode, reason, tooLarge]) => {
      const url = mode === "refused" ? `http://127.0.0.1:${closedPort}/jwks.json` : `${jwksBase}/${mode}/jwks.json`;
      const casinoId = await casinoFor(`hostile-${mode}`, url);
      for (const [i, hub] of hubs.entries()) {
        const out = await login(hub.url, casinoId, `victim-${i}`);
        t.equal(out.status, 200, `${mode}: a GraphQL answer, no 5xx`);
        const error = out.body.errors?.[0];
        t.match(error, { extensions: { code: "CASINO_KEYS_UNAVAILABLE", casinoId } }, `${mode} on hub ${i}: the casino's fault`);
        t.match(error?.message, reason, `${mode}: says why`);
        t.match(error?.message, casinoId, `${mode}: names the casino`);
        if (tooLarge) t.equal(error?.extensions?.limit, KEY_SET_MAX_BYTES, `${mode}: names the limit`);
        t.notMatch(error?.extensions?.code, /USER_TOKEN/, `${mode}: never the player's token`);
      }
      const read = await gql(hubs[1]!.url, FAILURE, { c: casinoId }, op.header);
      t.equal(read.body.data?.hubJwkSetByCasinoId, null, `${mode}: no key set stored`);
      t.match(read.body.data?.hubJwkSetFailureByCasinoId, { jwksUrl: url, message: reason, failedAt: String }, `${mode}: operators read the last failure`);
      const users = await pool.query("select 1 from hub.user where casino_id = $1", [casinoId]);
      t.equal(users.rowCount, 0, `${mode}: no player created`);
    }),
  );
  for (const mode of ["padded-declared", "padded-chunked"]) {
    t.ok((written.get(mode) ?? 0) < PADDING_BYTES / 2, `${mode}: the hubs stopped reading long before the ${PADDING_BYTES} bytes (the server wrote ${written.get(mode)})`);
  }

  const player = await makePlayer((pool.options as { connectionString: string }).connectionString, "curious");
  const asPlayer = await gql(hubs[0]!.url, "{ allHubJwkSetFailures { nodes { message } } }", {}, player.header);
  t.same(asPlayer.body.data, { allHubJwkSetFailures: { nodes: [] } }, "players read no failures");
});

t.test("a failed fetch is not retried at every login: a crowd of players costs the casino one request per instance", async (t) => {
  const casinoId = await casinoFor("down", `${jwksBase}/error/jwks.json`);
  const before = requests.get("error") ?? 0;
  const outs = await Promise.all(Array.from({ length: 10 }, (_, i) => login(hubs[i % 2]!.url, casinoId, `crowd-${i}`)));
  for (const out of outs) t.equal(out.body.errors?.[0]?.extensions?.code, "CASINO_KEYS_UNAVAILABLE");
  t.ok((requests.get("error") ?? 0) - before <= 2, `at most one fetch per instance (${(requests.get("error") ?? 0) - before})`);
});

t.test("snapshots: one per distinct set, the newest JWK_SET_SNAPSHOTS_KEPT kept per casino", async (t) => {
  const casinoId = await casinoFor("rotating", `${jwksBase}/valid/jwks.json`);
  const other = await casinoFor("steady", `${jwksBase}/valid/jwks.json`);
  await recordJwkSet(pool, other, { keys: [{ kid: "steady" }] });
  for (let i = 0; i < JWK_SET_SNAPSHOTS_KEPT + 5; i++) await recordJwkSet(pool, casinoId, { keys: [{ kid: `k${i}` }] });
  await recordJwkSet(pool, casinoId, { keys: [{ kid: `k${JWK_SET_SNAPSHOTS_KEPT + 4}` }] });
  const { rows } = await pool.query<{ kid: string }>("select jwks->'keys'->0->>'kid' as kid from hub.jwk_set_snapshot where casino_id = $1 order by created_at, id", [casinoId]);
  t.same(
    rows.map((r) => r.kid),
    Array.from({ length: JWK_SET_SNAPSHOTS_KEPT }, (_, i) => `k${i + 5}`),
    "the newest sets, the same set again adds none",
  );
  t.equal((await pool.query("select 1 from hub.jwk_set_snapshot where casino_id = $1", [other])).rowCount, 1, "another casino's snapshots untouched");
  const huge = { keys: [{ kid: "big", padding: "x".repeat(KEY_SET_MAX_BYTES) }] };
  await recordJwkSet(pool, other, huge);
  const stored = await pool.query<{ kid: string }>("select jwks->'keys'->0->>'kid' as kid from hub.jwk_set where casino_id = $1", [other]);
  t.same(stored.rows, [{ kid: "steady" }], "a set over the limit is not stored");
});

t.test("every page a casino's transfer endpoint answers is read with the same bound: over it, refused naming the casino and the limit", async (t) => {
  for (const mode of ["transfers-declared", "transfers-chunked", "trickle"]) {
    const casinoId = `0190f3a0-0000-7000-8000-00000000000${mode.length % 10}`;
    const connector = createHttpConnector({ casinoId, url: `${jwksBase}/${mode}/hub/transfers`, apiKey: "k", timeoutMs: 2000 });
    for (const [what, call] of [
      ["take-request page", () => connector.fetchTakeRequests!(null)],
      ["incoming page", () => connector.fetchIncoming(null)],
      ["withdrawal lookup", () => connector.lookup("key-1")],
      ["take transfer", () => connector.lookupTake!("0190f3a0-0000-7000-8000-000000000001")],
    ] as const) {
      const error = await (call as () => Promise<unknown>)().then(
        () => undefined,
        (e: Error) => e,
      );
      t.equal(error?.name, "OutcomeUnknownError", `${mode}, ${what}: an unknown outcome, retried later`);
      if (mode === "trickle") t.match(error?.message, /did not arrive whole within 2000 ms/, `${mode}, ${what}: the time limit covers the body`);
      else t.match(error?.message, new RegExp(`^CASINO_ANSWER_TOO_LARGE: casino ${casinoId} .*${CASINO_ANSWER_MAX_BYTES} bytes`), `${mode}, ${what}: names the casino and the limit`);
    }
    if (mode !== "trickle") t.ok((written.get(mode) ?? 0) < PADDING_BYTES * 2, `${mode}: reading stopped early (the server wrote ${written.get(mode)} bytes for 4 answers of ${PADDING_BYTES})`);
  }
});

t.test("a casino polled by both instances' workers with an oversized page: the job records the refusal, nothing is received", async (t) => {
  const baseUrl = `${jwksBase}/transfers-chunked`;
  const add = await gql(hubs[0]!.url, `mutation($u: String!) { hubAddCasino(input: { name: "huge-pages", baseUrl: $u, apiKey: "k" }) { casinoId } }`, { u: baseUrl }, op.header);
  const casinoId = add.body.data!.hubAddCasino.casinoId as string;
  await gql(hubs[0]!.url, `mutation($c: UUID!) { hubAddCurrency(input: { casinoId: $c, key: "BTC", displayUnitName: "bits", displayUnitScale: 100 }) { key } }`, { c: casinoId }, op.header);
  const set = (poll: boolean) =>
    gql(hubs[1]!.url, `mutation($c: UUID!, $p: Boolean!) { hubSetCasinoTransfers(input: { casinoId: $c, poll: $p, takeRequests: $p }) { casinoId } }`, { c: casinoId, p: poll }, op.header);
  t.same((await set(true)).body.errors, undefined, "polling of transfers and take requests on");
  const started = Date.now();
  let errors: string[] = [];
  while (errors.length < 2 && Date.now() - started < 20_000) {
    const { rows } = await pool.query<{ last_error: string }>("select last_error from hub.transfer_job where casino_id = $1 and last_error is not null", [casinoId]);
    errors = rows.map((r) => r.last_error);
    await new Promise((r) => setTimeout(r, 50));
  }
  await set(false);
  t.ok(errors.length >= 2, `both polls (transfers and take requests) recorded an error: ${JSON.stringify(errors)}`);
  for (const e of errors) t.match(e, new RegExp(`^CASINO_ANSWER_TOO_LARGE: casino ${casinoId} answered GET /(incoming|take-requests)\\?.*${CASINO_ANSWER_MAX_BYTES} bytes`), "names the code, the casino, the call and the limit");
  for (const table of ["hub.deposit", "hub.take_request"]) t.equal((await pool.query(`select 1 from ${table} where casino_id = $1`, [casinoId])).rowCount, 0, `nothing in ${table}`);
  const read = await gql(hubs[0]!.url, "query($c: UUID!) { allHubTransferJobs(condition: { casinoId: $c }) { nodes { lastError } } }", { c: casinoId }, op.header);
  t.ok(
    (read.body.data?.allHubTransferJobs as { nodes: { lastError: string | null }[] } | undefined)?.nodes.some((n) => n.lastError?.startsWith("CASINO_ANSWER_TOO_LARGE")),
    `operators read it over GraphQL (${JSON.stringify(read.body.errors ?? "")})`,
  );
});
