/**
 * The rows of hash chains and hashes, as custom games use them inside their
 * own transaction (`withPgPoolTransaction(superuserPool, …)`). Lock order for
 * a bet: the chain first, then the player's balance, then the house bankroll
 * (dbLockPlayerBalanceAndHouseBankroll), so concurrent bets cannot deadlock.
 */
import type pg from "pg";
import type { ChainSecrets } from "./chain-secret.js";
import { withPgPoolTransaction } from "../db/pools.js";

type Queryable = Pick<pg.ClientBase, "query">;

export type DbHashKind = "TERMINAL" | "INTERMEDIATE" | "PREIMAGE";

export interface DbHashChain {
  id: string;
  user_id: string;
  casino_id: string;
  experience_id: string;
  active: boolean;
  max_iteration: number;
  current_iteration: number;
  created_at: Date;
}

export interface DbHash {
  id: string;
  hash_chain_id: string;
  kind: DbHashKind;
  digest: Buffer;
  iteration: number;
  client_seed: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
}

const CHAIN_COLUMNS = "id, user_id, casino_id, experience_id, active, max_iteration, current_iteration, created_at";
const HASH_COLUMNS = "id, hash_chain_id, kind, digest, iteration, client_seed, metadata, created_at";

/** How many hashes a new chain has when nobody says otherwise. */
export const DEFAULT_HASH_CHAIN_LENGTH = 100_000;
export const MAX_HASH_CHAIN_LENGTH = 1_000_000;

/**
 * The player's chain, locked FOR UPDATE until the transaction ends; null
 * when there is no such chain of this user, casino and experience (or,
 * with `active: "must-be-active"`, when it is no longer active).
 */
export async function dbLockHubHashChain(
  pgClient: Queryable,
  input: { userId: string; experienceId: string; casinoId: string; hashChainId: string; active?: "must-be-active" | "any" },
): Promise<DbHashChain | null> {
  const { rows } = await pgClient.query<DbHashChain>({
    name: "hub-lock-hash-chain",
    text: `select ${CHAIN_COLUMNS} from hub.hash_chain
      where id = $1 and user_id = $2 and experience_id = $3 and casino_id = $4
        and ($5::boolean is false or active)
      for update`,
    values: [input.hashChainId, input.userId, input.experienceId, input.casinoId, (input.active ?? "must-be-active") === "must-be-active"],
  });
  return rows[0] ?? null;
}

/** Store a revealed hash of a chain (a bet's INTERMEDIATE hash, with its client seed). */
export async function dbInsertHubHash(
  pgClient: Queryable,
  input: { hashChainId: string; kind: DbHashKind; digest: Uint8Array; iteration: number; clientSeed?: string | null; metadata?: Record<string, unknown> | null },
): Promise<DbHash> {
  const { rows } = await pgClient.query<DbHash>(
    `insert into hub.hash (hash_chain_id, kind, digest, iteration, client_seed, metadata)
     values ($1, $2, $3, $4, $5, coalesce($6::jsonb, '{}'))
     returning ${HASH_COLUMNS}`,
    [input.hashChainId, input.kind, Buffer.from(input.digest), input.iteration, input.clientSeed ?? null, input.metadata === undefined || input.metadata === null ? null : JSON.stringify(input.metadata)],
  );
  return rows[0]!;
}

/**
 * Take the chain's next iteration (current_iteration - 1) for a bet. The chain
 * must be locked (dbLockHubHashChain) in this transaction. Null when the chain
 * is exhausted: h(1) was the last hash a bet may use.
 */
export async function dbNextHubHashChainIteration(pgClient: Queryable, input: { hashChainId: string }): Promise<number | null> {
  const { rows } = await pgClient.query<{ current_iteration: number }>(
    `update hub.hash_chain set current_iteration = current_iteration - 1
      where id = $1 and current_iteration > 1
      returning current_iteration`,
    [input.hashChainId],
  );
  return rows[0]?.current_iteration ?? null;
}

