import type { Logger } from "../logger.js";
import { openListenConnection } from "../live/listen-connection.js";
import type { InternalChannel } from "../live/notifications.js";

/** The channel the credential triggers (core baseline, "Functions: credentials") notify on. */
export const CREDENTIALS_CHANNEL = "hub_credentials_changed";

/**
 * Every hub instance listens for revocations and expiry changes made by any
 * instance (or by hand in SQL) and drops its cached identities at once, so a
 * revoked credential stops working everywhere without waiting for the cache
 * to age out. A channel of the server's one LISTEN connection
 * (createLiveNotifications). The 1 s cache bound still holds while that
 * connection is down; the cache is forgotten when it is lost and again once
 * it is back, since notifications sent meanwhile were lost.
 */
export function credentialEvents(onChange: () => void): InternalChannel {
  return { channel: CREDENTIALS_CHANNEL, onNotify: onChange, onGap: onChange };
}

/**
 * The credential channel alone on a LISTEN connection of its own, for a
 * process that serves no live updates (the bench's baseline servers); a hub
 * server uses credentialEvents on its one connection instead.
 */
export function listenForCredentialChanges(url: string, onChange: () => void, log: Logger): { ready: Promise<void>; close(): Promise<void> } {
  const connection = openListenConnection({
    url,
    applicationName: "hub:credential-events",
    log,
    channels: () => [CREDENTIALS_CHANNEL],
    onNotification: (msg) => {
      if (msg.channel === CREDENTIALS_CHANNEL) onChange();
    },
    onLost: onChange,
    onBack: async () => onChange(),
  });
  return { ready: connection.ready, close: () => connection.close() };
}
