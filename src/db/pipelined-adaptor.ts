import type { Socket } from "node:net";
import pg from "pg";
import {
  createWithPgClient,
  makePgService,
  makeWithPgClientViaPgClientAlreadyInTransaction,
  type PgAdaptorSettings,
} from "postgraphile/adaptors/pg";
import type { PgClient, WithPgClient } from "postgraphile/@dataplan/pg";
import { isOneStatement } from "./one-statement-executor.js";

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
 * When the callback is known to send exactly one statement (the statements
 * @dataplan/pg builds itself: adapters/dataplan-pg-executor.ts marks their
 * callbacks), `commit` goes in that same packet too:
 * one round trip. The commit's answer is still awaited before the result is
 * returned, so a statement is never reported done that did not commit.
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
    let statement: CommitBehindFirstStatement | undefined;
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
      if (isOneStatement(callback)) statement = new CommitBehindFirstStatement(client);
      try {
        const result = await inTransaction(statement ? statement.client : client, true)(null, callback);
        await prologue;
        await (statement ? statement.commit() : client.query("commit"));
        return result;
      } catch (error) {
        if (statement?.committing) {
          // The transaction is over: Postgres ran the commit that followed the
          // statement (as a rollback, when something before it failed).
          await statement.committing.catch((commitError: unknown) => {
            if (!(commitError instanceof pg.DatabaseError)) broken = commitError as Error;
          });
        } else {
          try {
            await client.query("rollback");
          } catch (rollbackError) {
            broken = rollbackError as Error;
          }
        }
        throw await prologue.then(
          () => error,
          (prologueError: unknown) => prologueError,
        );
      }
    } finally {
      statement?.close();
      // A client whose transaction could not be ended (its rollback or commit failed short of Postgres) is dropped by the pool, not reused mid-transaction.
      client.release(broken);
    }
  };
}

/**
 * The connection as a one-statement callback sees it: its first
 * query is followed at once by `commit`, written in the same packet (the
 * connection is corked until the next turn, and in pipeline mode node-postgres
 * sends a query without waiting for the previous answer). The transaction is
 * then over as soon as that statement is, one round trip for the whole
 * request instead of two. A second query while the call lasts would run after
 * the commit, outside the transaction and without the settings, so it is
 * refused; once the call is over, the object forwards to the connection (a
 * prepared-statement cache of @dataplan/pg keeps the first client it saw, and
 * deallocates through it later).
 *
 * Only what @dataplan/pg's adaptor uses of a node-postgres client is offered.
 */
class CommitBehindFirstStatement {
  /** The commit, once written. */
  committing: Promise<unknown> | undefined;
  private open = true;

  constructor(private readonly real: pg.PoolClient) {}

  /** What the callback is given instead of the connection. */
  get client(): pg.PoolClient {
    return this as unknown as pg.PoolClient;
  }

  query(...args: unknown[]): unknown {
    const send = this.real.query as (...a: unknown[]) => unknown;
    if (!this.open) return send.apply(this.real, args);
    if (this.committing) {
      return Promise.reject(
        new Error("A statement was sent after the one statement of a one-statement withPgClient call; it was refused, since the transaction was already committed."),
      );
    }
    const result = send.apply(this.real, args);
    this.committing = this.real.query("commit");
    this.committing.catch(() => undefined); // awaited by the caller, on success and on failure
    return result;
  }

  get connection(): unknown {
    return (this.real as unknown as { connection: unknown }).connection;
  }

  escapeIdentifier(text: string): string {
    return this.real.escapeIdentifier(text);
  }

  addListener(event: string, listener: (...args: unknown[]) => void): this {
    this.real.addListener(event, listener);
    return this;
  }

  removeListener(event: string, listener: (...args: unknown[]) => void): this {
    this.real.removeListener(event, listener);
    return this;
  }

  /** The commit: the one already written, or (when the callback sent nothing) one sent now. */
  commit(): Promise<unknown> {
    return (this.committing ??= this.real.query("commit"));
  }

  close(): void {
    this.open = false;
  }
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
 * the stock one for the superuser pool. The pool must be in pipeline mode; the
 * preset adds OneStatementRoutingPlugin (adapters/dataplan-pg-executor.ts) with it.
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
