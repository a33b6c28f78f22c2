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

