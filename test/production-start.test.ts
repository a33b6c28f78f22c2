/**
 * Production is explicit, and a failed start reads as one block: NODE_ENV=production
 * without database URLs refuses to start (naming the variables to set) unless
 * HUB_EMBEDDED_POSTGRES=on asks for the embedded Postgres; a start failure
 * (that one, a malformed variable, a port in use) prints the code and the
 * message without a stack, and with the stack only under LOG_LEVEL=debug.
 */
import "./helpers/env.js";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import t from "tap";
import { runServerExpectingFailure, startServerProcess } from "./helpers/process.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
import { tmpDir } from "./helpers/tmp.js";

const NO_URLS = { DATABASE_URL: "", SUPERUSER_DATABASE_URL: "", POSTGRAPHILE_DATABASE_URL: "" };
const STACK_LINE = /\n\s+at \S/;

t.test("production without database URLs: refused, naming what to set; nothing started", async (t) => {
  const dataDir = path.join(tmpDir(t), "data");
  const run = await runServerExpectingFailure({ ...NO_URLS, NODE_ENV: "production", HUB_DATA_DIR: dataDir, LOG_LEVEL: "info" });
  t.equal(run.code, 1, "exit status 1");
  t.match(run.stderr, /^hub: No database is configured and NODE_ENV is production, so the embedded Postgres is not started\. Set DATABASE_URL and SUPERUSER_DATABASE_URL .*HUB_EMBEDDED_POSTGRES=on .*\[HUB_DATABASE_REQUIRED\]\n$/);
  t.notMatch(run.stderr, STACK_LINE, "no stack");
  t.notOk(fs.existsSync(dataDir), "no embedded Postgres was initialised");

  const debug = await runServerExpectingFailure({ ...NO_URLS, NODE_ENV: "production", HUB_DATA_DIR: dataDir, LOG_LEVEL: "debug" });
  t.equal(debug.code, 1);
  t.match(debug.stderr, /^hub: No database is configured .*\[HUB_DATABASE_REQUIRED\]\nHubError: No database/, "LOG_LEVEL=debug: the same line, then the stack");
  t.match(debug.stderr, STACK_LINE);

  const off = await runServerExpectingFailure({ ...NO_URLS, NODE_ENV: "development", HUB_EMBEDDED_POSTGRES: "off", HUB_DATA_DIR: dataDir });
  t.equal(off.code, 1);
  t.match(off.stderr, /No database is configured and HUB_EMBEDDED_POSTGRES is off, .*\[HUB_DATABASE_REQUIRED\]/, "off outside production refuses too");
});

t.test("production with HUB_EMBEDDED_POSTGRES=on starts on the embedded Postgres", async (t) => {
  const dataDir = tmpDir(t);
  const server = await startServerProcess({ ...NO_URLS, NODE_ENV: "production", HUB_EMBEDDED_POSTGRES: "on", HUB_DATA_DIR: dataDir, HUB_EXAMPLES: "off", HOST: "127.0.0.1", HUB_DRAIN_MS: "0" });
  t.teardown(() => {
    if (server.child.exitCode === null) server.child.kill("SIGKILL");
  });
  const res = await fetch(`${server.url}/graphql`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ query: "{ __typename }" }) });
  t.same(await res.json(), { data: { __typename: "Query" } }, "serves GraphQL");
  t.ok(fs.existsSync(path.join(dataDir, "PG_VERSION")) || fs.readdirSync(dataDir).length > 0, "its data in HUB_DATA_DIR");
  server.child.kill("SIGINT");
  t.equal(await server.exited, 0, "stops cleanly");
});

t.test("a malformed variable and a port in use: one block, the stack only with LOG_LEVEL=debug", async (t) => {
  const bad = await runServerExpectingFailure({ PORT: "eighty" });
  t.equal(bad.code, 1);
  t.match(bad.stderr, /^hub: Environment variable PORT is invalid: received "eighty", expected an integer from 0 to 65535.*\[HUB_CONFIG_INVALID\]\n$/);
  const badDebug = await runServerExpectingFailure({ PORT: "eighty", LOG_LEVEL: "debug" });
  t.equal(badDebug.code, 1);
  t.match(badDebug.stderr, /\[HUB_CONFIG_INVALID\]\nHubError: Environment variable PORT/);
  t.match(badDebug.stderr, STACK_LINE);

  const blocker = net.createServer();
  await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise((resolve) => blocker.close(resolve)));
  const port = String((blocker.address() as net.AddressInfo).port);
  const db = await sharedClusterDatabase(t);
  const taken = await runServerExpectingFailure({ ...db, HUB_EXAMPLES: "off", HOST: "127.0.0.1", PORT: port, LOG_LEVEL: "warn" });
  t.equal(taken.code, 1);
  t.match(taken.stderr, /^hub: Port \d+ on 127\.0\.0\.1 is already in use .*\[HUB_PORT_IN_USE\]\n$/);
  t.notMatch(taken.stderr, STACK_LINE, "no stack");
  const takenDebug = await runServerExpectingFailure({ ...db, HUB_EXAMPLES: "off", HOST: "127.0.0.1", PORT: port, LOG_LEVEL: "debug" });
  t.equal(takenDebug.code, 1);
  t.match(takenDebug.stderr, /\[HUB_PORT_IN_USE\]\nHubError: Port/);
  t.match(takenDebug.stderr, /caused by: Error: listen EADDRINUSE/, "and the cause's");
});
