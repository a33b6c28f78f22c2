/** What the transfer tests share: setting a casino up through GraphQL, and checking the books. */
import pg from "pg";
import { gql } from "./http.js";
import type { SimCasino } from "./sim-casino.js";

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Small intervals: every fault is retried within a fraction of a second. */
export const FAST_TRANSFERS = {
  pollIntervalMs: 20,
  casinoPollIntervalMs: 40,
  requestTimeoutMs: 1000,
  backoffBaseMs: 30,
  backoffMaxMs: 250,
  clockSkewMs: 0,
};

export async function waitFor<T>(what: string, timeoutMs: number, fn: () => Promise<T | undefined | false>): Promise<T> {
  const started = Date.now();
  let last: unknown;
  for (;;) {
    try {
      const value = await fn();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms${last ? ` (last error: ${String(last)})` : ""}`);
    await sleep(50);
  }
}

/** A GraphQL call that must succeed: returns data, throws with the errors otherwise. */
export async function ok<T = any>(url: string, headers: Record<string, string>, query: string, variables?: Record<string, unknown>): Promise<T> {
  const r = await gql<T>(url, query, variables, headers);
  if (r.body.errors?.length || !r.body.data) throw new Error(`GraphQL failed: ${JSON.stringify(r.body.errors ?? r.body)}`);
  return r.body.data;
}

/** Register the simulated casino with the hub (hubAddCasino with its API key, a currency, transfer settings). */
export async function addSimCasino(url: string, operator: Record<string, string>, casino: SimCasino, opts: { name?: string; poll?: boolean; currency?: string; takeRequests?: boolean } = {}): Promise<string> {
  const name = opts.name ?? `sim-${Math.random().toString(36).slice(2, 8)}`;
  const { hubAddCasino } = await ok(url, operator, "mutation($i: HubAddCasinoInput!) { hubAddCasino(input: $i) { casinoId } }", {
    i: { name, baseUrl: casino.baseUrl, apiKey: casino.apiKey },
  });
  const casinoId = hubAddCasino.casinoId as string;
  await ok(url, operator, "mutation($i: HubAddCurrencyInput!) { hubAddCurrency(input: $i) { key } }", {
    i: { casinoId, key: opts.currency ?? "BTC", displayUnitName: "bits", displayUnitScale: 100 },
  });
  await ok(url, operator, "mutation($i: HubSetCasinoTransfersInput!) { hubSetCasinoTransfers(input: $i) { casinoId } }", {
    i: { casinoId, poll: opts.poll ?? true, takeRequests: opts.takeRequests ?? false },
  });
  return casinoId;
}

/**
 * The books agree: every balance equals the sum of its ledger entries; per
 * player and currency, the balance equals deposits minus withdrawals and take
 * requests not refunded; the casino's net (what it sent minus what it
 * received) equals the hub's deposits minus completed withdrawals and take
 * requests; nothing is pending.
 */
export async function reconcile(superuserUrl: string, casinoId: string, casino: SimCasino): Promise<{ problems: string[]; pending: number; totals: { deposits: number; withdrawals: number } }> {
  const client = new pg.Client({ connectionString: superuserUrl });
  await client.connect();
  try {
    const problems: string[] = [];
    const { rows: balances } = await client.query<{ uname: string; currency_key: string; amount: number; ledger: number | null }>(
      `select u.uname, b.currency_key, b.amount,
              (select sum(l.amount_delta) from hub.ledger l where l.account = 'player' and l.user_id = b.user_id and l.experience_id = b.experience_id and l.currency_key = b.currency_key) as ledger
         from hub.balance b join hub.user u on u.id = b.user_id where b.casino_id = $1`,
      [casinoId],
    );
    for (const b of balances) if (b.amount !== Number(b.ledger ?? 0)) problems.push(`${b.uname}/${b.currency_key}: balance ${b.amount} ≠ ledger sum ${b.ledger}`);
    const { rows: flows } = await client.query<{ uname: string; currency_key: string; deposits: number; kept: number; completed: number; taken: number; take_completed: number; balance: number | null }>(
      `with p as (
         select user_id, currency_key from hub.deposit where casino_id = $1 union select user_id, currency_key from hub.withdrawal where casino_id = $1
         union select user_id, currency_key from hub.take_request where casino_id = $1)
       select u.uname, p.currency_key,
              coalesce((select sum(amount) from hub.deposit d where d.user_id = p.user_id and d.currency_key = p.currency_key), 0)::float8 as deposits,
              coalesce((select sum(amount) from hub.withdrawal w where w.user_id = p.user_id and w.currency_key = p.currency_key and w.status <> 'CANCELED'), 0)::float8 as kept,
              coalesce((select sum(amount) from hub.withdrawal w where w.user_id = p.user_id and w.currency_key = p.currency_key and w.status = 'COMPLETED'), 0)::float8 as completed,
              coalesce((select sum(reserved_amount) from hub.take_request r where r.user_id = p.user_id and r.currency_key = p.currency_key and r.refunded_at is null), 0)::float8 as taken,
              coalesce((select sum(reserved_amount) from hub.take_request r where r.user_id = p.user_id and r.currency_key = p.currency_key and r.status = 'COMPLETED'), 0)::float8 as take_completed,
              (select sum(amount) from hub.balance b where b.user_id = p.user_id and b.currency_key = p.currency_key)::float8 as balance
         from p join hub.user u on u.id = p.user_id`,
      [casinoId],
    );
    const casinoNet = casino.netToHub();
    let deposits = 0;
    let withdrawals = 0;
    for (const f of flows) {
      deposits += f.deposits;
      withdrawals += f.completed;
      if ((f.balance ?? 0) !== f.deposits - f.kept - f.taken) problems.push(`${f.uname}/${f.currency_key}: balance ${f.balance} ≠ deposits ${f.deposits} − withdrawals ${f.kept} − take requests reserved ${f.taken}`);
      const net = casinoNet.get(`${f.uname}/${f.currency_key}`) ?? 0;
      if (net !== f.deposits - f.completed - f.take_completed) problems.push(`${f.uname}/${f.currency_key}: casino net ${net} ≠ hub deposits ${f.deposits} − completed withdrawals ${f.completed} − completed take requests ${f.take_completed}`);
      casinoNet.delete(`${f.uname}/${f.currency_key}`);
    }
    for (const [k, net] of casinoNet) if (net !== 0) problems.push(`${k}: the casino moved ${net} the hub never recorded`);
    const { rows: pending } = await client.query<{ n: number }>("select count(*)::int as n from hub.transfer_job where casino_id = $1 and status = 'PENDING' and kind not in ('POLL', 'TAKE_POLL')", [casinoId]);
    return { problems, pending: pending[0]!.n, totals: { deposits, withdrawals } };
  } finally {
    await client.end();
  }
}
