import type pg from "pg";
import type { CasinoConnector } from "./connector.js";
import { createHttpConnector, defaultTransferUrl } from "./http-connector.js";
import type { ResolvedTransferOptions } from "./options.js";

type Queryable = Pick<pg.ClientBase, "query">;

/**
 * The connector of a casino, as its settings say (hub.casino_transfer_config;
 * a casino without a row uses the HTTP connector at <base URL>/hub/transfers).
 */
export async function connectorForCasino(client: Queryable, casinoId: string, options: ResolvedTransferOptions): Promise<CasinoConnector> {
  const { rows } = await client.query<{ base_url: string | null; connector: string | null; url: string | null; api_key: string | null }>(
    `select c.base_url, s.connector, s.url, k.api_key
       from hub.casino c
       left join hub.casino_transfer_config s on s.casino_id = c.id
       left join hub_secret.casino_api_key k on k.casino_id = c.id
      where c.id = $1`,
    [casinoId],
  );
  const row = rows[0];
  if (!row) throw new Error(`no casino has the id ${casinoId}`);
  const kind = row.connector ?? "http";
  const factory = kind === "http" ? createHttpConnector : options.connectors[kind];
  if (!factory) throw new Error(`casino ${casinoId} uses the connector ${JSON.stringify(kind)}, which this hub does not have (ServerOptions.transfers.connectors)`);
  return factory({
    casinoId,
    url: row.url ?? (row.base_url ? defaultTransferUrl(row.base_url) : null),
    apiKey: row.api_key,
    timeoutMs: options.requestTimeoutMs,
  });
}
