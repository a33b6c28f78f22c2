/**
 * Liveness and readiness in the core (/healthz, /readyz): their answers,
 * their paths (moved, turned off, refused where the hub or an Express route
 * already answers), and readiness through a database outage after the start,
 * on a Postgres of the test's own that it stops and starts again.
 */
import "./helpers/env.js";
import t from "tap";
import { startAndListen } from "@hubpkg/hub";
import { startTestServer } from "@hubpkg/hub/test";
import { readConfig } from "../dist/src/config.js";
import { tmpDir } from "./helpers/tmp.js";
import { startExternalPostgres } from "./helpers/external-postgres.js";
import { makePlayer } from "./helpers/credentials.js";

async function get(url: string, headers: Record<string, string> = {}, method = "GET") {
  const res = await fetch(url, { method, headers });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
}

/** Asks readiness until its answer satisfies `done` (bounded; a failure names the last answer). */
async function readyUntil(url: string, done: (body: Record<string, unknown> | undefined) => boolean, what: string) {
  const started = Date.now();
  for (;;) {
    const answer = await get(`${url}/readyz`);
    if (done(answer.body)) return answer;
    if (Date.now() - started > 30_000) throw new Error(`timed out: ${what} (last answer ${answer.status} ${JSON.stringify(answer.body)})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test("liveness and readiness are served by default, as JSON, whatever the Authorization header says", async (t) => {
  const server = await startTestServer();
  t.teardown(() => server.stop());
  const live = await get(`${server.url}/healthz`);
  t.equal(live.status, 200);
  t.same(live.body, { status: "alive" });
  t.match(live.headers.get("content-type"), /^application\/json/);
  t.equal(live.headers.get("cache-control"), "no-store", "never cached by a proxy");
  const ready = await get(`${server.url}/readyz`);
  t.equal(ready.status, 200);
  t.same(ready.body, { status: "ready", database: "reachable" });
  t.equal((await get(`${server.url}/readyz`, {}, "HEAD")).status, 200, "HEAD is answered too");
  // A credential that does not exist would be looked up anywhere else; here it is not even read.
  for (const header of ["session:00000000-0000-0000-0000-000000000000", "apikey:nonsense", "Bearer x"]) {
    t.equal((await get(`${server.url}/readyz`, { authorization: header })).status, 200, `with Authorization: ${header}`);
  }
});

t.test("the paths move and turn off, by option and by environment variable, and refuse a path the hub uses", async (t) => {
  const server = await startTestServer({ livenessPath: "/ops/live", readinessPath: false });
  t.teardown(() => server.stop());
  t.equal((await get(`${server.url}/ops/live`)).status, 200, "liveness at the path given");
  t.equal((await get(`${server.url}/healthz`)).status, 404, "no longer at /healthz");
  t.equal((await get(`${server.url}/readyz`)).status, 404, "readiness off");

  const env = (vars: Record<string, string>) => readConfig(vars, {});
  t.equal(env({}).livenessPath, "/healthz");
  t.equal(env({}).readinessPath, "/readyz");
  t.equal(env({ HUB_LIVENESS_PATH: "off", HUB_READINESS_PATH: "/lb/ready/" }).livenessPath, false);
  t.equal(env({ HUB_READINESS_PATH: "/lb/ready/" }).readinessPath, "/lb/ready", "a trailing slash is dropped");
  t.equal(env({ HUB_READINESS_PATH: "on" }).readinessPath, "/readyz");
  t.throws(() => env({ HUB_READINESS_PATH: "/graphql" }), { code: "HUB_CONFIG_INVALID", message: /HUB_READINESS_PATH is invalid: received "\/graphql", expected on, off or a path such as \/readyz/ });
  t.throws(() => env({ HUB_DASHBOARD: "/ops", HUB_LIVENESS_PATH: "/ops/live" }), { code: "HUB_CONFIG_INVALID", message: /HUB_LIVENESS_PATH is invalid: received "\/ops\/live", expected a path other than the dashboard's \(\/ops\)/ });
  t.throws(() => env({ HUB_DASHBOARD: "/readyz" }), { code: "HUB_CONFIG_INVALID", message: /HUB_DASHBOARD is invalid: received "\/readyz", expected a path that does not hold the readiness check's \/readyz/ });
  t.throws(() => readConfig({}, { livenessPath: "/up", readinessPath: "/up" }), { code: "HUB_OPTION_INVALID", message: /"readinessPath" is invalid: received "\/up", expected a path other than the liveness check's/ });
  t.throws(() => readConfig({}, { livenessPath: "healthz" }), { code: "HUB_OPTION_INVALID", message: /"livenessPath" is invalid: received "healthz", expected true, false or a path such as \/healthz/ });
});

t.test("an Express route on a health path is refused at start, naming how to move the check", async (t) => {
  await t.rejects(
    startTestServer({ configureApp: ({ app }) => void app.get("/readyz", (_req, res) => void res.send("mine")) }),
    { code: "HUB_ROUTE_CONFLICT", message: /\/readyz.*readiness check.*HUB_READINESS_PATH/ },
  );
  // Turned off, the path is the app's.
  const server = await startTestServer({ readinessPath: false, configureApp: ({ app }) => void app.get("/readyz", (_req, res) => void res.send("mine")) });
  t.teardown(() => server.stop());
  const res = await fetch(`${server.url}/readyz`);
  t.equal(await res.text(), "mine");
});

t.test("a database outage after the start: readiness stays 200 and says the database is unreachable; requests get the hub's own 503", async (t) => {
  const dataDir = tmpDir(t);
  const pg = await startExternalPostgres(t, dataDir);
  const server = await startAndListen({ port: 0, logLevel: "silent", handleSignals: false, databaseUrl: pg.authenticatorUrl, superuserDatabaseUrl: pg.superuserUrl, identityCacheTtlMs: 0 });
  t.teardown(() => server.stop());
  const player = await makePlayer(pg.superuserUrl, "outage");
  t.same((await get(`${server.url}/readyz`)).body, { status: "ready", database: "reachable" });

  await pg.stop();
  let last = await readyUntil(server.url, (body) => body?.database === "unreachable", "readiness to report the database unreachable");
  t.equal(last!.status, 200, "still ready: the proxy keeps sending traffic, and clients get the hub's answers");
  t.same(last!.body, { status: "ready", database: "unreachable" });
  const live = await get(`${server.url}/healthz`, { authorization: player.header.authorization });
  t.equal(live.status, 200, "liveness needs no database, even with a credential");
  t.equal((await get(`${server.url}/readyz`, { authorization: player.header.authorization })).status, 200, "nor does readiness");
  const refused = await get(`${server.url}/graphql`, { authorization: player.header.authorization, "content-type": "application/json" }, "GET");
  t.equal(refused.status, 503, "a request that needs the database gets a 503");
  t.equal(refused.body?.code, "DATABASE_UNAVAILABLE", "with the hub's own retryable code");

  await pg.start();
  last = await readyUntil(server.url, (body) => body?.database === "reachable", "readiness to report the database reachable again");
  t.same(last!.body, { status: "ready", database: "reachable" });
});
