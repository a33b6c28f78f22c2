/**
 * `hub init` as a new user runs it, outside this repository: the package as
 * `npm pack` ships it, a project scaffolded in a temporary folder, installed
 * from the registry (the npm cache when it has the packages), then its
 * `npm start` serving on its own embedded Postgres, its `npm test` and its
 * type check passing.
 */
import "./helpers/env.js";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import t from "tap";
import { runCli } from "./helpers/cli.js";
import { ROOT, nodeTestSummary } from "./helpers/process.js";
import { tmpDir } from "./helpers/tmp.js";

interface Done {
  code: number | null;
  output: string;
}

/**
 * The environment of a user's shell: without what tap, npm's own run of this
 * test, or the hub's tests set (a loader in NODE_OPTIONS, npm_config_*, the
 * hub's variables).
 */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(npm_|TAP|HUB_|NODE_OPTIONS$|NODE_ENV$|LOG_LEVEL$|PORT$|DATABASE_URL$|SUPERUSER_DATABASE_URL$)/i.test(key)) continue;
    env[key] = value;
  }
  return { ...env, ...extra };
}

/** Run a command to its end (killed after timeoutMs), with its output. */
function run(command: string, args: string[], cwd: string, timeoutMs: number, env = userEnv()): Promise<Done> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => (output += c.toString()));
    const timer = setTimeout(() => {
      output += `\n[killed: still running after ${timeoutMs} ms]`;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

// npm install, a server's start and the project's tests, one after the other, on a loaded machine.
t.setTimeout(900_000);

const npm = process.platform === "win32" ? "npm.cmd" : "npm";

/** Whether the postmaster of this pid file has exited within timeoutMs (the file gone, or its process). */
async function stopped(pidFile: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let alive = false;
    try {
      const pid = Number(fs.readFileSync(pidFile, "utf8").split("\n")[0]);
      process.kill(pid, 0);
      alive = true;
    } catch {
      alive = false;
    }
    if (!alive) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function graphql(url: string, query: string, headers: Record<string, string> = {}): Promise<{ data?: Record<string, unknown>; errors?: unknown[] }> {
  const res = await fetch(`${url}/graphql`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ query }) });
  return (await res.json()) as { data?: Record<string, unknown>; errors?: unknown[] };
}

