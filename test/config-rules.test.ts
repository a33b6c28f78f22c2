/**
 * Options of startAndListen and environment variables go through one set of
 * rules: each rule below is driven through the option and through the
 * variable, and both must refuse the value before anything starts, with the
 * same "expected …" wording (only the source's name and the quoting of the
 * received value differ).
 */
import "./helpers/env.js";
import t from "tap";
import type * as Tap from "tap";
import { startAndListen } from "@hubpkg/hub";
import { tmpDir } from "./helpers/tmp.js";

const SETTINGS_VARIABLES = [
  "PORT", "HOST", "LOG_LEVEL", "HUB_DATA_DIR", "DATABASE_URL", "SUPERUSER_DATABASE_URL", "HUB_PLAYGROUND", "HUB_INTROSPECTION", "POSTGRAPHILE_DATABASE_URL", "LOG_PRETTY", "HUB_DASHBOARD",
  "HUB_MAX_CONNECTIONS", "DIRECT_DATABASE_URL", "HUB_DATABASE_POOLER", "HUB_EMBEDDED_POSTGRES",
];

/** startAndListen with these environment variables (and no other setting variable) in place. */
async function startWithEnv(env: Record<string, string>, options: Record<string, unknown>) {
  const saved = new Map(SETTINGS_VARIABLES.map((name) => [name, process.env[name]]));
  for (const name of SETTINGS_VARIABLES) delete process.env[name];
  Object.assign(process.env, env);
  try {
    return await startAndListen(options as never);
  } finally {
    for (const [name, value] of saved) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

interface Case {
  rule: string;
  option: Record<string, unknown>;
  env: Record<string, string>;
  /** The option's name and the variable's name the message must give. */
  names: [string, string];
  /** What both messages say is expected (the option's, when booleans are spelt differently). */
  expected: RegExp;
  optionExpected?: RegExp;
}

const PG = "postgres://someone:secretpw@127.0.0.1:1/db";
const cases: Case[] = [
  { rule: "port: an integer from 0 to 65535", option: { port: 70000 }, env: { PORT: "70000" }, names: ["port", "PORT"], expected: /an integer from 0 to 65535/ },
  { rule: "port: not a number", option: { port: "80" }, env: { PORT: "eighty" }, names: ["port", "PORT"], expected: /an integer from 0 to 65535/ },
  { rule: "host: a host name or IP address", option: { host: "not a host" }, env: { HOST: "not a host" }, names: ["host", "HOST"], expected: /a host name or IP address/ },
  { rule: "logLevel: a pino level", option: { logLevel: "loud" }, env: { LOG_LEVEL: "loud" }, names: ["logLevel", "LOG_LEVEL"], expected: /one of fatal, error, warn, info, debug, trace, silent/ },
  { rule: "dataDir: a directory path", option: { dataDir: " " }, env: { HUB_DATA_DIR: " " }, names: ["dataDir", "HUB_DATA_DIR"], expected: /a directory path/ },
  {
    rule: "databaseUrl: a URL",
    option: { databaseUrl: "not a url", superuserDatabaseUrl: PG },
    env: { DATABASE_URL: "not a url", SUPERUSER_DATABASE_URL: PG },
    names: ["databaseUrl", "DATABASE_URL"],
    expected: /a URL such as postgres:\/\/user:password@host:5432\/dbname/,
  },
  {
    rule: "databaseUrl: postgres:// only",
    option: { databaseUrl: "mysql://u:secretpw@h/db", superuserDatabaseUrl: PG },
    env: { DATABASE_URL: "mysql://u:secretpw@h/db", SUPERUSER_DATABASE_URL: PG },
    names: ["databaseUrl", "DATABASE_URL"],
    expected: /a URL starting with postgres:\/\/ or postgresql:\/\//,
  },
  {
    rule: "superuserDatabaseUrl: a URL with a host",
    option: { databaseUrl: PG, superuserDatabaseUrl: "postgres:///db" },
    env: { DATABASE_URL: PG, SUPERUSER_DATABASE_URL: "postgres:///db" },
    names: ["superuserDatabaseUrl", "SUPERUSER_DATABASE_URL"],
    expected: /a URL with a host/,
  },
  {
    rule: "databaseUrl needs superuserDatabaseUrl (never silently the embedded database)",
    option: { databaseUrl: PG },
    env: { DATABASE_URL: PG },
    names: ["superuserDatabaseUrl", "SUPERUSER_DATABASE_URL"],
    expected: /a postgres:\/\/ URL whenever (DATABASE_URL|"databaseUrl") is set \(migrations and superuserPool need it\); unset both to use the embedded database/,
  },
  {
    rule: "superuserDatabaseUrl needs databaseUrl",
    option: { superuserDatabaseUrl: PG },
    env: { SUPERUSER_DATABASE_URL: PG },
    names: ["databaseUrl", "DATABASE_URL"],
    expected: /a postgres:\/\/ URL whenever (SUPERUSER_DATABASE_URL|"superuserDatabaseUrl") is set; unset both to use the embedded database/,
  },
  { rule: "playground: on/off", option: { playground: "yes" }, env: { HUB_PLAYGROUND: "yes" }, names: ["playground", "HUB_PLAYGROUND"], expected: /on, off or auto/, optionExpected: /true or false/ },
  { rule: "embeddedPostgres: on/off", option: { embeddedPostgres: "yes" }, env: { HUB_EMBEDDED_POSTGRES: "yes" }, names: ["embeddedPostgres", "HUB_EMBEDDED_POSTGRES"], expected: /on or off/, optionExpected: /true or false/ },
  { rule: "introspection: on/off", option: { introspection: 1 }, env: { HUB_INTROSPECTION: "1" }, names: ["introspection", "HUB_INTROSPECTION"], expected: /on or off/, optionExpected: /true or false/ },
  { rule: "dashboard: on/off or a path", option: { dashboard: "admin" }, env: { HUB_DASHBOARD: "admin" }, names: ["dashboard", "HUB_DASHBOARD"], expected: /^on, off or a path such as \/admin/, optionExpected: /^true, false or a path such as \/admin/ },
  { rule: "maxConnections: an integer >= 1", option: { maxConnections: 0 }, env: { HUB_MAX_CONNECTIONS: "0" }, names: ["maxConnections", "HUB_MAX_CONNECTIONS"], expected: /^an integer >= 1\.$/ },
  { rule: "maxConnections: enough for every pool", option: { maxConnections: 5 }, env: { HUB_MAX_CONNECTIONS: "5" }, names: ["maxConnections", "HUB_MAX_CONNECTIONS"], expected: /^an integer >= 8: an instance needs at least LISTEN 1/ },
  { rule: "databasePooler: none or transaction", option: { databasePooler: "session" }, env: { HUB_DATABASE_POOLER: "session" }, names: ["databasePooler", "HUB_DATABASE_POOLER"], expected: /one of none, transaction/ },
  {
    rule: "databasePooler: transaction needs the direct URL",
    option: { databaseUrl: PG, superuserDatabaseUrl: PG, databasePooler: "transaction" },
    env: { DATABASE_URL: PG, SUPERUSER_DATABASE_URL: PG, HUB_DATABASE_POOLER: "transaction" },
    names: ["directDatabaseUrl", "DIRECT_DATABASE_URL"],
    expected: /^a postgres:\/\/ URL whenever .* is transaction: .*bypassing the pooler/,
  },
  { rule: "directDatabaseUrl: a postgres URL", option: { databaseUrl: PG, superuserDatabaseUrl: PG, directDatabaseUrl: "mysql://x@y/z" }, env: { DATABASE_URL: PG, SUPERUSER_DATABASE_URL: PG, DIRECT_DATABASE_URL: "mysql://x@y/z" }, names: ["directDatabaseUrl", "DIRECT_DATABASE_URL"], expected: /postgres:\/\// },
  { rule: "dashboard: not a path the hub uses", option: { dashboard: "/graphql" }, env: { HUB_DASHBOARD: "/graphql" }, names: ["dashboard", "HUB_DASHBOARD"], expected: /not \/ nor \/graphql/, optionExpected: /not \/ nor \/graphql/ },
];

const expectedPart = (message: string) => /, expected (.*)$/.exec(message)?.[1];
/** The same wording once each option's name and its variable's name are made one. */
const PAIRS: [string, string][] = [
  ["directDatabaseUrl", "DIRECT_DATABASE_URL"],
  ["databasePooler", "HUB_DATABASE_POOLER"],
  ["maxConnections", "HUB_MAX_CONNECTIONS"],
  ["superuserDatabaseUrl", "SUPERUSER_DATABASE_URL"],
  ["databaseUrl", "DATABASE_URL"],
  ["port", "PORT"],
  ["host", "HOST"],
  ["logLevel", "LOG_LEVEL"],
  ["dataDir", "HUB_DATA_DIR"],
];
const normalise = (text: string | undefined) =>
  PAIRS.reduce((s, [option, variable], i) => s?.replaceAll(`"${option}"`, `<${i}>`).replaceAll(variable, `<${i}>`), text);

for (const c of cases) {
  t.test(`rule ${c.rule}: refused the same way as an option and as an environment variable`, async (t) => {
    const dataDir = tmpDir(t);
    const base = { port: 0, logLevel: "silent", handleSignals: false };
    const errors: { source: string; error: Error & { code?: string } }[] = [];
    for (const [source, env, options] of [
      ["option", {}, { ...base, dataDir, ...c.option }],
      ["environment", c.env, { handleSignals: false, ...(c.env.HUB_DATA_DIR ? {} : { dataDir }), ...(c.env.PORT ? {} : { port: 0 }), ...(c.env.LOG_LEVEL ? {} : { logLevel: "silent" }) }],
    ] as const) {
      try {
        const server = await startWithEnv(env, options);
        t.teardown(() => server.stop());
        t.fail(`${source}: started instead of refusing ${JSON.stringify(source === "option" ? c.option : c.env)}`);
      } catch (error) {
        errors.push({ source, error: error as Error & { code?: string } });
      }
    }
    if (errors.length !== 2) return;
    const [byOption, byEnv] = [errors[0]!.error, errors[1]!.error];
    t.equal(byOption.code, "HUB_OPTION_INVALID", `option: ${byOption.message}`);
    t.match(byOption.message, new RegExp(`^Server option "${c.names[0]}" is invalid: received .*, expected `));
    t.equal(byEnv.code, "HUB_CONFIG_INVALID", `environment: ${byEnv.message}`);
    t.match(byEnv.message, new RegExp(`^Environment variable ${c.names[1]} is invalid: received .*, expected `));
    t.match(expectedPart(byEnv.message), c.expected);
    t.match(expectedPart(byOption.message), c.optionExpected ?? c.expected);
    if (!c.optionExpected) {
      t.equal(normalise(expectedPart(byOption.message)), normalise(expectedPart(byEnv.message)), "the same wording, but for the source's names");
    }
    for (const e of [byOption, byEnv]) t.notMatch(e.message, /secretpw/, "never echoes a database password");
  });
}

t.test("valid values are accepted the same way from both sources", async (t) => {
  const dataDir = tmpDir(t);
  const byOption = await startWithEnv({}, { port: 0, host: "127.0.0.1", logLevel: "silent", handleSignals: false, dataDir, playground: false, introspection: false });
  const byEnv = await startWithEnv({ PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "silent", HUB_DATA_DIR: dataDir, HUB_PLAYGROUND: "off", HUB_INTROSPECTION: "off" }, { handleSignals: false });
  t.teardown(async () => {
    await byEnv.stop();
    await byOption.stop();
  });
  for (const server of [byOption, byEnv]) {
    t.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await fetch(`${server.url}/graphql`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ query: "{ __schema { queryType { name } } }" }) });
    const body = (await res.json()) as { errors?: unknown[] };
    t.ok(body.errors, "introspection off, from either source");
  }
});

