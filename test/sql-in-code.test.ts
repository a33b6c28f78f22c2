/**
 * No SQL statement written in a TypeScript string of the library (src/,
 * adapters/) is longer than a few lines: longer ones live in
 * src/db/queries/*.sql (read by src/db/query-files.ts) or in SQL functions of
 * the migrations. plugins/ is left out on purpose: the reference extensions
 * are written as a game developer writes them, SQL inline.
 */
import t from "tap";
import fs from "node:fs";
import path from "node:path";
import ts from "typescript";
import { ROOT } from "./helpers/process.js";

const MAX_LINES = 7;
const SQL_START = /^\s*(select|insert|update|delete|with|create|alter|drop|grant|lock|do)\b/i;
const SQL_BODY = /\b(from|into|set|table|values|returning|where|schema)\b/i;

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "dashboard" ? [] : sourceFiles(rel);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts") ? [rel] : [];
  });
}

/** The text of a string or template (its literal parts, joined), else undefined. */
function literalText(node: ts.Node): string | undefined {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isTemplateExpression(node)) return [node.head.text, ...node.templateSpans.map((span) => span.literal.text)].join("${}");
  return undefined;
}

/** Every SQL text over the limit, as "file:line" → lines. */
function longStatements(text: string, file: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    const sql = literalText(node);
    if (sql !== undefined && SQL_START.test(sql) && SQL_BODY.test(sql)) {
      const lines = sql.trim().split("\n").length;
      if (lines > MAX_LINES) found.push(`${file}:${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}: ${lines} lines`);
      return;
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

t.test(`no SQL statement in a string of src/ or adapters/ is over ${MAX_LINES} lines`, async (t) => {
  const found = ["src", "adapters"].flatMap(sourceFiles).flatMap((file) => longStatements(fs.readFileSync(path.join(ROOT, file), "utf8"), file));
  t.same(found, [], found.length ? "move these to src/db/queries/<name>.sql (queryFile) or a SQL function" : "none");
});

t.test("the check sees a long statement, in a template with substitutions too", async (t) => {
  const long = `const q = \`select a,\n${"  b,\n".repeat(MAX_LINES)}  c from \${table} where x = $1\`;`;
  t.equal(longStatements(long, "x.ts").length, 1);
  t.equal(longStatements("const q = `select a\n  from t\n where b = $1`;", "x.ts").length, 0, "a short one passes");
  t.equal(longStatements(`const m = \`${"Select one of these\n".repeat(MAX_LINES + 1)}\`;`, "x.ts").length, 0, "prose is not SQL");
});

t.test("every file of src/db/queries is used by the library, and each one named exists", async (t) => {
  const files = fs.readdirSync(path.join(ROOT, "src/db/queries")).filter((name) => name.endsWith(".sql")).map((name) => name.slice(0, -4));
  const code = ["src", "adapters"].flatMap(sourceFiles).map((file) => fs.readFileSync(path.join(ROOT, file), "utf8")).join("\n");
  const named = [...code.matchAll(/queryFile\("([^"]+)"\)/g)].map((m) => m[1]!);
  t.same([...new Set(named)].sort(), files.sort(), "the names passed to queryFile are exactly the folder's files");
});
