/**
 * Postgres CPU per outcome bet, as test/outcome-bet-fairness.test.ts plays most
 * of its bets: makeOutcomeBet on the superuser pool through one server's settle
 * groups, 32 players on 2 casinos at once, every bet checked. It reports bets/s,
 * the CPU of the test kit's Postgres (bench/lib/pg-cpu.ts) and this process's
 * CPU, each per bet: run it on an otherwise idle machine.
 *
 *   npm run build && node --import tsx bench/settle-cost.ts [--bets 12800] [--alone] [--sql FILE]
 *
 * --alone settles every bet in its own statement (no settle groups), as a
 * bet settles without company: the cost of hub_hidden.settle_outcome_bet(_once)
 * rather than of the grouped settle_outcome_bets.
 *
 * --watch opens one operator socket subscribed to hubBetAlert of every player
 * first, and waits until it has received every bet's alert: the cost of live
 * delivery (reading the alert log) is then in the figures.
 *
 * --sql runs FILE on the test database before the bets (for example the
 * constraints of an earlier migration put back), so a change to the money SQL
 * can be measured against what it replaces in alternating runs of one build.
 * The test kit's shared cluster serves it (HUB_TEST_KIT_DIR to choose one).
 */
import fs from "node:fs";
import pg from "pg";
import { defaultPlugins, HubGameConfigPlugin } from "../dist/src/index.js";
import { createCasino, createCurrency, createExperience, createHashChain, createHouseBankroll, createPlayer, createPlayerBalance, startTestServer } from "../dist/src/exports/test.js";
import { makeOutcomeBet } from "../dist/src/exports/hash-chain.js";
import { createSettleGroups } from "../dist/src/fair/outcome-settlement.js";
import { defaultClusterDir } from "../dist/src/test-kit/cluster.js";
import { benchArgs, positiveOption } from "./lib/args.js";
import { postgresCpuSampler } from "./lib/pg-cpu.js";
import { createClient } from "graphql-ws";
import WebSocket from "ws";

const USAGE = "Usage: npm run build && node --import tsx bench/settle-cost.ts [--bets 12800] [--alone] [--watch] [--sql FILE]\n";
const PLAYERS = 32;
const CASINOS = 2;
const OUTCOMES = [
  { weight: 1, profit: 4.9 },
  { weight: 2, profit: 1 },
  { weight: 7, profit: -1 },
];

const { values } = benchArgs(USAGE, { options: { bets: { type: "string", default: "12800" }, alone: { type: "boolean" }, watch: { type: "boolean" }, sql: { type: "string" } } });
const bets = positiveOption(USAGE, "bets", values.bets);
if (bets % PLAYERS !== 0) {
  process.stderr.write(`--bets must be a multiple of ${PLAYERS}, received ${bets}\n\n${USAGE}`);
  process.exit(2);
}

