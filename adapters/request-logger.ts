import type { FastifyBaseLogger } from "fastify";
import type { Bindings, ChildLoggerOptions, LevelWithSilentOrString } from "pino";

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
