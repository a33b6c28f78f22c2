import "./helpers/env.js";
import path from "node:path";
import t from "tap";
import { gql } from "./helpers/http.js";
import { ROOT, startServerProcess, type ServerProcess } from "./helpers/process.js";
import { makePlayer, withPool } from "./helpers/credentials.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
import { until } from "./helpers/ws.js";

/*
 * What the database refuses because of what a client sent is the client's
 * error, however the SQL was sent: here by a resolver-style and a plan-style
 * plugin on superuserPool (test/fixtures/config-database-refusals.mjs), each
 * running a fixed parameterised statement with the client's values. Every
 * refusal must come back with a message saying what was wrong, a stable code
 * and the SQLSTATE, and be logged at info; faults of the server stay internal
 * errors logged at error level (they are the positive control of the log
 * capture).
 */

let server: ServerProcess;
let player: Record<string, string>;
/** Where the log of the requests starts (start-up may warn, e.g. about running as root). */
let logStart = 0;

t.before(async () => {
  // A database of the test kit's shared cluster: nothing here is about the embedded Postgres.
  const database = await sharedClusterDatabase(t);
  const superuserUrl = database.SUPERUSER_DATABASE_URL;
  server = await startServerProcess({
    ...database,
    HUB_CONFIG: path.join(ROOT, "test/fixtures/config-database-refusals.mjs"),
    LOG_LEVEL: "info",
  });
  logStart = server.output().length;
  // A player of the playground casino with 1000 HOUSE, and a house bankroll of 1 000 000.
  const player_ = await makePlayer(superuserUrl, "refused");
  await withPool(superuserUrl, async (pool) => {
    await pool.query("select hub_hidden.ensure_bankroll($1, 'HOUSE', 1000000, 'test bankroll')", [player_.casinoId]);
    await pool.query("select hub_hidden.credit_balance($1, $2, $3, 'HOUSE', 1000, 'test', 'test balance')", [player_.userId, player_.casinoId, player_.experienceId]);
  });
  player = player_.header;
});
t.teardown(async () => {
  if (!server || server.child.exitCode !== null || server.child.signalCode !== null) return;
  server.child.kill("SIGTERM");
  await server.exited;
});

interface Expected {
  code: string;
  message: string | RegExp;
  sqlstate?: string;
  constraint?: string;
}

const NUL = "A string argument contains a NUL character (\\u0000), which the database cannot store.";
const INTERNAL = /^Internal error \(reference [0-9a-f]{12}\); the server log has the details\.$/;

