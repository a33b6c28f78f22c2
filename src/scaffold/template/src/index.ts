/**
 * The server: `npm start` (node --import tsx src/index.ts). Settings come from
 * the environment (.env.example lists them); without DATABASE_URL the hub
 * runs an embedded Postgres in ./.hub. GraphiQL is at /graphiql outside
 * production. A failure to start prints one block (the code, the message,
 * what to change) and exits with status 1; LOG_LEVEL=debug adds the stack.
 * This process is the server's own, so it asks the hub to handle SIGINT and
 * SIGTERM (npm run dev's restarts, Ctrl-C): drain, stop, exit.
 */
import "./process.js";
import { exitOnStartFailure, startAndListen } from "@hubpkg/hub";
import { serverOptions } from "./options.js";

await startAndListen({
  ...serverOptions,
  handleSignals: true,
  // Written at each start outside production, for GraphQL code generators (a production image's folder is read-only).
  ...(process.env.NODE_ENV === "production" ? {} : { exportSchemaSDLPath: "schema.graphql" }),
}).catch(exitOnStartFailure);
