import createDebug from "debug";
import type { PgExecutor, WithPgClient } from "postgraphile/@dataplan/pg";
import { markOneStatement } from "../src/db/one-statement-executor.js";

interface ExecutorContext {
  withPgClient: WithPgClient;
  pgSettings: Record<string, string | undefined> | null;
}
type Execute = (this: PgExecutor, context: ExecutorContext, ...rest: unknown[]) => Promise<unknown>;
type ExecuteMutation = (this: PgExecutor, options: { context: ExecutorContext }) => Promise<unknown>;
/** Where the executor keeps a request's cache of query results, which a mutation clears. */
type ExecutorCache = { reset(): void } | undefined;

/**
 * @dataplan/pg's executor runs each statement it builds itself (a plan's
 * select, a mutation's insert, update or delete) through two methods whose
 * callback sends that one statement and returns its result: nothing before it,
 * nothing after it. Their callbacks are marked as such on the way to the
 * withPgClient; nothing else about the call changes. Every other use of
 * withPgClient (plugins' withPgClient steps, transactions, cursors) is
 * unmarked and keeps the general path, which sends the commit only once the
 * callback is done.
 *
 * The two methods are replaced on the executor objects of one schema's
 * registry (one server's), never on PgExecutor's prototype: another schema in
 * the process, the hub's or not, keeps @dataplan/pg's own.
 *
 * With DEBUG naming @dataplan/pg:PgExecutor:explain, the executor sends an
 * EXPLAIN after the statement, so the routing is off while that is enabled.
 *
 * These are @dataplan/pg's private members (`_execute`, `executeMutation`,
 * `$$cache`), kept because one round trip instead of two is worth it
 * (bench/results/private-internals.md). If a later @dataplan/pg renames
 * either method, start-up fails here; test/private-internals.test.ts fails
 * when the installed version's code of the two methods or of their callers
 * differs from the code this was written against.
 */
const explainDebug = createDebug("@dataplan/pg:PgExecutor:explain");

export function routeOneStatementCalls(executor: PgExecutor): void {
  const own = executor as unknown as { _execute: Execute; executeMutation: ExecuteMutation };
  if (Object.hasOwn(own, "_execute")) return;
  const execute = own._execute;
  const executeMutation = own.executeMutation;
  if (typeof execute !== "function" || typeof executeMutation !== "function") {
    throw new Error("@dataplan/pg's PgExecutor no longer has _execute and executeMutation; adapters/dataplan-pg-executor.ts must follow the new version.");
  }
  // Each is handed a context of its own with the marking withPgClient: a plain
  // object of the two fields they read, cheaper than one inheriting from the
  // request's context.
  own._execute = function (context, ...rest) {
    if (explainDebug.enabled) return execute.call(this, context, ...rest);
    return execute.call(this, marking(context), ...rest);
  };
  own.executeMutation = async function (options) {
    if (explainDebug.enabled) return executeMutation.call(this, options);
    const result = await executeMutation.call(this, { ...options, context: marking(options.context) });
    // What the original does after a mutation, on the request's own context:
    // the request's cached query results may be stale now.
    (options.context as unknown as Record<symbol, ExecutorCache>)[(this as unknown as { $$cache: symbol }).$$cache]?.reset();
    return result;
  };
}

/** Routes the executors of the schema being built (the registry is the build's own). */
export const OneStatementRoutingPlugin: GraphileConfig.Plugin = {
  name: "HubOneStatementRoutingPlugin",
  version: "0.0.0",
  schema: {
    hooks: {
      build(build) {
        for (const executor of Object.values(build.input.pgRegistry.pgExecutors)) routeOneStatementCalls(executor as PgExecutor);
        return build;
      },
    },
  },
};

function marking(context: ExecutorContext): ExecutorContext {
  const withPgClient = context.withPgClient;
  return {
    withPgClient: (pgSettings, callback) => withPgClient(pgSettings, markOneStatement(callback)),
    pgSettings: context.pgSettings,
  };
}
