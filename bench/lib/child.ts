/**
 * The target side of bench/lib/protocol.ts: answer counter requests, profile
 * on demand, and stop cleanly when asked, on SIGINT/SIGTERM, or when the
 * parent goes away (the IPC channel closes), so a crashed or killed bench
 * never leaves a server or its embedded Postgres behind.
 */
import fs from "node:fs";
import path from "node:path";
import { Session } from "node:inspector/promises";
import type { ChildMessage, ParentMessage } from "./protocol.js";
import { requestLog } from "./demo.js";
import { gcCounters, pgCounters } from "./child-prelude.js";

function send(message: ChildMessage): void {
  if (process.connected) process.send!(message);
}

export function serveBench(ready: { url: string; superuserDatabaseUrl: string }, stop: () => Promise<void>): void {
  if (!process.send) throw new Error("this script is started by bench/run.ts (it needs an IPC channel)");
  let stopping: Promise<void> | undefined;
  const shutdown = (code: number) => {
    stopping ??= stop().then(
      () => process.exit(code),
      (error: unknown) => {
        process.stderr.write(`error while stopping: ${(error as Error)?.stack ?? String(error)}\n`);
        process.exit(1);
      },
    );
  };
  let session: Session | undefined;

  process.on("message", (raw: ParentMessage) => {
    switch (raw.type) {
      case "stats": {
        const cpu = process.cpuUsage();
        const memory = process.memoryUsage();
        send({
          type: "stats",
          id: raw.id,
          stats: {
            cpuUserUs: cpu.user,
            cpuSystemUs: cpu.system,
            rssBytes: memory.rss,
            heapUsedBytes: memory.heapUsed,
            loggedRequests: requestLog.count,
            pgStatements: pgCounters.statements,
            pgRoundTrips: pgCounters.roundTrips,
            gcPauseUs: gcCounters.pauseUs,
            gcMinorUs: gcCounters.minorUs,
            gcMinorCount: gcCounters.minorCount,
            gcOtherCount: gcCounters.otherCount,
          },
        });
        break;
      }
      case "profile-start":
        void (async () => {
          session = new Session();
          session.connect();
          await session.post("Profiler.enable");
          // 100 µs instead of the default 1 ms: a request costs a few hundred µs.
          await session.post("Profiler.setSamplingInterval", { interval: 100 });
          await session.post("Profiler.start");
        })().then(
          () => send({ type: "done", id: raw.id }),
          (error: unknown) => send({ type: "done", id: raw.id, error: String(error) }),
        );
        break;
      case "profile-stop":
        void (async () => {
          if (!session) throw new Error("no profile running");
          const { profile } = await session.post("Profiler.stop");
          session.disconnect();
          session = undefined;
          fs.mkdirSync(path.dirname(raw.file), { recursive: true });
          fs.writeFileSync(raw.file, JSON.stringify(profile));
        })().then(
          () => send({ type: "done", id: raw.id }),
          (error: unknown) => send({ type: "done", id: raw.id, error: String(error) }),
        );
        break;
      case "stop":
        shutdown(0);
        break;
    }
  });
  process.on("disconnect", () => shutdown(0));
  process.on("SIGINT", () => shutdown(0));
  process.on("SIGTERM", () => shutdown(0));
  send({ type: "ready", url: ready.url, superuserDatabaseUrl: ready.superuserDatabaseUrl, pid: process.pid });
}
