/**
 * A transfer worker alone in a process, for bench/transfer-worker-vs-graphile-worker.ts
 * to SIGKILL in the middle of a casino call:
 *   node --import tsx bench/lib/transfer-worker-child.ts <hub|graphile> <superuser database URL>
 * Prints "ready" once the worker runs.
 */
import { resolveTransferOptions } from "../../dist/src/transfers/options.js";
import { loadGraphileWorker, startWorker, type Kind } from "./transfer-workers.js";

const [kind, url] = process.argv.slice(2) as [Kind, string];
const gw = await loadGraphileWorker();
await startWorker(kind, url, resolveTransferOptions({ concurrency: 4 }), gw);
process.stdout.write("ready\n");
setInterval(() => undefined, 60_000);
