import "./helpers/env.js";
import { randomUUID } from "node:crypto";
import path from "node:path";
import t, { type Test } from "tap";
import { gql, gqlOverHttp } from "./helpers/http.js";
import { makeOperator, makePlayer, withPool } from "./helpers/credentials.js";
import { ROOT, startServerProcess, type ServerProcess } from "./helpers/process.js";
import { INTROSPECTION, printType, unwrap, type IntrospectedType, type TypeRef } from "./helpers/schema-model.js";
import { tmpDir } from "./helpers/tmp.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
import { until } from "./helpers/ws.js";

/*
 * Every root field of the demo server's schema (Query and Mutation, found by
 * introspection, so a field added later is covered without editing this test)
 * gets hostile values in each of its argument leaves, one leaf at a time, with
 * plausible values everywhere else so the request gets as deep as it can: NUL
 * characters in every string-like scalar, negative, boundary and huge numbers
 * in every Int and Float. Each case is sent as an anonymous client, a player
 * and an operator. What a client sends must never be answered as a fault of
 * the server: no INTERNAL_SERVER_ERROR, no 5xx, and nothing in the server's
 * own log at warn level or above (the server runs as a child process and its
 * JSON log lines are read back). Every error must also carry a code.
 */

const NUL_STRINGS = ["a\u0000b", "\u0000"];
/** For scalars with a format of their own (UUID, Cursor, Datetime…): text that has none of it. */
const MALFORMED = ["garbage", "99999-99-99T99:99:99Z", "1e999999"];
const BAD_INTS = [-1, -5, 2147483647, -2147483648];
const BAD_FLOATS = [-1, -5, 1e308, -1e308, 5e-324];
/** Scalars whose values travel as strings (UUID, Cursor, Datetime, BigInt…). */
const NUMERIC_SCALARS = new Set(["Int", "Float", "Boolean"]);

interface Ids {
  casinoId: string;
  userId: string;
  experienceId: string;
}

// Two servers, some 7,000 requests to the first: on a loaded machine this can take longer than the default.
t.setTimeout(480_000);

/** The demo server (node dist/server.js), with its log at info, on a database of the test kit's cluster (no initdb). */
async function startDemo(t: Test, env: Record<string, string>): Promise<{ server: ServerProcess; superuserUrl: string }> {
  const database = await sharedClusterDatabase(t);
  // The playground on explicitly: hubCreatePlaygroundSession is one of the fields to drive.
  const server = await startServerProcess({ ...database, HUB_DATA_DIR: tmpDir(t), LOG_LEVEL: "info", HUB_PLAYGROUND: "on", ...env });
  t.teardown(async () => {
    server.child.kill("SIGTERM");
    await server.exited;
  });
  return { server, superuserUrl: database.SUPERUSER_DATABASE_URL };
}

/** A value that passes the scalar's own parsing, chosen by the leaf's name so lookups hit real rows. */
function plausible(scalar: string, name: string, ids: Ids, enumValues?: string[]): unknown {
  if (enumValues) return enumValues[0];
  const lower = name.toLowerCase();
  switch (scalar) {
    case "Int":
      return 1;
    case "Float":
      return 1;
    case "Boolean":
      return true;
    case "UUID":
      if (lower.includes("casino")) return ids.casinoId;
      if (lower.includes("experience")) return ids.experienceId;
      if (lower.includes("user")) return ids.userId;
      return "01890000-0000-7000-8000-000000000000";
    case "Datetime":
      return "2026-01-01T00:00:00Z";
    case "Cursor":
      return null;
    default:
      if (lower.includes("currency") || lower === "key") return "HOUSE";
      if (lower.includes("url")) return "https://fuzz.example";
      return "fuzz";
  }
}

function badValues(scalar: string): unknown[] {
  if (scalar === "Int") return BAD_INTS;
  if (scalar === "Float") return BAD_FLOATS;
  if (NUMERIC_SCALARS.has(scalar)) return [];
  return scalar === "String" || scalar === "ID" ? NUL_STRINGS : [...NUL_STRINGS, ...MALFORMED];
}

