/**
 * Verification a player (or anyone) runs without the hub's database: only the
 * revealed hashes, the client seeds and the bets' outcomes.
 */
import { createHash } from "node:crypto";
import { makeFinalHash, normalizeHash, pickOutcomeIndex, sha256, toHex } from "./hash.js";

export type VerifyResult = { ok: true } | { ok: false; reason: string };

const equalBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((byte, i) => byte === b[i]);

/**
 * Check one bet: the outcome its hash h(i) and client seed draw over the
 * outcomes' weights is outcomeIdx (and, when given, its profit is that
 * outcome's); with nextHash (h(i + 1), the hash revealed before it, or the
 * terminal hash), also that SHA-256(h(i)) = h(i + 1).
 */
export function verifyOutcomeBet(input: {
  hash: Uint8Array;
  clientSeed: string;
  outcomes: readonly { weight: number; profit: number }[];
  outcomeIdx: number;
  profit?: number;
  nextHash?: Uint8Array;
}): VerifyResult & { expectedOutcomeIdx?: number } {
  if (input.nextHash && !equalBytes(sha256(input.hash), input.nextHash)) {
    return { ok: false, reason: `SHA-256 of the bet's hash ${toHex(input.hash)} is not the next hash ${toHex(input.nextHash)}.` };
  }
  const normalized = normalizeHash(makeFinalHash({ serverHash: input.hash, clientSeed: input.clientSeed }));
  const expected = pickOutcomeIndex(normalized, input.outcomes.map((o) => o.weight));
  if (expected !== input.outcomeIdx) {
    return { ok: false, reason: `the hash and client seed draw outcome ${expected} (normalised ${normalized}); the bet says ${input.outcomeIdx}.`, expectedOutcomeIdx: expected };
  }
  if (input.profit !== undefined && input.outcomes[expected]!.profit !== input.profit) {
    return { ok: false, reason: `outcome ${expected} has profit ${input.outcomes[expected]!.profit}; the bet says ${input.profit}.`, expectedOutcomeIdx: expected };
  }
  return { ok: true, expectedOutcomeIdx: expected };
}

/**
 * Check a whole revealed chain at once: walking from the preimage h(0) up to
 * h(maxIteration), every listed hash must be the chain's hash at its
 * iteration and the last must be the terminal hash published at creation.
 * Costs maxIteration SHA-256 (about 1.3 µs each), however many hashes are listed.
 */
export function verifyHashChain(input: {
  preimage: Uint8Array;
  terminalHash: Uint8Array;
  maxIteration: number;
  hashes?: Iterable<{ iteration: number; digest: Uint8Array }>;
}): VerifyResult {
  const wanted = new Map<number, Uint8Array>();
  for (const h of input.hashes ?? []) {
    if (!Number.isSafeInteger(h.iteration) || h.iteration < 0 || h.iteration > input.maxIteration) {
      return { ok: false, reason: `a hash has iteration ${h.iteration}, outside 0..${input.maxIteration}.` };
    }
    wanted.set(h.iteration, h.digest);
  }
  let hash: Buffer = Buffer.from(input.preimage);
  for (let i = 0; i <= input.maxIteration; i++) {
    if (i > 0) hash = createHash("sha256").update(hash).digest();
    const listed = wanted.get(i);
    if (listed && !equalBytes(hash, listed)) return { ok: false, reason: `the hash at iteration ${i} is ${toHex(listed)}; the chain from the preimage gives ${toHex(hash)}.` };
  }
  if (!equalBytes(hash, input.terminalHash)) {
    return { ok: false, reason: `the chain from the preimage ends at ${toHex(hash)}, not at the published terminal hash ${toHex(input.terminalHash)}.` };
  }
  return { ok: true };
}
