import "./helpers/env.js";
import fs from "node:fs";
import path from "node:path";
import pg from "pg";
import t from "tap";
import { gql } from "./helpers/http.js";
import { childrenOf, startServerProcess } from "./helpers/process.js";
import { tmpDir } from "./helpers/tmp.js";
// The embedded Postgres's own readers of its pid file and of a process's liveness.
import { isAlive as alive, readPostmasterPid } from "../dist/src/db/embedded.js";
// The product's own list of core migrations: the count to expect follows it.
import { readCoreMigrations } from "../dist/src/db/core-migrations.js";

const postmasterPid = (dataDir: string): number | undefined => readPostmasterPid(path.join(dataDir, "pg"))?.pid;

async function superuserClient(dataDir: string): Promise<pg.Client> {
  const { superuserPassword } = JSON.parse(fs.readFileSync(path.join(dataDir, "credentials.json"), "utf8")) as { superuserPassword: string };
  const port = readPostmasterPid(path.join(dataDir, "pg"))!.port;
  const client = new pg.Client({ host: "127.0.0.1", port, user: "postgres", password: superuserPassword, database: "hub" });
  await client.connect();
  return client;
}

/**
 * The first and last tests share a data dir (the last needs a cluster, not a
 * first start): these tests are about the embedded Postgres's start, stop and
 * adoption, so they run it themselves instead of using the test kit's cluster.
 */
const sharedDataDir = tmpDir(t);

t.test("node dist/server.js: first start, second process, SIGINT, restart on the same data dir", async (t) => {
  const dataDir = sharedDataDir;

  // First start: initdb, migrations, GraphQL over POST and GET.
  const first = await startServerProcess({ HUB_DATA_DIR: dataDir });
  t.teardown(() => first.child.kill("SIGKILL"));
  t.match(first.output(), /initialising the embedded Postgres cluster/);
  t.match(first.output(), new RegExp(`"dataDir":"${dataDir.replace(/[/\\]/g, "\\$&")}"`), "logs where the data lives");

  const anon = await gql(first.url, "{ hubCurrentUser { id } }");
  t.same(anon.body, { data: { hubCurrentUser: null } }, "the README's first curl answers null");

  // A database-backed field (fails with a masked error on Node 20 without Promise.withResolvers).
  const casinos = await gql(first.url, "{ allHubCasinos { totalCount nodes { id } } }");
  t.same(casinos.body.errors, undefined, "no error from a database field");
  t.equal((casinos.body.data as any).allHubCasinos.totalCount, 0, "RLS hides every casino from an anonymous request");

  const viaGet = await fetch(`${first.url}/graphql?query=${encodeURIComponent("{ allHubCasinos { totalCount } }")}`);
  t.equal(viaGet.status, 200);
  t.same(await viaGet.json(), { data: { allHubCasinos: { totalCount: 0 } } }, "GET /graphql runs a database query");

  const mutationViaGet = await fetch(`${first.url}/graphql?query=${encodeURIComponent("mutation { __typename }")}`);
  t.equal(mutationViaGet.status, 405, "a mutation over GET is refused with 405");

  // The playground casino and its HOUSE currency exist after the first start.
  const su = await superuserClient(dataDir);
  const playground = await su.query("select c.is_playground, cur.key from hub.casino c join hub.currency cur on cur.casino_id = c.id where c.name = 'playground'");
  t.same(playground.rows, [{ is_playground: true, key: "HOUSE" }]);
  await su.query("insert into hub.casino (name) values ('persisted-across-restarts')");
  await su.end();

  // A second server on the same data dir uses the running Postgres.
  const pid = postmasterPid(dataDir)!;
  const second = await startServerProcess({ HUB_DATA_DIR: dataDir });
  t.teardown(() => second.child.kill("SIGKILL"));
  t.match(second.output(), /using the embedded Postgres another process started/);
  t.equal(postmasterPid(dataDir), pid, "no second postmaster");
  t.same((await gql(second.url, "{ hubCurrentUser { id } }")).body, { data: { hubCurrentUser: null } });
  second.child.kill("SIGINT");
  t.equal(await second.exited, 0, "the second server exits 0");
  t.ok(alive(pid), "stopping the second server leaves the first one's Postgres running");
  t.same((await gql(first.url, "{ allHubCasinos { totalCount } }")).body, { data: { allHubCasinos: { totalCount: 0 } } });

  // Ctrl-C stops everything: HTTP, pools, and the Postgres this process started.
  first.child.kill("SIGINT");
  t.equal(await first.exited, 0, "exits 0 on SIGINT");
  t.notOk(alive(pid), "no postgres process is left behind");
  t.match(first.output(), /embedded Postgres stopped/);

  // Restart: the data survives and no initdb runs.
  const started = Date.now();
  const again = await startServerProcess({ HUB_DATA_DIR: dataDir });
  t.teardown(() => again.child.kill("SIGKILL"));
  const answer = await gql(again.url, "{ hubCurrentUser { id } }");
  t.comment(`warm start to first answered /graphql: ${Date.now() - started} ms (process spawn included)`);
  t.same(answer.body, { data: { hubCurrentUser: null } });
  t.notMatch(again.output(), /initialising/, "reuses the cluster: no initdb");
  const su2 = await superuserClient(dataDir);
  const kept = await su2.query("select count(*)::int as n from hub.casino where name = 'persisted-across-restarts'");
  t.equal(kept.rows[0].n, 1, "data written before the restart is still there");
  const migrations = await su2.query<{ name: string; n: number }>("select name, count(*)::int as n from hub_secret.migration where kind = 'core' group by name order by name");
  await su2.end();
  again.child.kill("SIGTERM");
  t.equal(await again.exited, 0, "exits 0 on SIGTERM");
  const coreMigrations = await readCoreMigrations();
  t.ok(coreMigrations.length > 0);
  t.same(
    migrations.rows,
    coreMigrations.map((m) => ({ name: m.name, n: 1 })).sort((a, b) => a.name.localeCompare(b.name)),
    `each of the ${coreMigrations.length} core migrations recorded once, after three starts`,
  );
});

