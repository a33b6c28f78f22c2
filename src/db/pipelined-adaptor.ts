import type { Socket } from "node:net";
import type pg from "pg";
import {
  createWithPgClient,
  makePgService,
  makeWithPgClientViaPgClientAlreadyInTransaction,
  type PgAdaptorSettings,
} from "postgraphile/adaptors/pg";
import type { PgClient, WithPgClient } from "postgraphile/@dataplan/pg";

/**
 * The GraphQL pool's `withPgClient`, with the transaction prologue pipelined.
 *
 * Every GraphQL request has pgSettings (at least the role), so @dataplan/pg's
 * stock adaptor runs `begin`, then the `set_config` of the settings, then the
 * request's queries, then `commit`, each waiting for the answer to the one
 * before: four round trips to Postgres for a one-query request. On a client in
 * node-postgres's pipeline mode (`pipeline: true` on the pool), this one sends
 * `begin`, the `set_config` and the request's first query back to back and
 * waits once, so the same request takes two round trips (that, then `commit`),
 * and the first goes out in one packet.
 *
 * What stays exactly as in the stock adaptor:
 * - the same statements, in the same order, in one transaction; a query can
 *   never run without the settings: if `set_config` fails, Postgres refuses
 *   every statement after it in the transaction, and the caller gets the
 *   `set_config` error, not the "transaction is aborted" that follows it;
 * - the request's queries go through @dataplan/pg's own client
 *   (`makeWithPgClientViaPgClientAlreadyInTransaction`): one at a time,
 *   prepared-statement cache, notices, and nested transactions as savepoints;
 * - the planner setting the stock adaptor applies once per connection.
 *
 * The superuser variant (plugins' `withSuperuserPgClient`) keeps the stock
 * adaptor. The bench's baseline keeps the stock adaptor throughout.
 */
const SET_CONFIG = "select set_config(el->>0, el->>1, true) from json_array_elements($1::json) el";
/** Prepared once per connection: Postgres parses and plans it once, not on every request. */
const SET_CONFIG_NAME = "hub_set_config";
const configured = new WeakSet<pg.PoolClient>();

export function makePipelinedWithPgClient(pool: pg.Pool): WithPgClient {
  return async function withPgClient<T>(
    pgSettings: Record<string, string | undefined> | null,
    callback: (client: PgClient) => T | Promise<T>,
  ): Promise<T> {
    const settingsJson = pgSettings ? settingsJsonOf(pgSettings) : undefined;

    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      if (!configured.has(client)) {
        configured.add(client);
        // As @dataplan/pg: JIT optimisation costs short queries far more than it saves.
        client.query("set jit_optimize_above_cost = -1").catch(() => undefined);
      }
      if (settingsJson === undefined) return await inTransaction(client, false)(null, callback);

      // One packet instead of three: node-postgres writes each query as it is
      // submitted; held until the callback has submitted its first query (it
      // does so within this turn of the event loop, after a few promise hops).
      corkUntilNextTurn(client);
      const prologue = Promise.all([client.query("begin"), client.query({ name: SET_CONFIG_NAME, text: SET_CONFIG, values: [settingsJson] })]);
      prologue.catch(() => undefined); // awaited below, on success and on failure
      try {
        const result = await inTransaction(client, true)(null, callback);
        await prologue;
        await client.query("commit");
        return result;
      } catch (error) {
        try {
          await client.query("rollback");
        } catch (rollbackError) {
          broken = rollbackError as Error;
        }
        throw await prologue.then(
          () => error,
          (prologueError: unknown) => prologueError,
        );
      }
    } finally {
      // A client that could not even roll back is dropped by the pool, not reused mid-transaction.
      client.release(broken);
    }
  };
}

/**
 * The settings as set_config's JSON argument, or undefined for none. Kept per
 * settings object: the hub hands every request of one identity the same
 * frozen object (pgSettingsFor). A settings object made afresh per request
 * (a user's own context) is serialised each time, as it must be.
 */
const jsonBySettings = new WeakMap<object, string | undefined>();
function settingsJsonOf(pgSettings: Record<string, string | undefined>): string | undefined {
  if (!Object.isFrozen(pgSettings)) return serialise(pgSettings);
  if (jsonBySettings.has(pgSettings)) return jsonBySettings.get(pgSettings);
  const json = serialise(pgSettings);
  jsonBySettings.set(pgSettings, json);
  return json;
}
function serialise(pgSettings: Record<string, string | undefined>): string | undefined {
  const entries: Array<[string, string]> = [];
  for (const key of Object.keys(pgSettings)) {
    const value = pgSettings[key];
    if (value != null) entries.push([key, `${value}`]);
  }
  return entries.length === 0 ? undefined : JSON.stringify(entries);
}

function corkUntilNextTurn(client: pg.PoolClient): void {
  const stream = (client as unknown as { connection?: { stream?: Socket } }).connection?.stream;
  if (!stream || typeof stream.cork !== "function") return;
  stream.cork();
  setImmediate(() => stream.uncork());
}

/** @dataplan/pg's client over a connection whose transaction is ours (already=true) or none (already=false). */
function inTransaction(client: pg.PoolClient, already: boolean): WithPgClient {
  return makeWithPgClientViaPgClientAlreadyInTransaction(client as never, already);
}

/**
 * makePgService with the pipelined withPgClient for the pool (see above) and
 * the stock one for the superuser pool. The pool must be in pipeline mode.
 */
export function makePipelinedPgService(options: Parameters<typeof makePgService>[0] & { pool: pg.Pool }): ReturnType<typeof makePgService> {
  const service = makePgService(options);
  const stock = service.adaptor;
  service.adaptor = {
    ...stock,
    createWithPgClient(settings: PgAdaptorSettings, variant?: "SUPERUSER" | string | null) {
      if (variant === "SUPERUSER") return createWithPgClient(settings, variant);
      return makePipelinedWithPgClient(options.pool);
    },
  } as typeof stock;
  return service;
}
