// Preloaded into the live bench's hub (node --expose-gc --import): on SIGUSR2
// it runs full collections and prints RSS and the live heap, so memory per
// connection is read without garbage that a collection would have freed.
process.on("SIGUSR2", () => {
  globalThis.gc();
  globalThis.gc();
  const { rss, heapTotal, heapUsed, external, arrayBuffers } = process.memoryUsage();
  process.stdout.write(`live-mem ${JSON.stringify({ rss, heapTotal, heapUsed, external, arrayBuffers })}\n`);
});
