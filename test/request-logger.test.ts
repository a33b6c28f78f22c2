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

// Fastify's per-request lines through the hub's front (adapters/fastify.ts), over real HTTP.
t.test("Fastify's request lines: written at info, skipped above it; a server fault is still logged at error", async (t) => {
  const { createFastify } = await import("../dist/adapters/fastify.js");
  const { createServerStats } = await import("../dist/src/stats.js");
  for (const level of ["info", "warn"] as const) {
    const { lines, parent } = capture(level);
    const app = createFastify({ logger: parent as never, stats: createServerStats(), bodyLimit: 1024, requestTimeoutMs: 0 });
    app.get("/ok", async () => ({ ok: true }));
    app.get("/fault", async () => {
      throw new Error("broken on purpose");
    });
    await app.listen({ port: 0, host: "127.0.0.1" });
    const { port } = app.server.address() as { port: number };
    t.equal((await fetch(`http://127.0.0.1:${port}/ok`)).status, 200);
    t.equal((await fetch(`http://127.0.0.1:${port}/fault`)).status, 500);
    await app.close();
    const messages = lines.map((l) => l.msg);
    if (level === "info") {
      t.equal(messages.filter((m) => m === "incoming request").length, 2, "info: both requests' incoming lines");
      t.equal(messages.filter((m) => m === "request completed").length, 2, "info: both requests' completion lines");
    } else {
      t.notOk(messages.includes("incoming request"), "warn: no incoming lines");
      t.notOk(messages.includes("request completed"), "warn: no completion lines");
    }
    const fault = lines.find((l) => l.msg === "broken on purpose");
    t.ok(fault, `${level}: the fault is logged`);
    t.equal(fault?.level, 50, `${level}: at error level`);
    t.ok(typeof fault?.reqId === "string" && (fault.reqId as string).length > 0, `${level}: with the request id`);
  }
});
