import "./helpers/env.js";
import fs from "node:fs";
import path from "node:path";
import t from "tap";
import { startAndListen, defaultPlugins } from "@hubpkg/hub";
import { gql } from "./helpers/http.js";
import { tmpDir, writeFiles } from "./helpers/tmp.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";

const base = { port: 0, logLevel: "silent" as const, handleSignals: false };

/** A database of the test kit's shared cluster (a template copy, dropped at the end) as start options: no initdb of its own. */
async function sharedDatabase(t: { teardown(fn: () => unknown): void }) {
  const db = await sharedClusterDatabase(t);
  return { databaseUrl: db.DATABASE_URL, superuserDatabaseUrl: db.SUPERUSER_DATABASE_URL };
}

t.test("extraPgSchemas exposes a table with plain names; SDL export; callback form", async (t) => {
  const dataDir = tmpDir(t);
  const db = await sharedDatabase(t);
  const migrations = writeFiles(path.join(dataDir, "migrations"), {
    "001-app.sql": `
      create schema app;
      grant usage on schema app to app_postgraphile;
      create table app.widget (
        id uuid primary key default hub_hidden.uuid_generate_v7(),
        label text not null
      );
      grant select on app.widget to app_postgraphile;
      insert into app.widget (label) values ('first'), ('second');
    `,
  });
  const sdlPath = path.join(dataDir, "out", "schema.graphql");
  let callbackPort: number | undefined;
  const hub = await startAndListen(
    { ...base, ...db, extraPgSchemas: ["app"], userDatabaseMigrationsPath: migrations, exportSchemaSDLPath: sdlPath, plugins: [...defaultPlugins] },
    ({ port }) => (callbackPort = port),
  );
  t.teardown(() => hub.stop());
  t.equal(callbackPort, hub.port, "the completion callback receives { port }");
  t.ok(hub.port > 0);

  const res = await gql(hub.url, "{ allWidgets { nodes { id label } } }");
  t.same(res.body.errors, undefined);
  const nodes = (res.body.data as any).allWidgets.nodes as { id: string; label: string }[];
  t.same(nodes.map((n) => n.label).sort(), ["first", "second"], "rows of the extra schema are served");
  t.match(nodes[0]!.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, "id is the row's UUIDv7, not a Relay id");
  const byId = await gql(hub.url, "query($id: UUID!) { widgetById(id: $id) { label } }", { id: nodes[1]!.id });
  t.same(byId.body, { data: { widgetById: { label: nodes[1]!.label } } }, "lookup by id: widgetById(id: UUID!)");

  const sdl = fs.readFileSync(sdlPath, "utf8");
  t.match(sdl, /type Widget \{/);
  t.match(sdl, /hubCurrentUser: HubUser/);
  t.match(sdl, /hubUserById\(id: UUID!\): HubUser/);
  t.match(sdl, /allHubCasinos\(/);
  t.notMatch(sdl, /interface Node\b/, "no Relay Node interface");
  t.notMatch(sdl, /nodeId/);
  // HubHash.digest is a public hash of a provably fair chain; credential digests (keys, tokens, client ids) never show.
  t.notMatch(sdl, /(key|token|client_?id)_?digest/i, "credential digests are not exposed");
});

t.test("plugins without defaultPlugins drop the hub's own queries", async (t) => {
  const hub = await startAndListen({ ...base, ...(await sharedDatabase(t)), plugins: [] });
  t.teardown(() => hub.stop());
  const res = await gql(hub.url, "{ hubCurrentUser { id } }");
  t.match(res.body.errors?.[0]?.message, /Cannot query field "hubCurrentUser"/);
  t.same((await gql(hub.url, "{ allHubUsers { totalCount } }")).body, { data: { allHubUsers: { totalCount: 0 } } }, "the generated API stays");
});

t.test("options are validated before anything starts", async (t) => {
  await t.rejects(startAndListen({ ...base, plugin: [] } as never), {
    code: "HUB_OPTION_UNKNOWN",
    message: /Unknown server option "plugin"\. Known options: plugins, extraPgSchemas, configureApp, userDatabaseMigrationsPath, exportSchemaSDLPath/,
  });
  await t.rejects(startAndListen({ ...base, extraPgSchemas: "app" } as never), {
    code: "HUB_OPTION_INVALID",
    message: /"extraPgSchemas".*received "app".*array of Postgres schema names/,
  });
  await t.rejects(startAndListen({ ...base, port: 99999 }), { code: "HUB_OPTION_INVALID", message: /"port".*99999/ });
  await t.rejects(startAndListen({ ...base, plugins: [{}] } as never), { code: "HUB_OPTION_INVALID", message: /"plugins"/ });
  await t.rejects(startAndListen({ ...base, configureApp: "nope" } as never), { code: "HUB_OPTION_INVALID", message: /"configureApp"/ });
  await t.rejects(startAndListen(42 as never), { code: "HUB_OPTION_INVALID" });
});

t.test("a value inside an object or array option is named by its path, with what was received there", async (t) => {
  const refusals: [Record<string, unknown>, string][] = [
    [{ websocket: { maxOperations: 0 } }, 'Server option "websocket" is invalid at websocket.maxOperations: received 0, expected an integer >= 1.'],
    [{ websocket: { maxOps: 5 } }, 'Server option "websocket" is invalid at websocket.maxOps: received 5, expected one of the keys connectionInitTimeoutMs, maxOperations, maxMessageBytes, keepAliveMs, connectionsPerIdentity.'],
    [{ transfers: { concurrency: 0 } }, 'Server option "transfers" is invalid at transfers.concurrency: received 0, expected a whole number >= 1.'],
    [{ transfers: { connectors: { fast: "http" } } }, 'Server option "transfers" is invalid at transfers.connectors.fast: received "http", expected a connector factory: (settings) => CasinoConnector.'],
    [{ extraPgSchemas: ["app", "1st"] }, 'Server option "extraPgSchemas" is invalid at extraPgSchemas[1]: received "1st", expected a Postgres schema name such as "app".'],
    [{ plugins: [{ name: "A" }, { version: "1" }] }, 'Server option "plugins" is invalid at plugins[1]: received {"version":"1"}, expected a Graphile plugin (an object with a name).'],
    [{ identityCacheTtlMs: Number.POSITIVE_INFINITY }, 'Server option "identityCacheTtlMs" is invalid: received Infinity, expected a number of milliseconds >= 0.'],
  ];
  for (const [options, message] of refusals) {
    await t.rejects(startAndListen({ ...base, ...options } as never), { code: "HUB_OPTION_INVALID", message }, message);
  }
  // Fine values pass the same schema: undefined counts as not given.
  await t.rejects(startAndListen({ ...base, websocket: { maxOperations: undefined, keepAliveMs: 0 }, transfers: { worker: false, connectors: {} }, port: 99999 }), {
    message: /"port".*99999/,
  });
});

t.test("stop() closes HTTP and the database", async (t) => {
  // A cluster of its own: that stop() stops the embedded Postgres it started is under test.
  const dataDir = tmpDir(t);
  const hub = await startAndListen({ ...base, dataDir });
  const pid = Number(fs.readFileSync(path.join(dataDir, "pg/postmaster.pid"), "utf8").split("\n")[0]);
  await hub.stop();
  await t.rejects(fetch(`${hub.url}/graphql`), "HTTP no longer accepts connections");
  let alive = true;
  try {
    process.kill(pid, 0);
  } catch {
    alive = false;
  }
  t.notOk(alive, "the embedded Postgres has stopped");
  await hub.stop(); // idempotent
});

t.test("Ruru (GraphiQL) is served only when enabled: development yes, production no", async (t) => {
  const db = await sharedDatabase(t);
  const dev = await startAndListen({ ...base, ...db, graphiql: true });
  const page = await fetch(`${dev.url}/graphiql`, { headers: { accept: "text/html" } });
  t.equal(page.status, 200);
  t.match(page.headers.get("content-type"), /text\/html/);
  t.match(await page.text(), /ruru/i);
  await dev.stop();
  const prod = await startAndListen({ ...base, ...db, graphiql: false });
  t.teardown(() => prod.stop());
  t.equal((await fetch(`${prod.url}/graphiql`, { headers: { accept: "text/html" } })).status, 404);
});
