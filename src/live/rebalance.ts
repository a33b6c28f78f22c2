import { randomUUID } from "node:crypto";
import type pg from "pg";
import type { Logger } from "../logger.js";
import { queryFile } from "../db/query-files.js";
import type { SocketRebalance } from "./rebalance-options.js";

const HEARTBEAT = queryFile("instance-heartbeat");

/** What the rebalance needs of the WebSocket front (adapters/websocket.ts). */
export interface RebalancedSockets {
  socketCount(): number;
  /** Close up to `count` sockets with a code clients reconnect on; returns how many were closed. */
  shed(count: number): number;
}

export interface SocketRebalancer {
  /** Stops the timers and removes this instance's row (at the start of a drain, and at close). */
  stop(): Promise<void>;
}

/** A heartbeat is missed when it comes this many intervals late: the instance counts as gone. */
const SEEN_WITHIN_BEATS = 3;
const SHED_TICK_MS = 1000;

/**
 * After a rolling restart the instances restarted first hold the sockets, and
 * a socket never moves by itself. Each instance records how many it holds in
 * hub_hidden.instance on a heartbeat and reads the others' counts (one
 * statement). When it holds more than `maxShare` times the fair share, or
 * more than its share while another instance holds less than its share
 * divided by `maxShare`, it closes sockets, oldest first, at most
 * `closePerSecond`, down to its share. Their clients reconnect, and a proxy
 * balancing by least connections sends them to the emptier instances.
 */
export function startSocketRebalance(pool: pg.Pool, sockets: RebalancedSockets, settings: SocketRebalance, log: Logger): SocketRebalancer {
  const id = randomUUID();
  const seenWithinSeconds = (settings.heartbeatMs * SEEN_WITHIN_BEATS) / 1000;
  /** What this instance should come down to, from the last heartbeat; Infinity when it holds no more than its share. */
  let target = Infinity;
  let failing = false;
  let stopped = false;
  /** A heartbeat still waiting (a slow or unreachable database): the next is skipped rather than queued behind it. */
  let beating = false;

  const beat = async () => {
    if (beating || stopped) return;
    beating = true;
    try {
      await record();
    } finally {
      beating = false;
    }
  };
  const record = async () => {
    const mine = sockets.socketCount();
    let others: { instances: number; sockets: number; fewest: number };
    try {
      const { rows } = await pool.query<{ instances: number; sockets: number; fewest: number }>(HEARTBEAT, [id, mine, seenWithinSeconds]);
      others = rows[0]!;
      if (failing) log.info("socket rebalance: the heartbeat is recorded again");
      failing = false;
    } catch (error) {
      if (stopped) return;
      if (!failing) log.warn({ err: error }, "socket rebalance: the heartbeat could not be recorded; sockets stay where they are until it can");
      failing = true;
      target = Infinity;
      return;
    }
    target = targetOf(mine, others, settings.maxShare);
    if (target < mine) log.info({ sockets: mine, instances: others.instances + 1, total: mine + others.sockets, target }, "socket rebalance: holding more than this instance's share; closing the excess");
  };
  const shedTick = () => {
    const excess = sockets.socketCount() - target;
    if (excess > 0) sockets.shed(Math.min(excess, Math.max(1, Math.round(settings.closePerSecond * (SHED_TICK_MS / 1000)))));
  };
  void beat();
  const beats = setInterval(() => void beat(), settings.heartbeatMs).unref();
  const shedding = setInterval(shedTick, SHED_TICK_MS).unref();
  return {
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(beats);
      clearInterval(shedding);
      await pool.query("delete from hub_hidden.instance where id = $1", [id]).catch((error: unknown) => log.warn({ err: error }, "socket rebalance: this instance's row could not be removed; the others ignore it once it is stale"));
    },
  };
}

/**
 * The count to come down to, or Infinity when nothing needs to move. The fair
 * share is the mean over the live instances; `fewest` is the smallest count
 * among the others.
 */
export function targetOf(mine: number, others: { instances: number; sockets: number; fewest: number }, maxShare: number): number {
  if (others.instances === 0) return Infinity;
  const fair = (mine + others.sockets) / (others.instances + 1);
  const share = Math.ceil(fair);
  const overloaded = mine > fair * maxShare;
  const anotherStarved = others.fewest < fair / maxShare && mine > share;
  return overloaded || anotherStarved ? share : Infinity;
}
