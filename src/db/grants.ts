/**
 * What GraphQL (the role app_postgraphile) cannot use in the schemas of
 * extraPgSchemas, found at start and logged as warnings with the statement
 * that fixes each: a table created by a user's migration without its grants
 * otherwise shows up only as a failed request.
 *
 * Tables the schema hides on purpose (smart comment `@omit` or
 * `@behavior -*`) are left alone, and so are their sequences.
 */
import pg from "pg";
import type { Logger } from "../logger.js";
import { queryFile } from "./query-files.js";

export interface GrantProblem {
  /** schema.name of the object. */
  object: string;
  kind: "schema" | "table" | "sequence";
  /** What is wrong, in a few words. */
  problem: string;
  /** The SQL to run (as the owner or a superuser) to fix it. */
  fix: string;
}

const ROLE = "app_postgraphile";
const q = (schema: string, name?: string) => (name === undefined ? pg.escapeIdentifier(schema) : `${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(name)}`);

/** One query for all the schemas: each relation with what app_postgraphile may do with it. */
const RELATIONS = queryFile("grants-relations");

interface Row {
  schema: string;
  name: string;
  kind: string;
  can_use: boolean;
  can_insert: boolean;
  rls: boolean;
  has_policy: boolean;
  has_user: boolean;
  /** casino_id and experience_id, when the table has them. */
  scope_columns: string[];
  comment: string;
  owner_table: string | null;
  owner_comment: string;
  owner_insert: boolean;
}

/** The smart comments that take a table out of the generated API. */
const hidden = (comment: string) => /^\s*@(omit|behavior\s+-\*)\s*$/m.test(comment);

/** The policy of the hub's pattern: the session's player, in its casino and experience when the table records them; operators see all. */
function policyFor(row: Row): string {
  const own = ["user_id = hub_hidden.current_user_id()", ...row.scope_columns.map((c) => `${c} = hub_hidden.current_${c.slice(0, -3)}_id()`)];
  return `CREATE POLICY ${pg.escapeIdentifier(`select_${row.name}`)} ON ${q(row.schema, row.name)} FOR SELECT TO ${ROLE} USING (hub_hidden.is_operator() OR (${own.join(" AND ")}));`;
}

function problemsOf(row: Row): GrantProblem[] {
  const object = `${row.schema}.${row.name}`;
  const name = q(row.schema, row.name);
  if (row.kind === "S") {
    // A sequence matters when GraphQL may insert into its table (or it belongs to none).
    const needed = row.owner_table === null || (row.owner_insert && !hidden(row.owner_comment));
    if (!needed || row.can_use) return [];
    return [{ object, kind: "sequence", problem: `${ROLE} cannot use the sequence`, fix: `GRANT USAGE ON SEQUENCE ${name} TO ${ROLE};` }];
  }
  if (hidden(row.comment)) return [];
  const problems: GrantProblem[] = [];
  if (!row.can_use) problems.push({ object, kind: "table", problem: `${ROLE} cannot read the table`, fix: `GRANT SELECT ON ${name} TO ${ROLE};` });
  if (row.has_user && (row.kind === "r" || row.kind === "p")) {
    if (!row.rls) {
      problems.push({
        object,
        kind: "table",
        problem: "the table has a user column but no row-level security, so every player can read every player's rows",
        fix: `ALTER TABLE ${name} ENABLE ROW LEVEL SECURITY;${row.has_policy ? "" : ` ${policyFor(row)}`}`,
      });
    } else if (!row.has_policy) {
      problems.push({ object, kind: "table", problem: `the table has row-level security but no policy, so ${ROLE} sees none of its rows`, fix: policyFor(row) });
    }
  }
  return problems;
}

/** The problems of the schemas (in order: each schema, then its objects by name). */
export async function findGrantProblems(pool: Pick<pg.Pool, "query">, schemas: readonly string[]): Promise<GrantProblem[]> {
  if (schemas.length === 0) return [];
  const problems: GrantProblem[] = [];
  const { rows: missing } = await pool.query<{ schema: string }>(
    `select s as schema from unnest($1::text[]) s
      where exists (select 1 from pg_namespace where nspname = s) and not has_schema_privilege($2, s, 'USAGE')`,
    [schemas, ROLE],
  );
  for (const { schema } of missing) {
    problems.push({ object: schema, kind: "schema", problem: `${ROLE} has no USAGE on the schema, so nothing in it can be read`, fix: `GRANT USAGE ON SCHEMA ${q(schema)} TO ${ROLE};` });
  }
  const { rows } = await pool.query<Row>(RELATIONS, [schemas, ROLE]);
  for (const row of rows) problems.push(...problemsOf(row));
  return problems;
}

/** Log each problem as a warning naming the object and the statement to run. */
export async function warnAboutGrants(pool: Pick<pg.Pool, "query">, schemas: readonly string[], log: Logger): Promise<GrantProblem[]> {
  let problems: GrantProblem[];
  try {
    problems = await findGrantProblems(pool, schemas);
  } catch (error) {
    // A check, not a step of the start: the server runs without it.
    log.warn({ err: error }, "could not check what app_postgraphile may use in extraPgSchemas");
    return [];
  }
  for (const p of problems) {
    log.warn({ object: p.object, kind: p.kind, fix: p.fix }, `grants for GraphQL: ${p.kind} ${p.object}: ${p.problem}. Run: ${p.fix}`);
  }
  return problems;
}
