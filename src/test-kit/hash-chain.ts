/**
 * Hash chains in tests. A test learns a bet's outcome in advance the way
 * only the house could: it reads the chain's secret through the superuser
 * connection of the test database and derives the next hash, then picks a
 * client seed that draws the outcome it wants. The server offers no such
 * path: this needs the database's superuser.
 *
 * They are given a pool, not a server: each call computes with chain work of
 * its own (createChainSecrets), which keeps nothing after it. The hashes do
 * not depend on it; the checkpoints in the database determine the chain.
 */
import type pg from "pg";
import { dbCreateHubHashChain, type DbHashChain } from "../fair/db.js";
import { createChainSecrets } from "../fair/chain-secret.js";
import { outcomeIndexOf } from "../fair/hash.js";
import { invalidArgument } from "../errors.js";

/**
 * A new active chain for the player (retiring the previous one), like
 * hubCreateHashChain. Its length: maxIteration, or maxIterations (the other
 * revision's name; give one of them), default the hub's default length.
 */
export async function createHashChain(
  pool: pg.Pool,
  input: { userId: string; casinoId: string; experienceId: string; maxIteration?: number; maxIterations?: number },
): Promise<DbHashChain & { terminalHash: Uint8Array }> {
  const { maxIteration, maxIterations, ...owner } = input;
  if (maxIteration !== undefined && maxIterations !== undefined && maxIteration !== maxIterations) {
    throw invalidArgument(`createHashChain: maxIteration (${maxIteration}) and maxIterations (${maxIterations}) are two names of one length; give one of them.`);
  }
  const length = maxIteration ?? maxIterations;
  const { hashChain, terminalHash } = await dbCreateHubHashChain(pool, { ...owner, ...(length !== undefined ? { maxIteration: length } : {}) }, createChainSecrets());
  return { ...hashChain, terminalHash: new Uint8Array(terminalHash.digest) };
}

/** The hash the chain's next bet will use: h(current_iteration - 1). */
export async function getNextHash(pool: pg.Pool, input: { hashChainId: string }): Promise<{ iteration: number; hash: Uint8Array }> {
  const { rows } = await pool.query<{ current_iteration: number }>("select current_iteration from hub.hash_chain where id = $1", [input.hashChainId]);
  const current = rows[0]?.current_iteration;
  if (current === undefined) throw invalidArgument(`getNextHash: no hash chain has the id ${JSON.stringify(input.hashChainId)}.`);
  if (current <= 1) throw invalidArgument(`getNextHash: hash chain ${input.hashChainId} is exhausted (its next bet gets HubBadHashChainError).`);
  const result = await createChainSecrets().intermediateHash({ hashChainId: input.hashChainId, iteration: current - 1, pgClient: pool });
  if (result.type === "error") throw invalidArgument(`getNextHash: ${result.reason}`);
  return { iteration: current - 1, hash: result.hash };
}

/**
 * A client seed with which the chain's next bet on these outcomes draws
 * outcomeIdx (tries "seed-0", "seed-1", … in order). Only valid until the chain's
 * next bet.
 */
export async function clientSeedForOutcome(
  pool: pg.Pool,
  input: { hashChainId: string; outcomes: readonly { weight: number }[]; outcomeIdx: number },
): Promise<string> {
  const weights = input.outcomes.map((o) => o.weight);
  if (!(weights[input.outcomeIdx]! > 0)) throw invalidArgument(`clientSeedForOutcome: outcome ${input.outcomeIdx} has no positive weight, so no seed draws it.`);
  const { hash } = await getNextHash(pool, input);
  for (let i = 0; i < 1_000_000; i++) {
    const clientSeed = `seed-${i}`;
    if (outcomeIndexOf({ serverHash: hash, clientSeed, weights }) === input.outcomeIdx) return clientSeed;
  }
  throw invalidArgument(`clientSeedForOutcome: no seed among a million draws outcome ${input.outcomeIdx}.`);
}
