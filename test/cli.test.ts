import "./helpers/env.js";
import fs from "node:fs";
import path from "node:path";
import pg from "pg";
import t from "tap";
import { runCli } from "./helpers/cli.js";
import { tmpDir } from "./helpers/tmp.js";
import { dumpDatabase, findSecret, sha256 } from "./helpers/secrets.js";
// Internal units, to inspect what the CLI wrote: the compiled files.
import { startEmbeddedPostgres } from "../dist/src/db/embedded.js";
import { createIdentityResolver } from "../dist/src/auth/resolver.js";
import { createLogger } from "../dist/src/logger.js";

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The last line of stdout: where the credential is. */
  last: string;
}

/** `node dist/cli.js …` as a user runs it (`hub …`), with the environment of a test. */
const hub = (args: string[], env: Record<string, string | undefined> = {}): Promise<Run> => runCli(args, { DATABASE_URL: "", SUPERUSER_DATABASE_URL: "", ...env });

/** Credentials are random UUIDs (version 4). */
const TOKEN = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const log = createLogger({ level: "error", pretty: false });

t.test("--help prints the usage on stdout and exits 0, without a database", async (t) => {
  const dataDir = path.join(tmpDir(t), "data");
  for (const args of [["--help"], ["-h"], ["session", "create", "--help"], ["balance", "credit", "-h"]]) {
    const run = await hub(args, { HUB_DATA_DIR: dataDir });
    t.equal(run.code, 0, `hub ${args.join(" ")}`);
    t.match(run.stdout, /Usage: hub <command>/);
    t.match(run.stdout, /api-key create/);
    t.match(run.stdout, /session create --uname NAME/);
    t.match(run.stdout, /api-key list \[--json\]/);
    t.match(run.stdout, /api-key revoke --id UUID/);
    t.match(run.stdout, /session revoke --id UUID \| --token TOKEN/);
    t.match(run.stdout, /casino add --name NAME \[--base-url URL\] \[--jwt-public-key-file PATH \| --jwks-url URL\]/);
    t.match(run.stdout, /balance credit --uname NAME --currency KEY --amount N/);
    t.equal(run.stderr, "");
  }
  t.notOk(fs.existsSync(dataDir), "no database was started");
});

