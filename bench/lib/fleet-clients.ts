/**
 * The fleet scenario's clients, written as a game frontend would be:
 * players betting `hubMakeOutcomeBet` in a loop with an idempotency key per
 * bet (retried with the same key on the codes docs/errors.md calls safe to
 * retry with one), and subscribers that reconnect with the last cursor they
 * saw (`after`). Every answer is recorded with the phase it fell in, so the
 * scenario can say which requests failed during a rolling restart and which
 * were answered with a retryable code while Postgres restarted.
 */
import { createClient } from "graphql-ws";
import WebSocket from "ws";
import pg from "pg";
import { sleep } from "./util.js";

export const OUTCOME_BET = `mutation Bet($i: HubMakeOutcomeBetInput!) {
  hubMakeOutcomeBet(input: $i) { result { __typename ... on HubMakeOutcomeBetSuccess { bet { id } } ... on HubBadHashChainError { message } ... on HubRiskError { message } } }
}`;
const COIN = [{ weight: 1, profit: 0.98 }, { weight: 1, profit: -1 }];

/** Codes a client retries with the same idempotency key (docs/errors.md, "Retrying money mutations"). */
export const RETRY_WITH_KEY = new Set(["DATABASE_UNAVAILABLE", "SERVER_BUSY", "STATEMENT_TIMEOUT", "TOO_MANY_REQUESTS", "OUTCOME_COMMITTED", "OUTCOME_UNKNOWN"]);
/** Of those, the codes that say the bet did not commit: nothing may be stored under the key when one is answered. */
export const NOTHING_COMMITTED = new Set(["DATABASE_UNAVAILABLE", "SERVER_BUSY", "STATEMENT_TIMEOUT", "TOO_MANY_REQUESTS"]);

export interface Bettor {
  name: string;
  token: string;
  userId: string;
  casinoId: string;
  experienceId: string;
  hashChainId: string;
}

export type Outcome =
  | { kind: "ok"; betId: string }
  | { kind: "coded"; code: string; message: string }
  | { kind: "http"; status: number; body: string }
  | { kind: "transport"; detail: string };

export interface Answer {
  phase: string;
  key: string;
  outcome: Outcome;
}

export interface Shared {
  proxyUrl: string;
  phase: string;
  /** Bettors stop at their next bet. */
  stopping: boolean;
  /** Subscriptions end (set once the last bets' alerts had time to arrive). */
  unsubscribing: boolean;
  answers: Answer[];
  /** Keys answered with a code of NOTHING_COMMITTED whose bet was found stored before the retry. */
  committedButRetryable: { key: string; code: string }[];
  /** Bets answered as successes, by idempotency key. */
  bets: Map<string, string>;
  /** How many times a key was sent. */
  attempts: Map<string, number>;
  /** Direct superuser pool: to look up a key's bet before retrying. */
  pool: pg.Pool;
  /** How the idempotency record of a key is found (set by the scenario from the schema). */
  storedBetCount: (pool: pg.Pool, userId: string, key: string) => Promise<number>;
}

