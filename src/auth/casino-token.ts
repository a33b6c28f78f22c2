import type { JWTPayload, JWTVerifyGetKey, CryptoKey } from "jose";

// jose is loaded on first use: most servers never exchange a casino token, and
// importing it costs ~60 ms of start-up.
const loadJose = () => import("jose");
import type pg from "pg";
import { ErrorCode } from "../errors.js";
import { LRUCache } from "lru-cache";
import { recordJwkSet, recordJwkSetFailure } from "./jwk-sets.js";
import { createRemoteKeySet, KeySetUnavailableError, KEY_SET_MAX_BYTES } from "./remote-key-set.js";

/**
 * Casino token exchange: a casino signs a short-lived JWT for its player with
 * its private key; the hub verifies it with the public key (PEM or JWK) or JWKS
 * URL the operator registered for that casino, and only then issues a session.
 *
 * Only asymmetric algorithms are accepted: a registered public key can never
 * be used as an HMAC secret (the classic "alg confusion" forgery).
 */
export const ALLOWED_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"];

export interface CasinoAuth {
  casino_id: string;
  public_key: string | null;
  jwks_url: string | null;
  issuer: string | null;
  audience: string | null;
}

/** The catalogue's codes of a refused casino token (src/errors.ts). */
export type TokenErrorCode =
  | typeof ErrorCode.UNKNOWN_CASINO
  | typeof ErrorCode.CASINO_NOT_CONFIGURED
  | typeof ErrorCode.CASINO_KEYS_UNAVAILABLE
  | typeof ErrorCode.USER_TOKEN_EXPIRED
  | typeof ErrorCode.USER_TOKEN_BAD_SIGNATURE
  | typeof ErrorCode.USER_TOKEN_CLAIM
  | typeof ErrorCode.USER_TOKEN_MALFORMED;

/**
 * A refused token, kept apart from GraphQL so the verification can be used
 * (and tested) on its own; hubAuthenticate sends it on with its code.
 */
