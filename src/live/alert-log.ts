import type pg from "pg";
import type { Logger } from "../logger.js";
import { queryFile } from "../db/query-files.js";
import { ErrorCode } from "../errors.js";
import { clientError } from "../graphql/client-error.js";
import { LIVE_CHANNEL, liveTopic, type ChatRooms, type Publish } from "./core-alerts.js";

/**
 * The alert log (hub_hidden.live_alert, core baseline): triggers insert one row per alert and
 * NOTIFY hub_live_pending; a sequencer (hub_hidden.live_alert_sequence, run by
 * every instance) numbers the committed rows and NOTIFYs hub_live_sequenced;
 * each instance reads the numbered rows in order and publishes them to its
 * subscribers with their cursor. A subscription with `after` replays the rows
 * of its topic from the log first.
 */
export const LOG_CHANNEL = { pending: "hub_live_pending", sequenced: "hub_live_sequenced" } as const;

const CURSOR_DIGITS = 19;
const CURSOR = /^\d{19}$/;

/** The cursor of a sequence number: fixed width, so string order is numeric order. */
export const cursorOf = (seq: number | string): string => String(seq).padStart(CURSOR_DIGITS, "0");

/** A client's `after`: undefined when absent, else its sequence number; BAD_USER_INPUT when malformed. */
export function parseCursor(value: unknown, field: string): number | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value === "string" && CURSOR.test(value)) {
    const seq = Number(value);
    if (Number.isSafeInteger(seq)) return seq;
  }
  const shown = typeof value === "string" ? JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value) : typeof value;
  throw clientError(ErrorCode.BAD_USER_INPUT, `${field}: after must be the cursor of an alert received from this subscription (${CURSOR_DIGITS} digits); received ${shown}.`);
}

type Channel = "balance" | "bet" | "put" | "chat";

export interface LogRow {
  seq: string;
  channel: Channel;
  user_id: string | null;
  casino_id: string | null;
  experience_id: string | null;
  payload: Record<string, unknown>;
}

/** What a subscriber of the row's topic receives. */
const eventOf = (row: LogRow): Record<string, unknown> => ({ ...row.payload, cursor: cursorOf(row.seq) });

/** A logged alert, handed to the in-process topics it concerns. */
export function routeLogRow(row: LogRow, publish: Publish, chat: ChatRooms): void {
  const event = eventOf(row);
  const [u, c, e] = [String(row.user_id), String(row.casino_id), String(row.experience_id)];
  if (row.channel === "balance") publish(liveTopic.balance(u, c, e), event);
  else if (row.channel === "put") publish(liveTopic.put(u, c, e), event);
  else if (row.channel === "bet") {
    publish(liveTopic.bet(), event);
    publish(liveTopic.bet(u), event);
  } else if (row.user_id === null) chat.toRoom(c, e, event, publish);
  else publish(liveTopic.chat(u, c, e), event);
}

/** The log rows a topic receives: its channel and the ids its replay filters on. */
function topicFilter(topic: string): [Channel, string | null, string | null, string | null] {
  const [channel, ...ids] = topic.split(":");
  const none = (id: string | undefined) => (id === undefined || id === "*" ? null : id);
  if (channel === LIVE_CHANNEL.bet) return ["bet", none(ids[0]), null, null];
  if (channel === LIVE_CHANNEL.chat) return ["chat", none(ids[2]), none(ids[0]), none(ids[1])];
  return [channel === LIVE_CHANNEL.balance ? "balance" : "put", none(ids[0]), none(ids[1]), none(ids[2])];
}

const REPLAY = queryFile("live-alert-replay");
const REPLAY_PAGE = 2000;

type Query = <R extends pg.QueryResultRow>(sql: string, params?: unknown[]) => Promise<pg.QueryResult<R>>;

/** A page of a replay: its events in order, and whether more may follow. */
export interface ReplayPage {
  events: Record<string, unknown>[];
  more: boolean;
}

/**
 * A page of the events of a core topic after sequence number `from`, in
 * order. LIVE_CURSOR_EXPIRED when some were pruned; BAD_USER_INPUT for a
 * cursor never given.
 */
export async function replayPage(query: Query, topic: string, from: number, field: string): Promise<ReplayPage> {
  const { rows } = await query<LogRow & { pruned_through: string; last_seq: string }>(REPLAY, [from, ...topicFilter(topic), REPLAY_PAGE]);
  const head = rows[0]!;
  if (Number(head.pruned_through) > from) {
    throw clientError(
      ErrorCode.LIVE_CURSOR_EXPIRED,
      `${field}: the alerts after cursor ${cursorOf(from)} are no longer kept (the hub keeps at least an hour's and the last 10,000): refetch the state, then subscribe without after.`,
    );
  }
  if (Number(head.last_seq) < from) {
    throw clientError(ErrorCode.BAD_USER_INPUT, `${field}: no alert has been given cursor ${cursorOf(from)} yet; after must be a cursor received from this hub's database.`);
  }
  const found = rows.filter((r) => r.seq !== null);
  return { events: found.map(eventOf), more: found.length === REPLAY_PAGE };
}