/** Variables without an option of their own: refused like the others, before anything starts. */
async function refusal(t: Tap.Test, env: Record<string, string>): Promise<Error & { code?: string }> {
  const dataDir = tmpDir(t);
  try {
    const server = await startWithEnv(env, { port: 0, logLevel: "silent", handleSignals: false, dataDir });
    t.teardown(() => server.stop());
    t.fail(`started instead of refusing ${JSON.stringify(env)}`);
    return new Error("started");
  } catch (error) {
    return error as Error & { code?: string };
  }
}

const PG_OTHER = "postgres://other:otherpw@127.0.0.1:2/db";

t.test("POSTGRAPHILE_DATABASE_URL names the GraphQL connection like DATABASE_URL, by the same rules", async (t) => {
  const malformed = await refusal(t, { POSTGRAPHILE_DATABASE_URL: "mysql://u:secretpw@h/db", SUPERUSER_DATABASE_URL: PG });
  t.equal(malformed.code, "HUB_CONFIG_INVALID");
  t.match(malformed.message, /^Environment variable POSTGRAPHILE_DATABASE_URL is invalid: received .*, expected a URL starting with postgres:\/\/ or postgresql:\/\//);

  const alone = await refusal(t, { POSTGRAPHILE_DATABASE_URL: PG });
  t.equal(alone.code, "HUB_CONFIG_INVALID");
  t.match(alone.message, /^Environment variable SUPERUSER_DATABASE_URL is invalid: .*whenever POSTGRAPHILE_DATABASE_URL is set/);

  const both = await refusal(t, { POSTGRAPHILE_DATABASE_URL: PG, DATABASE_URL: PG_OTHER, SUPERUSER_DATABASE_URL: PG });
  t.equal(both.code, "HUB_CONFIG_INVALID");
  t.match(both.message, /POSTGRAPHILE_DATABASE_URL/);
  t.match(both.message, /the same URL as DATABASE_URL .*set only one of them/);
  for (const e of [malformed, alone, both]) t.notMatch(e.message, /secretpw|otherpw/, "never echoes a database password");

  // Both set to the same URL is one setting: it gets as far as connecting (nothing listens on port 1).
  const same = await refusal(t, { POSTGRAPHILE_DATABASE_URL: PG, DATABASE_URL: PG, SUPERUSER_DATABASE_URL: PG });
  t.equal(same.code, "HUB_DB_CONNECT", same.message);
});

t.test("LOG_PRETTY takes true or false, refused otherwise like other variables", async (t) => {
  for (const raw of ["yes", "1", "on", "TRUE"]) {
    const error = await refusal(t, { LOG_PRETTY: raw });
    t.equal(error.code, "HUB_CONFIG_INVALID");
    t.equal(error.message, `Environment variable LOG_PRETTY is invalid: received ${JSON.stringify(raw)}, expected true or false.`);
  }
});
