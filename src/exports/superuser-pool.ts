import type pg from "pg";
import { HubError } from "../errors.js";
import { forwardingProxy } from "../forwarding-proxy.js";
import { currentServer } from "./current-server.js";

/**
 * `superuserPool` as exported from `@hubpkg/hub/db`: a stable object a plugin
 * module can import before the server starts; it forwards to the superuser
 * pool of the server started last that is still running (./current-server.ts;
 * with several servers in one process, use `context.superuserPool` or
 * `req.superuserPool`, which are always the request's own server's), and says
 * so clearly when used before any server has opened its pools.
 */
export const superuserPool: pg.Pool = forwardingProxy(
  () => currentServer((server) => server.pools !== undefined)?.pools?.superuser,
  (prop) => {
    if (prop === "then") return undefined; // not a thenable
    throw new HubError(
      "HUB_NOT_STARTED",
      `superuserPool.${String(prop)} was used before the hub started; use it inside resolvers, plans or routes, or after startAndListen() resolves.`,
    );
  },
);
