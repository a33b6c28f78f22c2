import "./helpers/env.js";
import fs from "node:fs";
import path from "node:path";
import t from "tap";
import { gql } from "./helpers/http.js";
import { ROOT, runServerExpectingFailure, startServerProcess } from "./helpers/process.js";
import { tmpDir } from "./helpers/tmp.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";

/** Polls the output until `found` holds; fails after a generous 30 s naming what it waited for. */
async function untilLogged(output: () => string, found: (text: string) => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!found(output())) {
    if (Date.now() > deadline) throw new Error(`not logged within 30 s: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test("HUB_CONFIG: the stock binary runs an operator's ServerOptions module; masked errors are logged with the request id", async (t) => {
  // A database of the test kit's shared cluster: nothing here is about the embedded Postgres.
  // The test speaks as the proxy in front: its X-Request-ID is taken only from a trusted peer (trust-proxy.test.ts).
  const server = await startServerProcess({ ...(await sharedClusterDatabase(t)), HUB_CONFIG: path.join(ROOT, "test/fixtures/config-failing-plugin.mjs"), HUB_TRUST_PROXY: "loopback" });
  t.teardown(() => server.child.kill("SIGKILL"));
  t.same((await gql(server.url, "{ configured }")).body, { data: { configured: "from HUB_CONFIG" } });
  t.same(await (await fetch(`${server.url}/configured`)).json(), { by: "HUB_CONFIG" });

  const res = await gql(server.url, "{ explode }", {}, { "x-request-id": "req-for-this-test" });
  const message = res.body.errors?.[0]?.message ?? "";
  t.notMatch(message, /hunter2/, "the client never sees the internal message");
  const errorId = /reference ([0-9a-f]{12})/.exec(message)?.[1];
  t.ok(errorId, "the client gets a reference");
  await untilLogged(server.output, (text) => text.includes(`"errorId":"${errorId}"`), `the masked error's reference ${errorId}`);
  const line = server.output().split("\n").find((l) => l.includes(`"errorId":"${errorId}"`));
  t.ok(line, "the log has the same reference");
  t.match(line, /"reqId":"req-for-this-test"/, "and the request id");
  t.match(line, /"msg":"masked GraphQL error"/);
  t.match(line, /hunter2/, "with the real error for the operator");
  t.notMatch(server.output(), /^Masked GraphQL error/m, "nothing through console.error");

  // Per-request log lines (LOG_LEVEL=info here) carry the request id, for Express routes too.
  await fetch(`${server.url}/configured`, { headers: { "x-request-id": "req-express-route", authorization: "session:do-not-log-me" } });
  await untilLogged(server.output, (text) => text.split("\n").some((l) => l.includes('"reqId":"req-express-route"') && l.includes('"msg":"request completed"')), "the Express route's completion line");
  const requestLines = server.output().split("\n").filter((l) => l.includes('"reqId":"req-express-route"'));
  t.ok(requestLines.some((l) => l.includes('"msg":"request completed"')), "the Express route's completion line has its request id");
  const graphqlLines = server.output().split("\n").filter((l) => l.includes('"reqId":"req-for-this-test"'));
  t.ok(graphqlLines.some((l) => l.includes('"msg":"incoming request"')), "so do Fastify's own lines for /graphql");
  t.notMatch(server.output(), /do-not-log-me/, "no credential in the log");
  server.child.kill("SIGINT");
  t.equal(await server.exited, 0);
});

t.test("HUB_CONFIG and HUB_EXAMPLES errors are clear", async (t) => {
  const missing = await runServerExpectingFailure({ HUB_DATA_DIR: tmpDir(t), HUB_CONFIG: "/nonexistent/hub.config.js" });
  t.equal(missing.code, 1);
  t.match(missing.stderr, /HUB_CONFIG="\/nonexistent\/hub\.config\.js" could not be loaded/);
  const bad = await runServerExpectingFailure({ HUB_DATA_DIR: tmpDir(t), HUB_EXAMPLES: "maybe" });
  t.equal(bad.code, 1);
  t.match(bad.stderr, /HUB_EXAMPLES is invalid: received "maybe", expected on or off/);
});

