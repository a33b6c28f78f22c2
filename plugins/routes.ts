import { serverStats, type ConfigureAppArgs } from "@hubpkg/hub";
import type { Express, HubRequest, Response } from "@hubpkg/hub/express";

/**
 * The reference routes of spec §4.4, written as a route author writes them:
 * the 401s are this code's own decision (spec §5.5), not the hub's.
 *
 *   GET /health   {"status":"ok"} (and whether the database answers)
 *   GET /bets     the calling player's bets, newest first (401 unless a player)
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
    const limit = Math.min(Math.max(Number.parseInt(String(req.query.limit ?? "100"), 10) || 100, 1), 1000);
    const { rows } = await superuserPool.query(
      `select kind, id, wager, net, currency_key as "currencyKey", casino_id as "casinoId",
              experience_id as "experienceId", created_at as "createdAt"
         from (
           select 'coinflip' as kind, id, wager, net, currency_key, casino_id, experience_id,
                  hub_hidden.uuid_v7_timestamp(id) as created_at
             from app.coinflip where user_id = $1
           union all
           select 'coinflip_bet', id, wager, net, currency_key, casino_id, experience_id,
                  hub_hidden.uuid_v7_timestamp(id)
             from app.coinflip_bet where user_id = $1
         ) bets
        order by id desc
        limit $2`,
      [req.identity.user.id, limit],
    );
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
    const stats = serverStats();
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
