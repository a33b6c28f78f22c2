/**
 * What each piece of the hub's HTTP front costs a request, in one process and
 * without sockets or Postgres (Fastify's inject): a plain Fastify answering
 * `{"data":{"__typename":"Query"}}`, then the same with one piece added, as
 * the hub sets it up. Rounds interleave the variants; the figure per variant is
 * the median of its rounds (and the lower quartile, less touched by other load
 * on the machine), in CPU µs per request of this process.
 *
 *   npm run build && node --import tsx bench/front-items.ts [--rounds 22] [--requests 5000] [--only REGEX]
 *
 * Fastify's inject skips the socket work (most of a real request), so the
 * differences are the pieces' own cost; bench/ab.ts with the bare+… targets
 * measures the same over HTTP, which a busy machine blurs more.
 */
import { randomUUID } from "node:crypto";
import { benchArgs } from "./lib/args.js";
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { createLogger } from "../dist/src/logger.js";
import { LazyRequestLogger, lazyChildLoggerFactory, RequestLogController } from "../dist/adapters/request-logger.js";
import { createFastify } from "../dist/adapters/fastify.js";
import { addAuthHook } from "../dist/adapters/auth.js";
import { addOverloadHook } from "../dist/adapters/overload.js";
import { createServerStats } from "../dist/src/stats.js";
import { createIdentityPoolLimiter } from "../dist/src/db/identity-limit.js";
import type { IdentityResolver } from "../dist/src/auth/resolver.js";
import type pg from "pg";
import { median } from "./lib/util.js";

const USAGE = "Usage: npm run build && node --import tsx bench/front-items.ts [--rounds 22] [--requests 5000] [--only REGEX]\n";
const { values: opts } = benchArgs(USAGE, { options: { rounds: { type: "string", default: "22" }, requests: { type: "string", default: "5000" }, only: { type: "string" } } });
const log = createLogger({ level: "warn", pretty: false });
// Anonymous requests only: the resolver is never asked, the limiter never holds a connection.
const resolver = { resolve: async () => undefined, clear() {} } as unknown as IdentityResolver;
const limiter = createIdentityPoolLimiter({} as pg.Pool, { connections: 3, queue: 256, waitMs: 1000 });
/** Fastify's own request lines (off here: logger false), plus the counting the hub does in its controller. */
class CountingLogController extends LogController {
  constructor(private readonly count: (request: FastifyRequest, reply: FastifyReply) => void) {
    super();
  }
  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply, metadata?: Record<string, unknown>): void {
    this.count(request, reply);
    super.requestCompleted(error, request, reply, metadata);
  }
}
const answer = (f: FastifyInstance) => {
  f.post("/graphql", (_request, reply) => void reply.send({ data: { __typename: "Query" } }));
  return f;
};
const front = () => createFastify({ logger: log, stats: createServerStats(), bodyLimit: 1 << 20, requestTimeoutMs: 30_000 });
const variants: Record<string, () => FastifyInstance> = {
  "plain Fastify": () => answer(Fastify({ logger: false })),
  "+ pino logger, lazy child, level-aware request lines": () =>
    answer(Fastify({ loggerInstance: log, childLoggerFactory: lazyChildLoggerFactory, logController: new RequestLogController() }) as unknown as FastifyInstance),
  "+ no logger for Fastify, the lazy child made from ours (the hub above info)": () =>
    answer(Fastify({ childLoggerFactory: (_l, b, o) => new LazyRequestLogger(log, b, o), logController: new RequestLogController() }) as unknown as FastifyInstance),
  "+ pino logger without the level-aware request lines": () =>
    answer(Fastify({ loggerInstance: log, childLoggerFactory: lazyChildLoggerFactory }) as unknown as FastifyInstance),
  "+ request id (random UUID)": () => answer(Fastify({ logger: false, requestIdHeader: "x-request-id", genReqId: () => randomUUID() })),
  "+ response counters (onResponse hook, as before)": () => {
    const f = Fastify({ logger: false });
    const stats = createServerStats();
    f.addHook("onResponse", (request, reply, done) => {
      stats.countResponse(request.routeOptions.url === "/graphql" ? "graphql" : "other", reply.raw.statusCode);
      done();
    });
    return answer(f);
  },
  "+ response counters (in the log controller)": () => {
    const stats = createServerStats();
    const count = (request: FastifyRequest, reply: FastifyReply) => stats.countResponse(request.routeOptions.url === "/graphql" ? "graphql" : "other", reply.raw.statusCode);
    return answer(Fastify({ logger: false, logController: new CountingLogController(count) }));
  },
  "+ identity hook (anonymous)": () => {
    const f = Fastify({ logger: false });
    addAuthHook(f, resolver);
    return answer(f);
  },
  "+ per-identity admission hook apart (anonymous, as before)": () => {
    const f = Fastify({ logger: false });
    addOverloadHook(f, limiter);
    return answer(f);
  },
  "+ identity and admission in one hook (anonymous)": () => {
    const f = Fastify({ logger: false });
    addAuthHook(f, resolver, undefined, limiter);
    return answer(f);
  },
  // Its counters follow Node's channel of finished responses, which inject() never reaches: bench/ab.ts sees them.
  "the hub's createFastify (logger, ids)": () => answer(front()),
  "the hub's front: createFastify + identity/admission hook": () => {
    const f = front();
    addAuthHook(f, resolver, undefined, limiter);
    return answer(f);
  },
};
// --only REGEX: plain Fastify and the variants whose name matches (more rounds in the same time).
const only = opts.only === undefined ? undefined : new RegExp(opts.only);
const apps = Object.entries(variants)
  .filter(([name], i) => i === 0 || !only || only.test(name))
  .map(([name, make]) => ({ name, app: make(), us: [] as number[] }));
for (const { app } of apps) await app.ready();
const rounds = Number(opts.rounds);
const n = Number(opts.requests);
for (let round = -2; round < rounds; round++) {
  for (const v of apps) {
    const before = process.cpuUsage();
    for (let i = 0; i < n; i++) {
      await v.app.inject({ method: "POST", url: "/graphql", headers: { "content-type": "application/json" }, payload: '{"query":"{__typename}"}' });
    }
    const used = process.cpuUsage(before);
    if (round >= 0) v.us.push((used.user + used.system) / n);
  }
}
const q1 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 4)]!;
const base = apps[0]!;
process.stdout.write(`${rounds} rounds of ${n} requests per variant; CPU µs per request: median (lower quartile), and over plain Fastify\n`);
for (const v of apps) {
  process.stdout.write(
    `${v.name.padEnd(62)} ${median(v.us).toFixed(2).padStart(6)} (${q1(v.us).toFixed(2)})  ${v === base ? "" : `+${(median(v.us) - median(base.us)).toFixed(2)} (${(q1(v.us) - q1(base.us)).toFixed(2)})`}\n`,
  );
}
await Promise.all(apps.map(({ app }) => app.close()));
