/**
 * Indicative figures for deposits and withdrawals (docs/deposits-and-withdrawals.md):
 *
 *   npm run build && node --import tsx bench/transfers.ts [--deposits 2000] [--concurrency 16] [--withdrawals 200]
 *
 * One hub (the test kit's throw-away database, default transfer options) and
 * the simulated casino of the tests, without faults:
 * - push deposits per second: hubRecordDeposit calls, `concurrency` at a time;
 * - withdrawal latency: from sending hubWithdraw to hub.withdrawal reading
 *   COMPLETED (checked every 2 ms), one withdrawal at a time; p50 and p99.
 */
import { benchArgs } from "./lib/args.js";
import { startTestServer } from "../dist/src/test-kit/index.js";
import { startSimCasino } from "../test/helpers/sim-casino.js";
import { addSimCasino, ok } from "../test/helpers/transfers.js";

const USAGE = "Usage: npm run build && node --import tsx bench/transfers.ts [--deposits 2000] [--concurrency 16] [--withdrawals 200]\n";
const { values } = benchArgs(USAGE, { options: { deposits: { type: "string", default: "2000" }, concurrency: { type: "string", default: "16" }, withdrawals: { type: "string", default: "200" } } });
const DEPOSITS = Number(values.deposits);
const CONCURRENCY = Number(values.concurrency);
const WITHDRAWALS = Number(values.withdrawals);

const casino = await startSimCasino();
const server = await startTestServer({ logLevel: "warn" });
try {
  const { apiKey } = await server.authenticateOperator();
  const operator = { authorization: `apikey:${apiKey}` };
  const casinoId = await addSimCasino(server.url, operator, casino, { poll: false });
  const RECORD = "mutation($i: HubRecordDepositInput!) { hubRecordDeposit(input: $i) { created } }";
  const players = Array.from({ length: 50 }, (_, i) => `bench-${i}`);
  for (const p of players) casino.fund(p, "BTC", 1_000_000_000);
  const ids = Array.from({ length: DEPOSITS }, (_, i) => ({ uname: players[i % players.length]!, id: casino.deposit(players[i % players.length]!, "BTC", 1000) }));
  // Warm-up: the first of each player creates the user and the experience.
  for (const { uname, id } of ids.slice(0, players.length)) await ok(server.url, operator, RECORD, { i: { casinoId, mpTransferId: id, uname, experience: "main", currencyKey: "BTC", amount: 1000 } });
  const rest = ids.slice(players.length);
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < rest.length) {
        const { uname, id } = rest[next++]!;
        await ok(server.url, operator, RECORD, { i: { casinoId, mpTransferId: id, uname, experience: "main", currencyKey: "BTC", amount: 1000 } });
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  console.log(`push deposits: ${rest.length} in ${seconds.toFixed(2)} s = ${(rest.length / seconds).toFixed(0)} deposits/s (concurrency ${CONCURRENCY})`);

  const { rows } = await server.dbPool.query<{ id: string; experience_id: string }>(
    "select u.id, e.id as experience_id from hub.user u join hub.experience e on e.casino_id = u.casino_id and e.name = 'main' where u.casino_id = $1 and u.uname = $2",
    [casinoId, players[0]],
  );
  const { token } = await server.authenticate(rows[0]!.id, rows[0]!.experience_id);
  const player = { authorization: `session:${token}` };
  const latencies: number[] = [];
  for (let i = 0; i < WITHDRAWALS; i++) {
    const t0 = performance.now();
    const { hubWithdraw } = await ok(server.url, player, "mutation { hubWithdraw(input: { currencyKey: \"BTC\", amount: 1 }) { withdrawalRequest { id } } }");
    for (;;) {
      const { rows } = await server.dbPool.query<{ status: string }>("select status from hub.withdrawal where withdrawal_request_id = $1", [hubWithdraw.withdrawalRequest.id]);
      if (rows[0]!.status === "COMPLETED") break;
      await new Promise((r) => setTimeout(r, 2));
    }
    latencies.push(performance.now() - t0);
  }
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]!.toFixed(1);
  console.log(`slow (> 250 ms): ${latencies.filter((l) => l > 250).length} of ${latencies.length}`);
  console.log(`withdrawal latency (hubWithdraw sent → COMPLETED recorded), ${WITHDRAWALS} one at a time: p50 ${pct(50)} ms, p99 ${pct(99)} ms, max ${latencies[latencies.length - 1]!.toFixed(1)} ms`);
} finally {
  await server.stop();
  await casino.close();
}
