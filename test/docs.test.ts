/**
 * The documentation against the code, so no page drifts from it:
 * - every ```ts block of README.md and docs/*.md type-checks against the package as a user imports it
 *   (`@hubpkg/hub/...` through the package's exports, so `npm run build` first), with the project's
 *   strict settings; a block marked ```ts no-check is left out and must say why on its first line;
 * - every relative link points at a file that exists and, with `#anchor`, at a heading of it;
 * - the blocks marked ```sh runnable run against a freshly started `node dist/server.js`, and a comment
 *   line `# {...}` after a command is the shape its output must have;
 * - every ```graphql block's operations fit that server's schema, and the live-updates client receives an
 *   alert from it on the Node running the test.
 */
import "./helpers/env.js";
import { execFile, spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import t, { type Test } from "tap";
import { buildClientSchema, getIntrospectionQuery, Kind, parse, validate, type IntrospectionQuery } from "@hubpkg/hub/graphql";
import { ROOT, nodeTestSummary, startServerProcess, type ServerProcess } from "./helpers/process.js";
import { tmpDir } from "./helpers/tmp.js";
import { freePort } from "./helpers/ports.js";

/** Pages written in other branches at the same time: a link to one is checked once the page exists. */
const PAGES_IN_PROGRESS = new Set<string>();

interface Block {
  page: string;
  /** Line of the block's first content line in the page, 1-based. */
  line: number;
  info: string[];
  text: string;
}

/** README.md and the pages of docs/ (not the `_notes-*` drafts waiting to be folded in). */
function pages(): string[] {
  const docs = fs.readdirSync(path.join(ROOT, "docs")).filter((f) => f.endsWith(".md") && !f.startsWith("_"));
  return ["README.md", ...docs.sort().map((f) => `docs/${f}`)];
}

function read(page: string): string {
  return fs.readFileSync(path.join(ROOT, page), "utf8");
}

function blocks(page: string): Block[] {
  const found: Block[] = [];
  let open: Block | undefined;
  read(page).split("\n").forEach((line, i) => {
    const fence = /^```(.*)$/.exec(line);
    if (!fence) {
      if (open) open.text += line + "\n";
    } else if (open) {
      found.push(open);
      open = undefined;
    } else {
      open = { page, line: i + 2, info: fence[1]!.trim().split(/\s+/).filter(Boolean), text: "" };
    }
  });
  return found;
}

/** Lines outside fenced blocks, with their 1-based numbers. */
function prose(page: string): [number, string][] {
  let inside = false;
  const lines: [number, string][] = [];
  read(page).split("\n").forEach((line, i) => {
    if (line.startsWith("```")) inside = !inside;
    else if (!inside) lines.push([i + 1, line]);
  });
  return lines;
}

/** The anchors GitHub gives a page's headings (lower case, punctuation dropped, spaces to hyphens), and its `<a id>`s. */
function anchors(page: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const [, line] of prose(page)) {
    const heading = /^#{1,6} (.*)$/.exec(line);
    if (heading) {
      const base = heading[1]!.trim().toLowerCase().replace(/[^\p{L}\p{N}_\- ]/gu, "").replace(/ /g, "-");
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      result.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of line.matchAll(/<a id="([^"]+)"><\/a>/g)) result.add(m[1]!);
  }
  return result;
}

t.test("every page is listed in the README's map, and the README stays short", async (t) => {
  const readme = read("README.md");
  t.ok(readme.split("\n").length <= 300, `README.md has ${readme.split("\n").length} lines (at most 300)`);
  for (const page of pages().slice(1)) t.ok(readme.includes(`](${page})`), `README.md links to ${page}`);
});