const cases: [string, Record<string, unknown>, Expected][] = [
  ["a NUL character", { statement: "text", codePoints: [97, 0, 98] }, { code: "BAD_USER_INPUT", sqlstate: "22021", message: NUL }],
  ["a malformed uuid", { statement: "uuid", text: "not-a-uuid" }, { code: "BAD_USER_INPUT", sqlstate: "22P02", message: 'A value has the wrong format (invalid input syntax for type uuid: "not-a-uuid").' }],
  ["an int out of range", { statement: "int", number: 1e10 }, { code: "BAD_USER_INPUT", sqlstate: "22003", message: 'A number is outside the range the database can store (value "10000000000" is out of range for type integer).' }],
  ["a negative limit", { statement: "limit", number: -1 }, { code: "BAD_USER_INPUT", sqlstate: "2201W", message: "The number of rows to return (first, last or a limit) must not be negative." }],
  ["a negative offset", { statement: "offset", number: -5 }, { code: "BAD_USER_INPUT", sqlstate: "2201X", message: "The number of rows to skip (offset) must not be negative." }],
  ["a text too long", { statement: "code", text: "toolong" }, { code: "BAD_USER_INPUT", sqlstate: "22001", message: "A text value is longer than the database accepts (value too long for type character varying(3))." }],
  ["a duplicate unique value", { statement: "insert", id: 3, text: "taken" }, { code: "CONSTRAINT_VIOLATION", sqlstate: "23505", constraint: "thing_name_key", message: 'A row with the same name already exists (constraint "thing_name_key" on thing).' }],
  ["a duplicate primary key", { statement: "insert", id: 1, text: "fresh" }, { code: "CONSTRAINT_VIOLATION", sqlstate: "23505", constraint: "thing_pkey", message: 'A row with the same id already exists (constraint "thing_pkey" on thing).' }],
  ["a check violation", { statement: "insert", id: 4, text: "negative", qty: -1 }, { code: "CONSTRAINT_VIOLATION", sqlstate: "23514", constraint: "thing_qty_check", message: 'A value is not allowed by a check (constraint "thing_qty_check" on thing).' }],
  ["a null in a not-null column", { statement: "insert", id: 5 }, { code: "CONSTRAINT_VIOLATION", sqlstate: "23502", message: "name of thing must not be null." }],
  ["a reference to nothing", { statement: "insert", id: 6, text: "orphan", parent: 999 }, { code: "CONSTRAINT_VIOLATION", sqlstate: "23503", constraint: "thing_parent_id_fkey", message: 'parent_id refers to a row of thing that does not exist (constraint "thing_parent_id_fkey" on thing).' }],
  ["deleting a referenced row", { statement: "deleteThing", id: 1 }, { code: "CONSTRAINT_VIOLATION", sqlstate: "23503", constraint: "thing_parent_id_fkey", message: 'The row is still referenced from thing (constraint "thing_parent_id_fkey" on thing).' }],
  ["a debit beyond the balance (ledger)", { statement: "debit", number: 1e9 }, { code: "INSUFFICIENT_FUNDS", sqlstate: "P0001", constraint: "ledger_sufficient_funds", message: "debit_balance: insufficient funds: the balance is 1000 HOUSE, the debit 1000000000." }],
  ["a negative debit (ledger)", { statement: "debit", number: -1 }, { code: "INVALID_AMOUNT", sqlstate: "P0001", constraint: "ledger_amount_whole", message: "debit_balance: amount must be a whole number of base units from 1 to 9007199254740991; received -1." }],
  // The bankroll's amount (1 000 000) is not the player's business: not in the message.
  ["a bankroll debit beyond the bankroll (ledger)", { statement: "debitBankroll", number: 1e12 }, { code: "INSUFFICIENT_FUNDS", sqlstate: "P0001", constraint: "ledger_sufficient_funds", message: "adjust_bankroll: insufficient funds: the house bankroll cannot cover this change." }],
];
const faults: [string, Record<string, unknown>][] = [
  ["a plugin passing an empty ledger actor", { statement: "emptyActor" }],
  ["SQL on a missing table", { statement: "missingTable" }],
];

/** Per field: a deadlock (two requests) and a serialization failure, each answered TRANSACTION_CONFLICT and logged at warn. */
const CONFLICTS_PER_FIELD = 2;

const MUTATION = (field: string) =>
  `mutation($statement: String!, $text: String, $codePoints: [Int!], $number: Float, $id: Int, $qty: Int, $parent: Int) {
    ${field}(statement: $statement, text: $text, codePoints: $codePoints, number: $number, id: $id, qty: $qty, parent: $parent)
  }`;

for (const field of ["refusalByResolver", "refusalByPlan"]) {
  t.test(`${field}: the database's refusals of client input are client errors`, async (t) => {
    for (const [name, variables, expected] of cases) {
      const res = await gql(server.url, MUTATION(field), variables, player);
      t.equal(res.status, 200, `${name}: HTTP 200`);
      const error = res.body.errors?.[0];
      t.equal(res.body.errors?.length, 1, `${name}: one error`);
      if (typeof expected.message === "string") t.equal(error?.message, expected.message, `${name}: message`);
      else t.match(error?.message, expected.message, `${name}: message`);
      t.same(
        error?.extensions,
        { code: expected.code, sqlstate: expected.sqlstate, ...(expected.constraint ? { constraint: expected.constraint } : {}) },
        `${name}: extensions`,
      );
      t.notMatch(error?.message ?? "", /1000000(?!000)/, `${name}: no bankroll amount`);
    }
  });

  t.test(`${field}: faults of the server stay internal errors`, async (t) => {
    for (const [name, variables] of faults) {
      const res = await gql(server.url, MUTATION(field), variables, player);
      const error = res.body.errors?.[0];
      t.match(error?.message, INTERNAL, name);
      t.equal(error?.extensions?.code, "INTERNAL_SERVER_ERROR", name);
    }
  });
}

