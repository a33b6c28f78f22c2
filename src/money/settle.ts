/**
 * dbSettleBet: the one way a game moves money. What it locks, checks and
 * writes is the SQL function hub_hidden.settle_bet (core migration
 * 0032-one-settlement, whose header states the invariants), called here in
 * one round trip with the bet as one named row (BetSettlement);
 * hubMakeOutcomeBet reaches the same function through settle_outcome_bet.
 * A bet settled against cover set aside in advance leaves its house side
 * pending: foldAfterCommit moves it into the bankroll once the bet commits.
 */
import type pg from "pg";
import type { GraphQLError } from "graphql";
import { ErrorCode } from "../errors.js";
import { clientError } from "../graphql/client-error.js";
import { onCommit } from "../db/pools.js";
import { MAX_AMOUNT, isWholeAmount } from "./exact.js";
import { foldBankroll } from "./fold.js";
import { checkIdempotencyKey, idempotencyKeyReused, playerKeyScope, requestFingerprint } from "./idempotency.js";
import { noteCommitted } from "./committed.js";

/** The most bytes a bet's metadata may take as JSON text. */
export const MAX_BET_METADATA_BYTES = 8192;

export interface SettleBetInput {
  userId: string;
  casinoId: string;
  experienceId: string;
  currencyKey: string;
  /** The kind of game ("coinflip", "dice"): names the bet in the ledger. */
  kind: string;
  /** Whole base units the player pays into the house bankroll (0 for a payout-only step). */
  wager: number;
  /** Whole base units the house pays the player, wager included (0 on a loss). */
  payout: number;
  /** The largest payout this bet could have made: the bankroll must cover maxPayout − wager. Default: payout. */
  maxPayout?: number;
  /** The house's expected gain from this bet, added to the bankroll's statistics. Default 0. */
  expectedValue?: number;
  /** The bet's id (a UUID), written on its ledger rows. Default: a new UUIDv7. */
  betId?: string;
  /** Who moves the money, for the ledger. Default `plugin:<kind>`. */
  actor?: string;
  /** Why, for the ledger. Default `<kind> bet`. */
  reason?: string;
  /** What refusal messages name as the source, such as the GraphQL field ("makeCoinflipBet"). Default `<kind> bet`. */
  field?: string;
  /** The client's data about the bet, bounded to MAX_BET_METADATA_BYTES of JSON; returned as metadataJson for the game's own row. */
  metadata?: unknown;
  /**
   * The client's idempotency key (1 to 255 characters; null or absent: none).
   * With one, a retry of this player with the same key and request settles
   * nothing and answers the first bet with `replayed: true`; with another
   * request it is refused (IDEMPOTENCY_KEY_REUSED). Keys are kept 24 hours.
   */
  idempotencyKey?: string | null;
  /**
   * What else the client asked for (the game's input besides the wager and
   * currency, such as the side of a coin): part of the request a replay must
   * repeat. Never the drawn outcome.
   */
  idempotencyRequest?: unknown;
}

export interface SettledBet {
  betId: string;
  /** payout − wager: what the player's balance moved. */
  net: number;
  /** The player's balance after the bet. */
  balance: number;
  /** The metadata as JSON text, or null when none was given. */
  metadataJson: string | null;
  /**
   * True when the idempotency key was already used by this request: nothing
   * was settled now, and betId, net, balance and metadataJson are the first
   * bet's; answer from the game's row stored under betId, write nothing.
   */
  replayed: boolean;
}

/** What hub_hidden.settle_bet answers instead of settling. */
export type SettleRefusal = "unknown-currency" | "no-balance" | "insufficient-funds" | "balance-overflow" | "no-bankroll" | "no-cover" | "bankroll-overflow";

/** A client-visible label for errors: the kind, as the game's field names it. */
const label = (input: Pick<SettleBetInput, "kind" | "field">) => input.field ?? `${input.kind} bet`;

/** The metadata as JSON text, refused when it is not JSON or too large. */
export function betMetadataJson(metadata: unknown, what: string): string | null {
  if (metadata === undefined || metadata === null) return null;
  let json: string | undefined;
  try {
    json = JSON.stringify(metadata);
  } catch {
    json = undefined;
  }
  if (json === undefined) throw clientError(ErrorCode.BAD_USER_INPUT, `${what}: the metadata must be a JSON value; received ${typeof metadata}.`);
  const bytes = Buffer.byteLength(json);
  if (bytes > MAX_BET_METADATA_BYTES) {
    throw clientError(ErrorCode.METADATA_TOO_LARGE, `${what}: the metadata is ${bytes} bytes as JSON; at most ${MAX_BET_METADATA_BYTES} are accepted.`, {
      limit: MAX_BET_METADATA_BYTES,
    });
  }
  return json;
}

