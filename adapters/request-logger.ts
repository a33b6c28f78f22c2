import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from "fastify";
import { pino, type Bindings, type ChildLoggerOptions, type LevelWithSilentOrString, type SerializerFn } from "pino";

/**
 * The req/res/err serializers Fastify adds to a logger it is given, for the
 * loggers the hub makes without Fastify (above `info`). Fastify exports its
 * own from no public entry point, so they are written out here, giving the
 * same fields (test/request-logger.test.ts compares the lines of both levels).
 */
export const fastifySerializers: Record<string, SerializerFn> = {
  req: (request: FastifyRequest) => ({
    method: request.method,
    url: request.url,
    version: request.headers?.["accept-version"],
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  }),
  err: pino.stdSerializers.err,
  res: (reply: FastifyReply) => ({ statusCode: reply.statusCode }),
};

type Level = "fatal" | "error" | "warn" | "info" | "debug" | "trace";

/**
 * Fastify's per-request logger (`request.log`, with the request id), made
 * only when a line is actually written.
 *
 * Fastify builds a pino child for every request. With our redaction paths
 * (wildcards, src/logger.ts) that child costs pino a formatter rebuild and a
 * redacting stringify of the request id: the largest cost the hub added to a
 * `{__typename}` request over bare Fastify + grafserv (bench/ab.ts; the
 * figure is in bench/README.md). The child is made on the first line
 * that passes the level: at `info` (the default) every request logs its
 * completion, so nothing changes there; at `warn` and above (the bench, and a
 * busy production server's usual setting) a request that logs nothing makes
 * no child at all.
 */
export class LazyRequestLogger implements FastifyBaseLogger {
  #child: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly childBindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  private get logger(): FastifyBaseLogger {
    return (this.#child ??= this.parent.child(this.childBindings, this.options));
  }

  get level(): LevelWithSilentOrString {
    return this.#child?.level ?? this.options.level ?? this.parent.level;
  }

  set level(level: LevelWithSilentOrString) {
    this.logger.level = level;
  }

  isLevelEnabled(level: string): boolean {
    // A per-route level (options.level) is rare: let the real child decide.
    const decider = this.#child === undefined && this.options.level === undefined ? this.parent : this.logger;
    // Fastify's logger type omits it; pino's loggers (ours, src/logger.ts) all have it.
    return (decider as FastifyBaseLogger & { isLevelEnabled?: (l: string) => boolean }).isLevelEnabled?.(level) ?? true;
  }

  #write(level: Level, args: unknown[]): void {
    if (!this.isLevelEnabled(level)) return;
    (this.logger[level] as (...a: unknown[]) => void)(...args);
  }

  fatal(...args: unknown[]): void {
    this.#write("fatal", args);
  }
  error(...args: unknown[]): void {
    this.#write("error", args);
  }
  warn(...args: unknown[]): void {
    this.#write("warn", args);
  }
  info(...args: unknown[]): void {
    this.#write("info", args);
  }
  debug(...args: unknown[]): void {
    this.#write("debug", args);
  }
  trace(...args: unknown[]): void {
    this.#write("trace", args);
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.logger.child(bindings, options);
  }
}

export function lazyChildLoggerFactory(logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  return new LazyRequestLogger(logger, bindings, options);
}

/**
 * Fastify's two lines per request ("incoming request", "request completed")
 * only when `info` is on for the request. Fastify builds their objects and
 * reads the response time before the logger drops them by level; above `info`
 * that was most of what a logger cost a request the hub answers without
 * logging anything. Errors are still logged as Fastify logs them: a failed
 * request's completion at error level, the default error handler's lines
 * (they go through other methods, untouched here).
 */
const infoEnabled = (log: FastifyBaseLogger): boolean =>
  (log as FastifyBaseLogger & { isLevelEnabled?: (l: string) => boolean }).isLevelEnabled?.("info") ?? true;

export class RequestLogController extends LogController {
  override incomingRequest(request: FastifyRequest, reply: FastifyReply, metadata?: Record<string, unknown>): void {
    if (!infoEnabled(request.log)) return;
    super.incomingRequest(request, reply, metadata);
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply, metadata?: Record<string, unknown>): void {
    if (!error && !infoEnabled(request.log)) return;
    super.requestCompleted(error, request, reply, metadata);
  }
}
