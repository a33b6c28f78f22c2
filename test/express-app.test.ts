import "./helpers/env.js";
import t from "tap";
import cors from "cors";
import client from "prom-client";
import { serverStats, type ServerStats } from "@hubpkg/hub";
import { startTestServer, type TestServer } from "@hubpkg/hub/test";
import express, { Router, json, urlencoded, raw, text, type HubRequest, type Request, type Response, type NextFunction } from "@hubpkg/hub/express";
import http from "node:http";
import { gql } from "./helpers/http.js";
import { makeOperator, makePlayer } from "./helpers/credentials.js";

// Each server on its own database of the test kit's shared cluster (a template copy): no initdb each.
const base = { logLevel: "silent" as const };

// Everything below is ordinary Express code, as a user already has it.
const seen = { graphqlRequestsSeenByMiddleware: 0, jsonReturnedRes: false, superuserPoolPassed: false };
const warnings: Error[] = [];
process.on("warning", (w) => warnings.push(w));

function configureApp({ app, superuserPool }: { app: express.Express; superuserPool: import("pg").Pool }) {
  seen.superuserPoolPassed = typeof superuserPool.query === "function";
  app.use(cors({ origin: "https://casino.example" }));
  app.use(json());
  app.use(urlencoded({ extended: false }));
  app.use((req, _res, next) => {
    if (req.path === "/graphql") seen.graphqlRequestsSeenByMiddleware++;
    next();
  });
  app.use((_req, res, next) => {
    res.locals.startedBy = "locals-middleware";
    next();
  });

  const items = Router();
  items.get("/:id", (req, res) => res.json({ id: req.params.id, q: req.query.q ?? null, locals: res.locals.startedBy }));
  items.post("/", (req, res) => res.status(201).json({ created: req.body }));
  app.use("/items", items);

  app.post("/form", (req, res) => res.json({ form: req.body }));
  app.get("/json-returns-res", (_req, res) => {
    const returned = res.json({ ok: true });
    seen.jsonReturnedRes = returned === res;
  });
  app.get("/whoami", (req: HubRequest, res: Response) => {
    const id = req.identity;
    res.json(id === undefined ? { kind: null } : id.kind === "user" ? { kind: "user", uname: id.user.uname, sessionId: id.sessionId } : { kind: "operator", hasKey: id.apiKey.length > 0 });
  });
  app.get("/sync-throw", () => {
    throw new Error("sync failure");
  });
  app.get("/async-reject", async () => {
    await Promise.resolve();
    throw Object.assign(new Error("async failure"), { tag: "from-async" });
  });
  app.get("/unhandled-error", async () => {
    throw new Error("nobody handles this");
  });
  app.get("/stream", (_req, res) => {
    res.setHeader("content-type", "text/plain");
    res.write("part1,");
    setTimeout(() => res.end("part2"), 20);
  });
  app.get("/db", async (_req, res) => {
    const { rows } = await superuserPool.query<{ n: number }>("select count(*)::int as n from hub.casino");
    res.json({ casinos: rows[0]!.n });
  });
  // Extensions of Express's prototypes, per app and global, and a mounted sub-app with its own.
  type Helpers = { appHelper(): string; globalHelper(): string; subHelper?: () => string };
  (app.request as unknown as Helpers).appHelper = function (this: Request) {
    return `app:${this.path}`;
  };
  (express.request as unknown as Helpers).globalHelper = () => "global";
  (app.response as unknown as { sendOk(): Response }).sendOk = function (this: Response) {
    return this.json({ ok: true });
  };
  app.get("/protos", (req, res) => {
    const helpers = req as unknown as Helpers;
    res.json({
      reqProto: Object.getPrototypeOf(req) === app.request,
      resProto: Object.getPrototypeOf(res) === app.response,
      parentProtos: Object.getPrototypeOf(app.request) === express.request && Object.getPrototypeOf(app.response) === express.response,
      nodeClasses: req instanceof http.IncomingMessage && res instanceof http.ServerResponse,
      appHelper: helpers.appHelper(),
      globalHelper: helpers.globalHelper(),
      reqApp: req.app === app,
      resReq: res.req === req,
    });
  });
  app.get("/send-ok", (_req, res) => (res as unknown as { sendOk(): Response }).sendOk());
  const sub = express();
  (sub.request as unknown as Helpers).subHelper = () => "sub";
  sub.get("/inside", (req, res) => {
    const helpers = req as unknown as Helpers;
    res.json({ subHelper: helpers.subHelper?.() ?? null, appHelper: helpers.appHelper(), reqApp: req.app === sub, baseUrl: req.baseUrl });
  });
  app.use("/sub", sub);
  app.get("/sub/after", (req, res) => {
    res.json({ subHelper: typeof (req as unknown as Helpers).subHelper, reqApp: req.app === app });
  });

  // (A route on /graphql is refused at start: test/startup.test.ts.)

  // prom-client's usual /metrics router.
  const registry = new client.Registry();
  const counter = new client.Counter({ name: "hub_test_requests_total", help: "requests", registers: [registry] });
  const metrics = Router();
  metrics.get("/", async (_req, res) => {
    counter.inc();
    res.set("content-type", registry.contentType);
    res.end(await registry.metrics());
  });
  app.use("/metrics", metrics);

  // Express 4-argument error middleware, scoped to the failures it knows.
  app.use((err: Error & { tag?: string }, req: Request, res: Response, next: NextFunction) => {
    // Leave body-parser's own 4xx errors and one deliberate failure to the hub.
    if (req.path === "/unhandled-error" || (err as { type?: string }).type === "entity.parse.failed") return next(err);
    res.status(500).json({ handledBy: "error-middleware", message: err.message, tag: err.tag ?? null });
  });
}

