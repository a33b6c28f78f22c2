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
import type * as Tap from "tap";
import { runCli } from "./helpers/cli.js";
import { ROOT, nodeTestSummary } from "./helpers/process.js";
import { tmpDir } from "./helpers/tmp.js";
import { graphql, npmStart, projectsDir, run, userEnv } from "./helpers/packed-project.js";

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

t.test("hub init: a project from the packed hub installs, serves with npm start, and passes npm test and its type check", async (t) => {
  const work = projectsDir(t);
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
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")) as { name: string; dependencies: Record<string, string>; devDependencies: Record<string, string> };
  t.equal(manifest.name, "my-game");
  t.equal(manifest.dependencies["@hubpkg/hub"], `file:${tarball}`);
  const hubManifest = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
  t.same(
    { "graphql-ws": manifest.dependencies["graphql-ws"], ws: manifest.dependencies.ws, "@types/ws": manifest.devDependencies["@types/ws"] },
    { "graphql-ws": hubManifest.dependencies["graphql-ws"], ws: hubManifest.dependencies.ws, "@types/ws": hubManifest.devDependencies["@types/ws"] },
    "what the live-updates client imports, pinned to the hub's own versions",
  );
  for (const file of ["Dockerfile", ".dockerignore", "tsconfig.build.json"]) t.ok(fs.existsSync(path.join(dir, file)), `wrote ${file}`);

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
    const started = await npmStart(dir);
    t.teardown(() => started.stop());
    const url = started.url;
    if (!url) throw new Error(`npm start exited with ${await started.exited} before listening:\n${started.output()}`);
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
    t.notMatch(started.output(), /grants for GraphQL/, "no warning about grants");
    await started.stop();
    t.match(started.output(), /"msg":"stopped"/, "the server stops cleanly on SIGTERM (and its Postgres with it)");
  });

  await t.test("npx hub db reset empties the project's development database", async (t) => {
    // The rows before and after through the bin npx runs, without starting npm's CLI each time.
    const hub = path.join(dir, "node_modules", ".bin", process.platform === "win32" ? "hub.cmd" : "hub");
    const created = await run(hub, ["api-key", "create"], dir, 120_000);
    t.equal(created.code, 0, `hub api-key create:\n${created.output}`);
    const listed = await run(hub, ["api-key", "list", "--json"], dir, 120_000);
    t.match(listed.output, /\[\{"id":/, "a row before");
    const reset = await run(npm, ["exec", "--", "hub", "db", "reset", "--yes"], dir, 120_000);
    t.equal(reset.code, 0, `hub db reset --yes:\n${reset.output}`);
    t.match(reset.output, new RegExp(`reset the development database "hub" in ${path.join(dir, ".hub")}`));
    const after = await run(hub, ["api-key", "list", "--json"], dir, 120_000);
    t.match(after.output, /^\[\]$/m, "none after");
  });

  await t.test("npm run dev restarts on a change under src/ and under migrations/", async (t) => {
    const child = spawn(npm, ["run", "dev"], { cwd: dir, env: userEnv({ PORT: "0" }), stdio: ["ignore", "pipe", "pipe"], detached: true });
    const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
    t.teardown(async () => {
      if (child.exitCode === null) process.kill(-child.pid!, "SIGTERM");
      await exited;
    });
    let output = "";
    let waiting: { from: number; resolve: () => void } | undefined;
    // A restart after `from`, then the restarted server's listening line (one save may fire more than one restart).
    const restarted = (from: number) => /Restarting 'src\/index\.ts'[\s\S]*hub listening on/.test(output.slice(from));
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (waiting && restarted(waiting.from)) waiting.resolve();
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    const waitFor = (what: string, test: () => boolean, from: number) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${what} within 180 s:\n${output}`)), 180_000);
        waiting = { from, resolve: () => (clearTimeout(timer), resolve()) };
        if (test()) waiting.resolve();
      });
    const listening = /hub listening on/;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`npm run dev did not listen within 180 s:\n${output}`)), 180_000);
      const check = () => (listening.test(output) ? (clearTimeout(timer), child.stdout.off("data", check), resolve()) : undefined);
      child.stdout.on("data", check);
      check();
    });
    let from = output.length;
    fs.appendFileSync(path.join(dir, "src", "dice.ts"), "// touched by the test\n");
    await waitFor("no restart after a change in src/", () => restarted(from), from);
    t.pass("a change in src/: Node restarted the server, which listens again");
    from = output.length;
    fs.writeFileSync(path.join(dir, "migrations", "002-note.sql"), "create table app.note (id int primary key);\n");
    await waitFor("no restart after a new migration", () => restarted(from), from);
    t.pass("a new file in migrations/: restarted again");
    process.kill(-child.pid!, "SIGTERM");
    await exited;
  });

  await t.test("npm start in production without database URLs: one block, no stack; LOG_LEVEL=debug adds it", async (t) => {
    const refused = await run(npm, ["start"], dir, 120_000, userEnv({ NODE_ENV: "production" }));
    t.not(refused.code, 0, "a non-zero exit status");
    t.match(refused.output, /hub: No database is configured and NODE_ENV is production.*DATABASE_URL and SUPERUSER_DATABASE_URL.*\[HUB_DATABASE_REQUIRED\]\n/);
    t.notMatch(refused.output, /\n\s+at \S/, "no stack");
    t.notMatch(refused.output, /\[cause\]|\^\n/, "no uncaught exception's dump");
    const debug = await run(npm, ["start"], dir, 120_000, userEnv({ NODE_ENV: "production", LOG_LEVEL: "debug" }));
    t.not(debug.code, 0);
    t.match(debug.output, /\[HUB_DATABASE_REQUIRED\]\nHubError: No database is configured/);
    t.match(debug.output, /\n\s+at \S/, "the stack");
  });

  await t.test("docs/live-updates.md's client example type-checks in the project", async (t) => {
    const page = fs.readFileSync(path.join(ROOT, "docs", "live-updates.md"), "utf8");
    const example = [...page.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!).find((code) => code.includes('from "graphql-ws"'));
    t.ok(example, "the example that imports graphql-ws");
    const file = path.join(dir, "src", "live-client.ts");
    fs.writeFileSync(file, example!);
    const check = await run(npm, ["run", "typecheck"], dir, 180_000);
    fs.rmSync(file);
    t.equal(check.code, 0, `npm run typecheck with the example:\n${check.output}`);
  });

  await t.test("the Dockerfile's steps run in order (each RUN's command in a copy; no Docker daemon)", async (t) => {
    const final = await runDockerfile(t, dir, path.join(work, "docker"));
    if (!final) return;
    t.ok(fs.existsSync(path.join(final.dir, "dist", "index.js")), "the runtime stage has the compiled dist/index.js");
    t.notOk(fs.existsSync(path.join(final.dir, "node_modules", "typescript")), "and no dev dependency");
    t.same(final.cmd.slice(0, 1), ["node"]);
    // Its CMD, as `docker run` without the URLs would run it: the one block, from the compiled code.
    const started = await run(final.cmd[0]!, final.cmd.slice(1), final.dir, 120_000, final.env);
    t.equal(started.code, 1, started.output);
    t.match(started.output, /^hub: No database is configured and NODE_ENV is production.*\[HUB_DATABASE_REQUIRED\]\n$/);
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

/**
 * The Dockerfile's instructions done without Docker, to check that its steps
 * work in their order: each stage is a folder standing for its WORKDIR, COPY
 * copies files (from the project, or --from an earlier stage's folder), ENV
 * sets a variable for what follows, RUN runs its shell command there. It does
 * not check the base image, USER or anything else Docker itself does.
 */
async function runDockerfile(t: Tap.Test, project: string, work: string): Promise<{ dir: string; cmd: string[]; env: NodeJS.ProcessEnv } | undefined> {
  const stages = new Map<string, { dir: string; workdir: string }>();
  let stage = { dir: "", workdir: "/" };
  let env = userEnv();
  let cmd: string[] = [];
  const lines = fs.readFileSync(path.join(project, "Dockerfile"), "utf8").split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("#"));
  for (const line of lines) {
    const [instruction, ...words] = line.split(/\s+/);
    const rest = line.slice(instruction!.length).trim();
    if (instruction === "FROM") {
      stage = { dir: path.join(work, `stage-${stages.size}`), workdir: "/" };
      fs.mkdirSync(stage.dir, { recursive: true });
      stages.set(/\sAS\s+(\S+)/i.exec(line)?.[1] ?? String(stages.size), stage);
      env = userEnv();
    } else if (instruction === "WORKDIR") stage.workdir = rest;
    else if (instruction === "ENV") env = { ...env, [rest.split("=")[0]!]: rest.split("=").slice(1).join("=") };
    else if (instruction === "CMD") cmd = JSON.parse(rest) as string[];
    else if (instruction === "COPY") {
      const from = words[0]!.startsWith("--from=") ? stages.get(words.shift()!.slice("--from=".length))! : undefined;
      const target = path.join(stage.dir, words.pop()!);
      for (const source of words) {
        const base = from ? path.join(from.dir, path.relative(from.workdir, source)) : path.join(project, source);
        // A wildcard that matches nothing copies nothing (the other sources of the line still count).
        const matches = source.includes("*")
          ? fs.readdirSync(path.dirname(base)).filter((n) => new RegExp(`^${path.basename(base).replace(/\./g, "\\.").replace(/\*/g, ".*")}$`).test(n)).map((n) => path.join(path.dirname(base), n))
          : [base];
        for (const match of matches) {
          const into = target.endsWith(path.sep) || words.length > 1 ? path.join(target, path.basename(match)) : target;
          fs.cpSync(match, into, { recursive: true });
        }
      }
    } else if (instruction === "RUN") {
      // npm's cache here has every package the project's install fetched (Docker's build would
      // download them): no revalidating each of them with the registry.
      const step = await run("sh", ["-c", rest], stage.dir, 480_000, { ...env, npm_config_prefer_offline: "true" });
      t.equal(step.code, 0, step.code === 0 ? `RUN ${rest}` : `RUN ${rest}:\n${step.output.slice(-4000)}`);
      if (step.code !== 0) return undefined;
    }
  }
  return { dir: stage.dir, cmd, env };
}

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
