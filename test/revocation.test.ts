import "./helpers/env.js";
import path from "node:path";
import t from "tap";
import { gql } from "./helpers/http.js";
import { ROOT, startServerProcess } from "./helpers/process.js";
import { tmpDir } from "./helpers/tmp.js";
import { makeOperator, makePlayer } from "./helpers/credentials.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";

/** Poll until the instance stops accepting the credential; resolves with how long it took, or rejects after 1 s. */
async function rejectedWithinOneSecond(url: string, header: Record<string, string>): Promise<number> {
  const started = Date.now();
  for (;;) {
    const kind = ((await (await fetch(`${url}/whoami`, { headers: header })).json()) as { kind: unknown }).kind;
    if (kind === null) return Date.now() - started;
    if (Date.now() - started > 1000) throw new Error("the credential still works after 1 s");
    await new Promise((r) => setTimeout(r, 25));
  }
}

t.test("a credential revoked through one instance stops working within 1 s on another that has it cached", async (t) => {
  // Two instances on one database of the test kit's shared cluster (no initdb of its own).
  const database = await sharedClusterDatabase(t);
  const env = { ...database, HUB_DATA_DIR: tmpDir(t), HUB_CONFIG: path.join(ROOT, "test/fixtures/config-long-identity-cache.mjs") };
  const a = await startServerProcess(env);
  t.teardown(() => a.child.kill("SIGKILL"));
  const b = await startServerProcess(env);
  t.teardown(() => b.child.kill("SIGKILL"));
  const url = database.SUPERUSER_DATABASE_URL;

  const player = await makePlayer(url, "roaming");
  const operator = await makeOperator(url);
  for (const server of [a, b]) {
    t.same(await (await fetch(`${server.url}/whoami`, { headers: player.header })).json(), { kind: "user" }, "cached as valid");
    t.same(await (await fetch(`${server.url}/whoami`, { headers: operator.header })).json(), { kind: "operator" });
  }

  const out = await gql(a.url, "mutation { hubLogout { success } }", {}, player.header);
  t.same(out.body, { data: { hubLogout: { success: true } } });
  const ms = await rejectedWithinOneSecond(b.url, player.header);
  t.pass(`instance B refused the logged-out session after ${ms} ms (its cache TTL is 60 s)`);

  // Revoked by hand in SQL (e.g. an operator's script): the trigger notifies too.
  const { default: pg } = await import("pg");
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query("update hub.api_key set revoked_at = now() where id = $1", [operator.id]);
  await client.end();
  for (const server of [a, b]) await rejectedWithinOneSecond(server.url, operator.header);
  t.pass("a key revoked in SQL stopped working on both instances");
  b.child.kill("SIGINT");
  a.child.kill("SIGINT");
  t.equal(await b.exited, 0);
  t.equal(await a.exited, 0);
});