/** Refuse amounts the database would refuse, with a message naming them, before any lock. */
export function checkSettleAmounts(input: Pick<SettleBetInput, "kind" | "field" | "wager" | "payout" | "maxPayout" | "expectedValue">): void {
  const { wager, payout, maxPayout = payout, expectedValue = 0 } = input;
  for (const [name, value] of [["wager", wager], ["payout", payout], ["maxPayout", maxPayout]] as const) {
    if (!isWholeAmount(value)) {
      throw clientError(ErrorCode.INVALID_AMOUNT, `${label(input)}: the ${name} must be a whole number of base units from 0 to ${MAX_AMOUNT}; received ${value}.`);
    }
  }
  if (wager === 0 && maxPayout === 0) {
    throw clientError(ErrorCode.INVALID_AMOUNT, `${label(input)}: a bet moves at least 1 base unit; the wager and the payout are both 0.`);
  }
  if (maxPayout < payout) throw new RangeError(`dbSettleBet: maxPayout ${maxPayout} is below the payout ${payout}.`);
  if (!Number.isFinite(expectedValue)) throw new RangeError(`dbSettleBet: expectedValue must be finite; received ${expectedValue}.`);
}

/** The catalogue's error for a refusal of hub_hidden.settle_bet. */
export function settleRefusalError(refusal: SettleRefusal, input: SettleBetInput, balance: number | null): GraphQLError {
  const what = label(input);
  const { currencyKey: currency, wager } = input;
  const maxPayout = input.maxPayout ?? input.payout;
  switch (refusal) {
    case "unknown-currency":
      return clientError(ErrorCode.UNKNOWN_CURRENCY, `${what}: unknown currency ${JSON.stringify(currency)}; the casino of this session has no such currency.`);
    case "no-bankroll":
      return clientError(ErrorCode.UNKNOWN_CURRENCY, `${what}: the house has no bankroll in ${currency}.`);
    case "no-balance":
      return clientError(ErrorCode.INSUFFICIENT_FUNDS, `${what}: the wager is ${wager} ${currency} but this player has no ${currency} balance.`, { account: "player" });
    case "insufficient-funds":
      return clientError(ErrorCode.INSUFFICIENT_FUNDS, `${what}: the wager is ${wager} ${currency} but the balance is ${balance} ${currency}.`, { account: "player" });
    case "balance-overflow":
      return clientError(ErrorCode.INVALID_AMOUNT, `${what}: a payout of ${maxPayout} ${currency} would take the balance past ${MAX_AMOUNT} base units.`);
    case "bankroll-overflow":
      return clientError(ErrorCode.INVALID_AMOUNT, `${what}: a wager of ${wager} ${currency} would take the house bankroll past ${MAX_AMOUNT} base units; try a smaller wager.`, { account: "house" });
    case "no-cover":
      // The bankroll's size is the casino's business: the player learns only that it is short.
      return clientError(ErrorCode.INSUFFICIENT_FUNDS, `${what}: the house bankroll cannot cover a win of ${maxPayout - wager} ${currency} now; try a smaller wager.`, { account: "house" });
  }
}

/** One bet's money: hub_hidden.bet_settlement (core migration 0032) in TypeScript, sent as one JSON object by name. */
export interface BetSettlement {
  user_id: string;
  casino_id: string;
  experience_id: string;
  currency_key: string;
  /** Null: a new UUIDv7. */
  bet_id: string | null;
  wager: number;
  payout: number;
  max_payout: number;
  expected_value: number;
  actor: string;
  reason: string;
}

/** The bet dbSettleBet settles, as hub_hidden.settle_bet reads it. */
export function betSettlementOf(input: SettleBetInput): BetSettlement {
  return {
    user_id: input.userId, casino_id: input.casinoId, experience_id: input.experienceId, currency_key: input.currencyKey,
    bet_id: input.betId ?? null, wager: input.wager, payout: input.payout, max_payout: input.maxPayout ?? input.payout,
    expected_value: input.expectedValue ?? 0, actor: input.actor ?? `plugin:${input.kind}`, reason: input.reason ?? `${input.kind} bet`,
  };
}

/**
 * After a bet settled against a slot (pending_bankroll set), inside a
 * transaction: fold the bankroll once the transaction commits, on the
 * client, before the transaction's helper returns (withPgClientTransaction /
 * withPgPoolTransaction); a transaction committed otherwise is folded by the
 * server's sweep. A failed fold is logged and retried by the server's folds
 * (src/money/fold.ts).
 */
export function foldAfterCommit(pgClient: Pick<pg.ClientBase, "query">, bankrollId: string | null): void {
  if (bankrollId !== null) onCommit(pgClient, () => foldBankroll(pgClient, bankrollId));
}

