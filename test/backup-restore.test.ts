/**
 * Backups (docs/deployment.md, "Backups and restore"): pg_dump a database a
 * hub has used (players, balances, bets, the ledger) while the hub runs,
 * pg_restore it into a new database on the same cluster, start a hub on it,
 * and check over HTTP that the balances are intact and that betting goes on
 * (same sessions, same hash chains).
 *
 * The cluster is one of the test's own that pg_dump can dump (test/helpers/own-cluster.ts).
 */
import "./helpers/env.js";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import t from "tap";
import pg from "pg";
import { startAndListen } from "@hubpkg/hub";
import { defaultPlugins, HubGameConfigPlugin } from "../dist/src/index.js";
import { createCasino, createCurrency, createExperience, createHouseBankroll, createPlayer, createPlayerBalance } from "../dist/src/exports/test.js";
import { createSession } from "../dist/src/auth/credentials.js";
import { PG_DUMP, PG_RESTORE, startOwnCluster } from "./helpers/own-cluster.js";
import { gql } from "./helpers/http.js";

const plugins = [...defaultPlugins, HubGameConfigPlugin({ outcomeBetConfigs: { GENERAL: { houseEdge: 0.01, saveOutcomes: true } }, hashChainLength: 1000 })];
const BET = "mutation($input: HubMakeOutcomeBetInput!) { hubMakeOutcomeBet(input: $input) { result { __typename } } }";
const BALANCE = '{ hubCurrentUser { hubBalanceByCurrency(currency: "BTC") { amount } } }';
const betInput = (hashChainId: string, seed: string) => ({ input: { kind: "GENERAL", wager: 100, currency: "BTC", hashChainId, clientSeed: seed, outcomes: [{ weight: 1, profit: 0.98 }, { weight: 1, profit: -1 }] } });

t.test("a dump of a database the hub used restores into a new database, and a hub on it keeps the balances and takes bets", async (t) => {
  const cluster = await startOwnCluster(t, "hub-backup-");
  const admin = new pg.Client({ connectionString: cluster.url("postgres") });
  await admin.connect();
  t.teardown(() => admin.end());
  await admin.query("create database hub");
  const base = { port: 0, handleSignals: false, logLevel: "silent" as const, plugins };
  const first = await startAndListen({ ...base, databaseUrl: cluster.url("hub"), superuserDatabaseUrl: cluster.url("hub") });
  t.teardown(() => first.stop());

  const db = new pg.Pool({ connectionString: cluster.url("hub"), max: 2 });
  const casinoId = (await createCasino(db, { name: "backup" })).id;
  await createCurrency(db, { casinoId, key: "BTC", displayUnitName: "bits", displayUnitScale: 100 });
  const experienceId = (await createExperience(db, { casinoId })).id;
  await createHouseBankroll(db, { casinoId, currencyKey: "BTC", amount: 100_000_000 });
  const players: { header: { authorization: string }; hashChainId: string }[] = [];
  for (let i = 0; i < 3; i++) {
    const userId = (await createPlayer(db, { casinoId, uname: `backup-${i}` })).id;
    await createPlayerBalance(db, { userId, experienceId, currencyKey: "BTC", amount: 100_000 });
    const { token } = await createSession(db, { userId, casinoId, experienceId });
    const header = { authorization: `session:${token}` };
    const chain = await gql(first.url, "mutation { hubCreateHashChain { hashChain { id } } }", {}, header);
    players.push({ header, hashChainId: chain.body.data!.hubCreateHashChain.hashChain.id as string });
  }
  for (let round = 0; round < 5; round++) {
    for (const p of players) t.equal((await gql(first.url, BET, betInput(p.hashChainId, `r${round}`), p.header)).body.data?.hubMakeOutcomeBet.result.__typename, "HubMakeOutcomeBetSuccess", `bet ${round} taken`);
  }
  const balances = async (url: string) => Promise.all(players.map(async (p) => (await gql(url, BALANCE, {}, p.header)).body.data!.hubCurrentUser.hubBalanceByCurrency.amount as number));
  const before = await balances(first.url);
  const counts = async (pool: pg.Pool | pg.Client) =>
    (await pool.query("select (select count(*)::int from hub.outcome_bet) as bets, (select count(*)::int from hub.ledger) as ledger, (select amount::text from hub.bankroll where casino_id = $1) as bankroll", [casinoId])).rows[0];
  const countsBefore = await counts(db);
  await db.end();
  t.equal(countsBefore.bets, 15, "15 bets stored");
  t.ok(countsBefore.ledger > 0, "the ledger has entries");

  // The documented commands, while the hub runs.
  const dump = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "hub-dump-")), "hub.dump");
  t.teardown(() => fs.rmSync(path.dirname(dump), { recursive: true, force: true }));
  execFileSync(PG_DUMP, ["--format=custom", `--file=${dump}`, cluster.url("hub")], { stdio: ["ignore", "ignore", "pipe"] });
  await first.stop();
  await admin.query("create database hub_restored");
  execFileSync(PG_RESTORE, ["--exit-on-error", `--dbname=${cluster.url("hub_restored")}`, dump], { stdio: ["ignore", "ignore", "pipe"] });

  const restored = await startAndListen({ ...base, databaseUrl: cluster.url("hub_restored"), superuserDatabaseUrl: cluster.url("hub_restored") });
  t.teardown(() => restored.stop());
  t.same(await balances(restored.url), before, "every balance as it was, read over HTTP with the same sessions");
  const restoredDb = new pg.Client({ connectionString: cluster.url("hub_restored") });
  await restoredDb.connect();
  t.teardown(() => restoredDb.end());
  t.same(await counts(restoredDb), countsBefore, "bets, ledger and bankroll as they were");
  for (const p of players) t.equal((await gql(restored.url, BET, betInput(p.hashChainId, "after"), p.header)).body.data?.hubMakeOutcomeBet.result.__typename, "HubMakeOutcomeBetSuccess", "betting goes on, on the same hash chain");
  const after = await balances(restored.url);
  t.ok(after.every((amount, i) => amount !== before[i]), "each bet moved its player's balance");
  t.equal((await counts(restoredDb)).bets, 18, "and was stored");
});
