/**
 * Callbacks known to send exactly one statement and nothing after it. Knowing
 * that in advance lets a withPgClient that looks here (the hub's pipelined
 * adaptor) put `commit` on the wire right behind the statement, in the same
 * packet, instead of waiting for the statement's answer before sending it. Any
 * other withPgClient ignores the mark, and a wrapper that wraps the callback
 * (to add statements of its own) loses it, falling back to the general path.
 * Who marks them: adapters/dataplan-pg-executor.ts.
 */
const ONE_STATEMENT = Symbol("hub.oneStatement");

export function markOneStatement<F extends (...args: never[]) => unknown>(callback: F): F {
  (callback as F & { [ONE_STATEMENT]?: true })[ONE_STATEMENT] = true;
  return callback;
}

export function isOneStatement(callback: object): boolean {
  return (callback as { [ONE_STATEMENT]?: true })[ONE_STATEMENT] === true;
}