export class CasinoTokenError extends Error {
  constructor(
    readonly code: TokenErrorCode,
    message: string,
    /** More for the GraphQL error's extensions (CASINO_KEYS_UNAVAILABLE: casinoId, limit). */
    readonly extensions?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export interface VerifiedPlayer {
  uname: string;
  experienceName: string;
}

/**
 * One server's casino keys: a JWKS fetcher per URL (each keeps the set it
 * fetched and its cool-down, so a verification does not fetch every time), and
 * per casino the set last recorded in hub.jwk_set. Both bounded: the URLs are
 * whatever operators registered, and a server may serve many casinos.
 */
export interface CasinoKeys {
  readonly remoteSets: LRUCache<string, JWTVerifyGetKey>;
  /** Casino id → the JSON text of the set last recorded for it (src/auth/jwk-sets.ts). */
  readonly recorded: LRUCache<string, string>;
  /** Key-set failures already recorded for operators: one write per failed fetch, not per refused login. */
  readonly reportedFailures?: WeakSet<Error>;
}

/** Most JWKS URLs (and casinos' recorded sets) a server keeps; beyond, the least recently used is fetched again when next needed. */
export const MAX_CASINO_KEY_SETS = 1000;

export function createCasinoKeys(max = MAX_CASINO_KEY_SETS): CasinoKeys {
  return { remoteSets: new LRUCache({ max }), recorded: new LRUCache({ max }), reportedFailures: new WeakSet() };
}

async function keyFor(auth: CasinoAuth, keys: CasinoKeys): Promise<JWTVerifyGetKey | ((header: { alg?: string }) => Promise<CryptoKey | Uint8Array>)> {
  const { importJWK, importSPKI } = await loadJose();
  if (auth.jwks_url) {
    let set = keys.remoteSets.get(auth.jwks_url);
    if (!set) {
      // Bounded in size and time (src/auth/remote-key-set.ts); jwks() as jose's remote sets have it.
      const remote = createRemoteKeySet(auth.jwks_url, loadJose);
      set = Object.assign(remote.getKey, { jwks: remote.jwks });
      keys.remoteSets.set(auth.jwks_url, set);
    }
    return set;
  }
  const material = auth.public_key ?? "";
  return async (header: { alg?: string }) => {
    const alg = header.alg ?? "";
    if (material.trim().startsWith("{")) {
      const jwk = JSON.parse(material) as Record<string, unknown>;
      return (await importJWK(jwk, (jwk.alg as string | undefined) ?? alg)) as CryptoKey;
    }
    return importSPKI(material, alg);
  };
}

/** Check a public key when it is registered, so a typo fails then rather than at a player's login. */
export async function validatePublicKey(material: string): Promise<void> {
  const { importJWK, importSPKI } = await loadJose();
  const trimmed = material.trim();
  if (trimmed.startsWith("{")) {
    const jwk = JSON.parse(trimmed) as Record<string, unknown>;
    if (jwk.d !== undefined) throw new Error("this JWK contains a private key (d); register the public key only");
    if (jwk.kty === "oct") throw new Error("symmetric (oct) keys are not accepted; register an RSA, EC or OKP public key");
    await importJWK(jwk, (jwk.alg as string | undefined) ?? (jwk.kty === "OKP" ? "EdDSA" : jwk.kty === "EC" ? "ES256" : "RS256"));
    return;
  }
  if (!trimmed.startsWith("-----BEGIN PUBLIC KEY-----")) {
    throw new Error("expected a PEM public key (-----BEGIN PUBLIC KEY-----) or a JWK as JSON");
  }
  // The algorithm only has to fit the key type for the import to succeed.
  for (const alg of ["RS256", "ES256", "ES384", "ES512", "EdDSA"]) {
    try {
      await importSPKI(trimmed, alg);
      return;
    } catch {
      /* try the next family */
    }
  }
  throw new Error("the PEM could not be read as an RSA, EC or Ed25519 public key");
}

/**
 * The casino's key set could not be had: the casino's fault, never the
 * player's token. Recorded once per failed fetch for operators
 * (hub.jwk_set_failure, the dashboard's casino view).
 */
async function keySetUnavailable(pool: Pick<pg.Pool, "query">, casinoId: string, url: string, error: KeySetUnavailableError, keys: CasinoKeys): Promise<CasinoTokenError> {
  if (keys.reportedFailures && !keys.reportedFailures.has(error)) {
    keys.reportedFailures.add(error);
    // The player's answer is the same whether or not the record could be written (the casino may be being removed).
    await recordJwkSetFailure(pool, casinoId, url, error.message).catch(() => undefined);
  }
  return new CasinoTokenError(
    ErrorCode.CASINO_KEYS_UNAVAILABLE,
    `Casino ${casinoId}'s key set could not be fetched from its JWKS URL, so no token of it can be verified now: ${error.message}${error.limit !== undefined ? ` (limit ${KEY_SET_MAX_BYTES} bytes)` : ""}. The casino is unreachable or misconfigured; retry later, or ask the operator to check its JWKS URL.`,
    { casinoId, ...(error.limit !== undefined ? { limit: error.limit } : {}) },
  );
}

function claimString(payload: JWTPayload, names: string[]): string | undefined {
  for (const name of names) {
    const value = payload[name];
    if (typeof value === "string" && value.length > 0) return value;
  }
  return undefined;
}

/**
 * Verify a casino-signed user token. Claims: `uname` (or `username`, or `sub`)
 * names the player; `experience` names the experience (default "default");
 * `exp` is required; `iss`/`aud` are checked when the casino has them set.
 */
export async function verifyCasinoToken(
  pool: Pick<pg.Pool, "query">,
  casinoId: string,
  token: string,
  /** The verifying server's (src/server-state.ts); without, fresh ones that keep nothing. */
  keys: CasinoKeys = createCasinoKeys(1),
): Promise<VerifiedPlayer> {
  const { rows } = await pool.query<CasinoAuth & { exists: boolean }>(
    `select c.id is not null as exists, a.casino_id, a.public_key, a.jwks_url, a.issuer, a.audience
       from hub.casino c left join hub_secret.casino_auth a on a.casino_id = c.id
      where c.id = $1`,
    [casinoId],
  );
  const auth = rows[0];
  if (!auth) throw new CasinoTokenError(ErrorCode.UNKNOWN_CASINO, `No casino has the id ${casinoId}.`);
  if (!auth.public_key && !auth.jwks_url) {
    throw new CasinoTokenError(ErrorCode.CASINO_NOT_CONFIGURED, `Casino ${casinoId} has no public key or JWKS URL registered, so its tokens cannot be verified.`);
  }
  const { errors, jwtVerify } = await loadJose();
  let payload: JWTPayload;
  const key = await keyFor(auth, keys);
  try {
    ({ payload } = await jwtVerify(token, key as JWTVerifyGetKey, {
      algorithms: ALLOWED_ALGORITHMS,
      requiredClaims: ["exp"],
      ...(auth.issuer ? { issuer: auth.issuer } : {}),
      ...(auth.audience ? { audience: auth.audience } : {}),
    }));
  } catch (error) {
    if (error instanceof KeySetUnavailableError) throw await keySetUnavailable(pool, casinoId, auth.jwks_url ?? "", error, keys);
    if (error instanceof errors.JWTExpired) {
      throw new CasinoTokenError(ErrorCode.USER_TOKEN_EXPIRED, `The user token has expired (exp ${String(error.payload.exp)}, now ${Math.floor(Date.now() / 1000)}).`);
    }
    if (error instanceof errors.JWSSignatureVerificationFailed || error instanceof errors.JWKSNoMatchingKey) {
      throw new CasinoTokenError(ErrorCode.USER_TOKEN_BAD_SIGNATURE, "The user token was not signed by the key registered for this casino.");
    }
    if (error instanceof errors.JWTClaimValidationFailed) {
      throw new CasinoTokenError(ErrorCode.USER_TOKEN_CLAIM, `The user token's "${error.claim}" claim is not acceptable: ${error.message}.`);
    }
    if (error instanceof errors.JOSEAlgNotAllowed) {
      throw new CasinoTokenError(ErrorCode.USER_TOKEN_MALFORMED, `The user token's algorithm is not accepted; expected one of ${ALLOWED_ALGORITHMS.join(", ")}.`);
    }
    const reason = error instanceof Error ? error.message : String(error);
    throw new CasinoTokenError(ErrorCode.USER_TOKEN_MALFORMED, `The user token is not a valid signed JWT (${reason}).`);
  }
  // The set that verified the token, kept for operators (hub.jwk_set, hub.jwk_set_snapshot).
  if (auth.jwks_url) await recordJwkSet(pool, casinoId, (key as { jwks?: () => unknown }).jwks?.(), keys.recorded);
  const uname = claimString(payload, ["uname", "username", "sub"]);
  if (!uname || uname.length > 200) {
    throw new CasinoTokenError(ErrorCode.USER_TOKEN_CLAIM, 'The user token names no player: expected a "uname" (or "username" or "sub") claim of 1 to 200 characters.');
  }
  const experienceName = claimString(payload, ["experience"]) ?? "default";
  if (experienceName.length > 200) throw new CasinoTokenError(ErrorCode.USER_TOKEN_CLAIM, 'The "experience" claim is longer than 200 characters.');
  return { uname, experienceName };
}
