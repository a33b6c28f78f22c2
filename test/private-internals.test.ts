/**
 * The hub keeps three uses of a dependency's private internals, each worth
 * far more than 5% on its bench scenario (bench/results/private-internals.md),
 * each in one file of adapters/ named for what it patches. One test per patch:
 * the installed dependency must still have exactly the shape the patch was
 * written against, else it fails naming the package, its version and the file
 * to update. Everything else the hub uses of its dependencies is public.
 */
import "./helpers/env.js";
import t from "tap";
import fs from "node:fs";
import { createRequire } from "node:module";
import express from "express";
import { PgExecutor } from "postgraphile/@dataplan/pg";
import { expressMessageClasses } from "../dist/adapters/express-message-classes.js";
import { stacklessAbortReason } from "../dist/adapters/node-abort-controller.js";

const require = createRequire(import.meta.url);

function installed(pkg: string): { version: string; dir: string } {
  // The package's own directory, as Node resolves it from here (its exports may hide package.json).
  let dir = require.resolve(pkg).replace(/\\/g, "/");
  dir = dir.slice(0, dir.lastIndexOf(`/node_modules/${pkg}/`) + `/node_modules/${pkg}/`.length);
  return { version: (JSON.parse(fs.readFileSync(`${dir}package.json`, "utf8")) as { version: string }).version, dir };
}

/** The message of every failure here: what changed, and what to do. */
function changed(pkg: string, version: string, what: string, file: string, writtenFor: string): string {
  return `${pkg} ${version} (installed): ${what} is not what ${file} was written against (${pkg} ${writtenFor}). Read the new version's code, then update ${file} and this test, or remove the patch (bench/results/private-internals.md has its figure).`;
}

/** Source text without line comments and with whitespace collapsed, to compare code, not its layout. */
const code = (fn: { toString(): string }) =>
  fn
    .toString()
    .replace(/\/\/[^\n]*/g, "")
    .replace(/\s+/g, " ")
    .trim();

t.test("@dataplan/pg's executor: adapters/dataplan-pg-executor.ts replaces _execute and executeMutation and clears $$cache", async (t) => {
  const { version } = installed("@dataplan/pg");
  const say = (what: string) => changed("@dataplan/pg", version, what, "adapters/dataplan-pg-executor.ts", "1.1.2");
  const proto = PgExecutor.prototype as unknown as Record<string, unknown>;
  // The replacements hand each method a context of only withPgClient and pgSettings, and repeat executeMutation's cache reset.
  t.equal(
    code(proto._execute as object),
    "async _execute(context, text, values, name, publish) { return await context.withPgClient(context.pgSettings, (client) => this._executeWithClient(client, text, values, name, publish)); }",
    say("PgExecutor.prototype._execute"),
  );
  t.equal(
    code(proto.executeMutation as object),
    "async executeMutation(options) { const { context, text, values } = options; const { withPgClient, pgSettings } = context; const queryResult = await withPgClient(pgSettings, (client) => this._executeWithClient(client, text, values, undefined, undefined, true)); context[this.$$cache]?.reset(); return queryResult; }",
    say("PgExecutor.prototype.executeMutation"),
  );
  // The executor calls them through `this`, so the replacements on an executor object are the ones called.
  const body = code(PgExecutor);
  t.ok(body.includes("await this._execute(context, text, sqlValues, name, publishExecute)"), say("the call of this._execute in PgExecutor"));
  t.ok(body.includes("await this.executeMutation({ context, text, values: sqlValues, })"), say("the call of this.executeMutation in PgExecutor"));
  const executor = new PgExecutor({ name: "probe", context: () => ({}) as never });
  t.equal(typeof (executor as unknown as { $$cache?: unknown }).$$cache, "symbol", say("PgExecutor's $$cache"));
});

t.test("Node's AbortController.abort: adapters/node-abort-controller.ts gives the default reason without a stack", async (t) => {
  const say = (what: string) => changed("node", process.version, what, "adapters/node-abort-controller.ts", "v20.20.2");
  const controller = new AbortController();
  controller.abort();
  const native = controller.signal.reason as DOMException;
  const ours = stacklessAbortReason();
  t.ok(native instanceof DOMException && ours instanceof DOMException, say("the default abort reason's class"));
  t.same([ours.name, ours.message, ours.code], [native.name, native.message, native.code], say("the default abort reason (name, message, code)"));
  // The patch is for grafast's abort() without a reason after every request; with a reason it would be dead code.
  const grafast = installed("grafast");
  const prepare = code(fs.readFileSync(`${grafast.dir}dist/prepare.js`, "utf8"));
  t.match(
    prepare,
    /function handleMaybeIterator\(abortController, result\) \{.*\} else \{ abortController\.abort\(\); return result; \} \}/,
    changed("grafast", grafast.version, "prepare.js's handleMaybeIterator (abort() without a reason)", "adapters/node-abort-controller.ts", "1.1.3"),
  );
});

t.test("Express's app.request / app.response: adapters/express-message-classes.ts has Node build requests with them", async (t) => {
  const { version, dir } = installed("express");
  const say = (what: string) => changed("express", version, what, "adapters/express-message-classes.ts", "5.3.0");
  const app = express();
  for (const key of ["request", "response"] as const) {
    const own = Object.getOwnPropertyDescriptor(app, key);
    t.ok(own?.writable && typeof own.value === "object", say(`app.${key} as a writable property of the app`));
  }
  // app.handle reads them back per request, so the objects the classes' prototypes replace them with are the ones used.
  const handle = code((app as unknown as { handle: object }).handle);
  t.ok(handle.includes("Object.setPrototypeOf(req, this.request) Object.setPrototypeOf(res, this.response)"), say("app.handle's setPrototypeOf of req and res"));
  // A mounted sub-app restores the parent's prototypes the same way.
  t.ok(code(fs.readFileSync(`${dir}lib/application.js`, "utf8")).includes("Object.setPrototypeOf(req, orig.request) Object.setPrototypeOf(res, orig.response)"), say("a sub-app's restore of the parent's prototypes"));
  const classes = expressMessageClasses(app);
  t.equal(classes.IncomingMessage!.prototype, app.request, say("app.request after the classes are made"));
  t.equal(classes.ServerResponse!.prototype, app.response, say("app.response after the classes are made"));
});