let hub: TestServer;
let player: Awaited<ReturnType<typeof makePlayer>>;
let operator: Awaited<ReturnType<typeof makeOperator>>;

t.before(async () => {
  hub = await startTestServer({ ...base, configureApp });
  player = await makePlayer(hub.superuserDatabaseUrl, "alice");
  operator = await makeOperator(hub.superuserDatabaseUrl);
});
t.teardown(() => hub?.stop());

const get = (path: string, headers: Record<string, string> = {}) => fetch(`${hub.url}${path}`, { headers });

t.test("configureApp receives { app, superuserPool } and the app is a genuine Express app", async (t) => {
  t.ok(seen.superuserPoolPassed);
  const res = await get("/db");
  t.equal(res.status, 200);
  t.same(await res.json(), { casinos: 1 }, "superuserPool bypasses RLS (the playground casino)");
});

t.test("routers, params, query strings and res.locals", async (t) => {
  const res = await get("/items/42?q=dice");
  t.equal(res.status, 200);
  t.same(await res.json(), { id: "42", q: "dice", locals: "locals-middleware" });
});

t.test("express.json() and urlencoded() parse bodies while POST /graphql keeps working", async (t) => {
  const created = await fetch(`${hub.url}/items`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ name: "coin" }) });
  t.equal(created.status, 201);
  t.same(await created.json(), { created: { name: "coin" } });
  const form = await fetch(`${hub.url}/form`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "a=1&b=two" });
  t.same(await form.json(), { form: { a: "1", b: "two" } });
  const res = await gql(hub.url, "query Q($n: Int) { __typename hubCurrentUser { uname } a: allHubUsers(first: $n) { totalCount } } ", { n: 5 }, player.header);
  t.equal(res.status, 200, "POST /graphql with a JSON body is served by the hub, not hung by express.json()");
  t.same(res.body, { data: { __typename: "Query", hubCurrentUser: { uname: "alice" }, a: { totalCount: 1 } } });
});

t.test("/graphql is the hub's: user middleware does not see it", async (t) => {
  const before = seen.graphqlRequestsSeenByMiddleware;
  const post = await gql(hub.url, "{ __typename }");
  t.equal(post.status, 200);
  t.same(post.body, { data: { __typename: "Query" } });
  const getRes = await get(`/graphql?query=${encodeURIComponent("{ __typename }")}`, { accept: "application/json" });
  t.equal(getRes.status, 200);
  t.same(await getRes.json(), { data: { __typename: "Query" } });
  t.equal(seen.graphqlRequestsSeenByMiddleware, before, "the Express sub-app is not run for /graphql");
});

