import type pg from "pg";
import type { Logger } from "../logger.js";
import { HubError } from "../errors.js";
import { AlertLog, LOG_CHANNEL, parseCursor, replayPage, routeLogRow } from "./alert-log.js";
import { ChatRooms, CORE_CHANNELS, isCoreTopic, LIVE_CHANNEL as LIVE_CHANNEL_NAMES, reannounceBalances, routeCoreAlert } from "./core-alerts.js";
import { openListenConnection } from "./listen-connection.js";
import { ResumingSubscription, TopicSubscription, type Subscriber } from "./subscription.js";

export { LIVE_CHANNEL, liveTopic, type Cursored, type BalanceAlert, type BetAlert, type ChatAlert, type PutAlert } from "./core-alerts.js";

/**
 * A NOTIFY channel the hub itself consumes on the shared connection, outside
 * the subscription topics (credential changes). `onGap` runs when the
 * connection is lost and again once it is back: what was notified in between
 * is gone, so the consumer must assume anything changed.
 */
export interface InternalChannel {
  channel: string;
  onNotify(payload: string): void;
  onGap(): void;
}

/**
 * One LISTEN connection per server, shared by every subscriber of the
 * server: a notification is parsed once and handed to the in-process
 * subscribers of its topic. It is grafast's `GrafastSubscriber`, so a plan
 * subscribes with `listen(context().get("pgSubscriber"), topic)`.
 *
 * Topics: the core alerts' topics (liveTopic) carry ids and are fed from the
 * alert log (alert-log.ts); `<topic>@<cursor>` (resumeTopic) first replays
 * the topic's alerts after the cursor from the log. Any other topic is a
 * NOTIFY channel name, LISTENed while it has a subscriber, whose events are
 * the notifications' payload strings.
 *
 * Internal channels (credential changes) share the connection.
 *
 * When the connection drops it reconnects with back-off; once back it
 * delivers every alert sequenced meanwhile, from the log (if some were
 * already pruned, every balance subscriber gets one alert per currency the
 * player holds instead); internal channels are told of the gap.
 */
export interface LiveNotifications {
  subscribe(topic: string): AsyncIterableIterator<unknown>;
  /** Resolves once the first LISTEN is in place. */
  ready: Promise<void>;
  /** Subscribers of this server, for logs and the bench. */
  subscriberCount(): number;
  /** Whether the LISTEN connection is up: what readiness reports of the database, at no cost. */
  connected(): boolean;
  /** Ends the connection; open iterators end too. */
  close(): Promise<void>;
}

/** The topic of a subscription that resumes after `cursor` (checked by parseCursor). */
export const resumeTopic = (topic: string, cursor: string | undefined): string => (cursor === undefined ? topic : `${topic}@${cursor}`);

const CHANNEL_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** Channels a plugin may not subscribe to by name: the hub's own, which it never UNLISTENs. */
const OWN_CHANNELS: readonly string[] = [...CORE_CHANNELS, ...Object.values(LOG_CHANNEL)];

function checkChannelTopic(topic: string): void {
  if (CHANNEL_NAME.test(topic) && !OWN_CHANNELS.includes(topic)) return;
  throw new HubError(
    "HUB_INVALID_ARGUMENT",
    `A subscription topic is a NOTIFY channel name (a letter or _, then letters, digits or _, at most 63) other than the hub's own (${OWN_CHANNELS.join(", ")}); received ${JSON.stringify(topic)}.`,
  );
}

/**
 * The in-process subscribers by topic, and the plugin channels LISTENed on
 * with their subscriber count.
 */
class Topics {
  readonly byTopic = new Map<string, Set<Subscriber>>();
  readonly channels = new Map<string, number>();
  readonly chat = new ChatRooms();
  count = 0;

  publish = (topic: string, event: unknown): void => {
    const set = this.byTopic.get(topic);
    if (set) for (const sub of set) sub.push(event);
  };

  add(topic: string, onEnd: (sub: TopicSubscription) => void): TopicSubscription {
    let set = this.byTopic.get(topic);
    if (!set) {
      this.byTopic.set(topic, (set = new Set()));
      this.chat.added(topic);
    }
    this.count++;
    const sub = new TopicSubscription(topic, set, onEnd);
    set.add(sub);
    return sub;
  }

  remove(sub: TopicSubscription): void {
    this.count--;
    sub.set.delete(sub);
    if (sub.set.size > 0) return;
    this.byTopic.delete(sub.topic);
    this.chat.removed(sub.topic);
  }

  /** Counts a subscriber of a plugin channel: true when it is the channel's first. */
  channelAdded(channel: string): boolean {
    const n = this.channels.get(channel) ?? 0;
    this.channels.set(channel, n + 1);
    return n === 0;
  }

