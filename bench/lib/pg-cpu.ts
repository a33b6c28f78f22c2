/**
 * CPU time of the embedded Postgres (the postmaster and all its processes:
 * backends, WAL writer, checkpointer, …), read from /proc. Only one target is
 * under load at a time, so the growth during a run is that target's database
 * cost: together with the server's own CPU it tells how much of a request the
 * HTTP architecture can possibly change. Linux only; NaN elsewhere.
 */
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

function clockTicks(): number {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
}

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
      let stat: string;
      try {
        stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8");
      } catch {
        continue; // exited meanwhile
      }
      // Fields after "(comm) ": state ppid … utime(14) stime(15) cutime(16) cstime(17).
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const pid = Number(entry);
      if (pid === postmaster) {
        // cutime/cstime: children that have exited (a backend whose connection closed) keep counting.
        ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
      } else if (Number(f[1]) === postmaster) {
        ticks += Number(f[11]) + Number(f[12]);
      }
    }
    return ticks * usPerTick;
  };
}
