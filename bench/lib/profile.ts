/**
 * Summaries of V8 CPU profiles (.cpuprofile, as written by the inspector or
 * `node --cpu-prof`): self time by function and by package, excluding idle.
 */
import fs from "node:fs";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

export interface Row {
  name: string;
  selfMs: number;
  share: number;
}

/** Where a frame's code comes from: an npm package, this project, Node itself, or a V8 pseudo-frame. */
export function packageOf(url: string, functionName: string): string {
  if (!url) return functionName.startsWith("(") ? functionName : "(native)";
  const nm = url.lastIndexOf("/node_modules/");
  if (nm !== -1) {
    const rest = url.slice(nm + "/node_modules/".length).split("/");
    return rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith("node:")) return "node (core)";
  const local = /\/(dist\/(?:src|adapters|plugins)|bench)\//.exec(url);
  if (local) return `@hubpkg/hub ${local[1]!.replace(/^dist\//, "")}`;
  return url;
}

function shortUrl(url: string): string {
  const nm = url.lastIndexOf("/node_modules/");
  if (nm !== -1) return url.slice(nm + "/node_modules/".length);
  const root = url.search(/\/(dist|bench)\//);
  return root !== -1 ? url.slice(root + 1) : url.replace(/^file:\/\//, "");
}

export function summarise(profile: CpuProfile): { totalMs: number; idleMs: number; functions: Row[]; packages: Row[] } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  // timeDeltas[i] is the time before sample i; attribute the interval after a sample to it.
  for (let i = 0; i < samples.length; i++) {
    const dt = deltas[i + 1] ?? 0;
    selfUs.set(samples[i]!, (selfUs.get(samples[i]!) ?? 0) + Math.max(0, dt));
  }
  let idleUs = 0;
  let busyUs = 0;
  const fn = new Map<string, number>();
  const pkg = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const frame = byId.get(id)!.callFrame;
    if (frame.functionName === "(idle)") {
      idleUs += us;
      continue;
    }
    busyUs += us;
    const name = `${frame.functionName || "(anonymous)"} ${frame.url ? `${shortUrl(frame.url)}:${frame.lineNumber + 1}` : ""}`.trim();
    fn.set(name, (fn.get(name) ?? 0) + us);
    const p = packageOf(frame.url, frame.functionName);
    pkg.set(p, (pkg.get(p) ?? 0) + us);
  }
  const rows = (m: Map<string, number>) =>
    [...m]
      .map(([name, us]) => ({ name, selfMs: us / 1000, share: busyUs > 0 ? us / busyUs : 0 }))
      .sort((a, b) => b.selfMs - a.selfMs);
  return { totalMs: busyUs / 1000, idleMs: idleUs / 1000, functions: rows(fn), packages: rows(pkg) };
}

function load(file: string) {
  return summarise(JSON.parse(fs.readFileSync(file, "utf8")) as CpuProfile);
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const cell = (name: string) => `\`${name.replace(/\|/g, "\\|")}\``;

/** One profile on its own (bench/summarise-profile.ts). */
export function summaryMarkdown(title: string, file: string, top = 25): string {
  const s = load(file);
  return [
    `### ${title}`,
    "",
    `Busy ${s.totalMs.toFixed(0)} ms, idle ${s.idleMs.toFixed(0)} ms.`,
    "",
    "| package | self ms | share of busy |",
    "|---|--:|--:|",
    ...s.packages.slice(0, 15).map((r) => `| ${r.name} | ${r.selfMs.toFixed(0)} | ${pct(r.share)} |`),
    "",
    "| function (self time) | self ms | share of busy |",
    "|---|--:|--:|",
    ...s.functions.slice(0, top).map((r) => `| ${cell(r.name)} | ${r.selfMs.toFixed(1)} | ${pct(r.share)} |`),
    "",
  ].join("\n");
}

/**
 * The hub's and the baseline's profiles of one scenario side by side, in µs
 * of self time per response (the two serve different numbers of requests in
 * the same time, so shares alone mislead).
 */
export function comparisonMarkdown(
  title: string,
  hub: { file: string; responses: number },
  baseline: { file: string; responses: number },
  top = 20,
): string {
  const h = load(hub.file);
  const b = load(baseline.file);
  const perReq = (ms: number, n: number) => (ms * 1000) / n;
  const us = (x: number) => x.toFixed(1);
  const joined = (hr: Row[], br: Row[]) => {
    const names = new Set([...hr.map((r) => r.name), ...br.map((r) => r.name)]);
    const hm = new Map(hr.map((r) => [r.name, perReq(r.selfMs, hub.responses)]));
    const bm = new Map(br.map((r) => [r.name, perReq(r.selfMs, baseline.responses)]));
    return [...names].map((name) => ({ name, hub: hm.get(name) ?? 0, base: bm.get(name) ?? 0 }));
  };
  const packages = joined(h.packages, b.packages).sort((x, y) => Math.max(y.hub, y.base) - Math.max(x.hub, x.base));
  const functions = joined(h.functions, b.functions);
  const moreInHub = [...functions].sort((x, y) => y.hub - y.base - (x.hub - x.base)).filter((r) => r.hub - r.base > 0);
  return [
    `## ${title}`,
    "",
    `Busy CPU per response: hub ${us(perReq(h.totalMs, hub.responses))} µs (${hub.responses} responses), baseline ${us(perReq(b.totalMs, baseline.responses))} µs (${baseline.responses} responses). Main thread only (the sampling profiler does not see GC helper or libuv threads).`,
    "",
    "| package | hub µs/resp | baseline µs/resp | hub − baseline |",
    "|---|--:|--:|--:|",
    ...packages.slice(0, 16).map((r) => `| ${r.name} | ${us(r.hub)} | ${us(r.base)} | ${(r.hub - r.base >= 0 ? "+" : "") + us(r.hub - r.base)} |`),
    "",
    "Functions costing the hub more than the baseline (self time per response):",
    "",
    "| function | hub µs/resp | baseline µs/resp | hub − baseline |",
    "|---|--:|--:|--:|",
    ...moreInHub.slice(0, top).map((r) => `| ${cell(r.name)} | ${us(r.hub)} | ${us(r.base)} | +${us(r.hub - r.base)} |`),
    "",
    "Top self time in the hub:",
    "",
    "| function | hub µs/resp | share of hub busy |",
    "|---|--:|--:|",
    ...h.functions.slice(0, top).map((r) => `| ${cell(r.name)} | ${us(perReq(r.selfMs, hub.responses))} | ${pct(r.share)} |`),
    "",
    "Top self time in the baseline:",
    "",
    "| function | baseline µs/resp | share of baseline busy |",
    "|---|--:|--:|",
    ...b.functions.slice(0, top).map((r) => `| ${cell(r.name)} | ${us(perReq(r.selfMs, baseline.responses))} | ${pct(r.share)} |`),
    "",
  ].join("\n");
}
