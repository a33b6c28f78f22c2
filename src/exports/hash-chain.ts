// What custom provably fair games use: the chain rows, the hashes, the arithmetic and the verifier.
import * as rows from "../fair/db.js";
import * as outcomeBets from "../fair/outcome-bet.js";
import { createChainSecrets, type ChainSecrets, type GetIntermediateHashResult } from "../fair/chain-secret.js";
import type pg from "pg";
import { currentServer } from "./current-server.js";
import { superuserPool } from "./superuser-pool.js";

export {
  dbLockHubHashChain,
  dbInsertHubHash,
  dbNextHubHashChainIteration,
  DEFAULT_HASH_CHAIN_LENGTH,
  MAX_HASH_CHAIN_LENGTH,
  type DbHashChain,
  type DbHash,
  type DbHashKind,
} from "../fair/db.js";
export { CHECKPOINT_INTERVAL, type ChainSecrets, type GetIntermediateHashResult } from "../fair/chain-secret.js";
export * from "./hash-chain-verify.js";
export { validateRisk, riskLimitsOf, playerRiskLimits, coarseLimit, type RiskPolicy, type RiskPolicyArgs, type RiskLimits, type ValidateRiskInput, type ValidateRiskResult } from "../fair/risk.js";
export { checkOutcomeBetInput, netOf, MAX_OUTCOMES, MAX_CLIENT_SEED_LENGTH, HOUSE_EDGE_TOLERANCE, type MakeOutcomeBetInput, type MakeOutcomeBetResult } from "../fair/outcome-bet.js";

/**
 * The chain work of the server started last that is still running
 * (./current-server.ts), for a caller that gives none; with no server running,
 * a fresh one for the call, which keeps nothing. A plugin passes its own
 * server's instead: `context.hashChains`.
 */
const currentChains = (): ChainSecrets => currentServer()?.chains ?? createChainSecrets();

/**
 * h(iteration) of a chain whose seed the hub holds (an unrevealed chain), for
 * 1 ≤ iteration ≤ maxIteration. Reads the secret on the given client (or the
 * hub's superuser pool) only when the segment is not in the cache of `chains`
 * (default: the current server's). The result does not depend on the cache.
 */
export function getIntermediateHash(
  input: { hashChainId: string; iteration: number; pgClient?: Pick<pg.ClientBase, "query"> | undefined },
  chains: ChainSecrets = currentChains(),
): Promise<GetIntermediateHashResult> {
  return chains.intermediateHash({ hashChainId: input.hashChainId, iteration: input.iteration, pgClient: input.pgClient ?? superuserPool });
}

/** A new active chain for the player (src/fair/db.ts); computed by `chains` (default: the current server's). */
export function dbCreateHubHashChain(
  pool: pg.Pool,
  input: Parameters<typeof rows.dbCreateHubHashChain>[1],
  chains?: ChainSecrets,
): ReturnType<typeof rows.dbCreateHubHashChain> {
  return rows.dbCreateHubHashChain(pool, input, chains ?? currentChains());
}

/** End the player's chain and publish its seed (src/fair/db.ts); `chains` (default: the current server's) forgets it. */
export function dbRevealHubHashChain(
  pool: pg.Pool,
  input: Parameters<typeof rows.dbRevealHubHashChain>[1],
  chains?: ChainSecrets,
): ReturnType<typeof rows.dbRevealHubHashChain> {
  return rows.dbRevealHubHashChain(pool, input, chains ?? currentChains());
}

type OutcomeBetArgs = Parameters<typeof outcomeBets.makeOutcomeBet>;

/** One outcome bet, as hubMakeOutcomeBet runs it (src/fair/outcome-bet.ts); hashes derived by `chains` (default: the current server's). */
export function makeOutcomeBet(
  pool: OutcomeBetArgs[0],
  player: OutcomeBetArgs[1],
  input: OutcomeBetArgs[2],
  config: OutcomeBetArgs[3],
  chainQueue?: OutcomeBetArgs[4],
  settleGroups?: OutcomeBetArgs[5],
  chains?: ChainSecrets,
): ReturnType<typeof outcomeBets.makeOutcomeBet> {
  return outcomeBets.makeOutcomeBet(pool, player, input, config, chainQueue, settleGroups, chains ?? currentChains());
}
