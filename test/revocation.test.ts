import "./helpers/env.js";
import path from "node:path";
import t from "tap";
import { gql } from "./helpers/http.js";
import { ROOT, startServerProcess } from "./helpers/process.js";
import { tmpDir } from "./helpers/tmp.js";
import { makeOperator, makePlayer } from "./helpers/credentials.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";

/** The identity cache's TTL of both instances (test/fixtures/config-long-identity-cache.mjs). */
const CACHE_TTL_MS = 60_000;

/**
 * Polls until the instance refuses the credential, and fails if it still
 * accepts it at `deadline`, when its cache entry expires: a refusal before that
 * can only come from the revocation's notification. Resolves with the
 * milliseconds it took (printed, not asserted).
 */
async function refusedBefore(url: string, header: Record<string, string>, deadline: number, what: string): Promise<number> {
  const started = Date.now();
  for (;;) {
    const kind = ((await (await fetch(`${url}/whoami`, { headers: header })).json()) as { kind: unknown }).kind;
    if (kind === null) return Date.now() - started;
    if (Date.now() > deadline) throw new Error(`${what} was still accepted when its cache entry expired: the revocation's notification did not arrive`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

t.test("a credential revoked through one instance stops working on another while its cache entry still holds it as valid", async (t) => {
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
  // Before the first lookups: no cache entry expires before this.
  const cacheExpires = Date.now() + CACHE_TTL_MS;
  for (const server of [a, b]) {
    t.same(await (await fetch(`${server.url}/whoami`, { headers: player.header })).json(), { kind: "user" }, "cached as valid");
    t.same(await (await fetch(`${server.url}/whoami`, { headers: operator.header })).json(), { kind: "operator" });
  }

  const out = await gql(a.url, "mutation { hubLogout { success } }", {}, player.header);
  t.same(out.body, { data: { hubLogout: { success: true } } });
  const ms = await refusedBefore(b.url, player.header, cacheExpires, "the logged-out session");
  t.pass("instance B refused the logged-out session before its cache entry (60 s) expired");
  t.comment(`instance B refused it ${ms} ms after the logout (not asserted)`);

  // Revoked by hand in SQL (e.g. an operator's script): the trigger notifies too.
  const { default: pg } = await import("pg");
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query("update hub.api_key set revoked_at = now() where id = $1", [operator.id]);
  await client.end();
  for (const server of [a, b]) t.comment(`refused after ${await refusedBefore(server.url, operator.header, cacheExpires, "the API key revoked in SQL")} ms (not asserted)`);
  t.pass("a key revoked in SQL stopped working on both instances before their cache entries expired");
  b.child.kill("SIGINT");
  a.child.kill("SIGINT");
  t.equal(await b.exited, 0);
  t.equal(await a.exited, 0);
});