/**
 * A new active chain for the player, retiring the previous active one of the
 * same casino and experience. The seed's N hashes are computed before the
 * transaction opens, so no connection is held meanwhile.
 */
export async function dbCreateHubHashChain(
  pool: pg.Pool,
  input: { userId: string; casinoId: string; experienceId: string; maxIteration?: number },
  /** Whose worker threads compute the chain: the server's (`context.hashChains`). */
  chains: ChainSecrets,
): Promise<{ hashChain: DbHashChain; terminalHash: DbHash }> {
  const maxIteration = input.maxIteration ?? DEFAULT_HASH_CHAIN_LENGTH;
  if (!Number.isSafeInteger(maxIteration) || maxIteration < 2 || maxIteration > MAX_HASH_CHAIN_LENGTH) {
    throw new RangeError(`a hash chain has 2 to ${MAX_HASH_CHAIN_LENGTH} hashes; received ${maxIteration}.`);
  }
  const secret = await chains.generate(maxIteration, undefined, input.userId);
  return withPgPoolTransaction(pool, async (pgClient) => {
    // One creation at a time per player and experience, so exactly one chain stays active.
    await pgClient.query("select pg_advisory_xact_lock(hashtextextended('hub.hash_chain:' || $1 || ':' || $2, 0))", [input.userId, input.experienceId]);
    await pgClient.query(
      "update hub.hash_chain set active = false where user_id = $1 and experience_id = $2 and casino_id = $3 and active",
      [input.userId, input.experienceId, input.casinoId],
    );
    const { rows } = await pgClient.query<DbHashChain>(
      `insert into hub.hash_chain (user_id, casino_id, experience_id, max_iteration, current_iteration)
       values ($1, $2, $3, $4, $4) returning ${CHAIN_COLUMNS}`,
      [input.userId, input.casinoId, input.experienceId, maxIteration],
    );
    const hashChain = rows[0]!;
    await pgClient.query(
      "insert into hub_secret.hash_chain_secret (hash_chain_id, seed, checkpoint_interval, checkpoints) values ($1, $2, $3, $4)",
      [hashChain.id, secret.seed, secret.checkpointInterval, secret.checkpoints],
    );
    const terminalHash = await dbInsertHubHash(pgClient, { hashChainId: hashChain.id, kind: "TERMINAL", digest: secret.terminalHash, iteration: maxIteration });
    return { hashChain, terminalHash };
  });
}

/**
 * End the player's chain: it becomes inactive, its seed is published as its
 * PREIMAGE hash (iteration 0) and the hub forgets the secret. Revealing a
 * revealed chain returns the same preimage. Null when the chain is not this
 * player's.
 */
export async function dbRevealHubHashChain(
  pool: pg.Pool,
  input: { userId: string; casinoId: string; experienceId: string; hashChainId: string },
  /** Whose cache forgets the chain: the server's (`context.hashChains`). */
  chains: ChainSecrets,
): Promise<DbHash | null> {
  const preimage = await withPgPoolTransaction(pool, async (pgClient) => {
    const chain = await dbLockHubHashChain(pgClient, { ...input, active: "any" });
    if (!chain) return null;
    const existing = await pgClient.query<DbHash>(`select ${HASH_COLUMNS} from hub.hash where hash_chain_id = $1 and kind = 'PREIMAGE'`, [chain.id]);
    if (existing.rows[0]) return existing.rows[0];
    const secret = await pgClient.query<{ seed: Buffer }>("delete from hub_secret.hash_chain_secret where hash_chain_id = $1 returning seed", [chain.id]);
    const seed = secret.rows[0]?.seed;
    if (!seed) throw new Error(`hash chain ${chain.id} has neither its secret nor a preimage`);
    await pgClient.query("update hub.hash_chain set active = false where id = $1", [chain.id]);
    return dbInsertHubHash(pgClient, { hashChainId: chain.id, kind: "PREIMAGE", digest: seed, iteration: 0 });
  });
  if (preimage) chains.forget(input.hashChainId);
  return preimage;
}
