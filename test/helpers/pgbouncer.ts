/**
 * A real PgBouncer (Debian's /usr/sbin/pgbouncer) of the test's own on
 * 127.0.0.1, configured with the ini block that docs/deployment.md shows
 * (so the documented configuration is the tested one): only its ports and
 * the userlist's path are the test's. Stopped (SIGTERM to the process this
 * helper started) when the test ends.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { ROOT } from "./process.js";
import { freePort } from "./ports.js";

export const PGBOUNCER = process.env.PGBOUNCER_PATH ?? "/usr/sbin/pgbouncer";

/** The fenced ```ini block that follows `marker` in a doc. */
export function iniBlockAfter(doc: string, marker: string): string {
  const text = fs.readFileSync(path.join(ROOT, doc), "utf8");
  const at = text.indexOf(marker);
  if (at < 0) throw new Error(`${doc} has no ${marker}`);
  const block = /```ini\n([\s\S]*?)```/.exec(text.slice(at));
  if (!block) throw new Error(`${doc} has no ini block after ${marker}`);
  return block[1]!;
}


export interface PgBouncer {
  port: number;
  /** The URL of `database` through the pooler for one of the users given. */
  urlFor(user: string, password: string, database: string): string;
}

export async function startPgBouncer(
  t: { teardown(fn: () => unknown): void },
  options: { ini: string; postgresPort: number; users: { user: string; password: string }[] },
): Promise<PgBouncer> {
  // Readable by the account PgBouncer drops to when started as root (it refuses to run as root).
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hub-pgbouncer-"));
  fs.chmodSync(dir, 0o755);
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  const userlist = path.join(dir, "userlist.txt");
  fs.writeFileSync(userlist, options.users.map((u) => `"${u.user}" "${u.password}"\n`).join(""), { mode: 0o644 });
  const ini = options.ini
    .replace(/port=5432/g, `port=${options.postgresPort}`)
    .replace(/^listen_port = \d+$/m, `listen_port = ${port}`)
    .replace(/^auth_file = .*$/m, `auth_file = ${userlist}`);
  if (ini === options.ini) throw new Error("the documented ini did not take the test's ports");
  const iniFile = path.join(dir, "pgbouncer.ini");
  fs.writeFileSync(iniFile, ini, { mode: 0o644 });
  const asRoot = process.getuid?.() === 0;
  const child = spawn(PGBOUNCER, [...(asRoot ? ["-u", "postgres"] : []), iniFile], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  });
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes(`listening on 127.0.0.1:${port}`)) resolve();
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    void exited.then(() => reject(new Error(`pgbouncer exited before listening:\n${output}`)));
  });
  return {
    port,
    urlFor: (user, password, database) => `postgres://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`,
  };
}
