/**
 * The fleet scenario's data and verdicts: the players it seeds (plain SQL and
 * the hub's credential helpers on the superuser connection, chains made
 * through GraphQL as a frontend makes them), and the checks it runs against
 * the database once the load has stopped. What the hub stores is read
 * directly: the idempotency records, the alert log, the ledger.
 */
import type pg from "pg";
// Internal helpers (not a public sub-path), as the tests use them.
import { createApiKey, createSession, ensurePlayer } from "../../dist/src/auth/credentials.js";
import { RETRY_WITH_KEY, type Bettor, type Shared, type Subscription } from "./fleet-clients.js";

export interface Check {
  name: string;
  ok: boolean;
  detail?: string;
}

const FUNDS = 1e12;

async function createChain(proxyUrl: string, token: string): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    const response = await fetch(`${proxyUrl}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `session:${token}` },
      body: JSON.stringify({ query: "mutation { hubCreateHashChain { hashChain { id } } }" }),
    });
    const body = (await response.json()) as { data?: { hubCreateHashChain?: { hashChain?: { id: string } } }; errors?: unknown };
    const id = body.data?.hubCreateHashChain?.hashChain?.id;
    if (id) return id;
    if (attempt > 5) throw new Error(`hubCreateHashChain failed: ${JSON.stringify(body)}`);
  }
}

export async function seedBettors(pool: pg.Pool, proxyUrl: string, count: number): Promise<{ bettors: Bettor[]; operatorKey: string }> {
  const bettors: Bettor[] = [];
  for (let i = 0; i < count; i++) {
    const name = `fleet-${i}`;
    const { user, casino, experience } = await ensurePlayer(pool, { uname: name });
    const { token } = await createSession(pool, { userId: user.id, casinoId: casino.id, experienceId: experience.id });
    await pool.query("select hub_hidden.credit_balance($1, $2, $3, 'HOUSE', $4, 'fleet', 'fleet funds')", [user.id, casino.id, experience.id, FUNDS]);
    if (i === 0) {
      await pool.query("select hub_hidden.ensure_bankroll($1, 'HOUSE', 0, 'fleet funds', 'fleet')", [casino.id]);
      await pool.query("select hub_hidden.adjust_bankroll($1, 'HOUSE', $2, 'fleet', 'fleet funds')", [casino.id, FUNDS * 10]);
    }
    bettors.push({ name, token, userId: user.id, casinoId: casino.id, experienceId: experience.id, hashChainId: await createChain(proxyUrl, token) });
  }
  const { key } = await createApiKey(pool);
  return { bettors, operatorKey: key };
}

/** Bets stored under a player's idempotency key. */
export async function storedBetCount(pool: pg.Pool, userId: string, key: string): Promise<number> {
  const { rows } = await pool.query<{ n: string }>("select count(*) as n from hub_hidden.idempotency_key where scope = 'user:' || $1 and key = $2", [userId, key]);
  return Number(rows[0]!.n);
}

/** The cursor of the alert log's present end: subscriptions start after it. */
export async function alertStart(pool: pg.Pool): Promise<string> {
  const { rows } = await pool.query<{ cursor: string }>("select lpad(last_seq::text, 19, '0') as cursor from hub_hidden.live_alert_counter");
  return rows[0]!.cursor;
}

/** Sockets each live instance holds, as the instances record them for the rebalance (hub_hidden.instance). */
export async function socketCounts(pool: pg.Pool): Promise<number[]> {
  const { rows } = await pool.query<{ sockets: number }>("select sockets from hub_hidden.instance where seen_at > now() - interval '15 seconds' order by id");
  return rows.map((r) => r.sockets);
}

async function expectedCursors(pool: pg.Pool, channel: string, userId: string | undefined, start: string): Promise<string[]> {
  const { rows } = await pool.query<{ cursor: string }>(
    "select lpad(seq::text, 19, '0') as cursor from hub_hidden.live_alert where channel = $1 and ($2::uuid is null or user_id = $2) and seq > $3::bigint order by seq",
    [channel, userId ?? null, start],
  );
  return rows.map((r) => r.cursor);
}

async function alertChecks(pool: pg.Pool, subs: { sub: Subscription; bettor?: Bettor }[], start: string): Promise<Check[]> {
  const problems: string[] = [];
  let received = 0;
  for (const { sub, bettor } of subs) {
    const expected = await expectedCursors(pool, bettor ? "balance" : "bet", bettor?.userId, start);
    const got = new Set(sub.cursors);
    received += sub.cursors.length;
    const duplicates = sub.cursors.length - got.size;
    const missing = expected.filter((c) => !got.has(c));
    const extra = [...got].filter((c) => !expected.includes(c));
    if (duplicates || missing.length || extra.length || sub.errors.length) {
      const last = sub.cursors[sub.cursors.length - 1];
      problems.push(
        `${sub.name}: ${expected.length} expected, ${sub.cursors.length} received, ${duplicates} duplicates, ${missing.length} missing (${missing.slice(0, 3).join(", ")}; last received ${last}), ${extra.length} unexpected, errors ${sub.errors.slice(0, 2).join("; ")}`,
      );
    }
  }
  return [{ name: "every subscriber received every alert of its topic exactly once (resubscribing with after)", ok: problems.length === 0, detail: problems.length ? problems.slice(0, 5).join(" / ") : `${received} alerts received` }];
}

async function moneyChecks(pool: pg.Pool, shared: Shared, bettors: Bettor[]): Promise<Check[]> {
  const userIds = bettors.map((b) => b.userId);
  const { rows: stored } = await pool.query<{ id: string }>("select id from hub.outcome_bet where user_id = any($1::uuid[])", [userIds]);
  const answered = new Set(shared.bets.values());
  const storedIds = new Set(stored.map((r) => r.id));
  const unanswered = [...storedIds].filter((id) => !answered.has(id));
  const lost = [...answered].filter((id) => !storedIds.has(id));
  const { rows: ledger } = await pool.query<{ mismatched: string }>(
    `select count(*) as mismatched from hub.balance b
      where b.user_id = any($1::uuid[])
        and b.amount <> coalesce((select sum(l.amount_delta) from hub.ledger l where l.account = 'player' and l.user_id = b.user_id
                                    and l.experience_id = b.experience_id and l.currency_key = b.currency_key), 0)`,
    [userIds],
  );
  return [
    {
      name: "no bet answered with a code that says nothing committed was stored",
      ok: shared.committedButRetryable.length === 0,
      detail: shared.committedButRetryable.length ? JSON.stringify(shared.committedButRetryable.slice(0, 5)) : undefined,
    },
    {
      name: "every key retried until answered ended as exactly one bet (stored bets = answered bets)",
      ok: unanswered.length === 0 && lost.length === 0,
      detail: `${storedIds.size} stored, ${answered.size} answered, ${unanswered.length} stored but never answered, ${lost.length} answered but not stored; ${[...shared.attempts.values()].filter((n) => n > 1).length} keys needed a retry`,
    },
    { name: "every balance equals its ledger", ok: Number(ledger[0]!.mismatched) === 0, detail: `${ledger[0]!.mismatched} balances differ` },
  ];
}

function answerChecks(shared: Shared): Check[] {
  const calm = new Set(["warm-up", "rolling restart", "spreading"]);
  const failedCalm = shared.answers.filter((a) => calm.has(a.phase) && a.outcome.kind !== "ok");
  const inCalm = shared.answers.filter((a) => calm.has(a.phase)).length;
  const byCode = new Map<string, number>();
  for (const a of shared.answers) {
    if (a.outcome.kind === "ok") continue;
    const label = `${a.phase}: ${a.outcome.kind === "coded" ? a.outcome.code : a.outcome.kind === "http" ? `HTTP ${a.outcome.status}` : a.outcome.detail}`;
    byCode.set(label, (byCode.get(label) ?? 0) + 1);
  }
  return [
    {
      name: "the rolling restart failed no request",
      ok: failedCalm.length === 0,
      detail: `${failedCalm.length} of ${inCalm} failed${failedCalm.length ? `: ${JSON.stringify(failedCalm.slice(0, 3))}` : ""}`,
    },
    {
      name: "every answer other than a bet carried a code to retry with the key (no refusal, no internal error)",
      ok: shared.answers.every((a) => a.outcome.kind !== "coded" || RETRY_WITH_KEY.has(a.outcome.code)),
      detail: [...byCode].map(([k, n]) => `${k} ×${n}`).join("; ") || "none",
    },
  ];
}

export async function fleetChecks(pool: pg.Pool, shared: Shared, subs: { sub: Subscription; bettor?: Bettor }[], start: string): Promise<Check[]> {
  const bettors = subs.flatMap((s) => (s.bettor ? [s.bettor] : []));
  return [...answerChecks(shared), ...(await moneyChecks(pool, shared, bettors)), ...(await alertChecks(pool, subs, start))];
}
