/**
 * The classifiers of src/db/error-class.ts and src/graphql/request-errors.ts
 * against errors really raised by Postgres, node-postgres, pg-pool and
 * graphql-js: each is recognised by its SQLSTATE, code or origin, so a change
 * of wording (or lc_messages) cannot turn an outage into an internal error.
 */
import "./helpers/env.js";
import t from "tap";
import pg from "pg";
import { GraphQLError, Source, buildSchema, parse, specifiedRules, validate } from "graphql";
import { sharedClusterDatabase } from "./helpers/shared-database.js";
import {
  PoolSaturatedError,
  classifyClientInputError,
  classifyDatabaseError,
  codePoolSaturation,
  connectionLoss,
  isPoolSaturated,
} from "../dist/src/db/error-class.js";
import { isTokenLimit, isValidationAborted } from "../dist/src/graphql/request-errors.js";

const urls = await sharedClusterDatabase(t);

async function failure(run: () => Promise<unknown>): Promise<Error> {
  try {
    await run();
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected a failure");
}

t.test("a pool whose every connection stays in use rejects with the hub's own coded error, promise and callback alike", async (t) => {
  const pool = codePoolSaturation(new pg.Pool({ connectionString: urls.SUPERUSER_DATABASE_URL, max: 1, connectionTimeoutMillis: 300 }), "test");
  t.teardown(() => pool.end());
  const held = await pool.connect();
  const byPromise = await failure(() => pool.connect());
  t.ok(byPromise instanceof PoolSaturatedError, "connect(): a PoolSaturatedError");
  t.equal((byPromise as PoolSaturatedError).code, "HUB_POOL_SATURATED");
  t.match(byPromise.message, /test database pool stayed in use for 300 ms/);
  t.ok(isPoolSaturated(byPromise));
  t.same(classifyDatabaseError(byPromise)?.code, "SERVER_BUSY");
  const byQuery = await failure(() => pool.query("select 1"));
  t.ok(isPoolSaturated(byQuery), "query() goes through connect: the same error");
  held.release();
  t.same((await pool.query("select 1 as one")).rows, [{ one: 1 }], "a free connection serves again");
});

t.test("a connection refused or terminated is a lost connection, not saturation", async (t) => {
  const nowhere = codePoolSaturation(new pg.Pool({ host: "127.0.0.1", port: 1, connectionTimeoutMillis: 2000 }), "nowhere");
  t.teardown(() => nowhere.end());
  const refused = await failure(() => nowhere.query("select 1"));
  t.notOk(isPoolSaturated(refused));
  t.ok(connectionLoss(refused), `refused: ${refused.message}`);
  t.equal(classifyDatabaseError(refused)?.code, "DATABASE_UNAVAILABLE");

  const admin = new pg.Client({ connectionString: urls.SUPERUSER_DATABASE_URL });
  const victim = new pg.Client({ connectionString: urls.SUPERUSER_DATABASE_URL });
  await admin.connect();
  await victim.connect();
  victim.on("error", () => undefined);
  t.teardown(() => admin.end());
  const pid = (await victim.query("select pg_backend_pid() as pid")).rows[0].pid;
  const pending = failure(() => victim.query("select pg_sleep(30)"));
  await admin.query("select pg_terminate_backend($1)", [pid]);
  const terminated = await pending;
  t.ok(connectionLoss(terminated), `terminated (${(terminated as { code?: string }).code ?? "no code"}): ${terminated.message}`);
  const after = await failure(() => victim.query("select 1"));
  t.ok(connectionLoss(after), `a query on the dead client: ${after.message}`);
  t.equal(classifyDatabaseError(after)?.code, "DATABASE_UNAVAILABLE");
  t.ok(connectionLoss(new Error("start-up failed", { cause: after })), "found through a cause");
});

t.test("Postgres's refusals are classified by SQLSTATE", async (t) => {
  const client = new pg.Client({ connectionString: urls.SUPERUSER_DATABASE_URL });
  await client.connect();
  t.teardown(() => client.end());
  await client.query("set statement_timeout = 50");
  const timeout = await failure(() => client.query("select pg_sleep(5)"));
  t.equal(classifyDatabaseError(timeout)?.code, "STATEMENT_TIMEOUT");
  await client.query("reset statement_timeout");
  t.equal(classifyClientInputError(await failure(() => client.query("select 'x'::int")))?.code, "BAD_USER_INPUT");
  t.equal(classifyClientInputError(await failure(() => client.query("select 1/0")))?.code, "BAD_USER_INPUT");
  await client.query("create temporary table unique_thing (name text unique)");
  await client.query("insert into unique_thing values ('a')");
  const duplicate = classifyClientInputError(await failure(() => client.query("insert into unique_thing values ('a')")));
  t.match(duplicate, { code: "CONSTRAINT_VIOLATION", sqlstate: "23505", constraint: "unique_thing_name_key", message: /same name already exists/ });
  t.equal(classifyDatabaseError(await failure(() => client.query("select * from no_such_table"))), undefined, "a fault of the server's SQL stays unclassified");
});

t.test("graphql-js's errors are recognised by origin: the token limit, and the aborted validation", async (t) => {
  const text = `{ a b c d e }`;
  const limited = await failure(async () => parse(new Source(text), { maxTokens: 4 }));
  t.ok(limited instanceof GraphQLError);
  t.ok(isTokenLimit(limited as GraphQLError, new Source(text), 4), "more tokens than allowed");
  const syntax = await failure(async () => parse(new Source("{ a b c ) }"), { maxTokens: 40 }));
  t.notOk(isTokenLimit(syntax as GraphQLError, new Source("{ a b c ) }"), 40), "a syntax error is not the token limit");
  const unclosed = "{ a b c";
  const atTheEnd = await failure(async () => parse(new Source(unclosed), { maxTokens: 4 }));
  t.notOk(isTokenLimit(atTheEnd as GraphQLError, new Source(unclosed), 4), "exactly the limit, then a syntax error at the end: a syntax error");
  const comments = "# one\n{ a # two\n b }";
  t.doesNotThrow(() => parse(new Source(comments), { maxTokens: 4 }), "comments do not count");

  const schema = buildSchema("type Query { a(x: Int): Int }");
  const overlapping = `{ ${Array.from({ length: 3000 }, (_, i) => `a(x: ${i % 2})`).join(" ")} }`;
  const errors = validate(schema, parse(overlapping), specifiedRules);
  t.ok(errors.some(isValidationAborted), "graphql gave up comparing the fields, and it is recognised");
  t.notOk(validate(schema, parse("{ b }"), specifiedRules).some(isValidationAborted), "another validation error is not");
});