/**
 * Runs `pass` one at a time; a call during a pass runs one more pass after
 * it, so no wake-up is lost. Answers when the passes it asked for are done.
 */
class Serial {
  private running: Promise<void> | undefined;
  private again = false;
  constructor(private readonly pass: () => Promise<void>) {}

  run(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    const loop = async () => {
      try {
        do {
          this.again = false;
          await this.pass();
        } while (this.again);
      } finally {
        this.running = undefined;
      }
    };
    return (this.running = loop());
  }
}

const READ_PAGE = 1000;
// Ordered by the column, not the text of the same name.
const READ = "select l.seq::text, l.channel, l.user_id, l.casino_id, l.experience_id, l.payload from hub_hidden.live_alert l where l.seq > $1 order by l.seq limit $2";
/**
 * Sequencer passes start at most this often on one instance: under load one
 * pass numbers the alerts of many commits (each pass is a transaction), at
 * the price of this much latency at most; an idle hub sequences at once.
 */
const SEQUENCE_GAP_MS = 10;

/**
 * One instance's side of the log: it sequences when told of pending alerts
 * (and every so often, in case a wake-up was lost), and delivers the
 * sequenced rows it has not delivered yet, in order.
 */
export class AlertLog {
  /** The last sequence number delivered; -1 until read at start. */
  private last = -1;
  private readonly reader = new Serial(() => this.readPass());
  private readonly sequencer = new Serial(() => this.sequencePass());
  private passAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly query: Query,
    private readonly deliver: (row: LogRow) => void,
    /** Whether anyone listens: without subscribers, rows are skipped rather than read. */
    private readonly listened: () => boolean,
    private readonly log: Logger,
  ) {}

  /** The cursor of the last alert delivered (given to raw notifications, which have none of their own). */
  lastCursor(): string {
    return cursorOf(Math.max(this.last, 0));
  }

  /** At the first LISTEN: deliver what is sequenced from now on. */
  async start(client: pg.Client): Promise<void> {
    const { rows } = await client.query<{ last_seq: string }>("select last_seq::text from hub_hidden.live_alert_counter");
    this.last = Number(rows[0]!.last_seq);
    this.sequence();
  }

  /** After a LISTEN gap. Answers whether alerts were pruned before this instance read them (they are lost). */
  async resume(client: pg.Client): Promise<boolean> {
    const { rows } = await client.query<{ pruned_through: string; last_seq: string }>("select pruned_through::text, last_seq::text from hub_hidden.live_alert_counter");
    const pruned = Number(rows[0]!.pruned_through);
    const lost = pruned > this.last;
    if (lost) this.last = pruned;
    await this.upTo(Number(rows[0]!.last_seq));
    this.sequence();
    return lost && this.listened();
  }

  /** Alerts up to `payload` are sequenced. */
  onSequenced(payload: string): void {
    this.upTo(Number(payload));
  }

  /** A pass of the sequencer now, or once SEQUENCE_GAP_MS has passed since the last one began. */
  sequence(): void {
    if (this.closed || this.timer) return;
    const wait = this.passAt + SEQUENCE_GAP_MS - Date.now();
    if (wait <= 0) return void this.runSequencer();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (!this.closed) void this.runSequencer();
    }, wait);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }

  private runSequencer(): Promise<void> {
    return this.sequencer.run().catch((error: unknown) => {
      if (!this.closed) this.log.warn({ err: error }, "live alerts: the sequencer pass failed; the next one retries");
    });
  }

  private read(): Promise<void> {
    return this.reader.run().catch((error: unknown) => {
      if (!this.closed) this.log.warn({ err: error }, "live alerts: reading sequenced alerts failed; the next notification retries");
    });
  }

  /** What to do once alerts up to `seq` are known to be sequenced. */
  private upTo(seq: number): Promise<void> | undefined {
    if (this.last < 0 || !(seq > this.last)) return undefined;
    // Nobody to deliver to: what is sequenced now was before any later subscriber (an `after` replays it).
    if (!this.listened()) return void (this.last = seq);
    return this.read();
  }

  private async sequencePass(): Promise<void> {
    this.passAt = Date.now();
    const { rows } = await this.query<{ last: string }>("select hub_hidden.live_alert_sequence()::text as last");
    await this.upTo(Number(rows[0]!.last));
  }

  private async readPass(): Promise<void> {
    if (this.last < 0) return;
    for (;;) {
      const { rows } = await this.query<LogRow>(READ, [this.last, READ_PAGE]);
      for (const row of rows) {
        // Skipped meanwhile (no subscribers): never deliver behind the mark.
        if (Number(row.seq) <= this.last) continue;
        this.last = Number(row.seq);
        this.deliver(row);
      }
      if (rows.length < READ_PAGE) return;
    }
  }
}
