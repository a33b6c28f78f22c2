/**
 * Evidence that a cached identity costs no database round-trip.
 *
 * Method: Postgres's cumulative statistics. Every session lookup is one
 * statement that reads hub.session (by token digest; API keys are looked up
 * in hub.api_key the same way), and nothing else the measured requests do
 * touches that table. So the growth of seq_scan + idx_scan of hub.session in
 * pg_stat_all_tables counts identity lookups exactly, whichever process or
 * pool made them. (hub.api_key is left out: the hub stamps last_used_at of
 * the keys used, in one batched UPDATE every 10 s, which reads it too.) xact_commit + xact_rollback of the `hub` database (every
 * statement the targets send, lookups or not) is reported beside it.
 *
 * A backend publishes its counters when it goes idle, but at most once a
 * second; when it flushed less than a second ago it waits for its idle
 * timeout (PGSTAT_IDLE_INTERVAL, 10 s). So each reading is taken after 11 s
 * without traffic (measured: after 2 s, a burst of lookups was still
 * missing). Our own previous reading is one transaction; it is subtracted.
 *
 *  1. Control: CONTROL_REQUESTS requests, each with a different unknown
 *     session token, on GET /whoami. Each is a cache miss, so the counter must
 *     grow by CONTROL_REQUESTS: this shows the method sees lookups.
 *  2. Cached: N requests on GET /whoami, then N on POST /graphql {__typename},
 *     all with one valid session token (each answer checked: the identity was
 *     found). With the resolver's 1 s cache the counter may grow by about one
 *     per second of traffic (the entry is refreshed when it goes stale), and by
 *     nothing per request.
 */
import { randomBytes } from "node:crypto";
import type pg from "pg";
import { runAmount } from "./load.js";
import { fetchOnce } from "./scenarios.js";
import { newPlayerSession } from "./seed.js";
import type { Target } from "./target.js";
import { sleep } from "./util.js";

const CONTROL_REQUESTS = 50;
const QUIET_MS = 11_000;

export interface IdentityEvidence {
  target: string;
  control: { requests: number; lookups: number; transactions: number };
  cached: { requests: number; seconds: number; lookups: number; transactions: number; bad: number };
}

async function counters(pool: pg.Pool): Promise<{ lookups: number; transactions: number }> {
  const { rows } = await pool.query<{ lookups: string; transactions: string }>(
    `select (select coalesce(sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0)), 0)
               from pg_stat_all_tables where relid = 'hub.session'::regclass) as lookups,
            (select xact_commit + xact_rollback from pg_stat_database where datname = current_database()) as transactions`,
  );
  return { lookups: Number(rows[0]!.lookups), transactions: Number(rows[0]!.transactions) };
}

async function quietCounters(pool: pg.Pool) {
  await sleep(QUIET_MS);
  return counters(pool);
}

export async function identityEvidence(target: Target, pool: pg.Pool, requests: number, connections: number): Promise<IdentityEvidence> {
  const player = await newPlayerSession(pool, `bench-identity-${target.name}`);
  const unknownTokens = Array.from({ length: CONTROL_REQUESTS }, () => randomBytes(32).toString("base64url"));

  const c0 = await quietCounters(pool);
  for (const token of unknownTokens) {
    const res = await fetchOnce(target.url, { method: "GET", path: "/whoami", headers: { authorization: `session:${token}` } });
    if (res.status !== 200 || res.body !== '{"kind":null}') throw new Error(`${target.name}: /whoami with an unknown token answered ${res.status} ${res.body}`);
  }
  const c1 = await quietCounters(pool);

  const auth = { authorization: `session:${player.token}` };
  const whoami = await runAmount(target.url, { method: "GET", path: "/whoami", headers: auth }, requests, connections, (b) => b === '{"kind":"user"}');
  const graphql = await runAmount(
    target.url,
    { method: "POST", path: "/graphql", headers: { ...auth, "content-type": "application/json" }, body: '{"query":"{__typename}"}' },
    requests,
    connections,
    (b) => b === '{"data":{"__typename":"Query"}}',
  );
  const c2 = await quietCounters(pool);

  return {
    target: target.name,
    // -1: our own reading of the counters is a transaction.
    control: { requests: CONTROL_REQUESTS, lookups: c1.lookups - c0.lookups, transactions: c1.transactions - c0.transactions - 1 },
    cached: {
      requests: whoami.responses + graphql.responses,
      seconds: whoami.seconds + graphql.seconds,
      lookups: c2.lookups - c1.lookups,
      transactions: c2.transactions - c1.transactions - 1,
      bad: whoami.bad + graphql.bad,
    },
  };
}