interface Leaf {
  /** Path from the root argument, e.g. ["input", "currency"]. */
  path: string[];
  scalar: string;
}

/** Leaves of an argument's type, through input objects (a depth bound stops self-referencing inputs). */
function leavesOf(types: Map<string, IntrospectedType>, ref: TypeRef, at: string[], depth = 0): Leaf[] {
  const named = unwrap(ref);
  if (named.kind === "SCALAR") return [{ path: at, scalar: named.name }];
  if (named.kind !== "INPUT_OBJECT" || depth > 3) return [];
  return (types.get(named.name)!.inputFields ?? []).flatMap((f) => leavesOf(types, f.type, [...at, f.name], depth + 1));
}

/** The required parts of a value of this type, plus the path under test set to `bad`. */
function build(types: Map<string, IntrospectedType>, ref: TypeRef, name: string, ids: Ids, target: string[] | null, bad: unknown): unknown {
  const named = unwrap(ref);
  const type = types.get(named.name)!;
  let value: unknown;
  if (target && target.length === 0) value = bad;
  else if (named.kind === "INPUT_OBJECT") {
    const obj: Record<string, unknown> = {};
    for (const f of type.inputFields ?? []) {
      const onPath = target?.[0] === f.name;
      if (!onPath && f.type.kind !== "NON_NULL") continue;
      obj[f.name] = build(types, f.type, f.name, ids, onPath ? target!.slice(1) : null, bad);
    }
    value = obj;
  } else {
    value = plausible(named.name, name, ids, type.enumValues?.map((e) => e.name));
  }
  return named.list ? [value] : value;
}

/** A GraphQL literal for a JSON value (enum values of the type printed bare). */
function literal(types: Map<string, IntrospectedType>, ref: TypeRef, value: unknown): string {
  if (value === null || value === undefined) return "null";
  const named = unwrap(ref);
  if (Array.isArray(value)) return `[${value.map((v) => literal(types, ref.kind === "NON_NULL" ? ref.ofType!.ofType! : ref.ofType!, v)).join(", ")}]`;
  const type = types.get(named.name)!;
  if (named.kind === "ENUM") return String(value);
  if (named.kind === "INPUT_OBJECT") {
    const fields = type.inputFields ?? [];
    return `{ ${Object.entries(value as Record<string, unknown>)
      .map(([k, v]) => `${k}: ${literal(types, fields.find((f) => f.name === k)!.type, v)}`)
      .join(", ")} }`;
  }
  return JSON.stringify(value);
}

/** Leaves of an output type, and objects below it down to `depth`, so the field really runs. */
function selection(types: Map<string, IntrospectedType>, ref: TypeRef, depth: number): string {
  const named = unwrap(ref);
  if (named.kind === "SCALAR" || named.kind === "ENUM") return "";
  const type = types.get(named.name)!;
  if (named.kind !== "OBJECT") return "{ __typename }";
  const parts: string[] = [];
  for (const f of type.fields ?? []) {
    if (f.args.some((a) => a.type.kind === "NON_NULL")) continue;
    const inner = unwrap(f.type);
    if (inner.kind === "SCALAR" || inner.kind === "ENUM") parts.push(f.name);
    else if (depth > 0 && inner.name !== "Query") parts.push(`${f.name} ${selection(types, f.type, depth - 1)}`);
  }
  return `{ __typename ${parts.join(" ")} }`;
}

interface Case {
  label: string;
  query: string;
  variables: Record<string, unknown>;
  field: string;
}