t.test("node dist/server.js takes no arguments: --help lists the variables, anything else stops it before it starts", async (t) => {
  const dataDir = path.join(tmpDir(t), "never-created");
  const help = await runServerExpectingFailure({ HUB_DATA_DIR: dataDir }, ["--help"]);
  t.equal(help.code, 0, "--help exits 0");
  t.match(help.stdout, /^Usage: node dist\/server\.js/, "the usage on stdout");
  for (const variable of ["DATABASE_URL", "SUPERUSER_DATABASE_URL", "HUB_DATA_DIR", "PORT", "HOST", "LOG_LEVEL", "HUB_CONFIG", "HUB_EXAMPLES", "HUB_DRAIN_MS", "HUB_TRUST_PROXY", "HUB_READINESS_PATH", "HUB_SOCKET_REBALANCE"]) {
    t.match(help.stdout, new RegExp(`\\b${variable}\\b`), `names ${variable}`);
  }
  t.equal(help.stderr, "", "nothing else: no log line, no Postgres started");
  t.equal((await runServerExpectingFailure({ HUB_DATA_DIR: dataDir }, ["-h"])).code, 0, "-h too");

  const wrong = await runServerExpectingFailure({ HUB_DATA_DIR: dataDir }, ["--port", "5000"]);
  t.equal(wrong.code, 2, "a wrong command line exits 2, as the hub tool's does");
  t.equal(wrong.stdout, "");
  t.match(wrong.stderr, /^hub: node dist\/server\.js takes no arguments; received "--port" "5000"\. .*PORT=5000 node dist\/server\.js.* \[HUB_CLI_USAGE\]\n$/);
  t.notOk(fs.existsSync(dataDir), "neither started nor created the embedded Postgres");
});

t.test("HUB_EXAMPLES=off starts the bare hub", async (t) => {
  const server = await startServerProcess({ ...(await sharedClusterDatabase(t)), HUB_EXAMPLES: "off" });
  t.teardown(() => server.child.kill("SIGKILL"));
  const res = await gql(server.url, "{ randomFortune { id } }");
  t.match(res.body.errors?.[0]?.message, /Cannot query field "randomFortune"/);
  t.equal((await fetch(`${server.url}/health`)).status, 404, "no reference routes");
  server.child.kill("SIGINT");
  await server.exited;
});

t.test("the options the environment picks can be read without starting a server", async (t) => {
  // Internal: the module server.ts starts with; importing it must start nothing (no Postgres, no port).
  const sigintListeners = process.listenerCount("SIGINT");
  const { optionsFromEnvironment } = await import("../dist/src/bin/environment-options.js");
  t.same(await optionsFromEnvironment({ HUB_EXAMPLES: "off" }), {}, "HUB_EXAMPLES=off: the bare hub");
  const demo = await optionsFromEnvironment({});
  t.same(demo.extraPgSchemas, ["app"], "the demo by default");
  t.equal(typeof demo.configureApp, "function");
  t.ok(demo.plugins?.some((p) => p.name === "CoinflipBetPlugin"));
  const fromFile = await optionsFromEnvironment({ HUB_CONFIG: path.join(ROOT, "test/fixtures/config-failing-plugin.mjs") });
  t.ok(fromFile.plugins?.length, "HUB_CONFIG: that module's default export");
  await t.rejects(optionsFromEnvironment({ HUB_EXAMPLES: "maybe" }), { code: "HUB_CONFIG_INVALID" });
  await new Promise((r) => setTimeout(r, 300));
  t.equal(process.listenerCount("SIGINT"), sigintListeners, "no server was started (it would handle SIGINT)");
});
