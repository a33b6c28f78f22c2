/**
 * Imported first by src/index.ts (and by `npm test`): this process is the
 * game's own, so it chooses the Graphile packages' mode; importing the hub
 * changes nothing process-wide. They read GRAPHILE_ENV once, when they load:
 * production runs the fast planner, anything else the checked one.
 */
process.env.GRAPHILE_ENV ||= process.env.NODE_ENV === "production" ? "production" : "development";

export {};
