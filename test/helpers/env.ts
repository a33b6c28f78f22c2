// Imported first by every test: throw-away clusters skip fsync (initdb
// --no-sync) and logs stay quiet unless a test asks for them.
process.env.NODE_ENV ??= "test";
process.env.LOG_LEVEL ??= "warn";

// tap's process-info hook follows every process a test starts (for coverage):
// on each spawn it puts itself back into the child's NODE_OPTIONS, through the
// spawn listeners of `process-on-spawn`, kept on this global so that all of
// its copies share them. Coverage is off (.taprc), and the hook costs every
// node process it enters about 0.45 s of CPU: the servers, CLIs and watchdogs
// the tests start (several hundred a suite) are spawned without it.
interface SpawnOptions {
  env: Record<string, string | undefined>;
}
const spawnHooks = (globalThis as Record<symbol, { listeners?: ((options: SpawnOptions) => void)[] } | undefined>)[
  Symbol.for("process-on-spawn@*:singletonId")
];
spawnHooks?.listeners?.push((options) => {
  const nodeOptions = options.env.NODE_OPTIONS;
  if (!nodeOptions?.includes("@tapjs/processinfo")) return;
  const kept = nodeOptions.replace(/"--(?:import|loader)=[^"]*@tapjs\/processinfo[^"]*"|--(?:import|loader)=\S*@tapjs\/processinfo\S*/g, "").trim();
  if (kept === "") delete options.env.NODE_OPTIONS;
  else options.env.NODE_OPTIONS = kept;
});
export {};
