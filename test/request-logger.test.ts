import "./helpers/env.js";
import t from "tap";
import { Writable } from "node:stream";
import { pino } from "pino";
// Internal: Fastify's per-request logger (adapters/request-logger.ts).
import { LazyRequestLogger } from "../dist/adapters/request-logger.js";

function capture(level: string) {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  // As src/logger.ts: wildcard redaction paths.
  const logger = pino({ level, redact: { paths: ["headers.authorization", "*.authorization"], censor: "[redacted]" } }, stream);
  let children = 0;
  const parent = new Proxy(logger, {
    get(target, prop, receiver) {
      if (prop === "child") return (...args: Parameters<typeof logger.child>) => (children++, target.child(...args));
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
  return { lines, parent, children: () => children };
}

t.test("nothing below the level is written, and no child logger is made for it", async (t) => {
  const { lines, parent, children } = capture("warn");
  const log = new LazyRequestLogger(parent, { reqId: "r1" }, {});
  log.info({ a: 1 }, "incoming request");
  log.debug("detail");
  t.equal(log.level, "warn");
  t.equal(log.isLevelEnabled("info"), false);
  t.same(lines, []);
  t.equal(children(), 0);
});

t.test("a line at the level carries the request id and is redacted, through one child", async (t) => {
  const { lines, parent, children } = capture("warn");
  const log = new LazyRequestLogger(parent, { reqId: "r2" }, {});
  log.error({ headers: { authorization: "session:secret" } }, "failed");
  log.warn("again");
  t.equal(children(), 1);
  t.equal(lines.length, 2);
  t.match(lines[0], { reqId: "r2", msg: "failed", headers: { authorization: "[redacted]" } });
  t.match(lines[1], { reqId: "r2", msg: "again" });
});

t.test("a per-route level (Fastify's logLevel) overrides the parent's", async (t) => {
  const { lines, parent } = capture("warn");
  const log = new LazyRequestLogger(parent, { reqId: "r3" }, { level: "debug" });
  t.equal(log.level, "debug");
  log.debug("visible");
  log.trace("not visible");
  t.same(lines.map((l) => l.msg), ["visible"]);
});

t.test("child() and a level change go to the real child", async (t) => {
  const { lines, parent } = capture("info");
  const log = new LazyRequestLogger(parent, { reqId: "r4" }, {});
  log.child({ step: "inner" }).info("from the child");
  log.level = "error";
  log.warn("dropped");
  log.error("kept");
  t.match(lines[0], { reqId: "r4", step: "inner", msg: "from the child" });
  t.same(lines.slice(1).map((l) => l.msg), ["kept"]);
});

// Fastify's per-request lines through the hub's front (adapters/fastify.ts), over real HTTP. Above info Fastify is given
// no logger at all (so it sets up no per-response listeners): its own lines, the request loggers and the counters must
// come out the same.
t.test("Fastify's request lines: written at info, skipped above it; faults, failing hooks and the counters the same at both", async (t) => {
  const { createFastify, EXPRESS_RESPONSE } = await import("../dist/adapters/fastify.js");
  const { createServerStats } = await import("../dist/src/stats.js");
  for (const level of ["info", "warn"] as const) {
    const { lines, parent } = capture(level);
    const stats = createServerStats();
    const app = createFastify({ logger: parent as never, stats, bodyLimit: 1024, requestTimeoutMs: 0 });
    app.get("/ok", async () => ({ ok: true }));
    app.get("/fault", async () => {
      throw new Error("broken on purpose");
    });
    app.post("/graphql", async () => ({ data: { __typename: "Query" } }));
    app.get("/hijacked", (_request, reply) => {
      reply.hijack();
      (reply.raw as unknown as Record<symbol, boolean>)[EXPRESS_RESPONSE] = true;
      reply.raw.end("answered outside Fastify");
    });
    app.addHook("onListen", async () => {
      throw new Error("an onListen hook failed on purpose");
    });
    await app.listen({ port: 0, host: "127.0.0.1" });
    const { port } = app.server.address() as { port: number };
    const url = `http://127.0.0.1:${port}`;
    const post = (body: string) => fetch(`${url}/graphql?x=1`, { method: "POST", headers: { "content-type": "application/json" }, body });
    t.equal((await fetch(`${url}/ok`)).status, 200);
    t.equal((await fetch(`${url}/fault`, { headers: { authorization: "session:secret-in-a-header" } })).status, 500);
    t.equal((await fetch(`${url}/nowhere`)).status, 404);
    t.equal((await post('{"query":"{__typename}"}')).status, 200);
    t.equal((await post(JSON.stringify({ query: "x".repeat(4096) }))).status, 413);
    t.equal((await fetch(`${url}/hijacked`)).status, 200);
    t.same(
      stats.snapshot().requests,
      { total: 6, graphql: 2, express: 1, status2xx: 3, status3xx: 0, status4xx: 2, status5xx: 1 },
      `${level}: every response counted once, by kind and status`,
    );
    await app.close();
    const messages = lines.map((l) => l.msg);
    if (level === "info") {
      t.equal(messages.filter((m) => m === "incoming request").length, 6, "info: every request's incoming line");
      t.equal(messages.filter((m) => m === "request completed").length, 6, "info: every request's completion line");
    } else {
      t.notOk(messages.includes("incoming request"), "warn: no incoming lines");
      t.notOk(messages.includes("request completed"), "warn: no completion lines");
    }
    const fault = lines.find((l) => l.msg === "broken on purpose");
    t.ok(fault, `${level}: the fault is logged`);
    t.equal(fault?.level, 50, `${level}: at error level`);
    t.ok(typeof fault?.reqId === "string" && (fault.reqId as string).length > 0, `${level}: with the request id`);
    t.match(fault?.req, { method: "GET", url: "/fault" }, `${level}: the request as Fastify's serializer writes it`);
    t.same(Object.keys((fault?.req ?? {}) as object).sort(), ["host", "method", "remoteAddress", "remotePort", "url"], `${level}: and nothing more (no headers)`);
    t.notOk(JSON.stringify(lines).includes("secret-in-a-header"), `${level}: the Authorization header is nowhere in the log`);
    const hook = lines.find((l) => (l.err as { message?: string } | undefined)?.message === "an onListen hook failed on purpose");
    t.equal(hook?.level, 50, `${level}: a failing hook is logged at error level by Fastify's own logger`);
  }
});
