import pg from "pg";
import type { Logger } from "../logger.js";

export interface ListenConnectionOptions {
  url: string;
  /** Shown in pg_stat_activity, so an operator (or a test) can find and count it. */
  applicationName: string;
  /** Every channel to LISTEN on, read again at each (re)connection. */
  channels(): Iterable<string>;
  onNotification(msg: pg.Notification): void;
  /**
   * The connection is gone: notifications sent from now until it is back are
   * lost. Called once per loss, not per failed retry.
   */
  onLost(): void;
  /** LISTEN is in place for the first time on `client`; `ready` waits for it. */
  onFirst?(client: pg.Client): Promise<void>;
  /** LISTEN is in place again on `client` after a loss (not after the first connection). */
  onBack(client: pg.Client): Promise<void>;
  log: Logger;
}

export interface ListenConnection {
  /** Resolves once the first LISTEN is in place. */
  ready: Promise<void>;
  /** LISTEN on one more channel now, if connected (else at the next connection, through channels()). */
  listen(channel: string): void;
  unlisten(channel: string): void;
  /** LISTEN is in place now (false from the connection's end until it is back). */
  connected(): boolean;
  /**
   * A query on the connection, once it is up (it waits through a reconnection;
   * it fails if the connection drops during the query, or once closed).
   */
  query<R extends pg.QueryResultRow>(sql: string, params?: unknown[]): Promise<pg.QueryResult<R>>;
  close(): Promise<void>;
}

interface Deferred {
  promise: Promise<pg.Client>;
  resolve(client: pg.Client): void;
  reject(error: Error): void;
}

function deferred(): Deferred {
  const d = {} as Deferred;
  d.promise = new Promise<pg.Client>((resolve, reject) => Object.assign(d, { resolve, reject }));
  return d;
}

const FIRST_DELAY_MS = 100;
const MAX_DELAY_MS = 5000;

/**
 * A pg client that LISTENs, and reconnects with back-off when its connection
 * ends, until closed. The one reconnect path of the process: every consumer
 * of NOTIFY (live updates, chat, credential changes) shares this connection.
 */
export function openListenConnection(options: ListenConnectionOptions): ListenConnection {
  const { url, applicationName, log } = options;
  let client: pg.Client | undefined;
  let connected = false;
  let closed = false;
  let everConnected = false;
  /** Whether onLost was told since the last time LISTEN was in place. */
  let lostTold = false;
  let retryTimer: NodeJS.Timeout | undefined;
  let delay = FIRST_DELAY_MS;
  // Settled with the client each time LISTEN is in place; a new one while down.
  let up = deferred();
  up.promise.catch(() => undefined);

  const onEnd = (c: pg.Client) => {
    if (connected) {
      up = deferred();
      up.promise.catch(() => undefined);
    }
    connected = false;
    if (closed || client !== c) return;
    if (everConnected && !lostTold) {
      lostTold = true;
      options.onLost();
    }
    retryTimer = setTimeout(() => void connect().catch(() => undefined), delay);
    retryTimer.unref();
    delay = Math.min(delay * 2, MAX_DELAY_MS);
  };

  const connect = async (): Promise<void> => {
    const c = new pg.Client({ connectionString: url, application_name: applicationName });
    client = c;
    c.on("notification", options.onNotification);
    c.on("error", (error) => {
      if (!closed) log.warn({ err: error }, "the LISTEN connection lost its database connection; reconnecting");
    });
    c.on("end", () => onEnd(c));
    try {
      await c.connect();
      await c.query([...options.channels()].map((ch) => `listen ${pg.escapeIdentifier(ch)}`).join("; "));
    } catch (error) {
      await c.end().catch(() => undefined); // "end" schedules the next attempt
      throw error;
    }
    connected = true;
    delay = FIRST_DELAY_MS;
    const again = everConnected;
    everConnected = true;
    lostTold = false;
    up.resolve(c);
    if (!again) await options.onFirst?.(c);
    if (again) await options.onBack(c).catch((error: unknown) => log.warn({ err: error }, "the LISTEN connection is back, but what was missed could not be announced"));
  };

  const run = (sql: string) => {
    if (connected) client?.query(sql).catch(() => undefined);
  };

  return {
    ready: connect(),
    listen: (channel) => run(`listen ${pg.escapeIdentifier(channel)}`),
    unlisten: (channel) => run(`unlisten ${pg.escapeIdentifier(channel)}`),
    connected: () => connected,
    async query<R extends pg.QueryResultRow>(sql: string, params?: unknown[]) {
      const c = await up.promise;
      return c.query<R>(sql, params);
    },
    async close() {
      closed = true;
      up.reject(new Error("the LISTEN connection is closed"));
      if (retryTimer) clearTimeout(retryTimer);
      await client?.end().catch(() => undefined);
    },
  };
}
