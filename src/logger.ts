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
  return pino({
    level: options.level,
    redact: { paths: REDACT, censor: "[redacted]" },
    ...(options.pretty
      ? {
          transport: {
            target: "pino-pretty",
            options: { destination: options.fd ?? 1, colorize: process.stdout.isTTY === true, translateTime: "HH:MM:ss.l", ignore: "pid,hostname" },
          },
        }
      : {}),
  });
}
