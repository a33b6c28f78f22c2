// Preloaded into the live bench's hub (node --expose-gc --import): on SIGUSR2
// it runs full collections and prints RSS and the live heap, so memory per
// connection is read without garbage that a collection would have freed.
import v8 from "node:v8";
process.on("SIGUSR2", () => {
  globalThis.gc();
  globalThis.gc();
  const { rss, heapTotal, heapUsed, external, arrayBuffers } = process.memoryUsage();
  // Each V8 space's committed / used MiB: where the heap's committed size goes beyond what is live.
  const spaces = Object.fromEntries(
    v8.getHeapSpaceStatistics().map((s) => [s.space_name, [+(s.space_size / 2 ** 20).toFixed(1), +(s.space_used_size / 2 ** 20).toFixed(1)]]),
  );
  process.stdout.write(`live-mem ${JSON.stringify({ rss, heapTotal, heapUsed, external, arrayBuffers, spaces })}\n`);
});
