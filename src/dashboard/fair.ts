/**
 * Checking a provably fair bet in the browser (WebCrypto), with nothing from
 * the hub but what it published:
 *   the chain:   hash(i + 1) = SHA-256(hash(i)), so a revealed hash is checked
 *                against the next iteration's, revealed before it;
 *   the outcome: HMAC-SHA256(key = hash(i), message = the client seed's UTF-8),
 *                its 52 most significant bits / 2^52, then the first outcome
 *                whose cumulative weight exceeds that fraction of the total.
 */

/** The bytes of a digest as the hub prints them: hex (optionally \x…) or base64. */
export function digestBytes(digest: string): Uint8Array {
  const hex = digest.startsWith("\\x") ? digest.slice(2) : digest;
  if (/^[0-9a-fA-F]+$/.test(hex) && hex.length % 2 === 0) {
    return Uint8Array.from(hex.match(/../g)!.map((b) => parseInt(b, 16)));
  }
  const binary = atob(digest);
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

export const hexOf = (bytes: Uint8Array) => [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");

export async function sha256(bytes: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", new Uint8Array(bytes)));
}

export async function hmacSha256(key: Uint8Array, message: string): Promise<Uint8Array> {
  const k = await crypto.subtle.importKey("raw", new Uint8Array(key), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return new Uint8Array(await crypto.subtle.sign("HMAC", k, new TextEncoder().encode(message)));
}

/** The 52 most significant bits as a number in [0, 1). */
export function normalise(hash: Uint8Array): number {
  const high32 = ((hash[0]! << 24) >>> 0) + (hash[1]! << 16) + (hash[2]! << 8) + hash[3]!;
  const low20 = ((hash[4]! << 16) + (hash[5]! << 8) + hash[6]!) >>> 4;
  return (high32 * 2 ** 20 + low20) / 2 ** 52;
}

export function pickIndex(fraction: number, weights: number[]): number {
  const total = weights.reduce((s, w) => s + (w > 0 ? w : 0), 0);
  const target = fraction * total;
  let cumulative = 0;
  let last = -1;
  for (let i = 0; i < weights.length; i++) {
    const w = weights[i]!;
    if (w <= 0) continue;
    cumulative += w;
    last = i;
    if (target < cumulative) return i;
  }
  return last;
}

export interface Verification {
  finalHash: string;
  fraction: number;
  /** -1 and undefined when the bet's outcomes were not saved (nothing to draw from). */
  computedIdx: number;
  outcomeMatches: boolean | undefined;
  /** undefined when the next iteration's hash is not available to compare with. */
  chainMatches: boolean | undefined;
}

export async function verifyBet(input: { digest: string; clientSeed: string; weights: number[]; outcomeIdx: number; nextDigest?: string | undefined }): Promise<Verification> {
  const hash = digestBytes(input.digest);
  const final = await hmacSha256(hash, input.clientSeed);
  const fraction = normalise(final);
  const computedIdx = input.weights.length ? pickIndex(fraction, input.weights) : -1;
  let chainMatches: boolean | undefined;
  if (input.nextDigest !== undefined) chainMatches = hexOf(await sha256(hash)) === hexOf(digestBytes(input.nextDigest));
  return { finalHash: hexOf(final), fraction, computedIdx, outcomeMatches: input.weights.length ? computedIdx === input.outcomeIdx : undefined, chainMatches };
}

/** Longest walk from a revealed preimage the page does in the browser (about a second of SHA-256). */
export const MAX_PREIMAGE_WALK = 200_000;

/**
 * Whether hashing the chain's revealed preimage (iteration 0) `iteration` times
 * gives this hash: the proof, once the chain is revealed, that the hash was
 * fixed when the chain was made. undefined when the walk would be too long.
 */
export async function fromPreimage(preimage: string, iteration: number, digest: string): Promise<boolean | undefined> {
  if (iteration > MAX_PREIMAGE_WALK) return undefined;
  let h = digestBytes(preimage);
  for (let i = 0; i < iteration; i++) h = await sha256(h);
  return hexOf(h) === hexOf(digestBytes(digest));
}