t.test("req and res are Express's own: its prototypes and their extensions, sub-apps included", async (t) => {
  t.same(await (await get("/protos")).json(), {
    reqProto: true,
    resProto: true,
    parentProtos: true,
    nodeClasses: true,
    appHelper: "app:/protos",
    globalHelper: "global",
    reqApp: true,
    resReq: true,
  });
  t.same(await (await get("/send-ok")).json(), { ok: true }, "a method added to app.response");
  t.same(await (await get("/sub/inside")).json(), { subHelper: "sub", appHelper: "app:/inside", reqApp: true, baseUrl: "/sub" }, "a sub-app's request inherits from the app's");
  t.same(await (await get("/sub/after")).json(), { subHelper: "undefined", reqApp: true }, "leaving a sub-app restores the app's prototypes");
  // The same objects serve /graphql: Fastify and grafserv use only their Node side.
  t.same((await gql(hub.url, "{ __typename }")).body, { data: { __typename: "Query" } });
});

t.test("Node's server builds requests and responses with the app's prototypes already (no per-request setPrototypeOf)", async (t) => {
  const { createExpressApp } = await import("../dist/adapters/express.js");
  let configured: express.Express | undefined;
  const { app, messageClasses } = await createExpressApp((a: express.Express) => {
    configured = a;
  }, {} as import("pg").Pool);
  t.equal(configured, app);
  const Req = messageClasses.IncomingMessage!;
  const Res = messageClasses.ServerResponse!;
  const socket = new (await import("node:net")).Socket();
  const req = new Req(socket);
  const res = new Res(req);
  t.equal(Object.getPrototypeOf(req), app.request);
  t.equal(Object.getPrototypeOf(res), app.response);
  t.equal((app.request as { app?: unknown }).app, app, "app.request keeps its own `app`");
  t.equal(req.constructor, http.IncomingMessage, "no constructor of its own, as Express's objects");
  socket.destroy();
});

t.test("res.json returns res (Express semantics), no deprecation warnings", async (t) => {
  const res = await get("/json-returns-res");
  t.same(await res.json(), { ok: true });
  t.ok(seen.jsonReturnedRes, "res.json(x) === res");
  t.same(warnings.filter((w) => /deprecat/i.test(`${w.name} ${w.message}`)).map((w) => w.message), []);
});

t.test("4-argument error middleware gets sync throws and rejected async handlers", async (t) => {
  const sync = await get("/sync-throw");
  t.equal(sync.status, 500);
  t.same(await sync.json(), { handledBy: "error-middleware", message: "sync failure", tag: null });
  const rejected = await get("/async-reject");
  t.equal(rejected.status, 500);
  t.same(await rejected.json(), { handledBy: "error-middleware", message: "async failure", tag: "from-async" });
});

t.test("an error no middleware handles gets the hub's JSON 500 without its message", async (t) => {
  const res = await get("/unhandled-error");
  t.equal(res.status, 500);
  const body = (await res.json()) as { statusCode: number; message: string };
  t.equal(body.statusCode, 500);
  t.notMatch(body.message, /nobody handles this/, "internal messages are not leaked");
  t.match(body.message, /Internal error \(request [0-9a-f-]{36}\)/);
});

t.test("a malformed JSON body to an Express route is a 400 from body-parser, not a crash", async (t) => {
  const res = await fetch(`${hub.url}/items`, { method: "POST", headers: { "content-type": "application/json" }, body: "{not json" });
  t.equal(res.status, 400);
  t.equal(((await res.json()) as { statusCode: number }).statusCode, 400);
});

t.test("cors() headers, preflight included", async (t) => {
  const res = await get("/items/1", { origin: "https://casino.example" });
  t.equal(res.headers.get("access-control-allow-origin"), "https://casino.example");
  const preflight = await fetch(`${hub.url}/items/1`, { method: "OPTIONS", headers: { origin: "https://casino.example", "access-control-request-method": "POST" } });
  t.equal(preflight.status, 204);
  t.equal(preflight.headers.get("access-control-allow-origin"), "https://casino.example");
});

