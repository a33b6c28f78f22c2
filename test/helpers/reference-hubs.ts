import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import type { Test } from "tap";
import { startAndListen, defaultPlugins, type RunningServer, type ServerOptions } from "@hubpkg/hub";
import { startTestServer, type TestServer } from "@hubpkg/hub/test";
// The reference plugins, compiled, exactly as a user's server would load them.
import { FortunePlugin } from "../../dist/plugins/fortune.js";
import { CoinflipResolverPlugin } from "../../dist/plugins/coinflip-resolver.js";
import { CoinflipPlanPlugin } from "../../dist/plugins/coinflip-plan.js";
import { CoinflipBetPlugin } from "../../dist/plugins/coinflip-bet.js";
import { makePlayer, type Player } from "./credentials.js";

const MIGRATIONS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../plugins/migrations");

/*
 * Two servers on one database: makeCoinflip exists in a resolver and a plan
 * variant with the same field name, so they cannot share a schema. The second
 * server attaches to the Postgres the first one started.
 *   resolverHub: FortunePlugin, CoinflipResolverPlugin, CoinflipBetPlugin
 *   planHub:     CoinflipPlanPlugin
 */
export interface ReferenceHubs {
  resolverHub: TestServer;
  planHub: RunningServer;
  /** The superuser, for reading and seeding rows. */
  db: pg.Pool;
}

/** Started before the file's tests and stopped after them; the fields are set once t.before has run. */
export function useReferenceHubs(t: Test): ReferenceHubs {
  const hubs = {} as ReferenceHubs;
  t.before(async () => {
    const common: ServerOptions = {
      port: 0,
      logLevel: (process.env.TEST_LOG_LEVEL as "silent" | undefined) ?? "silent",
      handleSignals: false,
      extraPgSchemas: ["app"],
      userDatabaseMigrationsPath: MIGRATIONS,
      // The concurrency and fairness tests batch up to 200 mutations per request as aliases.
      maxQueryAliases: 200,
    };
    // The test kit, as a plugin author uses it; the plan variant is a second hub on the same database.
    hubs.resolverHub = await startTestServer({ ...common, plugins: [...defaultPlugins, FortunePlugin, CoinflipResolverPlugin, CoinflipBetPlugin] });
    hubs.planHub = await startAndListen({
      ...common,
      databaseUrl: hubs.resolverHub.databaseUrl,
      superuserDatabaseUrl: hubs.resolverHub.superuserDatabaseUrl,
      plugins: [...defaultPlugins, CoinflipPlanPlugin],
    });
    hubs.db = new pg.Pool({ connectionString: hubs.resolverHub.superuserDatabaseUrl, max: 4 });
  });
  t.teardown(async () => {
    await hubs.db?.end();
    // The test kit's server drops its database: stop it last.
    await hubs.planHub?.stop();
    await hubs.resolverHub?.stop();
  });
  return hubs;
}

let unique = 0;
const uname = (prefix: string) => `${prefix}-${process.pid}-${++unique}`;

/** A new player of a new (or the named) casino. */
export const referencePlayer = (hubs: ReferenceHubs, prefix: string, opts: { casinoName?: string } = {}) =>
  makePlayer(hubs.resolverHub.superuserDatabaseUrl, uname(prefix), opts);

/** Run `count` async jobs with at most `width` in flight. */
export async function pooled<T>(count: number, width: number, job: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, count) }, async () => {
      while (next < count) {
        const i = next++;
        results[i] = await job(i);
      }
    }),
  );
  return results;
}

/** A casino of its own (so bankroll sums are not disturbed by other tests) with a currency, a bankroll and funded players. */
export async function bettingTable(hubs: ReferenceHubs, opts: { casino: string; players: number; balance: number; bankroll: number; currency?: string }) {
  const currency = opts.currency ?? "CHIPS";
  const players: Player[] = [];
  for (let i = 0; i < opts.players; i++) players.push(await referencePlayer(hubs, `${opts.casino}-p${i}`, { casinoName: opts.casino }));
  const casinoId = players[0]!.casinoId;
  await hubs.db.query("insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale) values ($1, $2, 'chips', 1)", [currency, casinoId]);
  await hubs.db.query("insert into hub.bankroll (casino_id, currency_key, amount) values ($1, $2, $3)", [casinoId, currency, opts.bankroll]);
  for (const p of players) {
    await hubs.db.query("insert into hub.balance (user_id, casino_id, experience_id, currency_key, amount) values ($1, $2, $3, $4, $5)", [
      p.userId,
      p.casinoId,
      p.experienceId,
      currency,
      opts.balance,
    ]);
  }
  return { casinoId, currency, players };
}
