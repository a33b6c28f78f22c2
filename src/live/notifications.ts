import pg from "pg";
import type { Logger } from "../logger.js";
import { HubError } from "../errors.js";

/** The channels the core triggers (migration 0014) and deposit code notify on. */
export const LIVE_CHANNEL = {
  balance: "hub_balance_alert",
  put: "hub_put_alert",
  bet: "hub_bet_alert",
  chat: "hub_chat_alert",
} as const;
const CORE_CHANNELS: readonly string[] = Object.values(LIVE_CHANNEL);

/** In-process topics of the core alerts, derived from the identity on the server. */
export const liveTopic = {
  balance: (userId: string, casinoId: string, experienceId: string) => `${LIVE_CHANNEL.balance}:${userId}:${casinoId}:${experienceId}`,
  put: (userId: string, casinoId: string, experienceId: string) => `${LIVE_CHANNEL.put}:${userId}:${casinoId}:${experienceId}`,
  /** Every bet, or one player's bets. */
  bet: (userId?: string) => `${LIVE_CHANNEL.bet}:${userId ?? "*"}`,
  /** One chat subscriber: the room's messages and their own mutes. */
  chat: (userId: string, casinoId: string, experienceId: string) => `${LIVE_CHANNEL.chat}:${casinoId}:${experienceId}:${userId}`,
};

/** What a chat subscriber receives; a message is read afterwards under the subscriber's row-level security. */
export type ChatAlert = { kind: "message"; chatMessageId: string } | { kind: "muted" } | { kind: "unmuted" };

export interface BalanceAlert {
  currencyKey: string;
}
export interface PutAlert {
  currencyKey: string;
  mpTransferId: string;
}
export interface BetAlert {
  betId: string;
  userId: string;
  casinoId: string;
  experienceId: string;
  currencyKey: string;
  amountDelta: number;
  reason: string;
  createdAt: string;
}

/**
 * One LISTEN connection per hub process, shared by every subscriber of the
 * process: a notification is parsed once and handed to the in-process
 * subscribers of its topic. It is grafast's `GrafastSubscriber`, so a plan
 * subscribes with `listen(context().get("pgSubscriber"), topic)`.
 *
 * Topics: the core alerts' topics (liveTopic) carry ids and are fed from the
 * core channels; any other topic is a NOTIFY channel name, LISTENed while it
 * has a subscriber, whose events are the notifications' payload strings.
 *
 * When the connection drops it reconnects with back-off; notifications sent
 * meanwhile are lost, so once back it announces, to every balance subscriber,
 * one alert per currency the player holds: clients refetch and miss nothing.
 */
export interface LiveNotifications {
  subscribe(topic: string): AsyncIterableIterator<unknown>;
  /** Resolves once the first LISTEN is in place. */
  ready: Promise<void>;
  /** Subscribers of this process, for logs and the bench. */
  subscriberCount(): number;
  /** Ends the connection; open iterators end too. */
  close(): Promise<void>;
}

const CHANNEL_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

interface Subscriber {
  push(event: unknown): void;
  end(): void;
}

/**
 * One subscriber's events, as the async iterator grafast reads. A class, not
 * closures: an idle subscription lives as long as its socket, and ten
 * thousand of them are ten thousand of whatever each one holds. The queue
 * exists only while events wait to be read.
 */
class TopicSubscription implements Subscriber, AsyncIterableIterator<unknown> {
  private queue: unknown[] | undefined = undefined;
  private waiting: ((result: IteratorResult<unknown>) => void) | undefined = undefined;
  private done = false;
  constructor(
    readonly topic: string,
    readonly set: Set<Subscriber>,
    private readonly onEnd: (sub: TopicSubscription) => void,
  ) {}

  push(event: unknown): void {
    const waiting = this.waiting;
    if (waiting) {
      this.waiting = undefined;
      waiting({ value: event, done: false });
    } else (this.queue ??= []).push(event);
  }

  end(): void {
    if (this.done) return;
    this.done = true;
    this.queue = undefined;
    this.onEnd(this);
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.({ value: undefined, done: true });
  }

