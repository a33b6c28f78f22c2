import fs from "node:fs";
import { fileURLToPath } from "node:url";
import { readMigrationFolder, type Migration } from "./migration-files.js";

/**
 * The hub's own schema, applied before the user's migrations: the files of
 * src/db/migrations, read like the user's (src/db/migration-files.ts). Each
 * runs once, in its own transaction, and is recorded in hub_secret.migration
 * under its name without `.sql`, with the SHA-256 of its text. Once released a
 * file is never edited, not even its white space or comments: changes go in a
 * new file.
 *
 * 0029-baseline: the whole schema as core migrations 0001 to 0029 left it,
 * written once and grouped by concern (its header lists the sections and the
 * security model; the settlement section lists its invariants). Core
 * migrations after it are numbered from 0030 and are plain files.
 *
 * A database migrated before the baseline holds the records of 0001 to 0029
 * (PRE_BASELINE_MIGRATIONS), and exactly the schema the baseline builds; the
 * runner records the baseline as applied there without running it
 * (src/db/migrate.ts). One that holds only some of them, left by a start of an
 * earlier version that failed midway, is refused (HUB_MIGRATION_PRE_BASELINE):
 * the files that would finish it are no longer shipped, and a hub from before
 * the baseline applies them.
 *
 * 0030-lock-order: the one order of row locks every money path follows
 *   (claims, hash chains, balances by id, transfer rows, bankroll slots, the
 *   bankroll), written at the top of the file, and hub_hidden.lock_balances /
 *   lock_casino_balances, which lock a set of balances in that order in one
 *   statement, for the transactions that touch several (a page of deposits or
 *   take requests); groups of outcome bets already did (settle_outcome_bets).
 *
 * 0031-typed-settlement: hubMakeOutcomeBet's settlement functions
 *   (settle_outcome_bet(s) and their *_once forms) take each bet as one named
 *   row, the composite type hub_hidden.outcome_settlement, instead of 21 (25)
 *   positional arguments or positional JSON arrays; the server sends named
 *   JSON objects, read by outcome_settlement_of / outcome_settlements_of. The
 *   positional functions stay for the previous version's instances during a
 *   rolling restart; what each function locks, checks, writes and returns is
 *   written beside it.
 *
 * 0032-one-settlement: every bet's money through one function,
 *   hub_hidden.settle_bet(bet_settlement), a named row: dbSettleBet calls it,
 *   and so do hubMakeOutcomeBet's settle_outcome_bet(s), which now answer the
 *   bankroll to fold after the commit too. While the bankroll row is in
 *   demand a bet settles against a slot taken with SKIP LOCKED (no wait for a
 *   slot); a group of outcome bets may span bankrolls, taking their rows in
 *   (casino, currency) order. Its header is the settlement's reference: what
 *   runs, when the bankroll includes a bet, the lock order, the invariants.
 */
export const BASELINE_MIGRATION = "0029-baseline";

/** The core migrations the baseline replaces, as databases migrated before it recorded them. */
export const PRE_BASELINE_MIGRATIONS: readonly string[] = [
  "0001-schemas-roles-helpers",
  "0002-core-tables",
  "0003-row-level-security",
  "0004-playground-casino",
  "0005-uuid-v7-timestamp",
  "0006-ledger",
  "0007-casino-auth-and-credential-events",
  "0008-playground-client-ids",
  "0009-bankroll-operators-only",
  "0010-whole-amounts",
  "0011-casino-graphql-url-and-api-key",
  "0012-playground-user-client-id",
  "0013-hash-chains-and-outcome-bets",
  "0014-live-alerts",
  "0015-transfers",
  "0016-dashboard-queries",
  "0017-exact-money",
  "0018-chat",
  "0019-original-surface",
  "0020-grouped-settlement",
  "0021-transfer-leases",
  "0022-take-requests",
  "0023-bankroll-reservations",
  "0024-fold-asynchronous-commit",
  "0025-inline-amount-checks",
  "0026-idempotency-keys",
  "0027-live-alert-log",
  "0028-hardening-iv",
  "0029-instances",
];

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