t.test("relative links point at files and headings that exist", async (t) => {
  let checked = 0;
  // bench/README.md holds the benchmark notes the performance page links to, and links back.
  for (const page of [...pages(), "bench/README.md"]) {
    for (const [lineNo, line] of prose(page)) {
      // Inline code may show link syntax as text.
      const text = line.replace(/`[^`]*`/g, "");
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!;
        if (/^[a-z]+:/i.test(target)) continue; // http:, https:, mailto:
        const [file, anchor] = target.split("#") as [string, string | undefined];
        const resolved = file === "" ? page : path.posix.normalize(path.posix.join(path.posix.dirname(page), file));
        const where = `${page}:${lineNo}: ${target}`;
        if (!fs.existsSync(path.join(ROOT, resolved))) {
          if (PAGES_IN_PROGRESS.has(resolved)) t.comment(`${where}: ${resolved} is being written in another branch`);
          else t.fail(`${where}: no file ${resolved}`);
          continue;
        }
        checked++;
        if (anchor && resolved.endsWith(".md")) t.ok(anchors(resolved).has(anchor), `${where}: ${resolved} has a heading #${anchor}`);
      }
    }
  }
  t.ok(checked > 30, `${checked} links checked`);
});

t.test("docs/architecture.md names every source file of adapters/ and src/", async (t) => {
  const page = read("docs/architecture.md");
  const missing: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const rel = path.posix.join(dir, entry.name);
      // The dashboard is a web page of its own, described as one folder.
      if (entry.isDirectory() && rel !== "src/dashboard") walk(rel);
      else if (entry.isFile() && entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) {
        const named = new RegExp(`(^|[\\s/(,\`])${entry.name.replace(/\./g, "\\.")}\\b`, "m");
        if (!named.test(page)) missing.push(rel);
      }
    }
  };
  walk("adapters");
  walk("src");
  t.same(missing, [], "each file is named in the page's request path or layout (add a new file there)");
});

/** Written file (relative to the folder) → where its block is. */
type Origins = Map<string, { page: string; line: number }>;

/**
 * The pages' ```ts blocks (and ```sql blocks that name a file) as files under dir, one folder per page.
 * A block whose first line names a file (`// src/daily-bonus.ts`, `-- migrations/001-x.sql`) is written
 * there, so the blocks of one page can use each other as a project's files do.
 */
function writeBlocks(dir: string, onSkipped: (block: Block) => void = () => {}): Origins {
  const origin: Origins = new Map();
  for (const page of pages()) {
    blocks(page).forEach((block, i) => {
      const sqlFile = block.info[0] === "sql" ? /^-- ([\w./-]+\.sql)\b/.exec(block.text)?.[1] : undefined;
      if (block.info[0] !== "ts" && !sqlFile) return;
      if (block.info.includes("no-check")) return onSkipped(block);
      const named = sqlFile ?? /^\/\/ ([\w./-]+\.ts)\b/.exec(block.text)?.[1];
      const file = path.posix.join(path.basename(page, ".md"), named ?? `block-${i}.ts`);
      fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      // `export {}` makes every block a module, so top-level await and names are the block's own.
      fs.writeFileSync(path.join(dir, file), sqlFile ? block.text : `${block.text}export {};\n`);
      origin.set(file, { page, line: block.line });
    });
  }
  return origin;
}

