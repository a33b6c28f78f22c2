/**
 * Whether a folder lies on a tmpfs (files in memory) with `bytes` free, and
 * the machine has as much memory available: where the suite writes many files
 * (clusters, installed projects), a disk's filesystem costs a third more CPU
 * in kernel time. False where statfs cannot say (no such folder, macOS,
 * Windows). Plain JavaScript: test/run-all.mjs uses it before any TypeScript
 * loads; its types are in memory-tmp.d.mts.
 */
import fs from "node:fs";
import os from "node:os";

/** statfs's f_type of a tmpfs. */
const TMPFS_MAGIC = 0x01021994;

export function roomyTmpfs(dir, bytes) {
  try {
    const stat = fs.statfsSync(dir);
    return stat.type === TMPFS_MAGIC && stat.bavail * stat.bsize >= bytes && os.freemem() >= bytes;
  } catch {
    return false;
  }
}
