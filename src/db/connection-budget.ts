import type pg from "pg";
import { configInvalid, optionInvalid, type HubError } from "../errors.js";
import type { Logger } from "../logger.js";

/** Each pool's most connections, as the `pools` option names them. */
export interface PoolSizes {
  graphql: number;
  superuser: number;
  credentials: number;
  /** 0 when this instance runs no transfer worker. */
  transferWorker: number;
}

/** What one instance may open in all: its pools and its LISTEN connection. */
export interface ConnectionPlan extends PoolSizes {
  listen: number;
  total: number;
}

/** Today's sizes: what an instance opens when nothing is set (one instance, as fast as it can be). */
export const DEFAULT_POOL_SIZES = { graphql: 20, superuser: 10, credentials: 3 } as const;
const LISTEN = 1;
/** The fewest each pool can work with: below, maxConnections is refused. */
const MINIMUM = { graphql: 2, superuser: 2, credentials: 1, transferWorker: 2 } as const;

export interface PlanInput {
  /** maxConnections (HUB_MAX_CONNECTIONS); undefined: the pools' own sizes, added up. */
  maxConnections: number | undefined;
  /** Where maxConnections came from, for the refusal's wording. */
  maxConnectionsFrom: "env" | "option";
  /** The `pools` option: sizes given explicitly. */
  pools: Partial<PoolSizes> | undefined;
  /** The transfer worker's own wish (concurrency + 1), or 0 when it is off. */
  transferWorker: number;
}

const clamp = (n: number, lo: number, hi: number) => Math.max(lo, Math.min(hi, n));

/**
 * Split the budget across the pools (docs/deployment.md, "Connections: the
 * budget per instance"): LISTEN 1; credentials a twelfth of the rest (1 to 3);
 * the transfer worker an eighth (2 to its concurrency + 1); of what is left,
 * the superuser pool a third (at least 2) and GraphQL the remainder. A pool
 * given in `pools` takes that size and the others share what is left. With
 * nothing set this gives today's sizes, 39 in all (34 without the worker).
 */
export function planConnections(input: PlanInput): ConnectionPlan {
  const given = input.pools ?? {};
  const worker = input.transferWorker;
  if (input.maxConnections === undefined) {
    const sizes: PoolSizes = {
      graphql: given.graphql ?? DEFAULT_POOL_SIZES.graphql,
      superuser: given.superuser ?? DEFAULT_POOL_SIZES.superuser,
      credentials: given.credentials ?? DEFAULT_POOL_SIZES.credentials,
      transferWorker: worker === 0 ? 0 : given.transferWorker ?? worker,
    };
    return withTotal(sizes);
  }
  const budget = input.maxConnections;
  const rest = budget - LISTEN;
  const credentials = given.credentials ?? clamp(Math.round(rest / 12), MINIMUM.credentials, DEFAULT_POOL_SIZES.credentials);
  const transferWorker = worker === 0 ? 0 : given.transferWorker ?? clamp(Math.round(rest / 8), MINIMUM.transferWorker, Math.max(worker, MINIMUM.transferWorker));
  const shared = rest - credentials - transferWorker;
  const superuser = given.superuser ?? (given.graphql !== undefined ? shared - given.graphql : Math.max(MINIMUM.superuser, Math.floor(shared / 3)));
  const graphql = given.graphql ?? shared - superuser;
  const plan = withTotal({ graphql, superuser, credentials, transferWorker });
  if (plan.total > budget || graphql < MINIMUM.graphql || superuser < MINIMUM.superuser) throw tooSmall(input, plan);
  return plan;
}

function withTotal(sizes: PoolSizes): ConnectionPlan {
  return { ...sizes, listen: LISTEN, total: sizes.graphql + sizes.superuser + sizes.credentials + sizes.transferWorker + LISTEN };
}

/** The refusal of a budget the pools cannot run in, naming the smallest that works. */
function tooSmall(input: PlanInput, plan: ConnectionPlan): HubError {
  const given = input.pools ?? {};
  const need = (key: keyof PoolSizes) => (key === "transferWorker" && input.transferWorker === 0 ? 0 : given[key] ?? MINIMUM[key]);
  const least = LISTEN + need("graphql") + need("superuser") + need("credentials") + need("transferWorker");
  const parts = [`LISTEN ${LISTEN}`, `GraphQL ${need("graphql")}`, `superuser ${need("superuser")}`, `credentials ${need("credentials")}`];
  if (input.transferWorker > 0) parts.push(`transfer worker ${need("transferWorker")}`);
  const expected =
    `an integer >= ${least}: an instance needs at least ${parts.join(", ")}` +
    (input.pools ? " (with the sizes the pools option gives)" : "") +
    `; this budget would leave GraphQL ${plan.graphql} and superuser ${plan.superuser}. Raise it, or give smaller pools sizes`;
  return input.maxConnectionsFrom === "option" ? optionInvalid("maxConnections", input.maxConnections, expected) : configInvalid("HUB_MAX_CONNECTIONS", String(input.maxConnections), expected);
}

/**
 * Compare the plan with what the server accepts (max_connections less the
 * slots reserved for superusers and reserved roles) and warn, with the
 * numbers, when this instance's budget does not fit; how many instances of
 * it fit is in the info line either way.
 */
export async function checkServerConnectionLimit(pool: pg.Pool, plan: ConnectionPlan, log: Logger): Promise<void> {
  const { rows } = await pool.query<{ max: number; superuser_reserved: number; reserved: number }>(
    `select current_setting('max_connections')::int as max, current_setting('superuser_reserved_connections')::int as superuser_reserved,
            coalesce(current_setting('reserved_connections', true)::int, 0) as reserved`,
  );
  const row = rows[0];
  if (!row) return;
  const limit = row.max - row.superuser_reserved - row.reserved;
  const fit = Math.floor(limit / plan.total);
  const numbers = {
    budget: plan.total,
    pools: { graphql: plan.graphql, superuser: plan.superuser, credentials: plan.credentials, transferWorker: plan.transferWorker, listen: plan.listen },
    serverLimit: limit,
    maxConnections: row.max,
    superuserReservedConnections: row.superuser_reserved,
    reservedConnections: row.reserved,
    instancesThatFit: fit,
  };
  if (fit >= 1) {
    log.info(numbers, `connection budget: this instance opens at most ${plan.total} connections; the server accepts ${limit}, room for ${fit} instance(s) of this budget`);
    return;
  }
  log.warn(
    numbers,
    `connection budget: this instance may open ${plan.total} connections, but the server accepts only ${limit} ` +
      `(max_connections ${row.max} - superuser_reserved_connections ${row.superuser_reserved}${row.reserved ? ` - reserved_connections ${row.reserved}` : ""}): ` +
      `no instance of this budget fits. Set HUB_MAX_CONNECTIONS (maxConnections) to at most ${limit} divided by the number of instances, or raise max_connections`,
  );
}