t.test("every TypeScript block type-checks against the package with the project's strict settings", async (t) => {
  const dir = fs.mkdtempSync(path.join(ROOT, ".docs-check-"));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  let skipped = 0;
  const origin = writeBlocks(dir, (block) => {
    t.match(block.text, /^\/\/ .{10,}/, `${block.page}:${block.line}: a block left unchecked says why on its first line`);
    skipped++;
  });
  t.ok(origin.size >= 8, `${origin.size} blocks to check (${skipped} marked no-check)`);
  t.ok(skipped <= 2, "no-check stays rare");
  fs.writeFileSync(
    path.join(dir, "tsconfig.json"),
    JSON.stringify({
      extends: "../tsconfig.json",
      // No path mapping: @hubpkg/hub/... resolves through package.json's exports to dist/, as in a user's project.
      compilerOptions: { noEmit: true, rootDir: "..", paths: {}, incremental: false },
      include: ["**/*.ts"],
      exclude: [],
    }),
  );
  const tsc = path.join(ROOT, "node_modules/typescript/bin/tsc");
  const output = await new Promise<{ code: number; text: string }>((resolve) => {
    execFile(process.execPath, [tsc, "-p", path.join(dir, "tsconfig.json"), "--pretty", "false"], { cwd: ROOT, maxBuffer: 16 << 20 }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, text: stdout + stderr }),
    );
  });
  // Report each error at its line in the page.
  const errors = output.text
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const m = /^(.+?)\((\d+),(\d+)\): (.*)$/.exec(line);
      const file = m && path.relative(dir, path.resolve(ROOT, m[1]!)).split(path.sep).join("/");
      const from = file ? origin.get(file) : undefined;
      return from ? `${from.page}:${from.line + Number(m![2]) - 1}: ${m![4]}` : line;
    });
  t.same(errors, [], "tsc reports no error");
  t.equal(output.code, 0, "tsc exits 0");
});

t.test("the test files of the pages pass, run as their project runs them", async (t) => {
  const dir = fs.mkdtempSync(path.join(ROOT, ".docs-check-"));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const origin = writeBlocks(dir);
  const tests = [...origin.keys()].filter((file) => file.endsWith(".test.ts"));
  t.ok(tests.length >= 1, `${tests.length} test files in the pages`);
  for (const file of tests) {
    const [pageDir, ...rest] = file.split("/");
    const from = origin.get(file)!;
    // From the page's folder, as from the project's root: its migrations path is relative to it.
    const run = await new Promise<{ code: number; output: string }>((resolve) =>
      execFile(process.execPath, ["--import", "tsx", "--test", rest.join("/")], { cwd: path.join(dir, pageDir!), timeout: 300_000 }, (error, stdout, stderr) =>
        resolve({ code: error ? Number(error.code ?? 1) : 0, output: stdout + stderr }),
      ),
    );
    t.equal(run.code, 0, `${from.page}:${from.line}: ${rest.join("/")} passes`, { output: run.output.slice(-4000) });
    t.match(run.output, nodeTestSummary("pass", "[1-9]"), `${from.page}:${from.line}: it ran its tests`);
  }
});

/** The same JSON shape: the same keys, and values of the same kind (ids, times and a coin flip differ from run to run). */
function sameShape(actual: unknown, expected: unknown, at = "$"): string[] {
  const kind = (v: unknown) => (v === null ? "null" : Array.isArray(v) ? "array" : typeof v);
  if (kind(actual) !== kind(expected)) return [`${at}: expected ${kind(expected)}, got ${JSON.stringify(actual)}`];
  if (Array.isArray(expected)) {
    const got = actual as unknown[];
    if (expected.length > 0 && got.length === 0) return [`${at}: expected at least one element`];
    return expected.length > 0 ? got.flatMap((v, i) => sameShape(v, expected[0], `${at}[${i}]`)) : [];
  }
  if (kind(expected) === "object") {
    const a = actual as Record<string, unknown>;
    const e = expected as Record<string, unknown>;
    const keys = [...new Set([...Object.keys(a), ...Object.keys(e)])];
    return keys.flatMap((k) => (k in a && k in e ? sameShape(a[k], e[k], `${at}.${k}`) : [`${at}: key ${k} ${k in e ? "missing" : "not in the page"}`]));
  }
  return [];
}


/** The longest prefix of text that is JSON (the rest is a remark for the reader). */
function leadingJson(text: string, page: string, line: number): unknown {
  for (let end = text.length; end > 0; end--) {
    if (text[end - 1] !== "}" && text[end - 1] !== "]") continue;
    try {
      return JSON.parse(text.slice(0, end));
    } catch {
      // a shorter prefix, then
    }
  }
  throw new Error(`${page}:${line}: the comment after a command starts like JSON but is not: ${text}`);
}

