/**
 * Target (a): this hub, as a user runs it, with the demo configuration and the
 * bench's configureApp. Started by bench/run.ts with an IPC channel; it starts
 * the embedded Postgres in BENCH_DATA_DIR that the baseline then attaches to.
 */
import "../lib/child-prelude.js";
import "../../dist/src/bin/process-setup.js"; // the tuning node dist/server.js applies
import { startAndListen } from "@hubpkg/hub";
import { benchConfigureApp, demoExtraPgSchemas, demoPlugins, referenceMigrationsPath } from "../lib/demo.js";
import { serveBench } from "../lib/child.js";

const dataDir = process.env.BENCH_DATA_DIR;
if (!dataDir) throw new Error("BENCH_DATA_DIR is not set");

const hub = await startAndListen({
  port: 0,
  host: "127.0.0.1",
  dataDir,
  logLevel: "warn",
  handleSignals: false, // serveBench stops it: on SIGINT/SIGTERM, on "stop", or when bench/run.ts goes away
  plugins: demoPlugins,
  extraPgSchemas: demoExtraPgSchemas,
  userDatabaseMigrationsPath: referenceMigrationsPath,
  configureApp: benchConfigureApp,
  // bench/run.ts compares it with the baseline's: the same preset must give the same schema.
  ...(process.env.BENCH_SCHEMA_FILE ? { exportSchemaSDLPath: process.env.BENCH_SCHEMA_FILE } : {}),
});

serveBench({ url: hub.url, superuserDatabaseUrl: hub.superuserDatabaseUrl }, () => hub.stop());
