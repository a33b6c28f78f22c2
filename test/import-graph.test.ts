/**
 * The import graph of the library (src/, adapters/) has no circle, type-only
 * imports included: a circle makes the order modules load in depend on who
 * imports first, and ties files together that should be read one at a time.
 * Also: only the public entry points read the registry of running servers
 * (src/exports/current-server.ts) that the module-level façades follow.
 * Run it alone to see the cycles: `npx tap test/import-graph.test.ts`.
 */
import t from "tap";
import fs from "node:fs";
import path from "node:path";
import ts from "typescript";
import { ROOT } from "./helpers/process.js";

const SCANNED = ["src", "adapters"];
const EXTENSIONS = [".ts", ".tsx", ".mts"];
const REGISTRY = "src/exports/current-server.ts";
/**
 * Who may import the registry: the public entry points, which record the
 * servers they start (the package's index, its subpath exports, the test
 * kit's startTestServer, `node dist/server.js`).
 */
const ENTRY_POINTS = ["src/index.ts", "src/test-kit/index.ts", "src/bin/server.ts"];
const REGISTRY_READERS = (file: string) => file.startsWith("src/exports/") || ENTRY_POINTS.includes(file);

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = `${dir}/${entry.name}`;
    if (entry.isDirectory()) out.push(...sourceFiles(rel));
    else if (EXTENSIONS.some((ext) => entry.name.endsWith(ext)) && !entry.name.endsWith(".d.ts")) out.push(rel);
  }
  return out;
}

/**
 * Every module specifier a file names: import and export … from (type-only
 * too), `import x = require(…)`, dynamic `import(…)` and `import("…").T` in
 * types, and `/// <reference path>`.
 */
export function specifiersOf(fileName: string, text: string): string[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const found: string[] = source.referencedFiles.map((ref) => ref.fileName);
  const literal = (node: ts.Node | undefined) => {
    if (node && ts.isStringLiteralLike(node)) found.push(node.text);
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) literal(node.moduleSpecifier);
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) literal(node.moduleReference.expression);
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) literal(node.arguments[0]);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) literal(node.argument.literal);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The repository file a relative specifier names (`./x.js` is `./x.ts`), or undefined for a package or a file not in the set. */
function resolve(from: string, specifier: string, files: Set<string>): string | undefined {
  if (!specifier.startsWith(".")) return undefined;
  const base = path.posix.join(path.posix.dirname(from), specifier);
  const stem = base.replace(/\.(m?js|jsx)$/, "");
  const candidates = [base, ...EXTENSIONS.map((ext) => stem + ext), ...EXTENSIONS.map((ext) => `${base}/index${ext}`)];
  return candidates.find((candidate) => files.has(candidate));
}

type Graph = Map<string, Set<string>>;

function buildGraph(): Graph {
  const files = SCANNED.flatMap(sourceFiles);
  const known = new Set(files);
  const graph: Graph = new Map();
  for (const file of files) {
    const targets = new Set<string>();
    for (const specifier of specifiersOf(file, fs.readFileSync(path.join(ROOT, file), "utf8"))) {
      const target = resolve(file, specifier, known);
      if (target) targets.add(target);
    }
    graph.set(file, targets);
  }
  return graph;
}

/** Tarjan's strongly connected components; those of more than one file, or of a file importing itself, hold a cycle. */
function cyclicComponents(graph: Graph): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const connect = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter++);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        connect(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, index.get(next)!));
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1 || graph.get(node)?.has(node)) components.push(component.sort());
  };
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) connect(node);
  return components;
}

/** The shortest path from `from` to `to` inside `within` (breadth first), both ends included. */
function shortestPath(graph: Graph, from: string, to: string, within: Set<string>): string[] | undefined {
  const previous = new Map<string, string>([[from, from]]);
  const queue = [from];
  while (queue.length > 0) {
    const node = queue.shift()!;
    if (node === to) {
      const pathway = [to];
      while (pathway[0] !== from) pathway.unshift(previous.get(pathway[0]!)!);
      return pathway;
    }
    for (const next of graph.get(node) ?? []) {
      if (within.has(next) && !previous.has(next)) {
        previous.set(next, node);
        queue.push(next);
      }
    }
  }
  return undefined;
}