t.test("a prom-client /metrics router and a streamed response", async (t) => {
  const res = await get("/metrics");
  t.equal(res.status, 200);
  t.match(res.headers.get("content-type"), /text\/plain/);
  t.match(await res.text(), /hub_test_requests_total 1/);
  const stream = await get("/stream");
  t.equal(await stream.text(), "part1,part2");
});

t.test("paths Express does not handle fall through to the hub's JSON 404", async (t) => {
  const res = await get("/no/such/path?x=1");
  t.equal(res.status, 404);
  t.match(res.headers.get("content-type"), /application\/json/);
  t.same(await res.json(), { statusCode: 404, error: "Not Found", message: "No route for GET /no/such/path" });
  const del = await fetch(`${hub.url}/items/1`, { method: "DELETE" });
  t.equal(del.status, 404);
});

t.test("req.identity in Express handlers: user, operator, none", async (t) => {
  t.same(await (await get("/whoami", player.header)).json(), { kind: "user", uname: "alice", sessionId: player.sessionId });
  t.same(await (await get("/whoami", operator.header)).json(), { kind: "operator", hasKey: true });
  t.same(await (await get("/whoami")).json(), { kind: null });
  t.same(await (await get("/whoami", { authorization: "session:not-a-token" })).json(), { kind: null });
});

t.test("the other revision: configureApp(app) with the app as its only argument, async", async (t) => {
  const hub2 = await startTestServer({
    ...base,
    configureApp: async (app: express.Express) => {
      await new Promise((r) => setTimeout(r, 10));
      app.get("/health", (_req, res) => res.json({ status: "ok" }));
    },
  });
  t.teardown(() => hub2.stop());
  const res = await fetch(`${hub2.url}/health`);
  t.same(await res.json(), { status: "ok" });
  t.same((await gql(hub2.url, "{ __typename }")).body, { data: { __typename: "Query" } });
});

t.test("serverStats(req): each server in the process counts its own requests", async (t) => {
  const statsRoute = (app: express.Express) => {
    app.get("/stats", (req, res) => res.json(serverStats(req)));
  };
  const a = await startTestServer({ ...base, configureApp: statsRoute });
  t.teardown(() => a.stop());
  const b = await startTestServer({ ...base, configureApp: statsRoute });
  t.teardown(() => b.stop());
  const statsOf = async (url: string) => (await (await fetch(`${url}/stats`)).json()) as ServerStats;

  for (let i = 0; i < 2; i++) t.equal((await gql(a.url, "{ __typename }")).status, 200);
  // Fastify serves /graphql/ as /graphql; it is counted as GraphQL too.
  const slash = await fetch(`${a.url}/graphql/?from=test`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ query: "{ __typename }" }) });
  t.same(await slash.json(), { data: { __typename: "Query" } }, "/graphql/ is served as /graphql");
  t.equal((await fetch(`${a.url}/nowhere`)).status, 404);
  const ofA = await statsOf(a.url);
  // The /stats request itself is counted once answered; each response once (Express's are hijacked from Fastify).
  t.same(ofA.requests, { total: 4, graphql: 3, express: 1, status2xx: 3, status3xx: 0, status4xx: 1, status5xx: 0 }, "A counts its own requests, each once");
  const ofB = await statsOf(b.url);
  t.same(ofB.requests, { total: 0, graphql: 0, express: 0, status2xx: 0, status3xx: 0, status4xx: 0, status5xx: 0 }, "B saw none of A's requests");
  t.not(ofA.startedAt, undefined);
  t.equal(serverStats().startedAt, ofB.startedAt, "without a request: the server started last");
});

t.test("@hubpkg/hub/express exports Express's runtime API", async (t) => {
  t.equal(typeof express, "function");
  for (const fn of [Router, json, urlencoded, raw, text]) t.equal(typeof fn, "function");
  const mod = await import("@hubpkg/hub/express");
  t.equal(typeof mod.static, "function");
  t.equal(mod.default, express);
});