t.test("the server never logs credentials", async (t) => {
  // Its own first start: the credentials are created then, so that start is logged at trace too.
  const dataDir = tmpDir(t);
  const server = await startServerProcess({ HUB_DATA_DIR: dataDir, LOG_LEVEL: "trace" });
  t.teardown(() => server.child.kill("SIGKILL"));
  const res = await fetch(`${server.url}/graphql?probe=credentials`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "session:very-secret-token-value" },
    body: JSON.stringify({ query: "{ __typename }" }),
  });
  t.equal(res.status, 200);
  server.child.kill("SIGINT");
  await server.exited;
  // Positive control: the request itself was logged (else "not in the log" proves nothing).
  const entries = server
    .output()
    .split("\n")
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as { reqId?: string; msg?: string; req?: { method?: string; url?: string } }];
      } catch {
        return [];
      }
    });
  const incoming = entries.find((e) => e.msg === "incoming request" && e.req?.method === "POST" && e.req.url === "/graphql?probe=credentials");
  t.ok(incoming, "the request was logged");
  t.ok(incoming && entries.some((e) => e.reqId === incoming.reqId && e.msg === "request completed"), "and its completion, under the same request id");
  const { superuserPassword, authenticatorPassword } = JSON.parse(fs.readFileSync(path.join(dataDir, "credentials.json"), "utf8")) as Record<string, string>;
  t.notMatch(server.output(), /very-secret-token-value/, "Authorization header redacted");
  t.notMatch(server.output(), new RegExp(superuserPassword!), "superuser password never logged");
  t.notMatch(server.output(), new RegExp(authenticatorPassword!), "authenticator password never logged");
  const mode = fs.statSync(path.join(dataDir, "credentials.json")).mode & 0o777;
  t.equal(mode, 0o600, "credentials file readable by its owner only");
});

/** Whether the process is gone within withinMs: a generous bound on a wait, not a speed requirement. */
async function gone(pid: number, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (Date.now() < deadline) {
    if (!alive(pid)) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return !alive(pid);
}

t.test("a second Ctrl-C while stopping, or a killed server, never leaves the embedded Postgres behind for good", async (t) => {
  const dataDir = sharedDataDir;
  const first = await startServerProcess({ HUB_DATA_DIR: dataDir });
  t.teardown(() => first.child.kill("SIGKILL"));
  const pid = postmasterPid(dataDir)!;
  // Impatient operator: two Ctrl-C in a row.
  first.child.kill("SIGINT");
  first.child.kill("SIGINT");
  await first.exited;
  t.ok(await gone(pid, 30_000), "Postgres stopped although the second signal cut the graceful stop short (waited up to 30 s)");

  // A server killed outright cannot stop anything itself: its watchdog does (test/lifecycle.test.ts).
  // With the watchdog killed too, the postmaster is left running; the next server adopts the orphan
  // and stops it when it stops.
  const second = await startServerProcess({ HUB_DATA_DIR: dataDir });
  const orphan = postmasterPid(dataDir)!;
  const watchdogs = childrenOf(second.child.pid!).filter((pid) => pid !== orphan);
  t.equal(watchdogs.length, 1, "the server runs one watchdog besides the postmaster");
  for (const pid of watchdogs) process.kill(pid, "SIGKILL");
  second.child.kill("SIGKILL");
  await second.exited;
  await new Promise((r) => setTimeout(r, 500));
  t.ok(alive(orphan), "SIGKILL of the server and its watchdog leaves Postgres running");
  const third = await startServerProcess({ HUB_DATA_DIR: dataDir });
  t.teardown(() => third.child.kill("SIGKILL"));
  t.match(third.output(), /adopted an embedded Postgres left running by a process that died/);
  t.equal(postmasterPid(dataDir), orphan, "it reuses the orphan rather than starting another");
  t.same((await gql(third.url, "{ hubCurrentUser { id } }")).body, { data: { hubCurrentUser: null } });
  third.child.kill("SIGINT");
  t.equal(await third.exited, 0);
  t.ok(await gone(orphan, 30_000), "and stops it when it stops (waited up to 30 s)");
});
