import fs from "node:fs";
import { fileURLToPath } from "node:url";
import { readMigrationFolder, type Migration } from "./migration-files.js";

/**
 * The hub's own schema, applied before the user's migrations: the files of
 * src/db/migrations, read like the user's (src/db/migration-files.ts). Each
 * runs once, in its own transaction, and is recorded in hub_secret.migration
 * under its name without `.sql`, with the SHA-256 of its text. Once released a
 * file is never edited, not even its white space or comments: changes go in a
 * new file. That is why the notes about them are here rather than in the files.
 *
 * Security model: GraphQL requests run as `app_postgraphile`, and
 * row-level security decides what each identity sees from transaction
 * settings the hub sets per request (session.* for a player, operator.api_key
 * for an operator). Credentials are stored only as SHA-256 digests.
 *
 * 0006-ledger: every change of a player balance or a house bankroll, with who
 *   (actor), why (reason) and the amount after it. Rows are written by
 *   triggers on hub.balance and hub.bankroll, not by callers, so a change from
 *   any source is recorded (a plugin's own UPDATE, psql, the CLI, GraphQL) and
 *   the deltas of an account always sum to its amount. Callers say who and
 *   why through the functions it defines (or the transaction settings
 *   hub.ledger_actor / hub.ledger_reason / hub.ledger_bet_id before a direct
 *   UPDATE); without them the row says "sql:<role>" and what was done.
 *
 * 0007-casino-auth-and-credential-events: casino token exchange
 *   (hub_secret.casino_auth) and cross-instance revocation: every hub LISTENs
 *   on hub_credentials_changed.
 *
 * 0008-playground-client-ids: playground players are keyed by a random id
 *   their client generated and keeps: whoever presents it gets that player,
 *   nobody else does. The id is that client's secret, so only its SHA-256
 *   digest is stored, in a column GraphQL neither exposes nor may select.
 *   Experiences are shared by many players, so their client id is stored as is.
 *
 * 0009-bankroll-operators-only: the house bankroll (its amount, bets,
 *   wagered, expected value) is the casino's business: a player could
 *   otherwise size the house before betting against it. Players see no
 *   bankroll rows at all, by any path (the root connection, lookups, relations
 *   from their casino or currency); operators see every row. Plugins read it
 *   on the superuser connection as before.
 *
 * 0010-whole-amounts: amounts are whole base units of the currency
 *   (hub.currency's display_unit_scale says how many make one display unit),
 *   so every change a caller asks for must be a whole number from 1 to
 *   2^53 - 1, the largest integer a float8 (and a JavaScript number) holds
 *   exactly: 0.5, 5e-324 or 1e300 would move nothing, or move money nobody can
 *   count. No CHECK constraint is added on the tables: rows written before
 *   this rule may hold fractions, and they stay valid; only new movements are
 *   checked.
 *
 * 0011-casino-graphql-url-and-api-key: the casino's GraphQL endpoint
 *   (hub.casino.graphql_url, readable like base_url) and the controller's API
 *   key there (hub_secret.casino_api_key). The key is a credential for another
 *   system, so it lives in hub_secret, where app_postgraphile has no usage:
 *   no GraphQL request can select it, whatever the schema exposes.
 *
 * 0012-playground-user-client-id: the playground client id, so a player can
 *   read it back (HubUser.clientId), without the database ever holding it
 *   readably: each session created from a client id keeps it sealed with
 *   that session's key (hub.session.user_client_id_sealed: the id XOR an
 *   HMAC-SHA256 keyed with the session key, which itself is stored only as
 *   its SHA-256). Only a request carrying the key unseals it;
 *   app_postgraphile cannot select the column. The digest in hub.user still
 *   finds the player.
 * 0015-transfers: deposits (hub.deposit, unique per casino and casino
 *   transfer id, so a repeated report cannot credit twice), withdrawals
 *   (hub.withdrawal_request, the debit; hub.withdrawal, its status), per-casino
 *   transfer settings, and the outbox the workers of every instance share
 *   (hub.transfer_job). A trigger on hub.deposit notifies hub_put_alert, so the
 *   alert leaves only with a committed deposit, whichever path wrote it.
 *   hub_hidden.withdrawal_send_window keeps until when a send may still reach
 *   the casino; it is written outside the sender's transaction so a refund can
 *   trust it after a crash.
 *
 * 0026-idempotency-keys: hub_hidden.idempotency_key, one row per (scope, key):
 *   the operation, the fingerprint of the client's request and the answer,
 *   written in the transaction of the money it moved, kept 24 hours (a claim
 *   takes an older row over; the bankroll sweep deletes them once a minute).
 *   Claims wait on the primary key, so two requests with one key make one
 *   effect. settle_outcome_bet_once / settle_outcome_bets_once wrap 0017's and
 *   0020's statements, which stay as they were: a keyed bet claims its key
 *   before its chain, so a replay takes no hash, and a group claims its keys
 *   in key order before any chain (the one lock order: key, chain, balance,
 *   bankroll).
 *
 * 0027-live-alert-log: live alerts get a cursor that every instance agrees
 *   on. The triggers of 0014, 0015 and 0018 (and notify_put_alert) now insert
 *   one row per alert into hub_hidden.live_alert (a transaction's balance
 *   alerts of one player and currency fold into one row) and NOTIFY
 *   hub_live_pending. hub_hidden.live_alert_sequence numbers committed rows
 *   under the counter row's lock, so a number is visible only once every
 *   smaller one is: clients resume after the last cursor without a gap. It
 *   prunes what is both an hour old (by hub_hidden.live_alert_mark) and more
 *   than 10,000 alerts behind. The core channels of 0014 are no longer sent
 *   by the hub; a raw pg_notify on them is still delivered, live only.
 *
 * 0028-hardening-iv: the credential NOTIFY also fires on TRUNCATE and on a
 *   changed digest or owner of a session or key (0007 covered revoked_at,
 *   expired_at and DELETE), so open WebSockets are re-checked after any change
 *   that can end a credential's validity. hub.jwk_set_failure: a casino's last
 *   failure to serve its key set (when, why, the URL), for operators only, so
 *   an outage shows as the casino's, not as players' bad tokens.
 *
 * 0029-instances: hub_hidden.instance, one row per running instance sharing
 *   the database with its open WebSocket count, written on a heartbeat through
 *   the superuser pool and deleted at a clean stop (src/live/rebalance.ts).
 *   Not granted to app_postgraphile: no GraphQL request reads the fleet.
 *
 * 0030-lock-order: the one order of row locks every money path follows
 *   (claims, hash chains, balances by id, transfer rows, bankroll slots, the
 *   bankroll), written at the top of the file, and hub_hidden.lock_balances /
 *   lock_casino_balances, which lock a set of balances in that order in one
 *   statement, for the transactions that touch several (a page of deposits or
 *   take requests); groups of outcome bets already did (0020).
 */

/**
 * Beside this module in the sources; from the compiled module
 * (dist/src/db/), the package's src/db/migrations, which ships with it.
 */
export const CORE_MIGRATIONS_DIR = [new URL("./migrations/", import.meta.url), new URL("../../../src/db/migrations/", import.meta.url)]
  .map((url) => fileURLToPath(url))
  .find((dir) => fs.existsSync(dir)) ?? fileURLToPath(new URL("./migrations/", import.meta.url));

let core: Promise<Migration[]> | undefined;

/** The core migrations in order, read once per process. */
export function readCoreMigrations(): Promise<Migration[]> {
  core ??= readMigrationFolder(CORE_MIGRATIONS_DIR, "core", "The hub's core migrations folder").catch((error: unknown) => {
    core = undefined;
    throw error;
  });
  return core;
}
