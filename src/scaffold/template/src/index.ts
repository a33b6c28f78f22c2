/**
 * The server: `npm start` (node --import tsx src/index.ts). Settings come from
 * the environment (.env.example lists them); without DATABASE_URL the hub
 * runs an embedded Postgres in ./.hub. GraphiQL is at /graphiql outside
 * production.
 */
import "./process.js";
import { startAndListen } from "@hubpkg/hub";
import { serverOptions } from "./options.js";

await startAndListen({
  ...serverOptions,
  // Written at each start, for GraphQL code generators.
  exportSchemaSDLPath: "schema.graphql",
});
