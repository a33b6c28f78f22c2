/**
 * Where a test suite run's CPU goes (docs/testing.md, "Ten minutes"): runs a
 * command (by default `npm test`) and reads every process's CPU from /proc
 * every --interval ms meanwhile, charging each process to the test file that
 * caused it:
 * - a test file's own process (its command line names test/….test.ts);
 * - what such a process starts, at any depth: hub servers and CLIs
 *   (dist/server.js, dist/cli.js), Postgres clusters of its own, npm,
 *   Chromium, other commands;
 * - the backends of the test kit's shared cluster, through their database
 *   name, which holds the pid of the test process that made it.
 * The rest is charged by kind (tap's runner, tsc, npm ci, other Postgres).
 * The machine's busy time from /proc/stat is printed beside it: the difference
 * is the kernel's work and processes that lived less than one interval.
 *
 *   node --import tsx bench/suite-cpu.ts [--interval 250] [--top 25] [--out FILE] [-- command args…]
 *
 * Linux only. Run it on an otherwise idle machine: processes that ran before
 * the command are left out, but anything else started meanwhile is counted.
 * The command's exit status is this script's.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import { benchArgs, positiveOption } from "./lib/args.js";
import { clockTicks, procStat } from "./lib/proc-stat.js";

const USAGE = "Usage: node --import tsx bench/suite-cpu.ts [--interval 250] [--top 25] [--out FILE] [-- command args…]\n";
const argv = process.argv.slice(2);
const dashes = argv.indexOf("--");
const command = dashes >= 0 ? argv.slice(dashes + 1) : ["npm", "test"];
const { values } = benchArgs(
  USAGE,
  { options: { interval: { type: "string", default: "250" }, top: { type: "string", default: "25" }, out: { type: "string" } } },
  dashes >= 0 ? argv.slice(0, dashes) : argv,
);
const INTERVAL = positiveOption(USAGE, "interval", values.interval);
const TOP = positiveOption(USAGE, "top", values.top);
if (command.length === 0) {
  process.stderr.write(`no command after --\n\n${USAGE}`);
  process.exit(2);
}
if (!fs.existsSync("/proc/self/stat")) {
  process.stderr.write("bench/suite-cpu.ts reads /proc: Linux only\n");
  process.exit(2);
}

const TICKS = clockTicks();
const TEST_FILE = /(test\/[\w.-]+\.test\.ts)/;
// The test kit's database names: hub_tk_<host tag>_<pid>_<counter>_<random> (src/test-kit/cluster.ts).
const KIT_DATABASE = /hub_tk_[0-9a-f]+_(\d+)_\d+_[0-9a-f]{6}/;

interface Proc {
  ppid: number;
  cpu: number; // seconds, user + system
  cmd: string;
}

function readProc(pid: number): Proc | undefined {
  const stat = procStat(pid);
  try {
    const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").trim();
    return stat && { ppid: stat.ppid, cpu: stat.ticks / TICKS, cmd };
  } catch {
    return undefined; // exited meanwhile
  }
}

function machineBusy(): number {
  const f = fs.readFileSync("/proc/stat", "utf8").split("\n")[0]!.split(/\s+/).slice(1).map(Number);
  return (f[0]! + f[1]! + f[2]! + f[5]! + f[6]! + f[7]!) / TICKS; // user nice system irq softirq steal
}

/** Postgres's programs: a postmaster or initdb started by path, or a process titled "postgres: …". */
function isPostgres(cmd: string): boolean {
  return cmd.startsWith("postgres") || /(^|\/)(postgres|initdb|pg_ctl)$/.test(cmd.split(" ")[0]!);
}

function kindOf(cmd: string): string {
  if (isPostgres(cmd)) return "postgres (own cluster)";
  if (/dist\/(server|cli)\.js/.test(cmd)) return "hub server or CLI";
  if (/chrom/i.test(cmd)) return "chromium";
  if (/\bnpm\b/.test(cmd)) return "npm";
  return "other child";
}

