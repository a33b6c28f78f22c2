/**
 * A reference point, not a target of `npm run bench`'s main table: Fastify 5 +
 * grafserv's Fastify adapter serving the same preset as the hub and the
 * baseline, and nothing else (no identity hook, no request ids, logging off,
 * no Express app, no response counting). `bench/ab.ts` compares it with the
 * hub and the baseline: what the hub adds to a request, and the ratio the
 * framework change alone gives on this machine.
 *
 * BENCH_BARE_WITH (comma-separated; `bench/ab.ts --targets bare+logger+ids`)
 * adds the hub's own pieces one by one, each as the hub sets it up, so the
 * cost of each is the difference between two such targets:
 *   logger    as the hub sets Fastify up at `info`: Fastify given the logger, the lazy per-request child
 *   quietlogger  as the hub sets Fastify up above `info`: the same lazy per-request child over the hub's
 *             logger, but Fastify itself given no logger, so it sets up no response listeners
 *   ids       a request id per request (x-request-id or a random UUID)
 *   http      the hub's Node/Fastify server options (header size, request timeout sweep, 503 on close, idle close, trailing slash)
 *   stats     the response counters (adapters/fastify.ts: Node's channel of finished responses)
 *   auth      the identity hook (an anonymous request: no Authorization header)
 *   overload  the per-identity admission hook
 *   classes   requests and responses built with the Express app's prototypes
 *   express   the bench's configureApp mounted behind the hub's bridge (implies classes)
 *   noclasses with express: Node's own request and response classes, Express's app.handle giving each its prototypes
 *   nativeabort  Node's own AbortController.prototype.abort (src/bin/process-setup.ts replaces it)
 *   plainexecutor  @dataplan/pg's executor as shipped: its statements are not marked as one-statement calls, so the
 *             pipelined adaptor sends `commit` after the statement's answer, not in its packet
 *   front     logger, ids, http and stats together, through the hub's own createFastify (adapters/fastify.ts;
 *             the logger as `logger` or `quietlogger` by LOG_LEVEL, as in the hub)
 */
import { nativeAbort } from "../lib/child-prelude.js";
import "../../dist/src/bin/process-setup.js"; // the tuning node dist/server.js applies
import "../../dist/src/prelude.js";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import { grafserv } from "grafserv/fastify/v5";
import Fastify, { type FastifyInstance } from "fastify";
import { MAX_BODY } from "../lib/demo-preset.js";
import { attachToBenchDatabase } from "../lib/attach.js";
import { serveBench } from "../lib/child.js";
import { benchConfigureApp } from "../lib/demo.js";
import { createFastify, followResponses } from "../../dist/adapters/fastify.js";
import { LazyRequestLogger, lazyChildLoggerFactory, RequestLogController } from "../../dist/adapters/request-logger.js";
import type { Bindings, ChildLoggerOptions } from "pino";
import { addAuthHook } from "../../dist/adapters/auth.js";
import { addOverloadHook } from "../../dist/adapters/overload.js";
import { createExpressApp, mountExpressApp } from "../../dist/adapters/express.js";
import { createIdentityResolver } from "../../dist/src/auth/resolver.js";
import { createIdentityPoolLimiter, DEFAULT_IDENTITY_LIMITS } from "../../dist/src/db/identity-limit.js";
import { createServerStats } from "../../dist/src/stats.js";

const KNOWN = ["logger", "quietlogger", "ids", "http", "stats", "auth", "overload", "classes", "express", "noclasses", "nativeabort", "plainexecutor", "front"];
const features = new Set((process.env.BENCH_BARE_WITH ?? "").split(",").filter(Boolean));
for (const f of features) if (!KNOWN.includes(f)) throw new Error(`BENCH_BARE_WITH: unknown ${JSON.stringify(f)}; known: ${KNOWN.join(", ")}`);
const FRONT = ["logger", "ids", "http", "stats"];
const has = (f: string) => features.has(f) || (features.has("front") && FRONT.includes(f));

if (has("nativeabort")) AbortController.prototype.abort = nativeAbort;
/** Undoes the hub's routing of @dataplan/pg's executor: the methods it put on each executor hide the prototype's. */
const PlainExecutorPlugin: GraphileConfig.Plugin = {
  name: "BenchPlainExecutorPlugin",
  version: "0.0.0",
  after: ["HubOneStatementRoutingPlugin"],
  schema: {
    hooks: {
      build(build) {
        for (const executor of Object.values(build.input.pgRegistry.pgExecutors) as object[]) {
          delete (executor as { _execute?: unknown })._execute;
          delete (executor as { executeMutation?: unknown }).executeMutation;
        }
        return build;
      },
    },
  },
};
const { db, pgl, pools, log, close } = await attachToBenchDatabase(has("plainexecutor") ? { plugins: [PlainExecutorPlugin] } : {});
const serv = pgl.createServ(grafserv);
const stats = createServerStats();
const expressApp = has("classes") || has("express") ? await createExpressApp(benchConfigureApp, pools.superuser) : undefined;
const messageClasses = has("noclasses") ? undefined : expressApp?.messageClasses;
let f: FastifyInstance;
if (features.has("front")) {
  f = createFastify({ logger: log, stats, bodyLimit: MAX_BODY, requestTimeoutMs: 30_000, messageClasses });
} else {
  f = Fastify({
    bodyLimit: MAX_BODY,
    ...(has("logger")
      ? { loggerInstance: log, childLoggerFactory: lazyChildLoggerFactory }
      : has("quietlogger")
        ? { childLoggerFactory: (_l: unknown, b: Bindings, o: ChildLoggerOptions) => new LazyRequestLogger(log, b, o) }
        : { logger: false }),
    ...(has("logger") || has("quietlogger") ? { logController: new RequestLogController() } : {}),
    ...(has("ids") ? { requestIdHeader: "x-request-id", genReqId: () => randomUUID() } : {}),
    ...(has("http")
      ? { requestTimeout: 30_000, return503OnClosing: true, forceCloseConnections: "idle" as const, routerOptions: { ignoreTrailingSlash: true } }
      : {}),
    http: {
      ...(has("http") ? { maxHeaderSize: 96 * 1024, connectionsCheckingInterval: 1000, headersTimeout: 30_000 } : {}),
      ...messageClasses,
    },
  }) as unknown as FastifyInstance;
}
// Counted as the hub counts: from Node's channel of finished responses (adapters/fastify.ts).
if (has("stats") && !features.has("front")) followResponses(f, stats);
const limiter = createIdentityPoolLimiter(pools.superuser, { ...DEFAULT_IDENTITY_LIMITS, waitMs: 10_000 });
// Both: one hook, as the hub has it.
if (has("auth")) addAuthHook(f, createIdentityResolver(pools.credentials, { cacheTtlMs: 1000 }), undefined, has("overload") ? limiter : undefined);
else if (has("overload")) addOverloadHook(f, limiter);
await serv.addTo(f);
if (has("express")) await mountExpressApp(f, expressApp!.app, stats, limiter.poolFor);
await f.listen({ port: 0, host: "127.0.0.1" });
const { port } = f.server.address() as AddressInfo;
serveBench({ url: `http://127.0.0.1:${port}`, superuserDatabaseUrl: db.superuserUrl }, async () => {
  await f.close();
  await close();
});
