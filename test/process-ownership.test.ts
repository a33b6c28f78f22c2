/**
 * The library never touches the process unless asked: outside src/bin/ (the
 * `node dist/server.js` and `hub` processes) no file calls process.exit or
 * installs a SIGINT/SIGTERM handler, except the few below, each guarded by
 * an option or a call the process's owner makes. And startAndListen installs
 * signal handlers only with handleSignals: true.
 */
import "./helpers/env.js";
import t from "tap";
import fs from "node:fs";
import path from "node:path";
import ts from "typescript";
import { startAndListen } from "@hubpkg/hub";
import { ROOT } from "./helpers/process.js";
import { sharedClusterDatabase } from "./helpers/shared-database.js";

/** Files allowed to, and why. A file listed here that no longer does fails the test, so the list only shrinks. */
const ALLOWED: Record<string, string> = {
  "src/process-signals.ts": "stopOnSignals: installed by src/bin/server.ts, and by startAndListen only with handleSignals: true",
  "src/start-failure.ts": "exitOnStartFailure: exits only when the process's owner calls it",
  "src/db/owner-watchdog.ts": "the entry point of the watchdog process the embedded Postgres spawns: its own process",
  "src/db/test-kit-watchdog.ts": "the entry point of the test kit's watchdog process: its own process",
};

const SIGNALS = new Set(["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"]);
const LISTENERS = new Set(["on", "once", "addListener", "prependListener", "prependOnceListener"]);

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(rel));
    else if (/\.(ts|tsx|mts|mjs|js)$/.test(entry.name) && !entry.name.endsWith(".d.ts")) out.push(rel);
  }
  return out;
}

/** `process.exit(…)` and `process.on("SIGTERM", …)` (and the other ways to listen) in one file, as "line: text". */
function processCalls(file: string): string[] {
  const text = fs.readFileSync(path.join(ROOT, file), "utf8");
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
      const { expression: target, name } = node.expression;
      const onProcess = ts.isIdentifier(target) && target.text === "process";
      const first = node.arguments[0];
      const signal = first && ts.isStringLiteralLike(first) && SIGNALS.has(first.text);
      if (onProcess && (name.text === "exit" || (LISTENERS.has(name.text) && signal))) {
        found.push(`${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}: ${node.getText().split("\n")[0]}`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

t.test("outside src/bin/, no file exits the process or handles its signals, except the allowed ones", async (t) => {
  const files = ["src", "adapters", "plugins"].flatMap(sourceFiles).filter((file) => !file.startsWith(`src${path.sep}bin${path.sep}`));
  t.ok(files.length > 100, `the library's files are found (${files.length})`);
  const offending: string[] = [];
  const used = new Set<string>();
  for (const file of files) {
    const calls = processCalls(file);
    if (calls.length === 0) continue;
    const key = file.split(path.sep).join("/");
    if (ALLOWED[key]) used.add(key);
    else offending.push(...calls.map((call) => `${key}:${call}`));
  }
  t.same(offending, [], "process.exit or a signal handler outside src/bin/");
  t.same(Object.keys(ALLOWED).filter((file) => !used.has(file)), [], "every allowed file still needs its place in the list");
});

t.test("the check sees what it looks for", async (t) => {
  t.ok(processCalls("src/bin/server.ts").some((call) => call.includes("process.exit")), "src/bin/server.ts exits on --help");
  t.ok(processCalls("src/process-signals.ts").some((call) => call.includes('"SIGTERM"')), "process-signals.ts listens to SIGTERM");
});

t.test("startAndListen installs signal handlers only with handleSignals: true, and removes them at stop()", async (t) => {
  const db = await sharedClusterDatabase(t);
  const base = { port: 0, logLevel: "silent" as const, drainMs: 0, socketRebalance: false, databaseUrl: db.DATABASE_URL, superuserDatabaseUrl: db.SUPERUSER_DATABASE_URL };
  const before = { SIGINT: process.listenerCount("SIGINT"), SIGTERM: process.listenerCount("SIGTERM") };
  const quiet = await startAndListen(base);
  t.same({ SIGINT: process.listenerCount("SIGINT"), SIGTERM: process.listenerCount("SIGTERM") }, before, "by default: none");
  await quiet.stop();
  const handling = await startAndListen({ ...base, handleSignals: true });
  t.same({ SIGINT: process.listenerCount("SIGINT"), SIGTERM: process.listenerCount("SIGTERM") }, { SIGINT: before.SIGINT + 1, SIGTERM: before.SIGTERM + 1 }, "handleSignals: true: one each");
  await handling.stop();
  t.same({ SIGINT: process.listenerCount("SIGINT"), SIGTERM: process.listenerCount("SIGTERM") }, before, "removed at stop()");
});