t.test("usage errors exit 2 with one line saying what was received and expected", async (t) => {
  const dataDir = path.join(tmpDir(t), "data");
  const ALL = /"api-key create", "api-key list", "api-key revoke", "session create", "session revoke", "casino add", "balance credit" or "transfers list"/;
  const UUID = "0190f3a0-6b1c-7cde-8f00-1234567890ab";
  const credit = ["balance", "credit", "--uname", "alice", "--currency", "HOUSE"];
  const cases: { args: string[]; stderr: RegExp[] }[] = [
    { args: [], stderr: [/no command given/, ALL] },
    { args: ["frobnicate"], stderr: [/unknown command "frobnicate"/, ALL] },
    { args: ["api-key"], stderr: [/unknown command "api-key"/] },
    { args: ["api-key", "delete"], stderr: [/unknown command "api-key delete"/] },
    { args: ["api-key", "create", "extra"], stderr: [/unexpected argument "extra" after "api-key create"/] },
    { args: ["api-key", "create", "--uname", "bob"], stderr: [/--uname is not an option of "api-key create"; it takes none/] },
    { args: ["api-key", "create", "--frob"], stderr: [/unknown option "--frob": "api-key create" takes no options/] },
    { args: ["session", "create"], stderr: [/"session create" needs --uname NAME/, /received no --uname/] },
    { args: ["session", "create", "--uname"], stderr: [/--uname needs a value, as in --uname=NAME/] },
    { args: ["session", "create", "--uname", ""], stderr: [/--uname "" \(0 characters\) is invalid/, /1 to 200 characters/] },
    { args: ["session", "create", "--uname", "x".repeat(201)], stderr: [/--uname "x+\.\.\. \(201 characters\) is invalid/] },
    { args: ["session", "create", "--uname", "a\nb"], stderr: [/--uname "a\\nb" \(3 characters\) is invalid/, /control characters/] },
    { args: ["session", "create", "--uname", "a", "--uname", "b"], stderr: [/--uname was given 2 times \("a", "b"\)/, /expected it once/] },
    { args: ["session", "create", "--uname", "a", "--casino"], stderr: [/--casino needs a value/] },
    { args: ["session", "create", "--user", "a"], stderr: [/unknown option "--user"/, /expected --uname, --casino, --experience or --help/] },
    { args: ["session", "create", "alice"], stderr: [/unexpected argument "alice"/, /--uname/] },
    { args: ["session", "create", "--uname", "a", "--json"], stderr: [/--json is not an option of "session create"; expected --uname, --casino, --experience or --help/] },
    // api-key list / revoke
    { args: ["api-key", "list", "all"], stderr: [/unexpected argument "all" after "api-key list"/] },
    { args: ["api-key", "list", "--json=yes"], stderr: [/--json takes no value; received "--json=yes"/] },
    { args: ["api-key", "list", "--id", UUID], stderr: [/--id is not an option of "api-key list"; expected --json or --help/] },
    { args: ["api-key", "revoke"], stderr: [/"api-key revoke" needs --id UUID/, /hub api-key list/] },
    { args: ["api-key", "revoke", "--id", "42"], stderr: [/--id "42" is invalid: expected a UUID/] },
    { args: ["api-key", "revoke", "--id", UUID, "--id", UUID], stderr: [/--id was given 2 times/] },
    { args: ["api-key", "revoke", UUID], stderr: [/unexpected argument ".*" after "api-key revoke".*values go in --id/] },
    // session revoke
    { args: ["session", "revoke"], stderr: [/"session revoke" needs exactly one of --id UUID or --token TOKEN; received neither/] },
    { args: ["session", "revoke", "--id", UUID, "--token", "abc"], stderr: [/exactly one of --id UUID or --token TOKEN; received both/] },
    { args: ["session", "revoke", "--token", ""], stderr: [/--token is invalid \(0 characters\)/] },
    { args: ["session", "revoke", "--token", "a b"], stderr: [/--token is invalid \(3 characters\)/, /visible ASCII/] },
    { args: ["session", "revoke", "--id", "not-a-uuid"], stderr: [/--id "not-a-uuid" is invalid: expected a UUID/] },
    // casino add
    { args: ["casino", "add"], stderr: [/"casino add" needs --name NAME/] },
    { args: ["casino", "add", "--name", "x", "--base-url", "ftp://x"], stderr: [/--base-url "ftp:\/\/x" is invalid: expected an http:\/\/ or https:\/\/ URL/] },
    { args: ["casino", "add", "--name", "x", "--base-url", "not a url"], stderr: [/--base-url "not a url" is invalid/] },
    { args: ["casino", "add", "--nme", "x"], stderr: [/unknown option "--nme": expected --name, --base-url, --jwt-public-key-file, --jwks-url, --jwt-issuer, --jwt-audience or --help/] },
    // balance credit
    { args: ["balance", "credit"], stderr: [/"balance credit" needs --uname NAME/] },
    { args: ["balance", "credit", "--uname", "alice", "--amount", "1"], stderr: [/"balance credit" needs --currency KEY/] },
    { args: credit, stderr: [/"balance credit" needs --amount N \(how much to add, a whole number of base units of at least 1\)/] },
    { args: [...credit, "--amount", "0"], stderr: [/--amount "0" is invalid: expected a whole number of base units from 1 to 9007199254740991, such as 100/] },
    { args: [...credit, "--amount", "2.5"], stderr: [/--amount "2\.5" is invalid: expected a whole number of base units/] },
    { args: [...credit, "--amount=-5"], stderr: [/--amount "-5" is invalid/] },
    { args: [...credit, "--amount", "-5"], stderr: [/--amount "-5" is invalid/] },
    { args: ["session", "create", "--uname", "-bob"], stderr: [/--uname is followed by "-bob", which looks like an option; .*--uname=-bob/] },
    { args: [...credit, "--amount", "1e999"], stderr: [/--amount "1e999" is invalid: expected a whole number/] },
    { args: [...credit, "--amount", "NaN"], stderr: [/--amount "NaN" is invalid/] },
    { args: [...credit, "--amount", "0x10"], stderr: [/--amount "0x10" is invalid/] },
    { args: [...credit, "--amount", "ten"], stderr: [/--amount "ten" is invalid/] },
    { args: [...credit, "--amount", ""], stderr: [/--amount "" is invalid/] },
    { args: [...credit, "--amount", "1", "--amount", "2"], stderr: [/--amount was given 2 times/] },
    { args: ["balance", "credit", "--uname", "a", "--currency", "US DOLLAR", "--amount", "1"], stderr: [/--currency "US DOLLAR" is invalid: expected a currency key/] },
    { args: [...credit, "--amount", "1", "--reason", "r".repeat(1001)], stderr: [/--reason "r+\.\.\. \(1001 characters\) is invalid/] },
    { args: [...credit, "--amount", "1", "--name", "x"], stderr: [/--name is not an option of "balance credit"; expected --uname, --currency, --amount, --casino, --experience, --reason or --help/] },
    { args: ["balance", "debit"], stderr: [/unknown command "balance debit"/] },
  ];
  const runs = await Promise.all(cases.map(({ args }) => hub(args, { HUB_DATA_DIR: dataDir })));
  for (const [i, { args, stderr }] of cases.entries()) {
    const run = runs[i]!;
    const name = `hub ${JSON.stringify(args)}`;
    t.equal(run.code, 2, `${name} exits 2`);
    for (const re of stderr) t.match(run.stderr, re, name);
    t.equal(run.stderr.trim().split("\n").length, 1, `${name}: one line on stderr`);
    if (args.length > 0) t.equal(run.stdout, "", `${name}: nothing on stdout`);
  }
  t.notOk(fs.existsSync(dataDir), "no database was started");
});

t.test("runtime errors exit 1 with one line and no password", async (t) => {
  const unreachable = await hub(["api-key", "create"], {
    DATABASE_URL: "postgres://someone:secretpw@127.0.0.1:1/db",
    SUPERUSER_DATABASE_URL: "postgres://someone:secretpw@127.0.0.1:1/db",
  });
  t.equal(unreachable.code, 1);
  t.match(unreachable.stderr, /Cannot connect to the database/);
  t.match(unreachable.stderr, /HUB_DB_CONNECT/);
  t.notMatch(unreachable.stderr, /secretpw/);
  t.equal(unreachable.stdout, "");

  const badConfig = await hub(["api-key", "create"], { LOG_LEVEL: "loud", HUB_DATA_DIR: tmpDir(t) });
  t.equal(badConfig.code, 1);
  t.match(badConfig.stderr, /LOG_LEVEL.*"loud"/);
  t.match(badConfig.stderr, /HUB_CONFIG_INVALID/);
});

t.test("against the embedded database", async (t) => {
  // A cluster of its own: the CLI's own creating, starting and stopping of the embedded Postgres is under test.
  const dataDir = tmpDir(t);

  // First run on a fresh data dir: the CLI creates the cluster, starts it,
  // migrates, and stops what it started.
  const first = await hub(["api-key", "create"], { HUB_DATA_DIR: dataDir });
  t.equal(first.code, 0, first.stderr);
  t.match(first.last, TOKEN, "the key alone on the last line of stdout");
  t.equal(first.stdout, `${first.last}\n`, "and nothing else on stdout");
  t.notOk(fs.existsSync(path.join(dataDir, "pg", "postmaster.pid")), "the Postgres it started is stopped");

  // From here on the test holds the database; the CLI attaches to it.
  const db = await startEmbeddedPostgres({ dataDir, log, fastInit: true });
  t.ok(db.owned, "the test started it: nothing was left running");
  // pool.end() resolves before its sockets are closed, so a client may still
  // see Postgres's shutdown: ignore errors of idle clients.
  const admin = new pg.Pool({ connectionString: db.superuserUrl, max: 4 }).on("error", () => undefined);
  t.teardown(async () => {
    await admin.end();
    await db.stop();
  });
  const resolver = createIdentityResolver(admin, { cacheTtlMs: 0 });

  t.test("api-key create stores only the key's digest", async (t) => {
    const { rows } = await admin.query("select * from hub.api_key");
    t.equal(rows.length, 1);
    t.same(rows[0].key_digest, sha256(first.last), "the SHA-256 of the key (computed here)");
    const dump = await dumpDatabase(admin);
    t.same(findSecret(dump, first.last), [], "the key itself is stored nowhere, in any form");
    t.same(await resolver.resolve(`apikey:${first.last}`), { kind: "operator", apiKey: first.last, apiKeyId: rows[0].id });

    const second = await hub(["api-key", "create"], { HUB_DATA_DIR: dataDir });
    t.equal(second.code, 0, second.stderr);
    t.match(second.last, TOKEN);
    t.not(second.last, first.last, "each key is new");
    t.ok(fs.existsSync(path.join(dataDir, "pg", "postmaster.pid")), "the CLI left running the Postgres it attached to");
    t.equal((await admin.query("select count(*)::int as n from hub.api_key")).rows[0].n, 2);
  });

  t.test("logs go to stderr, never stdout", async (t) => {
    const run = await hub(["api-key", "create"], { HUB_DATA_DIR: dataDir, LOG_LEVEL: "debug" });
    t.equal(run.code, 0, run.stderr);
    t.match(run.stderr, /"level":/, "debug logs were written");
    t.equal(run.stdout, `${run.last}\n`, "stdout holds only the key");
    t.match(run.last, TOKEN);
  });

  t.test("session create creates the player in the playground and is idempotent per uname", async (t) => {
    const a = await hub(["session", "create", "--uname", "alice"], { HUB_DATA_DIR: dataDir });
    t.equal(a.code, 0, a.stderr);
    t.match(a.last, TOKEN);
    t.equal(a.stdout, `${a.last}\n`);
    const b = await hub(["session", "create", "--uname=alice"], { HUB_DATA_DIR: dataDir });
    t.equal(b.code, 0, b.stderr);
    t.not(b.last, a.last, "a new session each time");

    const users = await admin.query(
      "select u.*, c.name as casino, c.is_playground from hub.user u join hub.casino c on c.id = u.casino_id where u.uname = 'alice'",
    );
    t.equal(users.rows.length, 1, "one user alice");
    t.equal(users.rows[0].casino, "playground");
    t.equal(users.rows[0].is_playground, true);
    const sessions = await admin.query(
      "select s.*, e.name as experience from hub.session s join hub.experience e on e.id = s.experience_id where s.user_id = $1 order by s.id",
      [users.rows[0].id],
    );
    t.equal(sessions.rows.length, 2);
    t.same(sessions.rows.map((r) => r.token_digest), [sha256(a.last), sha256(b.last)], "the SHA-256 of each token (computed here)");
    const dump = await dumpDatabase(admin);
    for (const token of [a.last, b.last]) t.same(findSecret(dump, token), [], "the token itself is stored nowhere, in any form");
    t.same(sessions.rows.map((r) => r.experience), ["default", "default"]);
    t.equal((await admin.query("select count(*)::int as n from hub.casino where name = 'playground'")).rows[0].n, 1);

    const identity = await resolver.resolve(`session:${a.last}`);
    t.equal(identity?.kind, "user");
    if (identity?.kind === "user") {
      t.equal(identity.user.uname, "alice");
      t.equal(identity.sessionId, sessions.rows[0].id);
    }
  });

  t.test("session create with --casino and --experience creates them when missing", async (t) => {
    const run = await hub(["session", "create", "--uname", "bob", "--casino", "acme", "--experience", "dice"], { HUB_DATA_DIR: dataDir });
    t.equal(run.code, 0, run.stderr);
    const identity = await resolver.resolve(`session:${run.last}`);
    if (identity?.kind !== "user") throw new Error(`expected a user identity, got ${JSON.stringify(identity)}`);
    const { rows } = await admin.query(
      "select c.name as casino, c.is_playground, e.name as experience from hub.casino c, hub.experience e where c.id = $1 and e.id = $2",
      [identity.session.casino_id, identity.session.experience_id],
    );
    t.same(rows, [{ casino: "acme", is_playground: false, experience: "dice" }]);
    t.equal(identity.user.casino_id, identity.session.casino_id);

    const again = await hub(["session", "create", "--uname", "bob", "--casino", "acme", "--experience", "dice"], { HUB_DATA_DIR: dataDir });
    t.equal(again.code, 0, again.stderr);
    const counts = await admin.query(
      `select (select count(*)::int from hub.casino where name = 'acme') as casinos,
              (select count(*)::int from hub.user where uname = 'bob') as users,
              (select count(*)::int from hub.experience where name = 'dice') as experiences`,
    );
    t.same(counts.rows[0], { casinos: 1, users: 1, experiences: 1 });
  });

  t.test("concurrent session create for a new uname makes one user", async (t) => {
    const runs = await Promise.all(Array.from({ length: 4 }, () => hub(["session", "create", "--uname", "carol", "--casino", "concurrent"], { HUB_DATA_DIR: dataDir })));
    for (const run of runs) t.equal(run.code, 0, run.stderr);
    t.equal(new Set(runs.map((r) => r.last)).size, 4, "four sessions");
    const { rows } = await admin.query(
      `select (select count(*)::int from hub.casino where name = 'concurrent') as casinos,
              (select count(*)::int from hub.user where uname = 'carol') as users,
              (select count(*)::int from hub.session s join hub.user u on u.id = s.user_id where u.uname = 'carol') as sessions`,
    );
    t.same(rows[0], { casinos: 1, users: 1, sessions: 4 });
  });

  t.test("api-key list shows ids and times, never keys; --json for scripts", async (t) => {
    const { rows } = await admin.query<{ id: string; created_at: Date }>("select id, created_at from hub.api_key order by id");
    const text = await hub(["api-key", "list"], { HUB_DATA_DIR: dataDir });
    t.equal(text.code, 0, text.stderr);
    const lines = text.stdout.trimEnd().split("\n");
    t.match(lines[0], /^id +created_at +last_used_at +revoked_at$/, "a header");
    t.equal(lines.length, rows.length + 1, "a line per key");
    for (const [i, row] of rows.entries()) {
      const line = lines[i + 1]!;
      t.match(line, new RegExp(`^${row.id} +${row.created_at.toISOString().replace(/\./g, "\\.")} +- +-$`));
      t.equal(line.indexOf(row.created_at.toISOString()), lines[0]!.indexOf("created_at"), "columns are aligned");
    }
    t.notMatch(text.stdout, first.last, "the key itself is never printed");
    t.match(text.stderr, new RegExp(`^hub: ${rows.length} API keys\\.\\n$`));

    const json = await hub(["api-key", "list", "--json"], { HUB_DATA_DIR: dataDir });
    t.equal(json.code, 0, json.stderr);
    t.same(JSON.parse(json.stdout), rows.map((r) => ({ id: r.id, created_at: r.created_at.toISOString(), last_used_at: null, revoked_at: null })));
    t.equal(json.stdout.trim().split("\n").length, 1, "one line of JSON");
  });

  t.test("api-key revoke: the key stops resolving", async (t) => {
    const created = await hub(["api-key", "create"], { HUB_DATA_DIR: dataDir });
    t.equal(created.code, 0, created.stderr);
    const identity = await resolver.resolve(`apikey:${created.last}`);
    if (identity?.kind !== "operator") throw new Error("expected the new key to resolve");

    const revoke = await hub(["api-key", "revoke", "--id", identity.apiKeyId.toUpperCase()], { HUB_DATA_DIR: dataDir });
    t.equal(revoke.code, 0, revoke.stderr);
    t.equal(revoke.last, identity.apiKeyId, "the id on the last line");
    t.equal(revoke.stdout, `${identity.apiKeyId}\n`);
    t.match(revoke.stderr, /revoked API key .*refused within 1 s/);
    t.equal(await resolver.resolve(`apikey:${created.last}`), undefined, "the key no longer resolves");
    t.equal(await resolver.resolve(`apikey:${first.last}`).then((i) => i?.kind), "operator", "other keys still do");
    const { rows } = await admin.query("select revoked_at from hub.api_key where id = $1", [identity.apiKeyId]);
    t.type(rows[0].revoked_at, Date);

    const again = await hub(["api-key", "revoke", "--id", identity.apiKeyId], { HUB_DATA_DIR: dataDir });
    t.equal(again.code, 0, "revoking twice is not an error");
    t.match(again.stderr, /already revoked at .*nothing changed/);
    t.equal(again.last, identity.apiKeyId);
    t.same((await admin.query("select revoked_at from hub.api_key where id = $1", [identity.apiKeyId])).rows, rows, "the first revocation time is kept");

    const listed = await hub(["api-key", "list", "--json"], { HUB_DATA_DIR: dataDir });
    const entry = (JSON.parse(listed.stdout) as { id: string; revoked_at: string | null }[]).find((k) => k.id === identity.apiKeyId);
    t.equal(entry?.revoked_at, (rows[0].revoked_at as Date).toISOString(), "the list shows when");
    t.match(listed.stderr, /\(1 revoked\)/);

    const unknown = await hub(["api-key", "revoke", "--id", "0190f3a0-6b1c-7cde-8f00-1234567890ab"], { HUB_DATA_DIR: dataDir });
    t.equal(unknown.code, 1);
    t.equal(unknown.stderr, "hub: no API key has the id 0190f3a0-6b1c-7cde-8f00-1234567890ab (hub api-key list shows them).\n");
    t.equal(unknown.stdout, "");
  });

  t.test("session revoke by --id or by --token: the session stops resolving", async (t) => {
    const tokens = [];
    for (let i = 0; i < 3; i++) {
      const run = await hub(["session", "create", "--uname", "revokee"], { HUB_DATA_DIR: dataDir });
      t.equal(run.code, 0, run.stderr);
      tokens.push(run.last);
    }
    const ids = [];
    for (const token of tokens) {
      const identity = await resolver.resolve(`session:${token}`);
      if (identity?.kind !== "user") throw new Error("expected the new session to resolve");
      ids.push(identity.sessionId);
    }

    const byId = await hub(["session", "revoke", "--id", ids[0]!], { HUB_DATA_DIR: dataDir });
    t.equal(byId.code, 0, byId.stderr);
    t.equal(byId.stdout, `${ids[0]}\n`, "the session id on the last line");
    t.equal(await resolver.resolve(`session:${tokens[0]}`), undefined, "revoked by id");

    const byToken = await hub(["session", "revoke", "--token", tokens[1]!], { HUB_DATA_DIR: dataDir });
    t.equal(byToken.code, 0, byToken.stderr);
    t.equal(byToken.last, ids[1]);
    t.equal(await resolver.resolve(`session:${tokens[1]}`), undefined, "revoked by token");
    t.notMatch(byToken.stderr + byToken.stdout, tokens[1]!, "the token is not echoed");

    const byHeader = await hub(["session", "revoke", "--token", `session:${tokens[2]}`], { HUB_DATA_DIR: dataDir });
    t.equal(byHeader.code, 0, byHeader.stderr);
    t.equal(byHeader.last, ids[2], "the header form session:<token> works too");
    t.equal(await resolver.resolve(`session:${tokens[2]}`), undefined);

    // Tokens issued before UUIDs are base64url: one in 64 starts with "-", and must still be accepted as a value.
    const dashToken = `-${"A".repeat(42)}`;
    const { rows: dashed } = await admin.query<{ id: string }>(
      `insert into hub.session (user_id, casino_id, experience_id, token_digest)
       select user_id, casino_id, experience_id, $2 from hub.session where id = $1 returning id`,
      [ids[0], sha256(dashToken)],
    );
    t.equal((await resolver.resolve(`session:${dashToken}`))?.kind, "user");
    const byDashToken = await hub(["session", "revoke", "--token", dashToken], { HUB_DATA_DIR: dataDir });
    t.equal(byDashToken.code, 0, "a token starting with - is a value", { stderr: byDashToken.stderr });
    t.equal(byDashToken.last, dashed[0]!.id);
    t.equal(await resolver.resolve(`session:${dashToken}`), undefined);

    const again = await hub(["session", "revoke", "--token", tokens[1]!], { HUB_DATA_DIR: dataDir });
    t.equal(again.code, 0);
    t.match(again.stderr, /already revoked at .*nothing changed/);

    const unknownToken = await hub(["session", "revoke", "--token", "A".repeat(43)], { HUB_DATA_DIR: dataDir });
    t.equal(unknownToken.code, 1);
    t.match(unknownToken.stderr, /^hub: no session has this token/);
    t.equal(unknownToken.stderr.trim().split("\n").length, 1);
    const unknownId = await hub(["session", "revoke", "--id", "0190f3a0-6b1c-7cde-8f00-1234567890ab"], { HUB_DATA_DIR: dataDir });
    t.equal(unknownId.code, 1);
    t.equal(unknownId.stderr, "hub: no session has the id 0190f3a0-6b1c-7cde-8f00-1234567890ab.\n");
  });

  t.test("casino add registers a casino and prints its id", async (t) => {
    const run = await hub(["casino", "add", "--name", "royal", "--base-url", "https://royal.example"], { HUB_DATA_DIR: dataDir });
    t.equal(run.code, 0, run.stderr);
    const { rows } = await admin.query("select id, name, base_url, is_playground from hub.casino where name = 'royal'");
    t.same(rows, [{ id: run.last, name: "royal", base_url: "https://royal.example", is_playground: false }]);
    t.equal(run.stdout, `${run.last}\n`);

    const plain = await hub(["casino", "add", "--name=plain"], { HUB_DATA_DIR: dataDir });
    t.equal(plain.code, 0, plain.stderr);
    t.same((await admin.query("select base_url from hub.casino where id = $1", [plain.last])).rows, [{ base_url: null }]);

    const sameName = await hub(["casino", "add", "--name", "royal"], { HUB_DATA_DIR: dataDir });
    t.equal(sameName.code, 1);
    t.equal(sameName.stderr, `hub: a casino named "royal" already exists (${run.last}).\n`);
    const sameUrl = await hub(["casino", "add", "--name", "copycat", "--base-url", "https://royal.example"], { HUB_DATA_DIR: dataDir });
    t.equal(sameUrl.code, 1);
    t.match(sameUrl.stderr, /^hub: the base URL https:\/\/royal\.example is already the casino "royal"'s/);
    t.equal((await admin.query("select count(*)::int as n from hub.casino where name = 'copycat'")).rows[0].n, 0);
  });

  t.test("casino add registers the casino's token key (PEM file or JWKS URL), checked first", async (t) => {
    const { generateKeyPair, exportSPKI } = await import("jose");
    const { publicKey } = await generateKeyPair("ES256");
    const keyFile = path.join(dataDir, "acme.pem");
    fs.writeFileSync(keyFile, await exportSPKI(publicKey));
    const run = await hub(["casino", "add", "--name", "keyed", "--jwt-public-key-file", keyFile, "--jwt-audience", "hub"], { HUB_DATA_DIR: dataDir });
    t.equal(run.code, 0, run.stderr);
    const auth = await admin.query("select public_key, jwks_url, audience from hub_secret.casino_auth where casino_id = $1", [run.last]);
    t.match(auth.rows, [{ public_key: /BEGIN PUBLIC KEY/, jwks_url: null, audience: "hub" }]);
    const jwks = await hub(["casino", "add", "--name", "jwksed", "--jwks-url", "https://jwksed.example/jwks.json"], { HUB_DATA_DIR: dataDir });
    t.equal(jwks.code, 0, jwks.stderr);
    t.match((await admin.query("select jwks_url from hub_secret.casino_auth where casino_id = $1", [jwks.last])).rows, [{ jwks_url: "https://jwksed.example/jwks.json" }]);

    const badFile = path.join(dataDir, "bad.pem");
    fs.writeFileSync(badFile, "not a key");
    const bad = await hub(["casino", "add", "--name", "badkey", "--jwt-public-key-file", badFile], { HUB_DATA_DIR: dataDir });
    t.equal(bad.code, 1);
    t.match(bad.stderr, /--jwt-public-key-file ".*bad\.pem" is not usable: expected a PEM public key/);
    t.equal((await admin.query("select count(*)::int as n from hub.casino where name = 'badkey'")).rows[0].n, 0, "nothing is created");
    const both = await hub(["casino", "add", "--name", "x", "--jwt-public-key-file", keyFile, "--jwks-url", "https://x.example/j"], { HUB_DATA_DIR: dataDir });
    t.equal(both.code, 2);
    t.match(both.stderr, /takes --jwt-public-key-file or --jwks-url, not both/);
  });

  t.test("balance credit adds to the balance, creating it, and records each change in the ledger", async (t) => {
    const session = await hub(["session", "create", "--uname", "rich"], { HUB_DATA_DIR: dataDir });
    t.equal(session.code, 0, session.stderr);
    const identity = await resolver.resolve(`session:${session.last}`);
    if (identity?.kind !== "user") throw new Error("expected a user");
    const { user_id, experience_id } = identity.session;

    const credited = await hub(["balance", "credit", "--uname", "rich", "--currency", "HOUSE", "--amount", "100"], { HUB_DATA_DIR: dataDir });
    t.equal(credited.code, 0, credited.stderr);
    t.equal(credited.stdout, "100\n", "the new balance on the last line");
    t.match(credited.stderr, /credited 100 HOUSE to "rich" .* the balance is now 100 \(ledger entry [0-9a-f-]{36}\)/);
    const second = await hub(["balance", "credit", "--uname", "rich", "--currency", "HOUSE", "--amount", "3", "--reason", "refund of bet 12"], {
      HUB_DATA_DIR: dataDir,
    });
    t.equal(second.code, 0, second.stderr);
    t.equal(second.last, "103");

    const balance = await admin.query("select amount from hub.balance where user_id = $1 and experience_id = $2 and currency_key = 'HOUSE'", [user_id, experience_id]);
    t.same(balance.rows, [{ amount: 103 }]);
    const ledger = await admin.query(
      "select account, amount_delta, balance_after, actor, reason from hub.ledger where user_id = $1 and experience_id = $2 order by id",
      [user_id, experience_id],
    );
    t.match(ledger.rows, [
      { account: "player", amount_delta: 100, balance_after: 100, actor: /^cli:/, reason: "hub balance credit" },
      { account: "player", amount_delta: 3, balance_after: 103, actor: /^cli:/, reason: "refund of bet 12" },
    ]);
    t.equal(ledger.rows.length, 2);
    t.equal(ledger.rows.reduce((sum: number, r: { amount_delta: number }) => sum + r.amount_delta, 0), 103, "the ledger sums to the balance");

    // Another casino and experience, named explicitly.
    const elsewhere = await hub(["session", "create", "--uname", "rich", "--casino", "acme", "--experience", "dice"], { HUB_DATA_DIR: dataDir });
    t.equal(elsewhere.code, 0, elsewhere.stderr);
    await admin.query("insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale) select 'CHIP', id, 'chips', 1 from hub.casino where name = 'acme'");
    const inAcme = await hub(["balance", "credit", "--uname", "rich", "--casino", "acme", "--experience", "dice", "--currency", "CHIP", "--amount", "7"], {
      HUB_DATA_DIR: dataDir,
    });
    t.equal(inAcme.code, 0, inAcme.stderr);
    t.equal(inAcme.last, "7");
    t.same(balance.rows, (await admin.query("select amount from hub.balance where user_id = $1 and experience_id = $2 and currency_key = 'HOUSE'", [user_id, experience_id])).rows, "the playground balance did not move");

    const failures: [string[], RegExp][] = [
      [["--uname", "nobody", "--currency", "HOUSE", "--amount", "1"], /^hub: casino "playground" has no player "nobody"; .*hub session create --uname "nobody"/],
      [["--uname", "rich", "--currency", "EUR", "--amount", "1"], /^hub: casino "playground" has no currency "EUR" \(it has "HOUSE"\)\.$/],
      [["--uname", "rich", "--casino", "nowhere", "--currency", "HOUSE", "--amount", "1"], /^hub: no casino is named "nowhere" \(hub casino add --name "nowhere" adds it\)\.$/],
      [["--uname", "rich", "--experience", "poker", "--currency", "HOUSE", "--amount", "1"], /^hub: casino "playground" has no experience "poker"\.$/],
      [["--uname", "rich", "--currency", "HOUSE", "--amount", "1000"], /^hub: credit_balance: the balance would exceed 9007199254740991 base units \(it is 9007199254740000, the credit 1000\)\./],
    ];
    // Near the largest amount a float8 holds exactly (2^53 - 1): the ledger refuses to go past it.
    await admin.query("select hub_hidden.credit_balance($1, u.casino_id, $2, 'HOUSE', 9007199254740000 - 103, 'test', 'near the limit') from hub.user u where u.id = $1", [user_id, experience_id]);
    for (const [args, stderr] of failures) {
      const run = await hub(["balance", "credit", ...args], { HUB_DATA_DIR: dataDir });
      t.equal(run.code, 1, `balance credit ${args.join(" ")} exits 1`);
      t.match(run.stderr.trim(), stderr);
      t.equal(run.stderr.trim().split("\n").length, 1, "on one line");
      t.equal(run.stdout, "", "nothing on stdout");
    }
  });
});