  /** True when the channel's last subscriber left. */
  channelRemoved(channel: string): boolean {
    const n = (this.channels.get(channel) ?? 1) - 1;
    if (n > 0) this.channels.set(channel, n);
    else this.channels.delete(channel);
    return n <= 0;
  }

  endAll(): void {
    for (const set of this.byTopic.values()) for (const sub of [...set]) sub.end();
  }
}

export function createLiveNotifications(url: string, log: Logger, options: { internal?: readonly InternalChannel[] } = {}): LiveNotifications {
  const topics = new Topics();
  const internal = new Map((options.internal ?? []).map((c) => [c.channel, c]));
  const query: LiveQuery = (sql, params) => connection.query(sql, params);
  const alerts = new AlertLog(query, (row) => routeLogRow(row, topics.publish, topics.chat), () => topics.count > 0, log);
  const onNotification = notificationHandler(topics, internal, alerts, log);

  const connection = openListenConnection({
    url,
    applicationName: "hub:live-notifications",
    log,
    channels: () => new Set([...Object.values(LOG_CHANNEL), ...CORE_CHANNELS, ...internal.keys(), ...topics.channels.keys()]),
    onNotification,
    onFirst: (client) => alerts.start(client),
    onLost: () => {
      for (const own of internal.values()) own.onGap();
    },
    async onBack(client) {
      for (const own of internal.values()) own.onGap();
      if (!(await alerts.resume(client))) return;
      const { subscribers, alerts: sent } = await reannounceBalances(client, topics.byTopic.keys(), topics.publish, alerts.lastCursor());
      log.warn({ subscribers, alerts: sent }, "live notifications: listening again, but alerts sent meanwhile were already pruned from the log; announced every balance to its subscribers");
    },
  });
  // A safety net for a lost wake-up: pending alerts are sequenced within this time anyway.
  const sweep = setInterval(() => alerts.sequence(), SEQUENCE_EVERY_MS);
  sweep.unref();

  const released = (sub: TopicSubscription) => topics.remove(sub);
  const releasedChannel = (sub: TopicSubscription) => {
    topics.remove(sub);
    if (topics.channelRemoved(sub.topic) && !internal.has(sub.topic)) connection.unlisten(sub.topic);
  };

  return {
    ready: connection.ready,
    subscriberCount: () => topics.count,
    connected: () => connection.connected(),
    subscribe(topic) {
      const at = topic.indexOf("@");
      const base = at < 0 ? topic : topic.slice(0, at);
      const isCore = isCoreTopic(base);
      if (!isCore) {
        checkChannelTopic(topic);
        if (topics.channelAdded(topic) && !internal.has(topic)) connection.listen(topic);
        return topics.add(topic, releasedChannel);
      }
      if (at < 0) return topics.add(topic, released);
      const field = fieldOf(base);
      const cursor = topic.slice(at + 1);
      parseCursor(cursor, field);
      return new ResumingSubscription(topics.add(base, released), cursor, (from) => replayPage(query, base, parseCursor(from, field) ?? 0, field));
    },
    async close() {
      clearInterval(sweep);
      alerts.close();
      topics.endAll();
      await connection.close();
    },
  };
}

type LiveQuery = Parameters<typeof replayPage>[0];

const SEQUENCE_EVERY_MS = 1500;

const FIELD_OF_CHANNEL: Record<string, string> = {
  [LIVE_CHANNEL_NAMES.balance]: "hubBalanceAlert",
  [LIVE_CHANNEL_NAMES.put]: "hubPutAlert",
  [LIVE_CHANNEL_NAMES.bet]: "hubBetAlert",
  [LIVE_CHANNEL_NAMES.chat]: "hubChatAlert",
};
const fieldOf = (topic: string) => FIELD_OF_CHANNEL[topic.split(":")[0]!] ?? topic;

function notificationHandler(topics: Topics, internal: Map<string, InternalChannel>, alerts: AlertLog, log: Logger) {
  return (msg: pg.Notification) => {
    const { channel, payload = "" } = msg;
    if (channel === LOG_CHANNEL.pending) return alerts.sequence();
    if (channel === LOG_CHANNEL.sequenced) return alerts.onSequenced(payload);
    // An internal channel is also a plugin's to subscribe to, as any channel.
    internal.get(channel)?.onNotify(payload);
    if (!CORE_CHANNELS.includes(channel)) return topics.publish(channel, payload);
    let data: Record<string, unknown>;
    try {
      data = JSON.parse(payload) as Record<string, unknown>;
    } catch {
      log.warn({ channel, payload: payload.slice(0, 200) }, "ignored a live notification whose payload is not JSON");
      return;
    }
    routeCoreAlert(channel, data, topics.publish, topics.chat, alerts.lastCursor());
  };
}