interface Step {
  command: string;
  line: number;
  expected?: unknown;
  /** A process the reader starts in a terminal of its own (`# terminal 2: …`): run in the background. */
  background?: boolean;
}

/** A runnable block's commands (continuation lines joined) and the expected shapes of their outputs. */
function steps(block: Block): Step[] {
  const result: Step[] = [];
  const lines = block.text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === "" || line.startsWith("#")) {
      // `# {…}` right after a command: the JSON its output must match in shape (a remark may follow it).
      const last = result[result.length - 1];
      if (/^# [[{]/.test(line) && last && last.expected === undefined) last.expected = leadingJson(line.slice(2), block.page, block.line + i);
      continue;
    }
    // The test starts the server itself, where the page says `npm start`.
    if (/^npm start\b/.test(line)) continue;
    let command = line;
    const start = i;
    while (command.endsWith("\\") && i + 1 < lines.length) command = command.slice(0, -1) + lines[++i];
    result.push({ command, line: block.line + start, background: /#\s*terminal \d/.test(command) });
  }
  return result;
}

/** A runnable block as one bash script, as a reader types it; a marker before each command splits the output. */
function scriptOf(list: Step[], ports: Map<string, number>): string {
  const local = (command: string) =>
    command.replace(/(localhost:|127\.0\.0\.1:|--port )(\d+)/g, (_match, prefix: string, port: string) => `${prefix}${ports.get(port) ?? port}`);
  return [
    "set -eo pipefail",
    "BG=(); trap 'kill \"${BG[@]}\" 2>/dev/null || true' EXIT",
    ...list.map((s, i) => {
      const command = local(s.command);
      if (!s.background) return `printf '\\n@@step ${i}\\n'\n${command}`;
      // Started as in another terminal, then waited for until its port answers (at most 60 s).
      const port = /--port (\d+)/.exec(command)?.[1];
      const wait = port ? `\nfor i in $(seq 1 300); do curl -s -o /dev/null localhost:${port}/ && break; sleep 0.2; done` : "";
      return `printf '\\n@@step ${i}\\n'\n${command.replace(/#.*$/, "")} >/dev/null 2>&1 &\nBG+=($!)${wait}`;
    }),
  ].join("\n");
}

async function runBlock(t: Test, block: Block, server: ServerProcess, dataDir: string): Promise<void> {
  const list = steps(block);
  // A port a background process listens on (`--port 4100`) becomes a free one, wherever the block names it.
  const ports = new Map<string, number>([["4000", Number(new URL(server.url).port)]]);
  for (const step of list.filter((s) => s.background)) {
    const port = /--port (\d+)/.exec(step.command)?.[1];
    if (port) ports.set(port, await freePort());
  }
  const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      "bash",
      ["-c", scriptOf(list, ports)],
      {
        cwd: ROOT,
        timeout: 300_000, // a block that hangs (an `until` loop whose condition never holds) fails here
        env: { ...process.env, HUB_DATA_DIR: dataDir, PATH: `${path.dirname(process.execPath)}:${process.env.PATH ?? ""}` },
      },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
  const where = `${block.page}:${block.line}`;
  t.equal(run.code, 0, `${where}: every command succeeds`, { stderr: run.stderr });
  const outputs = run.stdout.split(/\n@@step \d+\n/).slice(1);
  t.equal(outputs.length, list.length, `${where}: every command ran`);
  list.forEach((step, i) => {
    if (step.expected === undefined) return;
    const text = outputs[i]?.trim() ?? "";
    let actual: unknown;
    try {
      actual = JSON.parse(text);
    } catch {
      t.fail(`${block.page}:${step.line}: the output is JSON`, { found: text });
      return;
    }
    t.same(sameShape(actual, step.expected), [], `${block.page}:${step.line}: the output has the page's shape`, { found: text });
  });
}

/** The hub command on the test server's data dir; resolves to the last line of its output. */
function hubCli(dataDir: string, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(process.execPath, [path.join(ROOT, "dist/cli.js"), ...args], { cwd: ROOT, env: { ...process.env, HUB_DATA_DIR: dataDir } }, (error, stdout, stderr) =>
      error ? reject(new Error(`hub ${args.join(" ")}: ${stderr}`)) : resolve(stdout.trim().split("\n").pop()!),
    ),
  );
}