function casesFor(types: Map<string, IntrospectedType>, operation: "query" | "mutation", rootType: string, ids: Ids): Case[] {
  const cases: Case[] = [];
  for (const field of types.get(rootType)!.fields ?? []) {
    const sel = selection(types, field.type, 2);
    const make = (argName: string | null, target: string[] | null, bad: unknown, asLiteral: boolean, label: string): Case => {
      const variables: Record<string, unknown> = {};
      const defs: string[] = [];
      const args: string[] = [];
      for (const arg of field.args) {
        const mine = arg.name === argName;
        if (!mine && arg.type.kind !== "NON_NULL") continue;
        const value = build(types, arg.type, arg.name, ids, mine ? target : null, bad);
        if (asLiteral) {
          args.push(`${arg.name}: ${literal(types, arg.type, value)}`);
        } else {
          defs.push(`$${arg.name}: ${printType(arg.type)}`);
          args.push(`${arg.name}: $${arg.name}`);
          variables[arg.name] = value;
        }
      }
      const query = `${operation}${defs.length ? `(${defs.join(", ")})` : ""} { ${field.name}${args.length ? `(${args.join(", ")})` : ""} ${sel} }`;
      return { label: `${field.name}${label}`, query, variables, field: field.name };
    };
    cases.push(make(null, null, undefined, false, " with plausible arguments"));
    for (const arg of field.args) {
      for (const leaf of leavesOf(types, arg.type, [arg.name])) {
        for (const bad of badValues(leaf.scalar)) {
          const where = `${leaf.path.join(".")}: ${leaf.scalar} = ${JSON.stringify(bad)}`;
          cases.push(make(arg.name, leaf.path.slice(1), bad, false, `(${where}) as a variable`));
          if (typeof bad === "string" && bad === NUL_STRINGS[0]) cases.push(make(arg.name, leaf.path.slice(1), bad, true, `(${where}) as a literal`));
        }
      }
    }
  }
  return cases;
}

