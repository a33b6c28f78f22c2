import "./helpers/env.js";
import t from "tap";
import fs from "node:fs";
import path from "node:path";
import { ErrorCode as RootErrorCode, ErrorCodes as RootErrorCodes, HubErrorCodes, HubError } from "@hubpkg/hub";
import { clientError, ErrorCode, ErrorCodes, GraphQLError } from "@hubpkg/hub/graphql";
import { ROOT } from "./helpers/process.js";

const clientCodes = Object.keys(ErrorCodes);
const hubCodes = Object.keys(HubErrorCodes);

t.test("one catalogue: every code names itself and says what it means, exported from @hubpkg/hub and @hubpkg/hub/graphql", async (t) => {
  t.ok(clientCodes.length >= 25, `${clientCodes.length} client codes`);
  for (const code of clientCodes) {
    t.equal((ErrorCode as Record<string, string>)[code], code);
    const meaning = (ErrorCodes as Record<string, string>)[code]!;
    t.match(meaning, /^\S.{10,}$/, `${code} has a one-line meaning`);
  }
  for (const code of hubCodes) {
    t.match(code, /^HUB_[A-Z_]+$/);
    t.match((HubErrorCodes as Record<string, string>)[code], /^\S.{10,}$/, `${code} has a one-line meaning`);
  }
  t.equal(RootErrorCode, ErrorCode, "the same constants from both entry points");
  t.equal(RootErrorCodes, ErrorCodes);
  t.equal(new HubError("HUB_CLI_FAILED", "x").code, "HUB_CLI_FAILED");
});

t.test("clientError builds a GraphQLError of the server's graphql with the code, which extensions cannot override", async (t) => {
  const error = clientError(ErrorCode.INVALID_AMOUNT, "amount must be whole; received 0.5.", { limit: 1, code: "SOMETHING_ELSE" });
  t.ok(error instanceof GraphQLError);
  t.equal(error.message, "amount must be whole; received 0.5.");
  t.same(error.toJSON().extensions, { code: "INVALID_AMOUNT", limit: 1 });
});

/** The "Error codes" section of docs/errors.md: the first column of its two tables. */
function documentedCodes(): string[] {
  const page = fs.readFileSync(path.join(ROOT, "docs/errors.md"), "utf8");
  const section = /\n## Error codes\n([\s\S]*?)(?:\n## |$)/.exec(page)?.[1] ?? "";
  const codes: string[] = [];
  for (const line of section.split("\n")) {
    const first = /^\| ([^|]+) \|/.exec(line)?.[1];
    if (first) for (const m of first.matchAll(/`([A-Z_]+)`/g)) codes.push(m[1]!);
  }
  return codes;
}

t.test("the table of docs/errors.md lists exactly the catalogue's codes", async (t) => {
  const listed = documentedCodes();
  t.same([...listed].sort(), [...clientCodes, ...hubCodes].sort());
});

/** Source files of the server, the adapters and the reference plugins, without comments. */
function sources(): [string, string][] {
  const files: [string, string][] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const rel = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(rel);
      else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) {
        const text = fs.readFileSync(path.join(ROOT, rel), "utf8").replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
        files.push([rel, text]);
      }
    }
  };
  for (const dir of ["src", "adapters", "plugins"]) walk(dir);
  return files;
}

// HubError's codes may be written as literals: HubErrorCode's type only accepts the catalogue's.
t.test("codes sent to clients come from the catalogue, not from string literals spread over the code", async (t) => {
  const codes = new Set([...clientCodes, "UNAUTHORIZED"]);
  const strays: string[] = [];
  for (const [file, text] of sources()) {
    if (file === path.join("src", "errors.ts")) continue;
    // The dashboard is a client of the API: it reads the codes the server sends, it sends none.
    if (file.startsWith(path.join("src", "dashboard") + path.sep)) continue;
    for (const m of text.matchAll(/["'`]([A-Z][A-Z_]{5,})["'`]/g)) {
      if (codes.has(m[1]!)) strays.push(`${file}: ${m[0]}`);
    }
  }
  t.same(strays, [], "no code written as a literal outside src/errors.ts");
});
