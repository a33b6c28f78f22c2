import type { QueryResult, QueryResultRow } from "pg";

/** The single row of a result; throws when there are none or several (a bug in the query). */
export function exactlyOneRow<T extends QueryResultRow>(result: QueryResult<T>): T {
  if (result.rows.length !== 1) {
    throw new Error(`Expected exactly one row, got ${result.rows.length}`);
  }
  return result.rows[0] as T;
}

/** The row of a result or undefined; throws when there are several (a bug in the query). */
export function maybeOneRow<T extends QueryResultRow>(result: QueryResult<T>): T | undefined {
  if (result.rows.length > 1) {
    throw new Error(`Expected at most one row, got ${result.rows.length}`);
  }
  return result.rows[0];
}
