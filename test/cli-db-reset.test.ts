/**
 * `hub db reset`: the embedded development database of HUB_DATA_DIR dropped
 * and recreated (a row created before is gone after), refused without --yes
 * when there is no terminal to ask on, and refused while DATABASE_URL is set
 * unless --force.
 */
import "./helpers/env.js";
import t from "tap";
import { runCli } from "./helpers/cli.js";
import { tmpDir } from "./helpers/tmp.js";

const NO_URLS = { DATABASE_URL: "", SUPERUSER_DATABASE_URL: "", POSTGRAPHILE_DATABASE_URL: "" };

t.test("db reset empties the development database", async (t) => {
  const env = { ...NO_URLS, HUB_DATA_DIR: tmpDir(t) };
  const created = await runCli(["api-key", "create"], env);
  t.equal(created.code, 0, created.stderr);
  const before = await runCli(["api-key", "list", "--json"], env);
  t.equal((JSON.parse(before.last) as unknown[]).length, 1, "a row before the reset");

  const unconfirmed = await runCli(["db", "reset"], env);
  t.equal(unconfirmed.code, 1);
  t.match(unconfirmed.stderr, /no terminal to ask on, so pass --yes to confirm/);
  t.equal((JSON.parse((await runCli(["api-key", "list", "--json"], env)).last) as unknown[]).length, 1, "nothing changed without --yes");

  const reset = await runCli(["db", "reset", "--yes"], env);
  t.equal(reset.code, 0, reset.stderr);
  t.match(reset.stderr, /reset the development database "hub"/);
  const after = await runCli(["api-key", "list", "--json"], env);
  t.equal(after.code, 0, after.stderr);
  t.same(JSON.parse(after.last), [], "the row is gone (the tables are back, empty)");
});

t.test("db reset with DATABASE_URL set: refused unless --force; a usage error for an unknown flag", async (t) => {
  const env = {
    HUB_DATA_DIR: tmpDir(t),
    DATABASE_URL: "postgres://someone:pw@db.example:5432/prod",
    SUPERUSER_DATABASE_URL: "postgres://admin:pw@db.example:5432/prod",
  };
  const refused = await runCli(["db", "reset", "--yes"], env);
  t.equal(refused.code, 1);
  t.match(refused.stderr, /DATABASE_URL is set, so your server uses that database, not the embedded one; .*pass --force/);
  const forced = await runCli(["db", "reset", "--yes", "--force"], env);
  t.equal(forced.code, 0, forced.stderr);
  t.match(forced.stderr, /reset the development database "hub"/, "--force: the embedded one, never the URL's");

  const wrong = await runCli(["db", "reset", "--json"], env);
  t.equal(wrong.code, 2);
  t.match(wrong.stderr, /--json is not an option of "db reset"; expected --yes, --force or --help/);
});