/** Which test file and kind a process's CPU belongs to. */
function classify(proc: Proc, procs: Map<number, Proc>): { file?: string; kind: string } {
  if (proc.cmd.startsWith("postgres: ")) {
    const owner = KIT_DATABASE.exec(proc.cmd)?.[1];
    const file = owner && testOf.get(Number(owner));
    if (file) return { file, kind: "postgres (test kit)" };
  }
  // Started by a test file's process, at any depth (a test of a scaffolded project runs tests of its own).
  for (let pid = proc.ppid, depth = 0; pid > 1 && pid !== process.pid && depth < 40; depth++) {
    const file = testOf.get(pid);
    if (file) return { file, kind: kindOf(proc.cmd) };
    const parent = procs.get(pid) ?? readProc(pid);
    if (!parent) break;
    pid = parent.ppid;
  }
  const file = TEST_FILE.exec(proc.cmd)?.[1];
  // A node running the file: tap's runner, npx and a shell name the files on their command lines too.
  const [program, script] = proc.cmd.split(" ");
  if (file && /(^|\/)node$/.test(program!) && !/(^|\/)(npx|npm|tap)$|\/tap\/dist\//.test(script ?? "")) return { file, kind: "test process" };
  if (isPostgres(proc.cmd)) return { kind: "postgres (test kit: its own processes, create and drop database)" };
  if (/\btsc\b/.test(proc.cmd)) return { kind: "tsc (build, type check)" };
  if (/\btap\b/.test(proc.cmd)) return { kind: "tap runner" };
  if (/\bnpm\b/.test(proc.cmd)) return { kind: "npm" };
  return { kind: `other: ${proc.cmd.slice(0, 50)}` };
}

interface Seen {
  cpu: number;
  argv0: string;
  file?: string;
  /** Undefined for a process that ran before the command: not charged. */
  kind?: string;
}

const seen = new Map<number, Seen>();
const testOf = new Map<number, string>(); // pid of a test file's process -> the file
const charged = new Map<string, Map<string, number>>(); // file (or "") -> kind -> seconds

function charge(file: string | undefined, kind: string, seconds: number): void {
  const kinds = charged.get(file ?? "") ?? new Map<string, number>();
  kinds.set(kind, (kinds.get(kind) ?? 0) + seconds);
  charged.set(file ?? "", kinds);
}

/** One pass over /proc; `first` only records what ran before the command. */
function sample(first: boolean): void {
  const procs = new Map<number, Proc>();
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const proc = readProc(Number(entry));
    if (proc && proc.cmd !== "") procs.set(Number(entry), proc);
  }
  for (const [pid, proc] of procs) {
    if (pid === process.pid) continue;
    let entry = seen.get(pid);
    // A Postgres backend's title changes with its state; any other process's program only on exec (or a
    // backend first seen as its postmaster, just forked, before it takes its title).
    const argv0 = proc.cmd.split(" ")[0]!;
    if (!entry || (entry.argv0 !== argv0 && !(entry.argv0.startsWith("postgres") && argv0.startsWith("postgres")))) {
      const { file, kind } = first ? { file: undefined, kind: undefined } : classify(proc, procs);
      if (kind === "test process") testOf.set(pid, file!);
      else testOf.delete(pid);
      entry = { cpu: entry?.cpu ?? (first ? proc.cpu : 0), argv0, file, kind };
      seen.set(pid, entry);
    }
    if (entry.kind && proc.cpu > entry.cpu) charge(entry.file, entry.kind, proc.cpu - entry.cpu);
    entry.cpu = proc.cpu;
  }
}

function report(wallSeconds: number, busySeconds: number): string {
  const total = (kinds: Map<string, number>) => [...kinds.values()].reduce((a, b) => a + b, 0);
  const byKind = new Map<string, number>();
  for (const kinds of charged.values()) for (const [kind, s] of kinds) byKind.set(kind, (byKind.get(kind) ?? 0) + s);
  const files = [...charged].filter(([file]) => file !== "").sort((a, b) => total(b[1]) - total(a[1]));
  const attributed = [...byKind.values()].reduce((a, b) => a + b, 0);
  const lines = [
    `# CPU of \`${command.join(" ")}\``,
    "",
    `Wall ${wallSeconds.toFixed(0)} s; the machine busy ${busySeconds.toFixed(0)} CPU-s (/proc/stat), ${attributed.toFixed(0)} of them read from processes; ` +
      `test files ${files.reduce((a, [, k]) => a + total(k), 0).toFixed(0)} CPU-s.`,
    "",
    "| kind | CPU-s |",
    "|---|--:|",
    ...[...byKind].sort((a, b) => b[1] - a[1]).filter(([, s]) => s >= 0.5).map(([kind, s]) => `| ${kind} | ${s.toFixed(0)} |`),
    "",
    `| test file (top ${TOP} of ${files.length}) | CPU-s | of which |`,
    "|---|--:|---|",
    ...files.slice(0, TOP).map(([file, kinds]) => {
      const parts = [...kinds].sort((a, b) => b[1] - a[1]).filter(([, s]) => s >= 0.5).map(([k, s]) => `${k} ${s.toFixed(0)}`);
      return `| ${file} | ${total(kinds).toFixed(0)} | ${parts.join(", ")} |`;
    }),
  ];
  return `${lines.join("\n")}\n`;
}

sample(true);
const busyBefore = machineBusy();
const started = performance.now();
const child = spawn(command[0]!, command.slice(1), { stdio: "inherit" });
const timer = setInterval(() => sample(false), INTERVAL);
const status = await new Promise<number>((resolve) => {
  child.on("error", (error) => {
    process.stderr.write(`${command[0]}: ${error.message}\n`);
    resolve(127);
  });
  child.on("close", (code, signal) => resolve(code ?? (signal ? 128 : 1)));
});
clearInterval(timer);
sample(false);
const text = report((performance.now() - started) / 1000, machineBusy() - busyBefore);
process.stdout.write(`\n${text}`);
if (values.out) fs.writeFileSync(values.out, text);
process.exit(status);
