import fs from "node:fs";
import os from "node:os";
import path from "node:path";

/** A fresh directory removed when the test ends. */
export function tmpDir(t: { teardown(fn: () => unknown): void }, prefix = "hub-test-"): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export function writeFiles(dir: string, files: Record<string, string | Buffer>): string {
  fs.mkdirSync(dir, { recursive: true });
  for (const [name, content] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), content);
  return dir;
}
