import type { JSONWebKeySet, JWTVerifyGetKey } from "jose";
import { AnswerTooLargeError, readBoundedText } from "../bounded-fetch.js";

/**
 * A casino's JWKS URL, fetched with bounds: the answer is read up to
 * KEY_SET_MAX_BYTES and must arrive whole within KEY_SET_TIMEOUT_MS. A set
 * is kept for KEY_SET_MAX_AGE_MS; a token whose key is not in it fetches
 * again, at most once per KEY_SET_COOLDOWN_MS. A failed fetch is not retried
 * for KEY_SET_RETRY_MS: logins meanwhile get the same answer, so players of
 * a casino that is down cannot make the hub hammer it. A set fetched before
 * keeps verifying tokens while refreshing it fails.
 */
export const KEY_SET_MAX_BYTES = 1024 * 1024;
export const KEY_SET_TIMEOUT_MS = 3000;
export const KEY_SET_MAX_AGE_MS = 10 * 60_000;
export const KEY_SET_COOLDOWN_MS = 30_000;
export const KEY_SET_RETRY_MS = 5000;
/** A key set is an object of an array of flat JWKs (x5c an array of strings): a few levels. Deeper JSON could not be stored as jsonb. */
const KEY_SET_MAX_DEPTH = 8;
/** The most keys a set may have (a casino rotating keys needs a handful). */
export const KEY_SET_MAX_KEYS = 100;

/** Why a key set could not be fetched, for the player's error and the operators' record. */
export class KeySetUnavailableError extends Error {
  constructor(
    message: string,
    /** The size limit, when the answer was over it. */
    readonly limit?: number,
  ) {
    super(message);
    this.name = "KeySetUnavailableError";
  }
}

export interface RemoteKeySet {
  /** For jose's jwtVerify; throws KeySetUnavailableError when no set could be had. */
  getKey: JWTVerifyGetKey;
  /** The set last fetched, if any. */
  jwks(): JSONWebKeySet | undefined;
}

/**
 * A failed fetch throws the same error object to every login until it is
 * retried, so a caller can record each failure once (CasinoKeys.reportedFailures).
 */
export function createRemoteKeySet(url: string, loadJose: () => Promise<typeof import("jose")>): RemoteKeySet {
  let jwks: JSONWebKeySet | undefined;
  let local: JWTVerifyGetKey | undefined;
  let fetchedAt = 0;
  let failure: { error: KeySetUnavailableError; at: number } | undefined;
  let pending: Promise<void> | undefined;

  async function fetchOnce(): Promise<void> {
    const { createLocalJWKSet } = await loadJose();
    let set: JSONWebKeySet;
    try {
      set = await fetchKeySet(url);
      local = createLocalJWKSet(set);
    } catch (error) {
      const refused = error instanceof KeySetUnavailableError ? error : new KeySetUnavailableError(`the key set is not usable (${(error as Error).message})`);
      failure = { error: refused, at: Date.now() };
      throw refused;
    }
    jwks = set;
    fetchedAt = Date.now();
    failure = undefined;
  }

  function refresh(): Promise<void> {
    if (failure && Date.now() - failure.at < KEY_SET_RETRY_MS) return Promise.reject(failure.error);
    pending ??= fetchOnce().finally(() => {
      pending = undefined;
    });
    return pending;
  }

  const getKey: JWTVerifyGetKey = async (header, token) => {
    const { errors } = await loadJose();
    if (!local || Date.now() - fetchedAt > KEY_SET_MAX_AGE_MS) {
      // An old set still verifies while its refresh fails; without one, the failure is the answer.
      await refresh().catch((error: unknown) => {
        if (!local) throw error;
      });
    }
    try {
      return await local!(header, token);
    } catch (error) {
      if (!(error instanceof errors.JWKSNoMatchingKey) || Date.now() - fetchedAt < KEY_SET_COOLDOWN_MS) throw error;
    }
    // A key the set does not have: the casino may have rotated its keys since.
    await refresh();
    return local!(header, token);
  };
  return { getKey, jwks: () => jwks };
}

async function fetchKeySet(url: string): Promise<JSONWebKeySet> {
  let text: string;
  try {
    // No redirects: the registered URL is the one the operator vouched for.
    const response = await fetch(url, { headers: { accept: "application/json" }, redirect: "manual", signal: AbortSignal.timeout(KEY_SET_TIMEOUT_MS) });
    if (response.status !== 200) {
      await response.body?.cancel().catch(() => undefined);
      throw new KeySetUnavailableError(`the JWKS URL answered HTTP ${response.status}, expected 200 with a JSON key set`);
    }
    text = await readBoundedText(response, KEY_SET_MAX_BYTES);
  } catch (error) {
    if (error instanceof KeySetUnavailableError) throw error;
    if (error instanceof AnswerTooLargeError) throw new KeySetUnavailableError(`the JWKS URL's answer is too large: ${error.message}`, error.limit);
    if ((error as Error).name === "TimeoutError") throw new KeySetUnavailableError(`the JWKS URL gave no whole answer within ${KEY_SET_TIMEOUT_MS} ms`);
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new KeySetUnavailableError(`the JWKS URL could not be reached (${cause?.code ?? cause?.message ?? (error as Error).message})`);
  }
  let set: unknown;
  try {
    set = JSON.parse(text);
  } catch {
    throw new KeySetUnavailableError("the JWKS URL's answer is not JSON");
  }
  if (depthOver(set, KEY_SET_MAX_DEPTH)) throw new KeySetUnavailableError(`the JWKS URL's answer is nested deeper than ${KEY_SET_MAX_DEPTH} levels; a key set is not`);
  const keys = (set as { keys?: unknown } | null)?.keys;
  if (typeof set !== "object" || set === null || Array.isArray(set) || !Array.isArray(keys) || !keys.every((k) => typeof k === "object" && k !== null && !Array.isArray(k))) {
    throw new KeySetUnavailableError('the JWKS URL\'s answer is not a key set: expected a JSON object with a "keys" array of JWK objects');
  }
  const jwks = keys as Record<string, unknown>[];
  // Each key a token's header could match is tried in turn: many keys would make any anonymous login attempt costly.
  if (jwks.length > KEY_SET_MAX_KEYS) throw new KeySetUnavailableError(`the JWKS URL's key set has ${jwks.length} keys, more than the ${KEY_SET_MAX_KEYS} the hub accepts`);
  // A casino's misconfiguration, not a player's bad token: said as such, and never stored.
  if (jwks.some((k) => PRIVATE_MEMBERS.some((m) => m in k))) {
    throw new KeySetUnavailableError("the JWKS URL serves private key material (d, p, q, dp, dq, qi or k); it must serve public keys only");
  }
  if (!jwks.some((k) => k.kty === "RSA" || k.kty === "EC" || k.kty === "OKP")) {
    throw new KeySetUnavailableError("the JWKS URL's key set has no RSA, EC or OKP public key to verify tokens with");
  }
  return set as JSONWebKeySet;
}

/** JWK members that only private or symmetric keys have. */
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "k"];

/** Whether JSON `value` nests objects or arrays deeper than `max` (iterative: deep input cannot exhaust the stack). */
function depthOver(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (typeof item !== "object" || item === null) continue;
    if (depth > max) return true;
    for (const child of Array.isArray(item) ? item : Object.values(item)) stack.push([child, depth + 1]);
  }
  return false;
}
