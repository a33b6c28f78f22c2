/**
 * CPU time of the embedded Postgres (the postmaster and all its processes:
 * backends, WAL writer, checkpointer, …), read from /proc. Only one target is
 * under load at a time, so the growth during a run is that target's database
 * cost: together with the server's own CPU it tells how much of a request the
 * HTTP architecture can possibly change. Linux only; NaN elsewhere.
 */
import fs from "node:fs";
import path from "node:path";
import { clockTicks, procStat } from "./proc-stat.js";

/** A function returning the cumulative CPU µs of the Postgres of dataDir. */
export function postgresCpuSampler(dataDir: string): () => number {
  let postmaster: number;
  try {
    postmaster = Number(fs.readFileSync(path.join(dataDir, "pg", "postmaster.pid"), "utf8").split("\n")[0]);
  } catch {
    return () => Number.NaN;
  }
  if (!fs.existsSync("/proc/self/stat")) return () => Number.NaN;
  const usPerTick = 1e6 / clockTicks();
  return () => {
    let ticks = 0;
    for (const entry of fs.readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue;
      const stat = procStat(entry);
      if (!stat) continue; // exited meanwhile
      // The postmaster's children that have exited (a backend whose connection closed) keep counting.
      if (Number(entry) === postmaster) ticks += stat.ticks + stat.childTicks;
      else if (stat.ppid === postmaster) ticks += stat.ticks;
    }
    return ticks * usPerTick;
  };
}
