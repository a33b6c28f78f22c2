import "./helpers/env.js";
import t from "tap";
import { runServerExpectingFailure } from "./helpers/process.js";
import { tmpDir } from "./helpers/tmp.js";

// Each malformed value must stop start-up before anything is started, naming
// the variable, what was received and what is expected.
const cases: { env: Record<string, string>; mentions: RegExp[] }[] = [
  { env: { PORT: "abc" }, mentions: [/PORT/, /"abc"/, /integer from 0 to 65535/] },
  { env: { PORT: "70000" }, mentions: [/PORT/, /"70000"/] },
  { env: { PORT: "-1" }, mentions: [/PORT/, /"-1"/] },
  { env: { NODE_ENV: "staging" }, mentions: [/NODE_ENV/, /"staging"/, /development, production, test/] },
  { env: { LOG_LEVEL: "loud" }, mentions: [/LOG_LEVEL/, /"loud"/, /info/] },
  { env: { HOST: "not a host" }, mentions: [/HOST/, /"not a host"/] },
  { env: { HUB_DATA_DIR: " " }, mentions: [/HUB_DATA_DIR/] },
  {
    env: { DATABASE_URL: "mysql://u:secretpw@h/db", SUPERUSER_DATABASE_URL: "postgres://u:p@h/db" },
    mentions: [/DATABASE_URL/, /postgres:\/\//],
  },
  { env: { DATABASE_URL: "not a url", SUPERUSER_DATABASE_URL: "postgres://u:p@h/db" }, mentions: [/DATABASE_URL/, /"not a url"/] },
  { env: { DATABASE_URL: "postgres://u:p@localhost/db" }, mentions: [/SUPERUSER_DATABASE_URL/, /whenever DATABASE_URL is set/] },
  { env: { SUPERUSER_DATABASE_URL: "postgres://u:p@localhost/db" }, mentions: [/DATABASE_URL/] },
];

for (const { env, mentions } of cases) {
  t.test(`rejects ${JSON.stringify(env)}`, async (t) => {
    const dataDir = tmpDir(t);
    const { code, stderr } = await runServerExpectingFailure({ HUB_DATA_DIR: dataDir, DATABASE_URL: "", SUPERUSER_DATABASE_URL: "", ...env });
    t.equal(code, 1, "exits with code 1");
    for (const re of mentions) t.match(stderr, re);
    t.match(stderr, /HUB_CONFIG_INVALID/);
    t.notMatch(stderr, /secretpw/, "never echoes a database password");
  });
}

t.test("an unreachable database is reported with the variable and no password", async (t) => {
  const { code, stderr } = await runServerExpectingFailure({
    DATABASE_URL: "postgres://someone:secretpw@127.0.0.1:1/db",
    SUPERUSER_DATABASE_URL: "postgres://someone:secretpw@127.0.0.1:1/db",
  });
  t.equal(code, 1);
  t.match(stderr, /Cannot connect to SUPERUSER_DATABASE_URL/);
  t.match(stderr, /HUB_DB_CONNECT/);
  t.notMatch(stderr, /secretpw/);
});
