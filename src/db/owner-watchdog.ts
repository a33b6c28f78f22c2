/**
 * The owner's watchdog, run by watchPostmaster (src/db/watchdog.ts) as
 * `node owner-watchdog.js <clusterDir> <postmaster pid>`. Its standard input
 * is a pipe from the hub that started the postmaster; the kernel closes that
 * pipe when the hub ends, however it ends (exit, crash, abort, SIGKILL, the OOM
 * killer). On end of input it stops the postmaster, unless it is already gone
 * or the cluster now runs another postmaster (someone started it again after
 * the owner had stopped it: not ours to stop).
 */
import path from "node:path";
import { isAlive, readPidFile, stopPostmaster } from "./postmaster.js";

const [clusterDir = "", pidRaw] = process.argv.slice(2);
const pid = Number(pidRaw);
let done = false;
const ownerGone = () => {
  if (done) return;
  done = true;
  if (readPidFile(path.join(clusterDir, "postmaster.pid")) !== pid || !isAlive(pid)) process.exit(0);
  void stopPostmaster(pid).finally(() => process.exit(0));
};
process.stdin.on("end", ownerGone);
process.stdin.on("close", ownerGone);
process.stdin.on("error", ownerGone);
process.stdin.resume();
