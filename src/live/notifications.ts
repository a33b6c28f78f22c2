import type pg from "pg";
import type { Logger } from "../logger.js";
import { HubError } from "../errors.js";
import { ChatRooms, CORE_CHANNELS, isCoreTopic, reannounceBalances, routeCoreAlert } from "./core-alerts.js";
import { openListenConnection } from "./listen-connection.js";
import { TopicSubscription, type Subscriber } from "./subscription.js";

export { LIVE_CHANNEL, liveTopic, type BalanceAlert, type BetAlert, type ChatAlert, type PutAlert } from "./core-alerts.js";

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
 * core channels; any other topic is a NOTIFY channel name, LISTENed while it
 * has a subscriber, whose events are the notifications' payload strings.
 *
 * Internal channels (credential changes) share the connection.
 *
 * When the connection drops it reconnects with back-off; notifications sent
 * meanwhile are lost, so once back it announces, to every balance subscriber,
 * one alert per currency the player holds: clients refetch and miss nothing;
 * internal channels are told of the gap.
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

const CHANNEL_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

function checkChannelTopic(topic: string): void {
  if (CHANNEL_NAME.test(topic) && !CORE_CHANNELS.includes(topic)) return;
  throw new HubError(
    "HUB_INVALID_ARGUMENT",
    `A subscription topic is a NOTIFY channel name (a letter or _, then letters, digits or _, at most 63) other than the hub's own (${CORE_CHANNELS.join(", ")}); received ${JSON.stringify(topic)}.`,
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

  const onNotification = (msg: pg.Notification) => {
    const { channel, payload = "" } = msg;
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
    routeCoreAlert(channel, data, topics.publish, topics.chat);
  };

  const connection = openListenConnection({
    url,
    applicationName: "hub:live-notifications",
    log,
    channels: () => new Set([...CORE_CHANNELS, ...internal.keys(), ...topics.channels.keys()]),
    onNotification,
    onLost: () => {
      for (const own of internal.values()) own.onGap();
    },
    async onBack(client) {
      for (const own of internal.values()) own.onGap();
      const { subscribers, alerts } = await reannounceBalances(client, topics.byTopic.keys(), topics.publish);
      if (subscribers > 0) log.info({ subscribers, alerts }, "live notifications: listening again; announced every balance to its subscribers");
    },
  });

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
      const isCore = isCoreTopic(topic);
      if (!isCore) {
        checkChannelTopic(topic);
        if (topics.channelAdded(topic) && !internal.has(topic)) connection.listen(topic);
      }
      return topics.add(topic, isCore ? released : releasedChannel);
    },
    async close() {
      topics.endAll();
      await connection.close();
    },
  };
}
