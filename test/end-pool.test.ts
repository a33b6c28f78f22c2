/**
 * endPool (src/db/database.ts) waits for the connections a pool opened to be
 * closed, and for nothing else: a connection still being made when the pool
 * ends, which then fails, never opened and never closes.
 */
import "./helpers/env.js";
import { fileURLToPath } from "node:url";
import pg from "pg";
import t from "tap";
import { run } from "./helpers/packed-project.js";
import { ROOT } from "./helpers/process.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
import { endPool, newPool } from "../dist/src/db/database.js";

const CONNECTING = fileURLToPath(new URL("./fixtures/end-pool-connecting.mjs", import.meta.url));

t.test("a connection that fails while the pool ends: endPool returns, and the process awaiting it does not end on an unsettled await", async (t) => {
  // The wait's own limit (60 s, unref'd) is far beyond the test: endPool must return because nothing is left to wait for.
  const { code, output } = await run(process.execPath, [CONNECTING, "60000"], ROOT, 120_000);
  t.match(output, /^failed: .+\nended\n$/, `the connection failed, then endPool returned: ${JSON.stringify(output)}`);
  t.equal(code, 0, "exit status 0 (13 is Node's unsettled top-level await)");
});

t.test("endPool waits until the pool's connections to Postgres are closed, checked out ones included", async (t) => {
  const urls = await sharedClusterDatabase(t);
  const pool = newPool({ connectionString: urls.SUPERUSER_DATABASE_URL, max: 3 });
  const held = await Promise.all([pool.connect(), pool.connect(), pool.connect()]);
  held[0]!.release();
  held[1]!.release();
  const removed: number[] = [];
  pool.on("remove", () => removed.push(Date.now()));
  let ended = false;
  const ending = endPool(pool).then(() => (ended = true));
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.equal(ended, false, "not ended while a connection is checked out");
  held[2]!.release();
  await ending;
  t.equal(removed.length, 3, "every connection was closed before endPool returned");
});

t.test("a pool not made by newPool is ended without waiting", async (t) => {
  const urls = await sharedClusterDatabase(t);
  const pool = new pg.Pool({ connectionString: urls.SUPERUSER_DATABASE_URL, max: 1 });
  await pool.query("select 1");
  await endPool(pool);
  t.equal(pool.ended, true, "ended");
});
