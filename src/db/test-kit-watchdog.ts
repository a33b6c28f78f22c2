/**
 * The test kit's watchdog, run by the test kit (src/test-kit/cluster.ts) as
 * `node test-kit-watchdog.js <dir> <idle milliseconds>` when it starts the
 * shared cluster in <dir>. Every 0.5 s it removes the leases (<dir>/leases/<pid>)
 * of processes that are gone; once no lease has been live for the idle time it
 * stops the postmaster and exits. Before stopping it writes <dir>/stopping and
 * looks at the leases once more: a test process writes its lease before looking
 * for the cluster, so either this sees the lease and stays, or the test process
 * sees the marker and waits. Only one watchdog is on duty: the one whose pid is
 * in <dir>/watchdog.pid.
 */
import fs from "node:fs";
import path from "node:path";
import { isAlive, readPidFile, stopPostmaster } from "./postmaster.js";

const [dir = "", idleRaw] = process.argv.slice(2);
const idleMs = Number(idleRaw);
const mine = path.join(dir, "watchdog.pid");
const leases = path.join(dir, "leases");
const stopping = path.join(dir, "stopping");
const postmaster = () => readPidFile(path.join(dir, "pg", "postmaster.pid"));

const liveLeases = (): number => {
  let n = 0;
  let names: string[] = [];
  try {
    names = fs.readdirSync(leases);
  } catch {
    /* no leases yet */
  }
  for (const name of names) {
    const pid = Number(name);
    if (pid > 0 && isAlive(pid)) n++;
    else
      try {
        fs.unlinkSync(path.join(leases, name));
      } catch {
        /* removed meanwhile */
      }
  }
  return n;
};

const other = readPidFile(mine);
if (other && other !== process.pid && isAlive(other)) process.exit(0);
fs.writeFileSync(mine, String(process.pid));
let lastBusy = Date.now();

const quit = (): never => {
  for (const file of [stopping, mine]) {
    if (readPidFile(file) === process.pid)
      try {
        fs.unlinkSync(file);
      } catch {
        /* removed meanwhile */
      }
  }
  process.exit(0);
};

const tick = (): void => {
  if (readPidFile(mine) !== process.pid) process.exit(0); // another watchdog is on duty
  const pid = postmaster();
  if (!pid || !isAlive(pid)) return quit();
  if (liveLeases() > 0) lastBusy = Date.now();
  if (Date.now() - lastBusy < idleMs) return;
  fs.writeFileSync(stopping, String(process.pid));
  if (liveLeases() > 0) {
    fs.unlinkSync(stopping);
    lastBusy = Date.now();
    return;
  }
  clearInterval(timer);
  void stopPostmaster(pid).finally(quit);
};

// A failed tick (a full disk, a file removed under it) is retried at the next one.
const timer = setInterval(() => {
  try {
    tick();
  } catch {
    /* next tick */
  }
}, 500);
