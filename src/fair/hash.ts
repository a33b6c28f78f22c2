/**
 * The provably fair arithmetic, with no database: what the hub computes and
 * what anyone re-implements to verify a bet. Bytes in, bytes out:
 *
 *   chain:       h(i) = SHA-256(h(i - 1)), h(0) the secret seed (32 bytes)
 *   final hash:  HMAC-SHA256(key = h(i), message = UTF-8 bytes of the client seed)
 *   normalised:  the first 52 bits of the final hash, big-endian, divided by 2^52
 *   outcome:     the first index whose cumulative weight exceeds normalised × total weight
 *
 * These are the conventions public verifiers of hash-chain games already implement.
 */
import { createHash, createHmac } from "node:crypto";

/** SHA-256 of the bytes. */
export function sha256(data: Uint8Array): Uint8Array {
  return new Uint8Array(createHash("sha256").update(data).digest());
}

/** HMAC-SHA256 keyed with the chain's hash over the UTF-8 bytes of the client seed. */
export function makeFinalHash({ serverHash, clientSeed }: { serverHash: Uint8Array; clientSeed: string }): Uint8Array {
  return new Uint8Array(createHmac("sha256", serverHash).update(clientSeed, "utf8").digest());
}

/** The 52 most significant bits of the hash as a number in [0, 1): uniform, and exact in a double. */
export function normalizeHash(hash: Uint8Array): number {
  if (hash.length < 7) throw new RangeError(`normalizeHash needs at least 7 bytes; received ${hash.length}.`);
  const high32 = ((hash[0]! << 24) >>> 0) + (hash[1]! << 16) + (hash[2]! << 8) + hash[3]!;
  const low20 = ((hash[4]! << 16) + (hash[5]! << 8) + hash[6]!) >>> 4;
  return (high32 * 2 ** 20 + low20) / 2 ** 52;
}

/**
 * The index of the outcome a normalised hash draws: outcome i covers
 * [w0 + … + w(i-1), w0 + … + wi) of [0, total weight), so zero-weight
 * outcomes are never drawn.
 */
export function pickOutcomeIndex(normalized: number, weights: readonly number[]): number {
  let total = 0;
  for (const w of weights) total += w;
  const target = normalized * total;
  let cumulative = 0;
  let lastPositive = -1;
  for (let i = 0; i < weights.length; i++) {
    const w = weights[i]!;
    if (w <= 0) continue;
    cumulative += w;
    lastPositive = i;
    if (target < cumulative) return i;
  }
  // Rounding can leave target a hair above the sum: that is the last outcome's range.
  if (lastPositive < 0) throw new RangeError("pickOutcomeIndex: the weights sum to 0.");
  return lastPositive;
}

/** The outcome of a bet from the chain's hash at its iteration and the client seed. */
export function outcomeIndexOf({ serverHash, clientSeed, weights }: { serverHash: Uint8Array; clientSeed: string; weights: readonly number[] }): number {
  return pickOutcomeIndex(normalizeHash(makeFinalHash({ serverHash, clientSeed })), weights);
}

export const toHex = (bytes: Uint8Array): string => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");
