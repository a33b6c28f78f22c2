import { ErrorCode, serverStats, type ConfigureAppArgs } from "@hubpkg/hub";
import { dbListBets } from "@hubpkg/hub/db";
import type { Express, HubRequest, Response } from "@hubpkg/hub/express";

/**
 * The reference routes, written as a route author writes them:
 * the 401s are this code's own decision, not the hub's.
 *
 *   GET /health   {"status":"ok"} (and whether the database answers)
 *   GET /bets     the calling player's bets of every game (every table tagged
 *                 @hubBet) in the session's experience, newest first, a page at a time (401 unless a player, 400 for a bad
 *                 ?limit= or ?before=)
 *   GET /metrics  uptime, request and bet counts (401 unless an operator)
 */
export function configureReferenceRoutes({ app, superuserPool }: ConfigureAppArgs<Express>): void {
  app.get("/health", async (_req, res: Response) => {
    try {
      await superuserPool.query("select 1");
      res.json({ status: "ok", database: "ok" });
    } catch {
      res.status(503).json({ status: "degraded", database: "unavailable" });
    }
  });

  app.get("/bets", async (req: HubRequest, res: Response) => {
    if (req.identity?.kind !== "user") {
      res.status(401).type("text/plain").send("Unauthorized");
      return;
    }
    const query = parseBetsQuery(req.query as Record<string, unknown>);
    if ("error" in query) {
      res.status(400).json({ statusCode: 400, error: "Bad Request", code: query.code, message: query.error });
      return;
    }
    // The session's casino and experience, as the GraphQL API's row-level
    // security scopes them: a session of one experience never lists the
    // player's bets of another.
    const { user_id: userId, casino_id: casinoId, experience_id: experienceId } = req.identity.session;
    // Every game's bets: each table tagged @hubBet, a new game's included without code here.
    const bets = await dbListBets(superuserPool, { userId, casinoId, experienceId }, { before: query.before, limit: query.limit });
    // The player is the caller: their id stays out of the answer, as before.
    const rows = bets.map(({ userId: _caller, ...bet }) => bet);
    // A full page may have older bets after it: say where they are.
    const last = rows.at(-1);
    if (last && rows.length === query.limit) {
      res.setHeader("Link", `</bets?before=${last.id}&limit=${query.limit}>; rel="next"`);
    }
    res.json(rows);
  });

  app.get("/metrics", async (req: HubRequest, res: Response) => {
    if (req.identity?.kind !== "operator") {
      res.status(401).type("text/plain").send("Unauthorized");
      return;
    }
    const { rows } = await superuserPool.query<{ coinflips: number; coinflip_bets: number; wagered: number }>(
      `select (select count(*)::int from app.coinflip) as coinflips,
              (select count(*)::int from app.coinflip_bet) as coinflip_bets,
              (select coalesce(sum(wagered), 0)::float8 from hub.bankroll) as wagered`,
    );
    // This server's figures (a process may run several servers).
    const stats = serverStats(req);
    const bets = rows[0]!;
    res.json({
      metrics: {
        uptimeSeconds: stats.uptimeSeconds,
        startedAt: stats.startedAt,
        requests: stats.requests,
        memory: stats.memory,
        bets: { coinflip: bets.coinflips, coinflipBet: bets.coinflip_bets, total: bets.coinflips + bets.coinflip_bets },
        bankrollWagered: bets.wagered,
      },
    });
  });
}

const DEFAULT_BETS_LIMIT = 100;
const MAX_BETS_LIMIT = 1000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type BetsQuery = { limit: number; before: string | null } | { error: string; code: string };

/**
 * `?limit=` (1 to 1000, default 100) and `?before=<bet id>` (only bets older
 * than that one: bet ids are UUIDv7, ordered by creation time). Anything else
 * is refused rather than ignored, so a typo never silently returns page one.
 */
function parseBetsQuery(params: Record<string, unknown>): BetsQuery {
  const unknown = Object.keys(params).filter((name) => name !== "limit" && name !== "before");
  if (unknown.length > 0) {
    return {
      code: ErrorCode.UNKNOWN_PARAMETER,
      error: `Unknown query parameter ${unknown.map((n) => JSON.stringify(n)).join(", ")}; GET /bets accepts limit and before.`,
    };
  }
  for (const name of ["limit", "before"] as const) {
    if (params[name] !== undefined && typeof params[name] !== "string") {
      return { code: name === "limit" ? ErrorCode.INVALID_LIMIT : ErrorCode.INVALID_CURSOR, error: `${name} must be given once, as a plain value; received ${JSON.stringify(params[name])}.` };
    }
  }
  const rawLimit = params.limit as string | undefined;
  let limit = DEFAULT_BETS_LIMIT;
  if (rawLimit !== undefined) {
    limit = /^[0-9]{1,7}$/.test(rawLimit) ? Number(rawLimit) : Number.NaN;
    if (!(limit >= 1 && limit <= MAX_BETS_LIMIT)) {
      return { code: ErrorCode.INVALID_LIMIT, error: `limit must be a whole number from 1 to ${MAX_BETS_LIMIT}; received ${JSON.stringify(rawLimit.slice(0, 100))}.` };
    }
  }
  const before = params.before as string | undefined;
  if (before !== undefined && !UUID.test(before)) {
    return {
      code: ErrorCode.INVALID_CURSOR,
      error: `before must be the id of a bet (a UUID such as the last id of the previous page); received ${JSON.stringify(before.slice(0, 100))}.`,
    };
  }
  return { limit, before: before?.toLowerCase() ?? null };
}
