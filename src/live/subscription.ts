/** What a topic's registry hands events to. */
export interface Subscriber {
  push(event: unknown): void;
  end(): void;
}

/**
 * One subscriber's events, as the async iterator grafast reads. A class, not
 * closures: an idle subscription lives as long as its socket, and ten
 * thousand of them are ten thousand of whatever each one holds. The queue
 * exists only while events wait to be read.
 */
export class TopicSubscription implements Subscriber, AsyncIterableIterator<unknown> {
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


const cursorOfEvent = (event: unknown): string => String((event as { cursor?: unknown } | null)?.cursor ?? "");

/** Loads the events after a cursor, a page at a time. */
export type LoadPage = (after: string) => Promise<{ events: unknown[]; more: boolean }>;

/**
 * A subscription resumed after a cursor: the live topic is subscribed first
 * (its events wait in its queue), then what the log holds after the cursor is
 * delivered, a page at a time, then the live events past the last one
 * replayed. Cursors are fixed-width, so comparing them as strings drops
 * exactly the duplicates.
 */
export class ResumingSubscription implements AsyncIterableIterator<unknown> {
  private pending: unknown[] = [];
  private more = true;
  private last: string;

  constructor(
    private readonly live: TopicSubscription,
    after: string,
    private readonly load: LoadPage,
  ) {
    this.last = after;
  }

  async next(): Promise<IteratorResult<unknown>> {
    while (this.pending.length === 0 && this.more) {
      try {
        const page = await this.load(this.last);
        this.pending = page.events;
        this.more = page.more;
      } catch (error) {
        this.more = false;
        this.live.end();
        throw error;
      }
      if (this.pending.length > 0) this.last = cursorOfEvent(this.pending[this.pending.length - 1]);
    }
    if (this.pending.length > 0) return { value: this.pending.shift(), done: false };
    for (;;) {
      const result = await this.live.next();
      if (result.done) return result;
      const cursor = cursorOfEvent(result.value);
      if (cursor > this.last) {
        this.last = cursor;
        return result;
      }
    }
  }

  return(): Promise<IteratorResult<unknown>> {
    this.more = false;
    this.pending = [];
    return this.live.return();
  }

  throw(error?: unknown): Promise<IteratorResult<unknown>> {
    this.more = false;
    this.pending = [];
    return this.live.throw(error);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}