async function betOnce(shared: Shared, b: Bettor, key: string): Promise<Outcome> {
  let response: Response;
  let text: string;
  try {
    response = await fetch(`${shared.proxyUrl}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `session:${b.token}` },
      body: JSON.stringify({ query: OUTCOME_BET, variables: { i: { kind: "GENERAL", wager: 100, currency: "HOUSE", outcomes: COIN, hashChainId: b.hashChainId, clientSeed: "fleet", idempotencyKey: key } } }),
      signal: AbortSignal.timeout(30_000),
    });
    text = await response.text();
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code;
    return { kind: "transport", detail: `${(error as Error).message}${cause ? ` (${cause})` : ""}` };
  }
  let body: { data?: { hubMakeOutcomeBet?: { result?: { __typename: string; bet?: { id: string }; message?: string } } }; errors?: { message: string; extensions?: { code?: string } }[] };
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    return { kind: "http", status: response.status, body: text.slice(0, 300) };
  }
  const error = body.errors?.[0];
  if (error) return { kind: "coded", code: error.extensions?.code ?? "NO_CODE", message: error.message };
  const result = body.data?.hubMakeOutcomeBet?.result;
  if (response.status === 200 && result?.__typename === "HubMakeOutcomeBetSuccess" && result.bet) return { kind: "ok", betId: result.bet.id };
  return { kind: "http", status: response.status, body: text.slice(0, 300) };
}

/** Wait until Postgres answers on the direct pool, then count what is stored under the key. */
async function storedUnder(shared: Shared, b: Bettor, key: string): Promise<number> {
  for (;;) {
    try {
      return await shared.storedBetCount(shared.pool, b.userId, key);
    } catch {
      await sleep(200);
    }
  }
}

/** Bet until told to stop: one key per bet, retried with the same key until it is answered with a bet. */
export async function runBettor(shared: Shared, b: Bettor, thinkMs: number): Promise<void> {
  let n = 0;
  while (!shared.stopping) {
    const key = `${b.name}-${n++}`;
    for (let attempt = 1; ; attempt++) {
      shared.attempts.set(key, attempt);
      const outcome = await betOnce(shared, b, key);
      shared.answers.push({ phase: shared.phase, key, outcome });
      if (outcome.kind === "ok") {
        shared.bets.set(key, outcome.betId);
        break;
      }
      if (outcome.kind === "coded" && !RETRY_WITH_KEY.has(outcome.code)) break; // a refusal: the scenario reports it
      if (outcome.kind === "coded" && NOTHING_COMMITTED.has(outcome.code) && (await storedUnder(shared, b, key)) > 0) {
        shared.committedButRetryable.push({ key, code: outcome.code });
      }
      await sleep(100 + Math.random() * 200);
    }
    await sleep(thinkMs);
  }
}

export interface Subscription {
  name: string;
  /** Cursors received, in order (duplicates kept, so the scenario can count them). */
  cursors: string[];
  errors: string[];
  /** Times the socket closed and the client resubscribed. */
  reconnects: number;
  closeCodes: number[];
}

/**
 * A subscription held through the proxy until told to stop: when its socket
 * closes it reconnects and subscribes again with the last cursor it saw, as
 * docs/live-updates.md tells clients to.
 */
export async function holdSubscription(
  shared: Shared,
  sub: Subscription,
  authorization: string,
  field: string,
  query: string,
  startAfter: string,
): Promise<void> {
  let after = startAfter;
  const wsUrl = `${shared.proxyUrl.replace(/^http/, "ws")}/graphql`;
  while (!shared.unsubscribing) {
    const client = createClient({ url: wsUrl, webSocketImpl: WebSocket, retryAttempts: 0, lazy: false, connectionParams: { authorization }, on: { closed: (e) => void sub.closeCodes.push((e as { code: number }).code) } });
    await new Promise<void>((resolve) => {
      const stopWatch = setInterval(() => shared.unsubscribing && finish(), 200);
      const finish = () => {
        clearInterval(stopWatch);
        resolve();
      };
      client.on("closed", finish);
      client.subscribe<Record<string, { cursor: string }>>(
        { query, variables: { after } },
        {
          next: (result) => {
            if (result.errors) sub.errors.push(JSON.stringify(result.errors).slice(0, 300));
            const cursor = result.data?.[field]?.cursor;
            if (cursor) {
              sub.cursors.push(cursor);
              after = cursor;
            }
          },
          error: (error: unknown) => {
            if (Array.isArray(error)) sub.errors.push(JSON.stringify(error).slice(0, 300));
            finish();
          },
          complete: finish,
        },
      );
    });
    await client.dispose();
    if (shared.unsubscribing) break;
    sub.reconnects++;
    await sleep(100 + Math.random() * 400);
  }
}