  next(): Promise<IteratorResult<unknown>> {
    const queue = this.queue;
    if (queue !== undefined && queue.length > 0) {
      const value = queue.shift();
      if (queue.length === 0) this.queue = undefined;
      return Promise.resolve({ value, done: false });
    }
    if (this.done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => (this.waiting = resolve));
  }

  return(): Promise<IteratorResult<unknown>> {
    this.end();
    return Promise.resolve({ value: undefined, done: true });
  }

  throw(error?: unknown): Promise<IteratorResult<unknown>> {
    this.end();
    return Promise.reject(error instanceof Error ? error : new Error(String(error)));
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}

export function createLiveNotifications(url: string, log: Logger): LiveNotifications {
  const topics = new Map<string, Set<Subscriber>>();
  /** Plugin channels LISTENed on, with their subscriber count. */
  const channels = new Map<string, number>();
  let client: pg.Client | undefined;
  let connected = false;
  let closed = false;
  let everConnected = false;
  let retryTimer: NodeJS.Timeout | undefined;
  let delay = 100;

  /** Chat topics by room (casino:experience): a message goes to every subscriber of its room. */
  const chatRooms = new Map<string, Set<string>>();
  const chatPrefix = `${LIVE_CHANNEL.chat}:`;
  const roomOf = (topic: string) => topic.slice(chatPrefix.length, topic.lastIndexOf(":"));

  const publish = (topic: string, event: unknown) => {
    const set = topics.get(topic);
    if (set) for (const sub of set) sub.push(event);
  };

  const onChat = (data: Record<string, unknown>) => {
    const room = `${String(data.c)}:${String(data.e)}`;
    if (data.t === "message") {
      const event: ChatAlert = { kind: "message", chatMessageId: String(data.id) };
      for (const topic of chatRooms.get(room) ?? []) publish(topic, event);
    } else if (data.t === "muted" || data.t === "unmuted") {
      publish(`${chatPrefix}${room}:${String(data.u)}`, { kind: data.t } satisfies ChatAlert);
    }
  };

  const onNotification = (msg: pg.Notification) => {
    const { channel, payload = "" } = msg;
    if (!CORE_CHANNELS.includes(channel)) {
      publish(channel, payload);
      return;
    }
    let data: Record<string, unknown>;
    try {
      data = JSON.parse(payload) as Record<string, unknown>;
    } catch {
      log.warn({ channel, payload: payload.slice(0, 200) }, "ignored a live notification whose payload is not JSON");
      return;
    }
    if (channel === LIVE_CHANNEL.balance) {
      publish(liveTopic.balance(String(data.u), String(data.c), String(data.e)), { currencyKey: String(data.k) } satisfies BalanceAlert);
    } else if (channel === LIVE_CHANNEL.chat) {
      onChat(data);
    } else if (channel === LIVE_CHANNEL.put) {
      publish(liveTopic.put(String(data.userId), String(data.casinoId), String(data.experienceId)), {
        currencyKey: String(data.currencyKey),
        mpTransferId: String(data.mpTransferId),
      } satisfies PutAlert);
    } else {
      const bet: BetAlert = {
        betId: String(data.betId),
        userId: String(data.userId),
        casinoId: String(data.casinoId),
        experienceId: String(data.experienceId),
        currencyKey: String(data.currencyKey),
        amountDelta: Number(data.amountDelta),
        reason: String(data.reason),
        createdAt: String(data.createdAt),
      };
      publish(liveTopic.bet(), bet);
      publish(liveTopic.bet(bet.userId), bet);
    }
  };

  /** Tell every balance subscriber to refetch: one alert per currency the player holds. */
  const reannounce = async (c: pg.Client) => {
    const keys = [...topics.keys()].filter((t) => t.startsWith(`${LIVE_CHANNEL.balance}:`)).map((t) => t.split(":"));
    if (keys.length === 0) return;
    const { rows } = await c.query<{ user_id: string; casino_id: string; experience_id: string; currency_key: string }>(
      `select b.user_id, b.casino_id, b.experience_id, b.currency_key
         from hub.balance b
         join unnest($1::uuid[], $2::uuid[], $3::uuid[]) as s(u, c, e)
           on b.user_id = s.u and b.casino_id = s.c and b.experience_id = s.e`,
      [keys.map((k) => k[1]), keys.map((k) => k[2]), keys.map((k) => k[3])],
    );
    for (const row of rows) publish(liveTopic.balance(row.user_id, row.casino_id, row.experience_id), { currencyKey: row.currency_key } satisfies BalanceAlert);
    log.info({ subscribers: keys.length, alerts: rows.length }, "live notifications: listening again; announced every balance to its subscribers");
  };

  const connect = async (): Promise<void> => {
    const c = new pg.Client({ connectionString: url, application_name: "hub:live-notifications" });
    client = c;
    c.on("notification", onNotification);
    c.on("error", (error) => {
      if (!closed) log.warn({ err: error }, "live notifications lost their database connection; reconnecting");
    });
    c.on("end", () => {
      connected = false;
      if (closed || client !== c) return;
      retryTimer = setTimeout(() => void connect().catch(() => undefined), delay);
      retryTimer.unref();
      delay = Math.min(delay * 2, 5000);
    });
    try {
      await c.connect();
      await c.query([...CORE_CHANNELS, ...channels.keys()].map((ch) => `listen ${pg.escapeIdentifier(ch)}`).join("; "));
    } catch (error) {
      await c.end().catch(() => undefined); // "end" schedules the next attempt
      throw error;
    }
    connected = true;
    delay = 100;
    if (everConnected) await reannounce(c).catch((error: unknown) => log.warn({ err: error }, "live notifications: could not announce balances after reconnecting"));
    everConnected = true;
  };

  const listenTo = (channel: string) => {
    const n = channels.get(channel) ?? 0;
    channels.set(channel, n + 1);
    if (n === 0 && connected) client?.query(`listen ${pg.escapeIdentifier(channel)}`).catch(() => undefined);
  };
  const unlistenFrom = (channel: string) => {
    const n = (channels.get(channel) ?? 1) - 1;
    if (n > 0) {
      channels.set(channel, n);
      return;
    }
    channels.delete(channel);
    if (connected) client?.query(`unlisten ${pg.escapeIdentifier(channel)}`).catch(() => undefined);
  };

  const ready = connect();
  let count = 0;
  const released = (sub: TopicSubscription) => {
    count--;
    sub.set.delete(sub);
    if (sub.set.size === 0) {
      topics.delete(sub.topic);
      if (sub.topic.startsWith(chatPrefix)) {
        const room = chatRooms.get(roomOf(sub.topic));
        room?.delete(sub.topic);
        if (room?.size === 0) chatRooms.delete(roomOf(sub.topic));
      }
    }
  };
  const releasedChannel = (sub: TopicSubscription) => {
    released(sub);
    unlistenFrom(sub.topic);
  };

  return {
    ready,
    subscriberCount: () => count,
    subscribe(topic) {
      const isCore = CORE_CHANNELS.some((ch) => topic.startsWith(`${ch}:`));
      if (!isCore) {
        if (!CHANNEL_NAME.test(topic) || CORE_CHANNELS.includes(topic)) {
          throw new HubError(
            "HUB_INVALID_ARGUMENT",
            `A subscription topic is a NOTIFY channel name (a letter or _, then letters, digits or _, at most 63) other than the hub's own (${CORE_CHANNELS.join(", ")}); received ${JSON.stringify(topic)}.`,
          );
        }
        listenTo(topic);
      }
      let set = topics.get(topic);
      if (!set) {
        topics.set(topic, (set = new Set()));
        if (topic.startsWith(chatPrefix)) {
          const room = roomOf(topic);
          let roomTopics = chatRooms.get(room);
          if (!roomTopics) chatRooms.set(room, (roomTopics = new Set()));
          roomTopics.add(topic);
        }
      }
      count++;
      const sub = new TopicSubscription(topic, set, isCore ? released : releasedChannel);
      set.add(sub);
      return sub;
    },
    async close() {
      closed = true;
      if (retryTimer) clearTimeout(retryTimer);
      for (const set of topics.values()) for (const sub of [...set]) sub.end();
      await client?.end().catch(() => undefined);
    },
  };
}
