import type pg from "pg";

/**
 * The channels the core triggers notified on before the alert log (which
 * they write instead, see alert-log.ts). Still LISTENed: a plugin that sends
 * a raw pg_notify on one is delivered live, without replay.
 */
export const LIVE_CHANNEL = {
  balance: "hub_balance_alert",
  put: "hub_put_alert",
  bet: "hub_bet_alert",
  chat: "hub_chat_alert",
} as const;
export const CORE_CHANNELS: readonly string[] = Object.values(LIVE_CHANNEL);

/** In-process topics of the core alerts, derived from the identity on the server. */
export const liveTopic = {
  balance: (userId: string, casinoId: string, experienceId: string) => `${LIVE_CHANNEL.balance}:${userId}:${casinoId}:${experienceId}`,
  put: (userId: string, casinoId: string, experienceId: string) => `${LIVE_CHANNEL.put}:${userId}:${casinoId}:${experienceId}`,
  /** Every bet, or one player's bets. */
  bet: (userId?: string) => `${LIVE_CHANNEL.bet}:${userId ?? "*"}`,
  /** One chat subscriber: the room's messages and their own mutes. */
  chat: (userId: string, casinoId: string, experienceId: string) => `${LIVE_CHANNEL.chat}:${casinoId}:${experienceId}:${userId}`,
};

/**
 * Every alert's place in its topic: a fixed-width decimal of the alert's
 * sequence number, so string order is numeric order.
 */
export interface Cursored {
  cursor: string;
}

/** What a chat subscriber receives; a message is read afterwards under the subscriber's row-level security. */
export type ChatAlert = ({ kind: "message"; chatMessageId: string } | { kind: "muted" } | { kind: "unmuted" }) & Cursored;

export interface BalanceAlert extends Cursored {
  currencyKey: string;
}
export interface PutAlert extends Cursored {
  currencyKey: string;
  mpTransferId: string;
}
export interface BetAlert extends Cursored {
  betId: string;
  userId: string;
  casinoId: string;
  experienceId: string;
  currencyKey: string;
  amountDelta: number;
  reason: string;
  createdAt: string;
}

export type Publish = (topic: string, event: unknown) => void;

/** Whether a topic is one of the core alerts' (fed from the core channels, never LISTENed by name). */
export const isCoreTopic = (topic: string) => CORE_CHANNELS.some((ch) => topic.startsWith(`${ch}:`));

const CHAT_PREFIX = `${LIVE_CHANNEL.chat}:`;

/**
 * Chat topics by room (casino:experience): a message goes to every
 * subscriber of its room, a mute to the one player.
 */
export class ChatRooms {
  private readonly rooms = new Map<string, Set<string>>();

  private static roomOf(topic: string): string | undefined {
    return topic.startsWith(CHAT_PREFIX) ? topic.slice(CHAT_PREFIX.length, topic.lastIndexOf(":")) : undefined;
  }

  /** A topic got its first subscriber. */
  added(topic: string): void {
    const room = ChatRooms.roomOf(topic);
    if (room === undefined) return;
    let topics = this.rooms.get(room);
    if (!topics) this.rooms.set(room, (topics = new Set()));
    topics.add(topic);
  }

  /** A topic lost its last subscriber. */
  removed(topic: string): void {
    const room = ChatRooms.roomOf(topic);
    if (room === undefined) return;
    const topics = this.rooms.get(room);
    topics?.delete(topic);
    if (topics?.size === 0) this.rooms.delete(room);
  }

  /** An event for every subscriber of a room. */
  toRoom(casinoId: string, experienceId: string, event: unknown, publish: Publish): void {
    for (const topic of this.rooms.get(`${casinoId}:${experienceId}`) ?? []) publish(topic, event);
  }

  route(data: Record<string, unknown>, publish: Publish, cursor: string): void {
    const room = `${String(data.c)}:${String(data.e)}`;
    if (data.t === "message") {
      const event: ChatAlert = { kind: "message", chatMessageId: String(data.id), cursor };
      for (const topic of this.rooms.get(room) ?? []) publish(topic, event);
    } else if (data.t === "muted" || data.t === "unmuted") {
      publish(`${CHAT_PREFIX}${room}:${String(data.u)}`, { kind: data.t, cursor } satisfies ChatAlert);
    }
  }
}

/**
 * A raw notification on a core channel (the format the triggers sent before the alert log), handed
 * to the in-process topics it concerns. It is in no log, so it carries the
 * cursor of the last logged alert delivered before it.
 */
export function routeCoreAlert(channel: string, data: Record<string, unknown>, publish: Publish, chat: ChatRooms, cursor: string): void {
  if (channel === LIVE_CHANNEL.balance) {
    publish(liveTopic.balance(String(data.u), String(data.c), String(data.e)), { currencyKey: String(data.k), cursor } satisfies BalanceAlert);
  } else if (channel === LIVE_CHANNEL.chat) {
    chat.route(data, publish, cursor);
  } else if (channel === LIVE_CHANNEL.put) {
    publish(liveTopic.put(String(data.userId), String(data.casinoId), String(data.experienceId)), {
      currencyKey: String(data.currencyKey),
      mpTransferId: String(data.mpTransferId),
      cursor,
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
      cursor,
    };
    publish(liveTopic.bet(), bet);
    publish(liveTopic.bet(bet.userId), bet);
  }
}

/**
 * After alerts were lost (pruned from the log before this instance read
 * them): one balance alert per currency each subscribed player holds, so
 * clients refetch and miss nothing. Returns the
 * subscribers and alerts counted, for the log.
 */
export async function reannounceBalances(client: pg.Client, topics: Iterable<string>, publish: Publish, cursor: string): Promise<{ subscribers: number; alerts: number }> {
  const keys = [...topics].filter((t) => t.startsWith(`${LIVE_CHANNEL.balance}:`)).map((t) => t.split(":"));
  if (keys.length === 0) return { subscribers: 0, alerts: 0 };
  const { rows } = await client.query<{ user_id: string; casino_id: string; experience_id: string; currency_key: string }>(
    `select b.user_id, b.casino_id, b.experience_id, b.currency_key
       from hub.balance b
       join unnest($1::uuid[], $2::uuid[], $3::uuid[]) as s(u, c, e)
         on b.user_id = s.u and b.casino_id = s.c and b.experience_id = s.e`,
    [keys.map((k) => k[1]), keys.map((k) => k[2]), keys.map((k) => k[3])],
  );
  for (const row of rows) publish(liveTopic.balance(row.user_id, row.casino_id, row.experience_id), { currencyKey: row.currency_key, cursor } satisfies BalanceAlert);
  return { subscribers: keys.length, alerts: rows.length };
}
