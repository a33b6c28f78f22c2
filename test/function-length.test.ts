/**
 * No function of the library (src/, adapters/, plugins/) is longer than 120
 * lines, counted from its first line to its last, nested functions included
 * in their parent. Run it alone to see the list: `npx tap test/function-length.test.ts`.
 */
import t from "tap";
import fs from "node:fs";
import path from "node:path";
import ts from "typescript";
import { ROOT } from "./helpers/process.js";

const MAX_LINES = 120;

/**
 * Functions still over the limit, each being split by another change under
 * way; empty this list as they land. A function listed here that has become
 * short enough fails the test, so the list only shrinks.
 */
const ALLOWED: Record<string, string> = {};

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(rel));
    else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) out.push(rel);
  }
  return out;
}

/** A readable name: the declaration's, or the variable, property or call it is the value of. */
function nameOf(node: ts.Node): string {
  const named = (node as { name?: ts.Node }).name;
  if (named && (ts.isIdentifier(named) || ts.isStringLiteral(named) || ts.isPrivateIdentifier(named))) return named.text;
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  if (ts.isPropertyAssignment(parent) && (ts.isIdentifier(parent.name) || ts.isStringLiteral(parent.name))) return parent.name.text;
  if (ts.isCallExpression(parent)) {
    let outer: ts.Node = parent;
    while (!ts.isSourceFile(outer) && !ts.isVariableDeclaration(outer) && !ts.isFunctionLike(outer)) outer = outer.parent;
    const owner = ts.isSourceFile(outer) ? "" : `${nameOf(outer)}: `;
    return `${owner}${parent.expression.getText().slice(0, 40)} callback`;
  }
  return "(anonymous)";
}

/** Every function over the limit, as "file name" → lines. */
function longFunctions(): Map<string, number> {
  const found = new Map<string, number>();
  for (const file of ["src", "adapters", "plugins"].flatMap(sourceFiles)) {
    const source = ts.createSourceFile(file, fs.readFileSync(path.join(ROOT, file), "utf8"), ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionLike(node) && (node as { body?: ts.Node }).body) {
        const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
        const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
        const lines = last - first + 1;
        if (lines > MAX_LINES) found.set(`${file.split(path.sep).join("/")} ${nameOf(node)}`, lines);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

t.test(`no function of src/, adapters/ or plugins/ is over ${MAX_LINES} lines (but those being split elsewhere)`, async (t) => {
  const found = longFunctions();
  const list = [...found].map(([where, lines]) => `${where}: ${lines} lines`);
  t.comment(list.length ? `over ${MAX_LINES} lines:\n${list.join("\n")}` : `none over ${MAX_LINES} lines`);
  t.same(list.filter((entry) => !(entry.slice(0, entry.lastIndexOf(":")) in ALLOWED)), [], "none outside the allow-list");
  t.same(Object.keys(ALLOWED).filter((where) => !found.has(where)), [], "every allowed function is still over the limit (else drop it from the list)");
});

t.test("the count sees a long function", async (t) => {
  const text = `function long() {\n${"  work();\n".repeat(MAX_LINES)}}\n`;
  const source = ts.createSourceFile("x.ts", text, ts.ScriptTarget.Latest, true);
  const fn = source.statements[0]!;
  const lines = source.getLineAndCharacterOfPosition(fn.getEnd()).line - source.getLineAndCharacterOfPosition(fn.getStart(source)).line + 1;
  t.equal(lines, MAX_LINES + 2);
});
