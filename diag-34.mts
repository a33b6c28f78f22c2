import "./test/helpers/env.js";
import pg from "pg";
import { startTestServer, createCasino, createCurrency, createExperience, createHouseBankroll, createPlayer, createPlayerBalance } from "@hubpkg/hub/test";
import { dbSettleBet, withPgPoolTransaction } from "@hubpkg/hub/db";
const hub = await startTestServer({ logLevel: "silent" });
const casinoId = (await createCasino(hub.dbPool, { name: "diag" })).id;
const experienceId = (await createExperience(hub.dbPool, { casinoId })).id;
await createCurrency(hub.dbPool, { casinoId, key: "D", displayUnitName: "d", displayUnitScale: 1 });
await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: "D", amount: 1e13 });
const players: string[] = [];
for (let i = 0; i < 50; i++) { const id = (await createPlayer(hub.dbPool, { casinoId, uname: `d${i}` })).id; await createPlayerBalance(hub.dbPool, { userId: id, experienceId, currencyKey: "D", amount: 1e9 }); players.push(id); }
const pool = new pg.Pool({ connectionString: hub.superuserDatabaseUrl, max: 10 });
let n = 0; const end = Date.now() + 8000;
const waits = new Map<string, number>();
const sampler = setInterval(async () => {
  const { rows } = await hub.dbPool.query(`select a.wait_event_type || ':' || a.wait_event || ' ' || coalesce(l.locktype || ' ' || coalesce(l.relation::regclass::text, '') || ' ' || l.mode, '') as w, left(a.query, 60) as q
    from pg_stat_activity a left join pg_locks l on l.pid = a.pid and not l.granted where a.state = 'active' and a.wait_event_type is not null and a.datname = current_database() and a.backend_type = 'client backend'`);
  for (const r of rows) waits.set(`${r.w} | ${r.q}`, (waits.get(`${r.w} | ${r.q}`) ?? 0) + 1);
}, 20);
await Promise.all(players.map(async (userId, i) => {
  while (Date.now() < end) {
    await withPgPoolTransaction(pool, async (c) => { await dbSettleBet(c, { userId, casinoId, experienceId, currencyKey: "D", kind: "diag", wager: 100, payout: (n % 2) * 199, maxPayout: 199 }); await c.query("select 1"); });
    n++;
  }
}));
clearInterval(sampler);
console.log("bets/s", n / 8);
console.log([...waits].sort((a, b) => b[1] - a[1]).slice(0, 15).map(([k, v]) => `${v}\t${k}`).join("\n"));
const { rows } = await hub.dbPool.query("select count(*) from hub_hidden.bankroll_slot");
console.log("slots", rows[0]);
await pool.end(); await hub.stop();
