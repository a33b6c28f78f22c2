/**
 * An oracle for "no secret is stored", independent of the product's code: it
 * reads every column of every table of the hub's schemas (and any other user
 * schema) and looks for a secret in every form it could have been written
 * in: as text, as its UTF-8 bytes, in hex and in base64 / base64url, and for
 * each also any 16-character piece of it (a secret cut to fit a column is
 * still a leak). bytea values are searched as bytes, not as Postgres's hex
 * rendering of them. SHA-256 is computed here with node:crypto, never with
 * the product's own digest function.
 */
import { createHash } from "node:crypto";
import type pg from "pg";

export const sha256 = (text: string): Buffer => createHash("sha256").update(text, "utf8").digest();

/** Every value of every column of every table outside the system schemas, as text and (for bytea) as bytes. */
export async function dumpDatabase(pool: pg.Pool): Promise<{ text: string[]; bytes: Buffer[]; tables: string[] }> {
  const { rows: columns } = await pool.query<{ schema: string; table: string; column: string; type: string }>(
    `select c.table_schema as schema, c.table_name as table, c.column_name as column, c.data_type as type
       from information_schema.columns c
       join information_schema.tables t on t.table_schema = c.table_schema and t.table_name = c.table_name
      where t.table_type = 'BASE TABLE' and c.table_schema not in ('pg_catalog', 'information_schema') and c.table_schema not like 'pg_toast%'
      order by 1, 2, c.ordinal_position`,
  );
  const text: string[] = [];
  const bytes: Buffer[] = [];
  const tables = new Set<string>();
  for (const { schema, table, column, type } of columns) {
    tables.add(`${schema}.${table}`);
    const ident = (s: string) => `"${s.replace(/"/g, '""')}"`;
    const source = `${ident(schema)}.${ident(table)}`;
    if (type === "bytea") {
      const { rows } = await pool.query<{ v: Buffer | null }>(`select ${ident(column)} as v from ${source}`);
      for (const { v } of rows) if (v) bytes.push(v);
    } else {
      const { rows } = await pool.query<{ v: string | null }>(`select ${ident(column)}::text as v from ${source}`);
      for (const { v } of rows) if (v !== null) text.push(v);
    }
  }
  return { text, bytes, tables: [...tables] };
}

/** The forms a secret could be stored in, as byte strings to look for. */
function needles(secret: string | Buffer): Buffer[] {
  const raw = typeof secret === "string" ? Buffer.from(secret, "utf8") : secret;
  const forms = [raw, Buffer.from(raw.toString("hex")), Buffer.from(raw.toString("hex").toUpperCase()), Buffer.from(raw.toString("base64")), Buffer.from(raw.toString("base64url"))];
  if (typeof secret === "string") forms.push(Buffer.from(secret.toLowerCase()), Buffer.from(secret.toUpperCase()), Buffer.from(secret.replace(/-/g, "")));
  const pieces: Buffer[] = [];
  for (const form of forms) {
    // Without padding: base64 of the whole secret ends in "=" where a cut copy would not.
    const f = Buffer.from(form.toString("latin1").replace(/=+$/, ""), "latin1");
    if (f.length <= 16) pieces.push(f);
    else for (let i = 0; i + 16 <= f.length; i++) pieces.push(f.subarray(i, i + 16));
  }
  return pieces;
}

/** Where the secret (or a 16-character piece of it, in any form) was found, or [] when nowhere. */
export function findSecret(dump: { text: string[]; bytes: Buffer[] }, secret: string | Buffer): string[] {
  const found: string[] = [];
  const haystacks = [...dump.text.map((t) => Buffer.from(t, "utf8")), ...dump.bytes];
  for (const needle of needles(secret)) {
    for (const hay of haystacks) {
      if (hay.includes(needle)) {
        found.push(`${needle.toString("latin1")} in ${hay.toString("latin1").slice(0, 80)}`);
        break;
      }
    }
    if (found.length >= 3) break;
  }
  return found;
}