/**
 * The cycles of the graph, each as "a → b → … → a": for every import inside
 * a circle, the shortest cycle through it (so every such import is in one
 * listed), each cycle once.
 */
export function findCycles(graph: Graph): string[] {
  const cycles = new Set<string>();
  for (const component of cyclicComponents(graph)) {
    const within = new Set(component);
    for (const from of component) {
      for (const to of graph.get(from) ?? []) {
        if (!within.has(to)) continue;
        const back = from === to ? [to] : shortestPath(graph, to, from, within);
        if (!back) continue;
        const cycle = [from, ...(from === to ? [] : back.slice(0, -1))];
        // Start at the smallest name, so one cycle found from two of its imports is listed once.
        const first = cycle.indexOf([...cycle].sort()[0]!);
        const rotated = [...cycle.slice(first), ...cycle.slice(0, first)];
        cycles.add([...rotated, rotated[0]].join(" → "));
      }
    }
  }
  return [...cycles].sort();
}

const graphOf = (edges: Record<string, string[]>): Graph => new Map(Object.entries(edges).map(([from, to]) => [from, new Set(to)]));

t.test("the cycle finder finds cycles and only cycles", async (t) => {
  t.same(findCycles(graphOf({ a: ["b"], b: ["c"], c: ["d"], d: [] })), [], "a chain has none");
  t.same(findCycles(graphOf({ a: ["b", "c"], b: ["d"], c: ["d"], d: [] })), [], "a diamond has none");
  t.same(findCycles(graphOf({ a: ["b"], b: ["c"], c: ["a", "d"], d: [] })), ["a → b → c → a"]);
  t.same(findCycles(graphOf({ a: ["a"] })), ["a → a"], "a file importing itself");
  t.same(findCycles(graphOf({ x: ["a"], a: ["b"], b: ["a", "c"], c: ["d"], d: ["c"] })), ["a → b → a", "c → d → c"], "two separate circles");
  t.same(findCycles(graphOf({ a: ["b", "c"], b: ["a"], c: ["a"] })), ["a → b → a", "a → c → a"], "two circles through one file");
});

t.test("every kind of import is an edge", async (t) => {
  const text = [
    `/// <reference path="./ref.ts" />`,
    `import { a } from "./a.js";`,
    `import type { B } from "./b.js";`,
    `import "./side-effect.js";`,
    `export { c } from "./c.js";`,
    `export type { D } from "./d.js";`,
    `export * from "./e.js";`,
    `import f = require("./f.js");`,
    `const g = await import("./g.js");`,
    `let h: import("./h.js").H;`,
    `import pg from "pg";`,
  ].join("\n");
  t.same(specifiersOf("x.ts", text).sort(), ["./a.js", "./b.js", "./c.js", "./d.js", "./e.js", "./f.js", "./g.js", "./h.js", "./ref.ts", "./side-effect.js", "pg"]);
});

t.test("src/ and adapters/ import in no circle, type imports included", async (t) => {
  const graph = buildGraph();
  t.ok(graph.size > 100, `the graph has the library's files (${graph.size})`);
  t.ok(graph.get("src/index.ts")?.has("src/start.ts"), "relative imports are resolved (src/index.ts → src/start.ts)");
  const cycles = findCycles(graph);
  t.same(cycles, [], cycles.length ? `cycles:\n${cycles.join("\n")}` : "no cycle");
});

t.test(`only the public entry points import ${REGISTRY}`, async (t) => {
  const graph = buildGraph();
  t.ok(graph.has(REGISTRY), `${REGISTRY} exists`);
  const readers = [...graph].filter(([, targets]) => targets.has(REGISTRY)).map(([file]) => file);
  t.same(readers.filter((file) => !REGISTRY_READERS(file)), [], `importers: ${readers.join(", ")}`);
});
