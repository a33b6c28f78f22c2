import pg from "pg";
import type { Logger } from "../logger.js";

/** The channel the credential triggers (core migration 0007) notify on. */
export const CREDENTIALS_CHANNEL = "hub_credentials_changed";

/**
 * Every hub instance listens for revocations and expiry changes made by any
 * instance (or by hand in SQL) and drops its cached identities at once, so a
 * revoked credential stops working everywhere without waiting for the cache
 * to age out. The 1 s cache bound still holds if this connection is down: it
 * reconnects with back-off, and forgets the cache on reconnecting, since
 * notifications sent meanwhile were lost.
 */
export function listenForCredentialChanges(url: string, onChange: () => void, log: Logger): { ready: Promise<void>; close(): Promise<void> } {
  let client: pg.Client | undefined;
  let closed = false;
  let retryTimer: NodeJS.Timeout | undefined;
  let delay = 250;

  const connect = async (): Promise<void> => {
    const c = new pg.Client({ connectionString: url, application_name: "hub:credential-events" });
    client = c;
    c.on("notification", (msg) => {
      if (msg.channel === CREDENTIALS_CHANNEL) onChange();
    });
    c.on("error", (error) => {
      if (!closed) log.warn({ err: error }, "credential-change listener lost its connection; reconnecting");
    });
    c.on("end", () => {
      if (closed) return;
      onChange();
      retryTimer = setTimeout(() => void connect().catch(() => undefined), delay);
      retryTimer.unref();
      delay = Math.min(delay * 2, 5000);
    });
    await c.connect();
    await c.query(`listen ${CREDENTIALS_CHANNEL}`);
    delay = 250;
    onChange();
  };

  const ready = connect();
  return {
    ready,
    async close() {
      closed = true;
      if (retryTimer) clearTimeout(retryTimer);
      await client?.end().catch(() => undefined);
    },
  };
}
