/**
 * The Express bundled with the hub (`@hubpkg/hub/express`). Using it
 * is optional; it is the same Express 5 whose app `configureApp` receives.
 */
import express from "express";
import type { Pool } from "pg";
import type { WithIdentity } from "../auth/identity.js";

export default express;
export const { Router, json, urlencoded, raw, text } = express;
const serveStatic = express.static;
export { serveStatic as static };

export type { Express, Response, NextFunction, RequestHandler, ErrorRequestHandler } from "express";

/**
 * Express's request with the hub's identity (one revision's name), and the
 * superuser pool bounded for that identity (the per-player bound of the
 * GraphQL context's `superuserPool`; the unbounded pool for anonymous requests).
 */
export type Request = express.Request & WithIdentity & { superuserPool: Pool };
/** The same type under the other revision's name. */
export type HubRequest = Request;

declare global {
  namespace Express {
    // So plain `(req, res) => req.identity` handlers type-check too.
    interface Request extends WithIdentity {
      /** Set by the hub on every request that reaches the app configured by `configureApp`. */
      superuserPool: Pool;
    }
  }
}
