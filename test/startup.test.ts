/**
 * What the stock server says at start about a user's project: grants GraphQL
 * lacks (and the error a request then gets), configureApp routes that take a
 * built-in path, a config module or plugin that fails (file and line), and a
 * port already in use (which port, which variable).
 */
import "./helpers/env.js";
import net from "node:net";
import path from "node:path";
import t from "tap";
import { gql } from "./helpers/http.js";
import { runServerExpectingFailure, startServerProcess } from "./helpers/process.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
import { until } from "./helpers/ws.js";
import { tmpDir, writeFiles } from "./helpers/tmp.js";
import { startTestServer } from "@hubpkg/hub/test";
// Internal: the check the start-up warnings come from.
import { findGrantProblems } from "../dist/src/db/grants.js";

const GAME_MIGRATION = `
create schema game;
-- No USAGE on the schema for app_postgraphile: the mistake this test makes on purpose.
create table game.note (id int primary key, user_id uuid, body text not null);
grant select on game.note to app_postgraphile;
insert into game.note values (1, null, 'hello');
-- Hidden from GraphQL on purpose: no warning wanted.
create table game.internal (id int generated always as identity primary key);
comment on table game.internal is E'@omit';
-- GraphQL may insert, but not draw the identity's next value.
create table game.log (id int generated always as identity primary key, body text);
grant select, insert on game.log to app_postgraphile;
-- Row-level security without a policy: GraphQL sees no row.
create table game.score (id int primary key, user_id uuid);
grant select on game.score to app_postgraphile;
alter table game.score enable row level security;
-- No grant at all.
create table game.secret (id int primary key);
`;

