import type pg from "pg";
import type { Logger } from "../logger.js";

/**
 * `hub.api_key.last_used_at` without a write per request: the auth hook records
 * which keys were used, and one UPDATE per interval stamps them all. The
 * timestamp is therefore accurate to the interval (default 10 s).
 */
export function createApiKeyUsage(pool: pg.Pool, log: Logger, intervalMs = 10_000) {
  let used = new Set<string>();
  const flush = async (): Promise<void> => {
    if (used.size === 0) return;
    const ids = [...used];
    used = new Set();
    try {
      await pool.query("update hub.api_key set last_used_at = now() where id = any($1::uuid[])", [ids]);
    } catch (error) {
      for (const id of ids) used.add(id);
      log.warn({ err: error }, "could not record API key usage; will retry");
    }
  };
  const timer = setInterval(() => void flush(), intervalMs);
  timer.unref();
  return {
    record(apiKeyId: string): void {
      used.add(apiKeyId);
    },
    flush,
    async stop(): Promise<void> {
      clearInterval(timer);
      await flush();
    },
  };
}

export type ApiKeyUsage = ReturnType<typeof createApiKeyUsage>;
