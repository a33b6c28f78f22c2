import "./helpers/env.js";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import pg from "pg";
import t from "tap";
import { ROOT } from "./helpers/process.js";
import { tmpDir } from "./helpers/tmp.js";
// Internal units, to inspect what the CLI wrote: the compiled files.
import { digest } from "../dist/src/credentials.js";
import { startEmbeddedPostgres } from "../dist/src/db/embedded.js";
import { createIdentityResolver } from "../dist/src/identity-resolver.js";
import { createLogger } from "../dist/src/logger.js";

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The last line of stdout: where the credential is. */
  last: string;
}

/** `node dist/cli.js …` as a user runs it (`hub …`), with the environment of a test. */
function hub(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  const childEnv: Record<string, string | undefined> = { ...process.env, NODE_ENV: "test", DATABASE_URL: "", SUPERUSER_DATABASE_URL: "", ...env };
  // The CLI's own default (warn) unless a test sets one.
  if (!("LOG_LEVEL" in env)) delete childEnv.LOG_LEVEL;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(ROOT, "dist/cli.js"), ...args], {
      cwd: ROOT,
      env: childEnv,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      const lines = stdout.split("\n").filter((l) => l !== "");
      resolve({ code, stdout, stderr, last: lines[lines.length - 1] ?? "" });
    });
  });
}

const TOKEN = /^[A-Za-z0-9_-]{43}$/;
const log = createLogger({ level: "error", pretty: false });

t.test("--help prints the usage on stdout and exits 0, without a database", async (t) => {
  const dataDir = path.join(tmpDir(t), "data");
  for (const args of [["--help"], ["-h"], ["session", "create", "--help"]]) {
    const run = await hub(args, { HUB_DATA_DIR: dataDir });
    t.equal(run.code, 0, `hub ${args.join(" ")}`);
    t.match(run.stdout, /Usage: hub <command>/);
    t.match(run.stdout, /api-key create/);
    t.match(run.stdout, /session create --uname NAME/);
    t.equal(run.stderr, "");
  }
  t.notOk(fs.existsSync(dataDir), "no database was started");
});

t.test("usage errors exit 2 with one line saying what was received and expected", async (t) => {
  const dataDir = path.join(tmpDir(t), "data");
  const cases: { args: string[]; stderr: RegExp[] }[] = [
    { args: [], stderr: [/no command given/, /"api-key create" or "session create"/] },
    { args: ["frobnicate"], stderr: [/unknown command "frobnicate"/, /"api-key create" or "session create"/] },
    { args: ["api-key"], stderr: [/unknown command "api-key"/] },
    { args: ["api-key", "delete"], stderr: [/unknown command "api-key delete"/] },
    { args: ["api-key", "create", "extra"], stderr: [/unexpected argument "extra" after "api-key create"/] },
    { args: ["api-key", "create", "--uname", "bob"], stderr: [/--uname is not an option of "api-key create"/] },
    { args: ["session", "create"], stderr: [/"session create" needs --uname NAME/, /received no --uname/] },
    { args: ["session", "create", "--uname"], stderr: [/--uname needs a value/] },
    { args: ["session", "create", "--uname", ""], stderr: [/--uname "" \(0 characters\) is invalid/, /1 to 200 characters/] },
    { args: ["session", "create", "--uname", "x".repeat(201)], stderr: [/--uname "x+\.\.\. \(201 characters\) is invalid/] },
    { args: ["session", "create", "--uname", "a\nb"], stderr: [/--uname "a\\nb" \(3 characters\) is invalid/, /control characters/] },
    { args: ["session", "create", "--uname", "a", "--uname", "b"], stderr: [/--uname was given 2 times \("a", "b"\)/, /expected it once/] },
    { args: ["session", "create", "--uname", "a", "--casino"], stderr: [/--casino needs a value/] },
    { args: ["session", "create", "--user", "a"], stderr: [/unknown option "--user"/, /expected --uname, --casino, --experience or --help/] },
    { args: ["session", "create", "alice"], stderr: [/unexpected argument "alice"/, /--uname/] },
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
    t.same(rows[0].key_digest, digest(first.last));
    t.notMatch(JSON.stringify(rows), first.last, "the key itself is stored nowhere");
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
    t.same(sessions.rows.map((r) => r.token_digest), [digest(a.last), digest(b.last)], "only digests are stored");
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
});
