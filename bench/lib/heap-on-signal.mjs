// Preloaded into the soak's server (node --expose-gc --import): on SIGUSR2 it
// runs full collections and prints the live heap, so the soak can compare the
// idle heap before and after the load without in-flight requests in it.
process.on("SIGUSR2", () => {
  globalThis.gc();
  globalThis.gc();
  process.stdout.write(`soak-heap-used ${process.memoryUsage().heapUsed}\n`);
});