const hub = await startTestServer({
  logLevel: "silent",
  plugins: [...defaultPlugins, HubGameConfigPlugin({ outcomeBetConfigs: { GENERAL: { houseEdge: 0.01, saveOutcomes: false } } })],
});
const superuser = new pg.Pool({ connectionString: hub.superuserDatabaseUrl, max: PLAYERS });
try {
  if (values.sql) await superuser.query(fs.readFileSync(values.sql, "utf8"));
  const casinos = await Promise.all(
    Array.from({ length: CASINOS }, async (_, c) => {
      const casinoId = (await createCasino(hub.dbPool, { name: `settle-cost-${c}` })).id;
      await createCurrency(hub.dbPool, { casinoId, key: "BTC" });
      const experienceId = (await createExperience(hub.dbPool, { casinoId })).id;
      await createHouseBankroll(hub.dbPool, { casinoId, currencyKey: "BTC", amount: 1e12 });
      return { casinoId, experienceId };
    }),
  );
  const perPlayer = bets / PLAYERS;
  const players = await Promise.all(
    Array.from({ length: PLAYERS }, async (_, i) => {
      const { casinoId, experienceId } = casinos[i % CASINOS]!;
      const userId = (await createPlayer(hub.dbPool, { casinoId, uname: `settle-cost-${i}` })).id;
      await createPlayerBalance(hub.dbPool, { userId, experienceId, currencyKey: "BTC", amount: 1e10 });
      const chain = await createHashChain(hub.dbPool, { userId, casinoId, experienceId, maxIteration: perPlayer + 1 });
      return { i, ids: { userId, casinoId, experienceId }, chainId: chain.id };
    }),
  );
  const watcher = values.watch ? await watchBets(hub) : undefined;
  const settleGroups = values.alone ? undefined : createSettleGroups();
  // The shared cluster runs by now (the server above started or joined it).
  const postgresCpuUs = postgresCpuSampler(defaultClusterDir());
  const pg0 = postgresCpuUs();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    players.map(async (p) => {
      for (let k = 0; k < perPlayer; k++) {
        const input = { kind: "GENERAL", wager: 100, currency: "BTC", outcomes: OUTCOMES, hashChainId: p.chainId, clientSeed: `s${p.i}-${k}` };
        const result = await makeOutcomeBet(superuser, p.ids, input, { houseEdge: 0.01, saveOutcomes: false }, undefined, settleGroups);
        if (result.__typename !== "HubMakeOutcomeBetSuccess") throw new Error(`bet ${k} of player ${p.i} answered ${result.__typename}`);
      }
    }),
  );
  await watcher?.received(bets);
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const pgMs = (postgresCpuUs() - pg0) / 1000;
  const load = fs.readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  process.stdout.write(
    `${bets} bets in ${(ms / 1000).toFixed(1)} s (${((bets / ms) * 1000).toFixed(0)} bets/s); Postgres CPU ${(pgMs / bets).toFixed(3)} ms a bet; ` +
      `this process ${((cpu.user + cpu.system) / 1000 / bets).toFixed(3)} ms a bet; load ${load}${values.alone ? "; alone" : ""}${values.watch ? "; watched" : ""}${values.sql ? `; with ${values.sql}` : ""}\n`,
  );
  watcher?.close();
} finally {
  await superuser.end();
  await hub.stop();
}

/** An operator's hubBetAlert subscription of every player, live once a probe's alert arrives; counts the other players' alerts. */
async function watchBets(server: Awaited<ReturnType<typeof startTestServer>>) {
  const { apiKey } = await server.authenticateOperator();
  const probe = await createPlayer(server.dbPool, { casinoId: server.playgroundCasinoId, uname: "settle-cost-watch" });
  const experienceId = (await createExperience(server.dbPool, { casinoId: server.playgroundCasinoId })).id;
  await createPlayerBalance(server.dbPool, { userId: probe.id, experienceId, currencyKey: "HOUSE", amount: 1e6 });
  const client = createClient({ url: `${server.url.replace(/^http/, "ws")}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: `apikey:${apiKey}` } });
  let [count, probes] = [0, 0];
  let wanted = Infinity;
  let reached = () => {};
  client.subscribe<{ hubBetAlert: { userId: string } }>(
    { query: "subscription { hubBetAlert { userId cursor } }" },
    {
      next: ({ data }) => {
        if (data?.hubBetAlert.userId === probe.id) probes++;
        else if (++count >= wanted) reached();
      },
      error: (e) => console.error(e),
      complete() {},
    },
  );
  while (probes === 0) {
    await server.dbPool.query(`begin; select hub_hidden.ledger_begin('bench', 'bench', 'probe', gen_random_uuid()); update hub.balance set amount = amount - 1 where user_id = '${probe.id}'; commit;`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    received: (n: number) => new Promise<void>((resolve) => ((wanted = n), (reached = resolve), count >= n && resolve())),
    close: () => void client.dispose(),
  };
}