/** The live-updates client, run as a user runs it on this Node (Node 20 has no global WebSocket). */
async function runLiveClient(t: Test, server: ServerProcess, dataDir: string): Promise<void> {
  const client = blocks("docs/live-updates.md").find((b) => b.info[0] === "ts" && b.text.includes("createClient"));
  if (!client) {
    t.fail("docs/live-updates.md has a graphql-ws client block");
    return;
  }
  const dir = fs.mkdtempSync(path.join(ROOT, ".docs-check-"));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, "client.ts"), client.text.replace(/(127\.0\.0\.1|localhost):4000/g, new URL(server.url).host));
  const token = await hubCli(dataDir, "session", "create", "--uname", "docs-live");
  const child = spawn(process.execPath, ["--import", "tsx", path.join(dir, "client.ts")], {
    cwd: ROOT,
    env: { ...process.env, SESSION_TOKEN: token },
    stdio: ["ignore", "pipe", "pipe"],
  });
  t.teardown(() => child.kill("SIGKILL"));
  let output = "";
  child.stdout.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr.on("data", (c: Buffer) => (output += c.toString()));
  // Credit until the alert arrives: the first credit may land before the subscription is in place.
  const deadline = Date.now() + 60_000;
  while (!output.includes("changed: refetch it") && Date.now() < deadline && child.exitCode === null) {
    await hubCli(dataDir, "balance", "credit", "--uname", "docs-live", "--currency", "HOUSE", "--amount", "1");
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  t.match(output, /the balance in HOUSE changed: refetch it/, `${client.page}:${client.line}: the client receives hubBalanceAlert (waited up to 60 s)`);
}

t.test("the walkthroughs against a started server", async (t) => {
  const hasCurl = await new Promise<boolean>((resolve) => execFile("bash", ["-c", "command -v curl"], (error) => resolve(!error)));
  if (!hasCurl) {
    t.fail("curl is on PATH: the walkthroughs run as a reader runs them (.ci/run installs it)");
    return;
  }
  const dataDir = tmpDir(t);
  const server = await startServerProcess({ HUB_DATA_DIR: dataDir });
  t.teardown(() => {
    server.child.kill("SIGINT");
    return server.exited;
  });

  await t.test("the blocks marked sh runnable", async (t) => {
    const runnable = pages().flatMap((page) => blocks(page).filter((b) => b.info[0] === "sh" && b.info.includes("runnable")));
    t.ok(runnable.length >= 3, `${runnable.length} runnable blocks`);
    for (const block of runnable) await runBlock(t, block, server, dataDir);
  });

  await t.test("the GraphQL blocks fit the server's schema, operation by operation", async (t) => {
    const introspection = await fetch(`${server.url}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ query: getIntrospectionQuery() }),
    });
    const schema = buildClientSchema(((await introspection.json()) as { data: IntrospectionQuery }).data);
    let operations = 0;
    for (const page of pages()) {
      for (const block of blocks(page).filter((b) => b.info[0] === "graphql")) {
        for (const definition of parse(block.text).definitions) {
          operations++;
          const errors = validate(schema, { kind: Kind.DOCUMENT, definitions: [definition] }).map((e) => e.message);
          t.same(errors, [], `${page}:${block.line + (definition.loc?.startToken.line ?? 1) - 1}: the operation fits the schema`);
        }
      }
    }
    t.ok(operations >= 3, `${operations} GraphQL operations validated`);
  });

  await t.test("the live-updates client receives an alert on this Node", (t) => runLiveClient(t, server, dataDir));
});
