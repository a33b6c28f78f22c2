import type { Logger } from "../logger.js";
import { credentialIdOf, type Identity } from "./identity.js";
import type { IdentityResolver } from "./resolver.js";

/** What a graphql-ws client treats as "unauthorised": it does not reconnect with the same credential. */
export const CLOSE_UNAUTHORIZED = 4401;
/** "Try again later": the credential could not be checked, not the client's fault. */
export const CLOSE_TRY_AGAIN_LATER = 1013;
export const REVOKED_REASON = "Unauthorized: the credential was revoked or has expired";
export const EXPIRED_REASON = "Unauthorized: the session has expired";

/** A long-lived connection acting for an identity, closed when that identity stops being valid. */
export interface IdentityHolder {
  /** Whom it acts for now; undefined for no one. */
  identity: Identity | undefined;
  /**
   * When its credential expires (ms since the epoch), for holders closed at
   * expiry by a sweep of their own: the revocation sweep sets it to the
   * credential's current expiry, so an expiry moved earlier holds too.
   */
  expiresAt?: number;
  close(code: number, reason: string): void;
}

/** What a socket keeps of its upgrade request's credential until connection_init. */
export interface PresentedCredential {
  /** What the upgrade's Authorization header gave, then what connection_init settled. */
  identity: Identity | undefined;
  /** The upgrade's Authorization header, dropped once checked again (a credential). */
  authorization: string | undefined;
}

/**
 * The identity a connection acts for, checked at connection_init by the
 * resolver every HTTP request goes through (never the upgrade's answer
 * reused): connectionParams.authorization, else the upgrade's header. A
 * credential that is not valid is no identity, as over HTTP. One exception:
 * the upgrade's own credential, valid when the socket opened and no longer
 * now, closes it with 4401, as the revocation sweep would have. False when
 * the socket is closed.
 */
export async function settleSocketIdentity(
  resolver: IdentityResolver,
  holder: IdentityHolder,
  request: PresentedCredential,
  fromParams: unknown,
  log: Logger,
): Promise<Identity | undefined | false> {
  const presented = fromParams !== undefined ? fromParams : request.authorization;
  request.authorization = undefined;
  if (typeof presented !== "string") return undefined;
  let identity: Identity | undefined;
  try {
    identity = await resolver.resolve(presented);
  } catch (error) {
    log.warn({ err: error }, "a WebSocket credential could not be checked");
    holder.close(CLOSE_TRY_AGAIN_LATER, "The credential could not be checked: the database is unavailable or busy; retry shortly");
    return false;
  }
  if (identity === undefined && fromParams === undefined && holder.identity !== undefined) {
    holder.close(CLOSE_UNAUTHORIZED, REVOKED_REASON);
    return false;
  }
  request.identity = identity;
  return identity;
}

/**
 * The revocation sweep: when a credential changed somewhere (the NOTIFY),
 * every holder whose identity is no longer valid is closed with 4401, and
 * every other one is held to its credential's current expiry (an expired_at
 * moved earlier, by SQL or otherwise, closes it when it passes, as HTTP
 * refuses it then). One sweep at a time; a change during a sweep runs one
 * more after it.
 */
export function createRevocationSweep(resolver: IdentityResolver, holders: ReadonlyMap<unknown, IdentityHolder>, log: Logger): () => void {
  let sweeping: Promise<void> | undefined;
  let again = false;
  const sweep = async () => {
    const held = new Map<IdentityHolder, Identity>();
    holders.forEach((holder) => {
      if (holder.identity !== undefined) held.set(holder, holder.identity);
    });
    if (held.size === 0) return;
    const valid = await resolver.validUntil(held.values());
    const now = Date.now();
    // Only what was checked: a holder whose identity connection_init settled meanwhile was checked there.
    held.forEach((identity, holder) => {
      if (holder.identity !== identity) return;
      const expiresAt = valid.get(credentialIdOf(identity));
      if (expiresAt === undefined || expiresAt <= now) holder.close(CLOSE_UNAUTHORIZED, REVOKED_REASON);
      else if (holder.expiresAt !== undefined) holder.expiresAt = expiresAt;
    });
  };
  const runSweep = () => {
    if (sweeping) {
      again = true;
      return;
    }
    sweeping = sweep()
      .catch((error: unknown) => log.warn({ err: error }, "could not check the credentials of WebSocket connections"))
      .finally(() => {
        sweeping = undefined;
        if (again) {
          again = false;
          runSweep();
        }
      });
  };
  return runSweep;
}