async function runAll<T>(items: T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

/**
 * The two demos differ only in makeCoinflip: the second is sent only the cases
 * whose request (query text and case, ids aside) the first was not, so every
 * field it has of its own, or of another shape, is driven, and the hub's own
 * fields are not driven twice through the same code.
 */
const sentToFirstDemo = new Set<string>();
const caseKey = (c: { label: string; query: string }) => `${c.label}\n${c.query}`.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<id>");

const demos: [string, Record<string, string>][] = [
  ["the demo (plan-style makeCoinflip)", {}],
  ["the demo with the resolver-style makeCoinflip", { HUB_CONFIG: path.join(ROOT, "test/fixtures/config-demo-resolver-coinflip.mjs") }],
];

for (const [demo, env] of demos) t.test(`${demo}: every root field, fed NUL bytes and extreme numbers by every kind of caller, answers client errors only`, async (t) => {
  const { server, superuserUrl } = await startDemo(t, env);
  const introspection = await gql<{ __schema: { queryType: { name: string }; mutationType: { name: string } | null; types: IntrospectedType[] } }>(
    server.url,
    INTROSPECTION,
  );
  t.notOk(introspection.body.errors, "introspection works");
  const schema = introspection.body.data!.__schema;
  const types = new Map(schema.types.map((ty) => [ty.name, ty]));

  // A player with a balance and a bankroll to bet against, and an operator, minted in the database.
  const url = superuserUrl;
  const player = await makePlayer(url, "fuzz-player");
  await withPool(url, async (pool) => {
    await pool.query("select hub_hidden.ensure_bankroll($1, 'HOUSE', 1000000, 'fuzz bankroll')", [player.casinoId]);
    await pool.query("select hub_hidden.credit_balance($1, $2, $3, 'HOUSE', 1000, 'test', 'fuzz balance')", [player.userId, player.casinoId, player.experienceId]);
  });
  const ids: Ids = { casinoId: player.casinoId, userId: player.userId, experienceId: player.experienceId };
  const operator = await makeOperator(url);
  const callers: [string, Record<string, string>][] = [
    ["anonymous", {}],
    ["operator", operator.header],
    ["player", player.header],
  ];

  const cases = [...casesFor(types, "query", schema.queryType.name, ids), ...(schema.mutationType ? casesFor(types, "mutation", schema.mutationType.name, ids) : [])];
  // Logging out ends the player's session: keep it for last.
  cases.sort((a, b) => Number(a.field === "hubLogout") - Number(b.field === "hubLogout"));
  const fields = new Set(cases.map((c) => c.field));
  t.ok(fields.size >= 40, `${fields.size} root fields found`);
  for (const name of ["hubCasinoByName", "allHubUsers", "hubCreatePlaygroundSession", "makeCoinflip", "makeCoinflipBet", "hubAddCasino"]) {
    t.ok(fields.has(name), `${name} is found`);
  }
  const first = sentToFirstDemo.size === 0;
  const own = first ? cases : cases.filter((c) => !sentToFirstDemo.has(caseKey(c)));
  if (first) for (const c of cases) sentToFirstDemo.add(caseKey(c));
  else {
    t.comment(`${cases.length - own.length} cases the first demo was sent already are left out`);
    t.ok(own.some((c) => c.field === "makeCoinflip"), "makeCoinflip, of another shape here, is driven");
  }
  cases.splice(0, cases.length, ...own);

  const logBefore = server.output().length;
  const failures: string[] = [];
  const failedFields = new Map<string, number>();
  let sent = 0;
  let withoutCode = 0;
  for (const [caller, headers] of callers) {
    await runAll(cases, 4, async (c) => {
      sent++;
      let problem: string | undefined;
      try {
        const res = await gqlOverHttp(server.url, c.query, c.variables, headers);
        const internal = res.body.errors?.filter((e) => e.extensions?.code === "INTERNAL_SERVER_ERROR" || /^Internal error/.test(e.message));
        if (res.status >= 500) problem = `HTTP ${res.status}`;
        else if (internal?.length) problem = internal.map((e) => e.message).join("; ");
        else if (res.body.errors?.some((e) => typeof e.extensions?.code !== "string")) {
          // The first few, so a failure shows which errors they are.
          if (withoutCode++ < 5) t.comment(`no code: ${caller} ${c.label}: ${JSON.stringify(res.body.errors).slice(0, 300)}`);
        }
      } catch (error) {
        problem = (error as Error).message;
      }
      if (problem) {
        failures.push(`${caller} ${c.label}: ${problem}`);
        failedFields.set(c.field, (failedFields.get(c.field) ?? 0) + 1);
      }
    });
  }
  // A last request, logged after the others (one process, one stream): once its line is in, theirs are.
  const fence = `/log-fence-${randomUUID()}`;
  await fetch(`${server.url}${fence}`);
  await until(() => server.output().includes(fence), 30_000, () => `the log line of ${fence} (log: ${server.output().slice(-2000)})`);

  const lines = server.output().slice(logBefore).split("\n").filter((l) => l.trim() !== "");
  const loud: string[] = [];
  for (const line of lines) {
    let level: number | undefined;
    try {
      level = (JSON.parse(line) as { level?: number }).level;
    } catch {
      loud.push(`not a JSON log line: ${line.slice(0, 300)}`);
      continue;
    }
    if (level !== undefined && level >= 40) loud.push(line.slice(0, 400));
  }

  t.comment(`${sent} requests (${cases.length} cases × ${callers.length} callers) over ${new Set(cases.map((c) => c.field)).size} root fields`);
  t.comment(`${failures.length} answered as a server fault, in ${failedFields.size} fields: ${[...failedFields].sort().map(([f, n]) => `${f} ${n}`).join(", ")}`);
  t.comment(`${withoutCode} answers had an error without extensions.code`);
  t.comment(`${loud.length} log lines at warn or above`);
  t.same(failures.slice(0, 40), [], "no INTERNAL_SERVER_ERROR and no 5xx");
  t.same(loud.slice(0, 20), [], "nothing logged at warn level or above");
  t.equal(failures.length, 0, "count of server-fault answers");
  t.equal(loud.length, 0, "count of loud log lines");
  t.equal(withoutCode, 0, "every error carries an extensions.code");
});
