import { pino, type Logger } from "pino";
import type { LogLevel } from "./config.js";

export type { Logger };

/**
 * Credentials must never reach a log: the Authorization header (session tokens,
 * API keys) and anything that looks like a password in a connection string.
 */
const REDACT = [
  "req.headers.authorization",
  "headers.authorization",
  "authorization",
  "*.authorization",
  "password",
  "*.password",
];

export function createLogger(options: { level: LogLevel; pretty: boolean; /** Default stdout; the CLI logs to 2. */ fd?: 1 | 2 }): Logger {
  if (options.fd === 2 && !options.pretty) {
    // Synchronous: a short-lived command must not lose lines at exit.
    return pino({ level: options.level, redact: { paths: REDACT, censor: "[redacted]" } }, pino.destination({ fd: 2, sync: true }));
  }
  const base = { level: options.level, redact: { paths: REDACT, censor: "[redacted]" } };
  if (options.pretty) {
    return pino({
      ...base,
      transport: {
        target: "pino-pretty",
        options: { destination: options.fd ?? 1, colorize: process.stdout.isTTY === true, translateTime: "HH:MM:ss.l", ignore: "pid,hostname" },
      },
    });
  }
  // pino's default destination (asynchronous writes), but with a minLength, without which its
  // flush(cb) calls back at once instead of after the writes in flight: a process exiting after
  // a stop waits for them (process-signals.ts). Each line still goes out as it is logged.
  return pino(base, pino.destination({ fd: options.fd ?? 1, sync: false, minLength: 1 }));
}