t.test("grants: start-up warns with the statement to run; a request that hits them gets SERVER_MISCONFIGURED", async (t) => {
  const dir = tmpDir(t);
  // A database of the test kit's shared cluster: nothing here is about the embedded Postgres.
  const db = await sharedClusterDatabase(t);
  writeFiles(path.join(dir, "migrations"), { "001-game.sql": GAME_MIGRATION });
  writeFiles(dir, {
    "hub.config.mjs": `export default { extraPgSchemas: ["game"], userDatabaseMigrationsPath: ${JSON.stringify(path.join(dir, "migrations"))} };\n`,
  });
  const server = await startServerProcess({ ...db, HUB_CONFIG: path.join(dir, "hub.config.mjs") });
  t.teardown(() => server.child.kill("SIGKILL"));
  const warnings = server.output().split("\n").filter((l) => l.includes('"msg":"grants for GraphQL:'));
  const fixes = warnings.map((l) => (JSON.parse(l) as { fix: string }).fix);
  t.same(fixes, [
    'GRANT USAGE ON SCHEMA "game" TO app_postgraphile;',
    'GRANT USAGE ON SEQUENCE "game"."log_id_seq" TO app_postgraphile;',
    'ALTER TABLE "game"."note" ENABLE ROW LEVEL SECURITY; CREATE POLICY "select_note" ON "game"."note" FOR SELECT TO app_postgraphile USING (hub_hidden.is_operator() OR (user_id = hub_hidden.current_user_id()));',
    'CREATE POLICY "select_score" ON "game"."score" FOR SELECT TO app_postgraphile USING (hub_hidden.is_operator() OR (user_id = hub_hidden.current_user_id()));',
    'GRANT SELECT ON "game"."secret" TO app_postgraphile;',
  ], "one per problem, in order; nothing about the @omit table or its sequence");
  t.match(warnings[0], /"level":40/, "a warning");
  t.match(warnings[0], /grants for GraphQL: schema game: app_postgraphile has no USAGE on the schema/);
  t.match(warnings[2], /grants for GraphQL: table game\.note: the table has a user column but no row-level security/);

  const res = await gql(server.url, "{ allNotes { nodes { body } } }");
  const error = res.body.errors?.[0];
  t.equal(error?.extensions?.code, "SERVER_MISCONFIGURED", JSON.stringify(res.body));
  t.match(error?.message, /^The server's configuration is incomplete/);
  t.notMatch(error?.message, /permission denied|game/, "the details stay in the log");
  await until(() => /permission denied for schema game/.test(server.output()), 30_000, () => `the log line with the details (log: ${server.output().slice(-2000)})`);
  t.match(server.output(), /permission denied for schema game/, "the log has them");
  server.child.kill("SIGINT");
  await server.exited;
});

t.test("grants: the statements the warnings name fix what they name", async (t) => {
  const dir = tmpDir(t);
  writeFiles(path.join(dir, "migrations"), { "001-game.sql": GAME_MIGRATION });
  const server = await startTestServer({ extraPgSchemas: ["game"], userDatabaseMigrationsPath: path.join(dir, "migrations"), logLevel: "error" });
  t.teardown(() => server.stop());
  const problems = await findGrantProblems(server.dbPool, ["game"]);
  t.equal(problems.length, 5);
  for (const problem of problems) await server.dbPool.query(problem.fix);
  t.same(await findGrantProblems(server.dbPool, ["game"]), [], "none left");
  const operator = await server.authenticateOperator();
  t.same(await operator.graphqlClient.request("{ allNotes { nodes { body } } }"), { allNotes: { nodes: [{ body: "hello" }] } }, "GraphQL reads the table now (an operator sees every row)");
  t.same(await server.graphqlClient.request("{ allNotes { nodes { body } } }"), { allNotes: { nodes: [] } }, "an anonymous request sees none of its rows");
});

t.test("a configureApp route on a built-in path is refused at start, naming both; a moved dashboard frees its path", async (t) => {
  const dir = tmpDir(t);
  // A database of the test kit's shared cluster: nothing here is about the embedded Postgres.
  const db = await sharedClusterDatabase(t);
  writeFiles(dir, {
    "admin.mjs": `export default { configureApp: (app) => { app.get("/admin/stats", (req, res) => res.json({ ok: true })); } };\n`,
    "graphql.mjs": `export default { configureApp: ({ app }) => { app.use("/graphql", (req, res) => res.end()); app.all("/graphiql", (req, res) => res.end()); } };\n`,
    "moved.mjs": `export default { dashboard: "/ops", configureApp: (app) => { app.get("/admin/stats", (req, res) => res.json({ ok: true })); } };\n`,
  });
  const admin = await runServerExpectingFailure({ ...db, HUB_CONFIG: path.join(dir, "admin.mjs") });
  t.equal(admin.code, 1);
  t.match(admin.stderr, /configureApp's route GET \/admin\/stats collides with the dashboard at \/admin \(and everything under it\).*move the dashboard \(the option dashboard: "\/ops", or HUB_DASHBOARD=\/ops\).*\[HUB_ROUTE_CONFLICT\]/);
  const graphql = await runServerExpectingFailure({ ...db, HUB_CONFIG: path.join(dir, "graphql.mjs") });
  t.equal(graphql.code, 1);
  t.match(graphql.stderr, /configureApp's app\.use\("\/graphql", …\) collides with GraphQL at \/graphql.* configureApp's route ALL \/graphiql collides with GraphiQL at \/graphiql.*\[HUB_ROUTE_CONFLICT\]/);

  const server = await startServerProcess({ ...db, HUB_CONFIG: path.join(dir, "moved.mjs") });
  t.teardown(() => server.child.kill("SIGKILL"));
  t.same(await (await fetch(`${server.url}/admin/stats`)).json(), { ok: true }, "the route answers");
  t.equal((await fetch(`${server.url}/ops/`)).headers.get("content-security-policy")?.startsWith("default-src 'none'"), true, "the dashboard is at /ops/");
  server.child.kill("SIGINT");
  await server.exited;
});

t.test("start-up errors name the file and line: a syntax error in a module the config imports, a plugin that throws", async (t) => {
  const dir = tmpDir(t);
  // A database of the test kit's shared cluster: nothing here is about the embedded Postgres.
  const db = await sharedClusterDatabase(t);
  writeFiles(dir, {
    "syntax.mjs": `import { games } from "./games.mjs";\nexport default { plugins: games };\n`,
    "games.mjs": `export const games = [];\nconst broken = ;\n`,
    "plugin.mjs": [
      "export const BoomPlugin = {",
      '  name: "BoomPlugin",',
      '  version: "1.0.0",',
      "  schema: { hooks: { init(_, build) {",
      '    throw new Error("the game table is missing");',
      "  } } },",
      "};",
      "",
    ].join("\n"),
    "throws.mjs": `import { BoomPlugin } from "./plugin.mjs";\nexport default { plugins: [BoomPlugin] };\n`,
    "settings.mjs": `export const settings = JSON.parse(\n  "{ not json"\n);\n`,
    "toplevel.mjs": `import { settings } from "./settings.mjs";\nexport default { extraPgSchemas: settings.schemas };\n`,
  });
  const syntax = await runServerExpectingFailure({ ...db, HUB_CONFIG: path.join(dir, "syntax.mjs") });
  t.equal(syntax.code, 1);
  t.match(syntax.stderr, new RegExp(`could not be loaded: Unexpected token ';' at ${path.join(dir, "games.mjs")}:2 \\(const broken = ;\\) \\[HUB_CONFIG_INVALID\\]`));

  const toplevel = await runServerExpectingFailure({ ...db, HUB_CONFIG: path.join(dir, "toplevel.mjs") });
  t.equal(toplevel.code, 1);
  t.match(toplevel.stderr, new RegExp(`could not be loaded: .*JSON.* at ${path.join(dir, "settings.mjs")}:1:\\d+ \\[HUB_CONFIG_INVALID\\]`), "a module that throws as it loads: where");

  const throws = await runServerExpectingFailure({ ...db, HUB_CONFIG: path.join(dir, "throws.mjs") });
  t.equal(throws.code, 1);
  t.match(throws.stderr, new RegExp(`Building the GraphQL schema failed: .*the game table is missing.* \\(thrown at ${path.join(dir, "plugin.mjs")}:5:\\d+\\).*\\[HUB_PLUGIN_FAILED\\]`));
});

t.test("a port in use: the message names the port and the variable to change", async (t) => {
  const blocker = net.createServer();
  await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise((resolve) => blocker.close(resolve)));
  const port = (blocker.address() as net.AddressInfo).port;
  const run = await runServerExpectingFailure({ ...(await sharedClusterDatabase(t)), HUB_EXAMPLES: "off", HOST: "127.0.0.1", PORT: String(port) });
  t.equal(run.code, 1);
  t.match(run.stderr, new RegExp(`^hub: Port ${port} on 127\\.0\\.0\\.1 is already in use .* choose another port with the environment variable PORT, e\\.g\\. PORT=${port + 1} .*\\[HUB_PORT_IN_USE\\]\\n$`));
  t.notMatch(run.stderr, /EADDRINUSE.*\n\s+at /, "no raw stack");
});
