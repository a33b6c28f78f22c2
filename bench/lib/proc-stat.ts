/**
 * A process's CPU as Linux's /proc/<pid>/stat gives it, for the bench's CPU
 * samplers (lib/pg-cpu.ts, suite-cpu.ts). Linux only.
 */
import { execFileSync } from "node:child_process";
import fs from "node:fs";

/** Clock ticks a second (USER_HZ), the unit of /proc's CPU times. */
export function clockTicks(): number {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
}

export interface ProcStat {
  ppid: number;
  /** Own CPU in ticks: utime + stime. */
  ticks: number;
  /** Ticks of its children that have exited and been waited for: cutime + cstime. */
  childTicks: number;
}

/** The process's stat, or undefined when it has exited (or never was). */
export function procStat(pid: number | string): ProcStat | undefined {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // Fields after "(comm) ": state ppid … utime(14) stime(15) cutime(16) cstime(17).
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]), childTicks: Number(f[13]) + Number(f[14]) };
}