t.test("hub init: a project from the packed hub installs, serves with npm start, and passes npm test and its type check", async (t) => {
  const work = tmpDir(t, "hub-scaffold-");
  const pack = await run(npm, ["pack", "--pack-destination", work, "--silent"], ROOT, 120_000, userEnv());
  t.equal(pack.code, 0, `npm pack:\n${pack.output}`);
  const tarball = path.join(work, pack.output.trim().split("\n").pop()!.trim());
  t.ok(fs.existsSync(tarball), `the tarball ${tarball}`);

  const dir = path.join(work, "my-game");
  const init = await runCli(["init", dir, "--hub", tarball], {});
  t.equal(init.code, 0, `hub init:\n${init.stderr}`);
  t.equal(init.stdout.trim(), dir, "the result line is the project's folder");
  for (const file of ["package.json", "src/index.ts", "src/dice.ts", "src/options.ts", "migrations/001-dice.sql", "test/dice.test.ts", ".env.example", ".gitignore", "README.md", "tsconfig.json"]) {
    t.ok(fs.existsSync(path.join(dir, file)), `wrote ${file}`);
  }
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")) as { name: string; dependencies: Record<string, string> };
  t.equal(manifest.name, "my-game");
  t.equal(manifest.dependencies["@hubpkg/hub"], `file:${tarball}`);

  const install = await run(npm, ["install", "--prefer-offline", "--no-audit", "--no-fund"], dir, 480_000);
  t.equal(install.code, 0, `npm install:\n${install.output}`);
  if (install.code !== 0) return;

  await t.test("npx hub init in the project: the hub it installed writes another project on the same dependency", async (t) => {
    const second = path.join(work, "second-game");
    const run2 = await run(npm, ["exec", "--", "hub", "init", second], dir, 120_000);
    t.equal(run2.code, 0, `npx hub init:\n${run2.output}`);
    const manifest2 = JSON.parse(fs.readFileSync(path.join(second, "package.json"), "utf8")) as { dependencies: Record<string, string> };
    t.equal(manifest2.dependencies["@hubpkg/hub"], `file:${tarball}`);
  });

  await t.test("npm start serves the example game on an embedded Postgres", async (t) => {
    // Its own process group: the stop below reaches npm and the node it starts.
    const child = spawn(npm, ["start"], { cwd: dir, env: userEnv({ PORT: "0" }), stdio: ["ignore", "pipe", "pipe"], detached: true });
    let output = "";
    const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
    t.teardown(async () => {
      if (child.exitCode === null) process.kill(-child.pid!, "SIGTERM");
      await exited;
    });
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`npm start did not log "hub listening on" within 180 s:\n${output}`)), 180_000);
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        const match = /hub listening on (http:\/\/[^/\s"]+)\/graphql/.exec(output);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]!);
        }
      };
      child.stdout.on("data", onData);
      child.stderr.on("data", onData);
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`npm start exited with ${code} before listening:\n${output}`));
      });
    });
    const result = await graphql(url, `{ mutation: __type(name: "Mutation") { fields { name } } bet: __type(name: "DiceBet") { interfaces { name } } kinds: __type(name: "AnyGameKind") { enumValues { name } } }`);
    t.same(result.errors, undefined, "no errors");
    const fields = (result.data?.mutation as { fields: { name: string }[] }).fields.map((f) => f.name);
    t.ok(fields.includes("rollDice"), "the example game's mutation is served");
    t.same(result.data?.kinds, { enumValues: [{ name: "DICE" }] }, "HubGameConfigPlugin names the game");
    t.same(result.data?.bet, { interfaces: [{ name: "Bet" }] }, "DiceBet implements Bet");
    t.ok(fs.existsSync(path.join(dir, ".hub")), "the embedded Postgres's data is in the project's .hub");

    // The README's "Try it": a playground player, then a roll.
    const readme = fs.readFileSync(path.join(dir, "README.md"), "utf8");
    const session = await graphql(url, 'mutation { hubCreatePlaygroundSession(input: { uname: "alice" }) { sessionToken } }');
    t.ok(readme.includes(JSON.stringify(`mutation { hubCreatePlaygroundSession(input: { uname: "alice" }) { sessionToken } }`).slice(1, -1)), "the README's session mutation");
    const token = (session.data?.hubCreatePlaygroundSession as { sessionToken: string } | undefined)?.sessionToken;
    t.ok(token, JSON.stringify(session));
    const roll = 'mutation { rollDice(input: { wager: 100, currency: "HOUSE", target: 50 }) { balance bet { roll net } } }';
    t.ok(readme.includes(JSON.stringify(roll).slice(1, -1)), "the README's roll");
    const rolled = await graphql(url, roll, { authorization: `session:${token}` });
    const { balance, bet } = (rolled.data?.rollDice ?? {}) as { balance?: number; bet?: { roll: number; net: number } };
    t.ok(bet, JSON.stringify(rolled));
    t.equal(bet?.net, bet && bet.roll < 50 ? 98 : -100, "a win pays floor(100 × 99 / 50) = 198, wager included");
    t.equal(balance, 1000 + (bet?.net ?? NaN), "from the playground's 1,000 HOUSE");
    t.notMatch(output, /grants for GraphQL/, "no warning about grants");
    process.kill(-child.pid!, "SIGTERM");
    await exited;
    t.match(output, /"msg":"stopped"/, "the server stops cleanly on SIGTERM (and its Postgres with it)");
  });

  await t.test("npm test passes", async (t) => {
    // The project's test kit gets a cluster of its own in the temporary folder (not the one this
    // repository's tests share), stopped by its watchdog a second after the tests end.
    const kitDir = path.join(work, "test-kit");
    const test = await run(npm, ["test"], dir, 300_000, userEnv({ HUB_TEST_KIT_DIR: kitDir, HUB_TEST_KIT_IDLE_SECONDS: "1" }));
    t.equal(test.code, 0, `npm test:\n${test.output}`);
    t.match(test.output, nodeTestSummary("pass", "2"));
    t.match(test.output, nodeTestSummary("fail", "0"));
    t.ok(fs.existsSync(path.join(kitDir, "pg")), "on its own cluster");
    t.ok(await stopped(path.join(kitDir, "pg", "postmaster.pid"), 60_000), "whose Postgres stops once the tests end");
  });

  await t.test("npm run typecheck passes (strict TypeScript)", async (t) => {
    const check = await run(npm, ["run", "typecheck"], dir, 180_000);
    t.equal(check.code, 0, `npm run typecheck:\n${check.output}`);
  });
});

t.test("hub init refuses a folder that is not empty, and a missing DIR", async (t) => {
  const dir = tmpDir(t, "hub-scaffold-");
  fs.writeFileSync(path.join(dir, "keep.txt"), "mine");
  const refused = await runCli(["init", dir], {});
  t.equal(refused.code, 1);
  t.match(refused.stderr, /is not empty \(it has keep\.txt\); expected a new or empty folder/);
  t.equal(fs.readFileSync(path.join(dir, "keep.txt"), "utf8"), "mine", "nothing overwritten");
  t.same(fs.readdirSync(dir), ["keep.txt"]);

  const missing = await runCli(["init"], {});
  t.equal(missing.code, 2);
  t.match(missing.stderr, /"init" needs DIR \(the folder to write the project into, new or empty\); received none\./);

  const badHub = await runCli(["init", path.join(dir, "new"), "--hub", "./nowhere/hub.tgz"], {});
  t.equal(badHub.code, 1);
  t.match(badHub.stderr, /--hub "\.\/nowhere\/hub\.tgz" looks like a path, but .* does not exist/);
  t.notOk(fs.existsSync(path.join(dir, "new")), "nothing written");
});

t.test("hub init without --hub depends on this package's own folder", async (t) => {
  const dir = path.join(tmpDir(t, "hub-scaffold-"), "game");
  const init = await runCli(["init", dir], {});
  t.equal(init.code, 0, init.stderr);
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")) as { dependencies: Record<string, string> };
  t.equal(manifest.dependencies["@hubpkg/hub"], `file:${ROOT}`);
});