/**
 * Settle one bet (or one step of a multi-step game) inside the caller's
 * transaction: lock the player's balance, check the funds, the house's cover
 * and the 2^53 − 1 bound, and move wager and payout through the ledger,
 * tagged with the bet's id, actor and reason (hub_hidden.settle_bet). A
 * refusal writes nothing and is thrown with the catalogue's code
 * (INVALID_AMOUNT, INSUFFICIENT_FUNDS with extensions.account "player" or
 * "house", UNKNOWN_CURRENCY, METADATA_TOO_LARGE). Call it on a client inside
 * a transaction (withPgPoolTransaction): its locks last until that ends, so
 * whatever the game writes next (its own bet row) commits with the money,
 * and the house bankroll includes the bet when withPgPoolTransaction returns.
 */
export async function dbSettleBet(pgClient: Pick<pg.ClientBase, "query">, input: SettleBetInput): Promise<SettledBet> {
  checkSettleAmounts(input);
  const metadataJson = betMetadataJson(input.metadata, label(input));
  const operation = label(input);
  const idempotencyKey = checkIdempotencyKey(input.idempotencyKey, operation);
  if (idempotencyKey !== undefined) return settleOnce(pgClient, input, operation, idempotencyKey, metadataJson);
  const { rows } = await pgClient.query<{ status: "settled" | SettleRefusal; balance: number | null; bet_id: string; pending_bankroll: string | null }>({
    name: "hub-settle-bet",
    text: "select status, balance, bet_id, pending_bankroll from hub_hidden.settle_bet(hub_hidden.bet_settlement_of($1::jsonb))",
    values: [JSON.stringify(betSettlementOf(input))],
  });
  const row = rows[0]!;
  if (row.status !== "settled") throw settleRefusalError(row.status, input, row.balance);
  foldAfterCommit(pgClient, row.pending_bankroll);
  noteSettled(pgClient, operation, row.bet_id, undefined);
  return { betId: row.bet_id, net: input.payout - input.wager, balance: row.balance!, metadataJson, replayed: false };
}

/** Once committed, a failure to answer is OUTCOME_COMMITTED (src/graphql/committed.ts), not a retryable outage. */
function noteSettled(pgClient: Pick<pg.ClientBase, "query">, operation: string, betId: string, idempotencyKey: string | undefined): void {
  const note = () => noteCommitted({ operation, ids: { betId }, idempotencyKey });
  if (!onCommit(pgClient, async () => note())) note();
}

/**
 * dbSettleBet with an idempotency key: hub_hidden.settle_bet_once claims the
 * key before the balance's lock (a replay answers even once the first bet
 * spent the balance), settles and stores the answer, in one statement.
 */
async function settleOnce(pgClient: Pick<pg.ClientBase, "query">, input: SettleBetInput, operation: string, key: string, metadataJson: string | null): Promise<SettledBet> {
  const net = input.payout - input.wager;
  const { rows } = await pgClient.query<{ status: "settled" | "replayed" | "key-reused" | SettleRefusal; balance: number | null; bet_id: string; pending_bankroll: string | null; stored: Omit<SettledBet, "replayed"> | null; stored_operation: string }>({
    name: "hub-settle-bet-once",
    text: "select status, balance, bet_id, pending_bankroll, stored, stored_operation from hub_hidden.settle_bet_once(hub_hidden.bet_settlement_of($1::jsonb), $2, $3, $4, $5, $6)",
    values: [JSON.stringify(betSettlementOf(input)), playerKeyScope(input.userId), key, operation, requestFingerprint(settleRequestOf(input)), JSON.stringify({ net, metadataJson })],
  });
  const row = rows[0]!;
  if (row.status === "key-reused") throw idempotencyKeyReused(operation, key, operation, row.stored_operation);
  if (row.status === "replayed") {
    if (!row.stored) throw new Error(`${operation}: idempotency key ${JSON.stringify(key)} holds no stored answer (claimed with dbClaimIdempotencyKey and never recorded): record answers with dbRecordIdempotentResult`);
    noteCommitted({ operation, ids: { betId: row.stored.betId }, idempotencyKey: key });
    return { ...row.stored, replayed: true };
  }
  if (row.status !== "settled") throw settleRefusalError(row.status, input, row.balance);
  foldAfterCommit(pgClient, row.pending_bankroll);
  noteSettled(pgClient, operation, row.bet_id, key);
  return { betId: row.bet_id, net, balance: row.balance!, metadataJson, replayed: false };
}

/** What a replay of a settlement must repeat: the player's request, never the drawn payout. */
function settleRequestOf(input: SettleBetInput): unknown {
  const { casinoId, experienceId, currencyKey, kind, wager, idempotencyRequest } = input;
  return { casinoId, experienceId, currencyKey, kind, wager, request: idempotencyRequest ?? null };
}
