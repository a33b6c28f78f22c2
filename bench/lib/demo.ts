/**
 * What both targets serve, so that only the architecture differs:
 *  - the demo configuration of src/bin/server.ts: defaultPlugins plus the
 *    reference plugins (makeCoinflip in plan style), the `app` schema and the
 *    reference migrations, and HubGameConfigPlugin (hubMakeOutcomeBet, kind GENERAL);
 *  - a configureApp as a user writes it: express.json(), a request-logging
 *    middleware, GET /health, GET /whoami, then the reference routes (/bets,
 *    /metrics). Our /health is declared first, so it is the one answering: a
 *    pure route, which measures the cost of reaching an Express route (the
 *    reference /health also runs `select 1`, which would mostly measure
 *    Postgres).
 *
 * Loaded only inside the target processes (through dist/, see
 * bench/tsconfig.child.json), never by bench/run.ts.
 */
import { defaultPlugins, HubGameConfigPlugin, type ConfigureAppArgs } from "@hubpkg/hub";
import express, { type Express, type HubRequest, type NextFunction, type Request, type Response } from "@hubpkg/hub/express";
import { CoinflipBetPlugin, CoinflipPlanPlugin, FortunePlugin, configureReferenceRoutes, referenceMigrationsPath } from "@hubpkg/hub/plugins";

/**
 * Plus hubMakeOutcomeBet with one kind, GENERAL (1% house edge, no risk
 * policy beyond the bankroll), for the outcome bet scenarios.
 */
export const demoPlugins: GraphileConfig.Plugin[] = [
  ...defaultPlugins,
  FortunePlugin,
  CoinflipPlanPlugin,
  CoinflipBetPlugin,
  HubGameConfigPlugin({ outcomeBetConfigs: { GENERAL: { houseEdge: 0.01, saveOutcomes: false } } }),
];
export const demoExtraPgSchemas = ["app"];
export { referenceMigrationsPath };

/** What the logging middleware keeps: a typical access-log/metrics middleware, minus the I/O. */
export const requestLog = { count: 0, totalNs: 0n, byStatusClass: [0, 0, 0, 0, 0, 0] };

function logRequests(req: Request, res: Response, next: NextFunction): void {
  const started = process.hrtime.bigint();
  res.on("finish", () => {
    requestLog.count++;
    requestLog.totalNs += process.hrtime.bigint() - started;
    requestLog.byStatusClass[Math.min(5, Math.floor(res.statusCode / 100))]!++;
    res.locals.method = req.method; // touch the request as a logger would
  });
  next();
}

export function benchConfigureApp({ app, superuserPool }: ConfigureAppArgs<Express>): void {
  app.use(express.json());
  app.use(logRequests);
  app.get("/health", (_req, res) => {
    res.json({ status: "ok" });
  });
  // Used by the identity-cache evidence: answers who the auth step found, no database work.
  app.get("/whoami", (req: HubRequest, res: Response) => {
    res.json({ kind: req.identity?.kind ?? null });
  });
  configureReferenceRoutes({ app, superuserPool });
}