for (const field of ["refusalByResolver", "refusalByPlan"]) {
  t.test(`${field}: a transaction Postgres rolls back for a conflict is TRANSACTION_CONFLICT, safe to retry`, async (t) => {
    const keys = field === "refusalByResolver" ? [1, 2] : [3, 4];
    const [a, b] = await Promise.all([
      gql(server.url, MUTATION(field), { statement: "deadlock", id: keys[0], qty: keys[1] }, player),
      gql(server.url, MUTATION(field), { statement: "deadlock", id: keys[1], qty: keys[0] }, player),
    ]);
    const answers = [a, b].map((res) => res.body.errors?.[0]?.extensions?.code ?? res.body.data?.[field]);
    t.same(answers.sort(), ["TRANSACTION_CONFLICT", "locked"], "one deadlocked, the other took both locks");
    const deadlocked = [a, b].find((res) => res.body.errors)!;
    t.match(deadlocked.body.errors?.[0]?.message, /conflicted with another .* rolled back; nothing was changed\. Retry it\./, "the message says to retry");
    const retried = await gql(server.url, MUTATION(field), { statement: "deadlock", id: keys[0], qty: keys[1] }, player);
    t.equal(retried.body.data?.[field], "locked", "the retry succeeds");
    const failed = await gql(server.url, MUTATION(field), { statement: "serializationFailure" }, player);
    t.same(failed.body.errors?.[0]?.extensions, { code: "TRANSACTION_CONFLICT", errorId: failed.body.errors?.[0]?.extensions?.errorId }, "a serialization failure: the same code");
  });
}

t.test("the log: each refusal at info, only the faults at error", async (t) => {
  const read = () =>
    server
      .output()
      .slice(logStart)
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { level: number; msg: string; sqlstate?: string; code?: string; errorId?: string });
  const isRefusal = (e: { msg: string }) => e.msg === "request refused: the database rejected the client's input";
  // Until the lines of every request are in (the log reaches this process through a pipe).
  await until(
    () => read().filter(isRefusal).length >= cases.length * 2 && read().filter((e) => e.level >= 40).length >= faults.length * 2 + CONFLICTS_PER_FIELD * 2,
    30_000,
    () => `${cases.length * 2} refusal lines and ${faults.length * 2 + CONFLICTS_PER_FIELD * 2} fault and conflict lines in the server's log (log: ${server.output().slice(logStart).slice(-3000)})`,
  );
  const entries = read();
  const refused = entries.filter(isRefusal);
  t.equal(refused.length, cases.length * 2, "one info line per refusal");
  t.ok(refused.every((e) => e.level === 30), "at info");
  t.same(
    refused.map((e) => e.sqlstate).sort(),
    [...cases, ...cases].map(([, , x]) => x.sqlstate).sort(),
    "each with its SQLSTATE",
  );
  const loud = entries.filter((e) => e.level >= 40);
  const conflicts = loud.filter((e) => e.code === "TRANSACTION_CONFLICT");
  t.equal(conflicts.length, CONFLICTS_PER_FIELD * 2, "each conflict logged once");
  t.ok(conflicts.every((e) => e.level === 40 && e.msg === "masked GraphQL error"), "conflicts at warn");
  const faultLines = loud.filter((e) => e.code !== "TRANSACTION_CONFLICT");
  t.equal(faultLines.length, faults.length * 2, "the faults, and nothing else, at error");
  t.ok(faultLines.every((e) => e.level === 50 && e.msg === "masked GraphQL error" && /^[0-9a-f]{12}$/.test(e.errorId ?? "")), "each fault logged at error with its reference");
});
