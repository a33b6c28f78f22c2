/**
 * What a request has committed of money, so that a failure after the commit
 * (the payload's read-back, a lost connection) is answered OUTCOME_COMMITTED
 * rather than as a retryable outage: a client that retried a committed bet
 * without its idempotency key would bet twice. The store is per request
 * (an AsyncLocalStorage entered by the GraphQL execution, src/graphql/committed.ts);
 * outside a request, noting does nothing.
 */
import { AsyncLocalStorage } from "node:async_hooks";

export interface CommittedMoney {
  /** The mutation or game ("hubMakeOutcomeBet", "makeCoinflipBet"). */
  operation: string;
  /** The committed rows' ids by name ({ betId }, { withdrawalRequestId }). */
  ids: Record<string, string>;
  /** The client's idempotency key, when it sent one: a retry with it answers the committed result. */
  idempotencyKey?: string | undefined;
}

const store = new AsyncLocalStorage<CommittedMoney[]>();

/** Run fn with a fresh list of commits for what it starts; the list fills as money commits. */
export function runNotingCommits<T>(commits: CommittedMoney[], fn: () => T): T {
  return store.run(commits, fn);
}

/** Note that money committed for the current request (after the commit, or for a replayed answer). */
export function noteCommitted(note: CommittedMoney): void {
  store.getStore()?.push(note);
}

/** What OUTCOME_UNKNOWN tells the client to do, with or without the key it sent. */
export function outcomeUnknownMessage(operation: string, idempotencyKey: string | undefined): string {
  const retry = idempotencyKey !== undefined
    ? `retry with the same idempotency key (${JSON.stringify(idempotencyKey)}): it answers what committed, or does it once`
    : "if you sent an idempotencyKey, retry with it; otherwise check the player's bets and balance before sending it again (it could move money twice)";
  return `${operation}: the connection to the database was lost while it was committing, so whether it took effect is unknown; ${retry}.`;
}
