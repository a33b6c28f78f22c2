/**
 * hubMakeOutcomeBet without GraphQL: the checks of a bet's input and the one
 * transaction that plays it. A bet lists its outcomes ({ weight, profit }); the
 * chain's next hash and the client seed draw one of them; the balance moves
 * by wager × that profit, rounded down to a whole base unit.
 */
import type pg from "pg";
import { ErrorCode } from "../errors.js";
import { clientError } from "../graphql/client-error.js";
import { withPgPoolTransaction } from "../db/pools.js";
import { unboundedPool } from "../db/identity-limit.js";
import { dbLockHubHashChain } from "./db.js";
import type { ChainSecrets } from "./chain-secret.js";
import { outcomeIndexOf } from "./hash.js";
import { riskLimitsOf, validateRisk, type RiskLimits, type RiskPolicy } from "./risk.js";
import { MAX_AMOUNT, exactNet } from "../money/exact.js";
import type { ChainQueue } from "./chain-queue.js";
import { settleAlone, settleOutcome, type OutcomeSettlement, type SettleGroups, type SettleRow } from "./outcome-settlement.js";
import { readBetState, type BetState, type BetStateKey } from "./bet-state.js";
import { betMetadataJson, foldAfterCommit, settleRefusalError, type SettleBetInput, type SettleRefusal } from "../money/settle.js";
import { checkIdempotencyKey, playerKeyScope, readIdempotentReplay, requestFingerprint, idempotencyKeyReused } from "../money/idempotency.js";
import { noteCommitted, outcomeUnknownMessage } from "../money/committed.js";
import { lostInFlight } from "../db/error-class.js";

export interface OutcomeBetConfig {
  /** The least edge the house keeps: the outcomes' weighted mean profit must be at most -houseEdge. From 0 to below 1. */
  houseEdge: number;
  /** Store each bet's outcomes array (else an empty array: the bet keeps only its outcome's index and profit). */
  saveOutcomes: boolean;
  /** How much one bet may pay; without one, at most the bankroll. */
  riskPolicy?: RiskPolicy;
}
export type OutcomeBetConfigMap<K extends string = string> = { [kind in K]: OutcomeBetConfig };

export interface CustomGameConfig {
  riskPolicy?: RiskPolicy;
}
export type CustomGameConfigMap<K extends string = string> = { [kind in K]: CustomGameConfig };

/** The most outcomes one bet may list. */
export const MAX_OUTCOMES = 1000;
/** The longest client seed, in characters. */
export const MAX_CLIENT_SEED_LENGTH = 32;
/**
 * Slack on the house-edge check: profits a frontend computes as
 * (1 - edge) / probability - 1 carry float rounding of about 1e-16.
 */
export const HOUSE_EDGE_TOLERANCE = 1e-9;

export interface MakeOutcomeBetInput {
  kind: string;
  wager: number;
  currency: string;
  outcomes: { weight: number; profit: number }[];
  hashChainId: string;
  clientSeed: string;
  metadata?: unknown;
  /** The client's key for retrying this bet safely: a retry with the same key and input answers the first bet. */
  idempotencyKey?: string | null;
}

export type MakeOutcomeBetResult =
  | { __typename: "HubMakeOutcomeBetSuccess"; betId: string; outcomeIdx: number; net: number; balance: number }
  | { __typename: "HubBadHashChainError"; message: string }
  | { __typename: "HubRiskError"; message: string; riskLimits: RiskLimits };

const refuse = (code: ErrorCode, message: string) => clientError(code, `hubMakeOutcomeBet: ${message}`);

/**
 * What the balance moves for a wager on an outcome: floor(wager × profit),
 * exact for every wager up to 2^53 − 1 (src/money/exact.ts: the profit is
 * read as the decimal the client sent, so 100 × 0.29 pays 29). Throws a
 * RangeError when the result is beyond ±(2^53 − 1).
 */
export function netOf(wager: number, profit: number): number {
  const net = exactNet(wager, profit);
  if (net === undefined) throw new RangeError(`netOf: ${wager} × ${profit} is beyond ±${MAX_AMOUNT} base units.`);
  return net;
}

/** What each outcome nets, its largest drawable win and the house's expected gain. */
export interface OutcomePlan {
  nets: number[];
  /** The largest net among outcomes of weight > 0. */
  maxNet: number;
  /** Minus the player's expected net, over the outcomes that can be drawn. */
  expectedValue: number;
  /** The bet's metadata as JSON text (checked for size), or null. */
  metadataJson: string | null;
  /** The client's idempotency key and the fingerprint of the rest of its input; undefined without a key. */
  idempotency: { key: string; fingerprint: string } | undefined;
}

const OPERATION = "hubMakeOutcomeBet";

/** Refuse a malformed bet before any lock is taken. */
export function checkOutcomeBetInput(input: MakeOutcomeBetInput, config: OutcomeBetConfig): OutcomePlan {
  const { wager, outcomes, clientSeed } = input;
  if (!Number.isSafeInteger(wager) || wager < 1) {
    throw refuse(ErrorCode.INVALID_AMOUNT, `the wager must be a whole number of base units of at least 1; received ${wager}.`);
  }
  if (!Array.isArray(outcomes) || outcomes.length < 2 || outcomes.length > MAX_OUTCOMES) {
    throw refuse(ErrorCode.INVALID_OUTCOMES, `a bet needs 2 to ${MAX_OUTCOMES} outcomes; received ${Array.isArray(outcomes) ? outcomes.length : "none"}.`);
  }
  let totalWeight = 0;
  let weightedProfit = 0;
  for (const [i, { weight, profit }] of outcomes.entries()) {
    if (!Number.isFinite(weight) || weight < 0) {
      throw refuse(ErrorCode.INVALID_OUTCOMES, `outcome ${i} has weight ${weight}; a weight must be a finite number of at least 0.`);
    }
    if (!Number.isFinite(profit) || profit < -1) {
      throw refuse(ErrorCode.INVALID_OUTCOMES, `outcome ${i} has profit ${profit}; a profit must be a finite number of at least -1 (losing the whole wager).`);
    }
    const net = exactNet(wager, profit);
    if (net === undefined || wager + net > MAX_AMOUNT) {
      throw refuse(ErrorCode.INVALID_OUTCOMES, `outcome ${i} has profit ${profit}; a wager of ${wager} would pay more than ${MAX_AMOUNT} base units, which cannot be paid exactly.`);
    }
    totalWeight += weight;
    weightedProfit += weight * profit;
  }
  if (!(totalWeight > 0) || !Number.isFinite(totalWeight) || !Number.isFinite(weightedProfit)) {
    throw refuse(ErrorCode.INVALID_OUTCOMES, `the weights must sum to a finite number above 0; they sum to ${totalWeight}.`);
  }
  const meanProfit = weightedProfit / totalWeight;
  if (meanProfit > -config.houseEdge + HOUSE_EDGE_TOLERANCE) {
    throw refuse(
      ErrorCode.HOUSE_EDGE_TOO_LOW,
      `the outcomes' weighted mean profit is ${meanProfit}; bets of kind ${input.kind} need at most ${-config.houseEdge} (a house edge of ${config.houseEdge}).`,
    );
  }
  if (typeof clientSeed !== "string" || [...clientSeed].length > MAX_CLIENT_SEED_LENGTH || /\p{Cc}/u.test(clientSeed)) {
    throw refuse(
      ErrorCode.INVALID_CLIENT_SEED,
      `the client seed must be at most ${MAX_CLIENT_SEED_LENGTH} characters without control characters; received ${JSON.stringify(clientSeed).slice(0, 80)} (${typeof clientSeed === "string" ? [...clientSeed].length : 0} characters).`,
    );
  }
  const metadataJson = betMetadataJson(input.metadata, "hubMakeOutcomeBet");
  const key = checkIdempotencyKey(input.idempotencyKey, OPERATION);
  const { idempotencyKey: _key, ...request } = input;
  const idempotency = key === undefined ? undefined : { key, fingerprint: requestFingerprint(request) };
  const nets = outcomes.map((o) => netOf(wager, o.profit));
  let maxNet = -wager;
  let expectedValue = 0;
  for (const [i, o] of outcomes.entries()) {
    if (o.weight === 0) continue;
    maxNet = Math.max(maxNet, nets[i]!);
    expectedValue -= (o.weight / totalWeight) * nets[i]!;
  }
  return { nets, maxNet, expectedValue, metadataJson, idempotency };
}

type Player = { userId: string; casinoId: string; experienceId: string };
type Queryable = Pick<pg.ClientBase, "query">;
/** How a try reads its state and settles: on the pool (with settle groups, sharing reads and commits with other bets'), or in the locked try's transaction. */
interface TryWith {
  read: (key: BetStateKey) => Promise<BetState | undefined>;
  settle: (bet: OutcomeSettlement) => Promise<SettleRow>;
}

/** The locked try's: in its transaction, the fold after its commit. */
const inTransaction = (pgClient: Queryable): TryWith => ({
  read: (key) => readBetState(pgClient, key),
  settle: async (bet) => {
    const row = await settleOutcome(pgClient, bet);
    foldAfterCommit(pgClient, row.pending_bankroll);
    return row;
  },
});

const badChain = (hashChainId: string, why: string): MakeOutcomeBetResult => ({
  __typename: "HubBadHashChainError",
  message: `Hash chain ${hashChainId} ${why}; create a new one (hubCreateHashChain) and retry.`,
});

/**
 * One try at a bet: read the currency, bankroll, chain and balance as last
 * committed (no lock), draw the outcome from the chain's next hash, and let
 * hub_hidden.settle_outcome_bet settle and store it in one statement, which
 * first checks, under the chain's lock, that the hash is still the next one.
 * Two round trips (the state read shared with other bets'), and the fold
 * after the commit when the bet settled against cover set aside.
 * "chain-moved" when another bet of the player took that hash meanwhile:
 * nothing was written or revealed, and the caller tries again.
 */
async function tryOutcomeBet(
  db: Queryable,
  player: Player,
  input: MakeOutcomeBetInput,
  config: OutcomeBetConfig,
  plan: OutcomePlan,
  by: TryWith,
  /** The server's chain work, whose cache holds the derived hashes. */
  chains: ChainSecrets,
): Promise<MakeOutcomeBetResult | "chain-moved"> {
  const { wager, currency, outcomes, hashChainId, clientSeed } = input;
  const key = { ...player, currency, hashChainId };
  const state = await by.read(key);
  if (!state) throw refuse(ErrorCode.UNKNOWN_CURRENCY, `unknown currency ${JSON.stringify(currency)}; the casino of this session has no such currency.`);
  if (state.current_iteration === null || state.max_iteration === null) return badChain(hashChainId, "is not an active chain of this player in this casino and experience");
  if (state.current_iteration <= 1) return badChain(hashChainId, `is exhausted (all its ${state.max_iteration - 1} hashes are used)`);
  const maxPayout = wager + Math.max(0, plan.maxNet);
  const settleInput: SettleBetInput = { ...player, currencyKey: currency, kind: input.kind, wager, payout: 0, maxPayout, expectedValue: plan.expectedValue, field: "hubMakeOutcomeBet" };
  if (state.balance === null) throw settleRefusalError("no-balance", settleInput, null);
  if (state.bankroll === null) throw settleRefusalError("no-bankroll", settleInput, null);
  if (state.balance < wager) throw settleRefusalError("insufficient-funds", settleInput, state.balance);

  const riskArgs = { currency, bankroll: state.bankroll, displayUnitName: state.display_unit_name, displayUnitScale: state.display_unit_scale };
  const riskLimits = riskLimitsOf(config.riskPolicy, riskArgs);
  const risk = validateRisk({ type: "validate-bet", ...riskArgs, wager, riskLimits, maxPotentialPayout: wager + plan.maxNet, outcomes });
  if (!risk.ok) return { __typename: "HubRiskError", message: risk.error.message, riskLimits: risk.error.riskLimits };

  const iteration = state.current_iteration - 1;
  const hashInput = { hashChainId, iteration, pgClient: db };
  const derived = await chains.intermediateHash(hashInput);
  if (derived.type === "error") throw new Error(`hubMakeOutcomeBet: cannot derive hash ${iteration} of chain ${hashChainId}: ${derived.reason}`);
  const outcomeIdx = outcomeIndexOf({ serverHash: derived.hash, clientSeed, weights: outcomes.map((o) => o.weight) });
  const net = plan.nets[outcomeIdx]!;
  const bet: OutcomeSettlement = {
    ...player, currencyKey: currency, betId: null,
    wager, payout: wager + net, maxPayout, expectedValue: plan.expectedValue,
    actor: "hub:hubMakeOutcomeBet", reason: `outcome bet ${input.kind}`,
    hashChainId, iteration, digest: derived.hash, clientSeed,
    kind: input.kind, profit: outcomes[outcomeIdx]!.profit, outcomeIdx,
    weights: config.saveOutcomes ? outcomes.map((o) => o.weight) : [], profits: config.saveOutcomes ? outcomes.map((o) => o.profit) : [],
    metadata: input.metadata ?? null,
    idempotency: plan.idempotency ? { scope: playerKeyScope(player.userId), ...plan.idempotency, answer: { outcomeIdx, net } } : null,
  };
  const written = await by.settle(bet);
  const status = written.status as "settled" | "chain-moved" | "replayed" | "key-reused" | SettleRefusal;
  const { balance, bet_id: betId } = written;
  if (status === "chain-moved") return status;
  if (status === "replayed" || status === "key-reused") return replayOf(db, player, plan);
  if (status === "no-cover") {
    // The refusal depends on the largest win, not the drawn outcome: it reveals nothing.
    return { __typename: "HubRiskError", message: `The house cannot cover this bet's largest win in ${currency} now. Lower the wager or the multiplier.`, riskLimits };
  }
  if (status !== "settled") throw settleRefusalError(status, settleInput, balance);
  return { __typename: "HubMakeOutcomeBetSuccess", betId: betId!, outcomeIdx, net, balance: balance! };
}

/** The first bet's answer for a replayed key, read as committed; null when the key holds nothing yet. */
async function storedAnswer(db: Queryable, player: Player, plan: OutcomePlan): Promise<MakeOutcomeBetResult | null> {
  const { key, fingerprint } = plan.idempotency!;
  const replay = await readIdempotentReplay(db, playerKeyScope(player.userId), key, OPERATION, fingerprint);
  const answer = replay?.result as { betId: string; outcomeIdx: number; net: number; balance: number } | null | undefined;
  if (!answer) return null;
  return { __typename: "HubMakeOutcomeBetSuccess", betId: answer.betId, outcomeIdx: answer.outcomeIdx, net: answer.net, balance: answer.balance };
}

/** A key the settlement found taken (by a bet that committed meanwhile): the first bet's answer, or the refusal of another input. */
async function replayOf(db: Queryable, player: Player, plan: OutcomePlan): Promise<MakeOutcomeBetResult> {
  const answer = await storedAnswer(db, player, plan);
  if (!answer) throw new Error(`hubMakeOutcomeBet: idempotency key ${JSON.stringify(plan.idempotency!.key)} was taken but holds no answer`);
  return answer;
}

/** Optimistic tries before a bet waits for the chain's lock instead. */
const OPTIMISTIC_TRIES = 3;

/**
 * One bet on the superuser pool, settled through hub_hidden.settle_bet. The
 * common case takes two round trips and no explicit transaction: each
 * statement is its own. When other bets of the same player keep taking the
 * chain's next hash (bets of one chain from several servers at once; within
 * a server the chainQueue keeps them apart), the last try locks the chain
 * first, in a transaction, so it cannot lose again. With settleGroups (the
 * server's), the optimistic tries' settlements share commits with other
 * bets' (src/fair/outcome-settlement.ts), and their state reads share
 * queries (src/fair/bet-state.ts).
 */
export async function makeOutcomeBet(
  pool: pg.Pool,
  player: Player,
  input: MakeOutcomeBetInput,
  config: OutcomeBetConfig,
  chainQueue: ChainQueue | undefined,
  settleGroups: SettleGroups | undefined,
  /** The server's chain work (HubGameConfigPlugin passes its server's; a plugin, `context.hashChains`). */
  chains: ChainSecrets,
): Promise<MakeOutcomeBetResult> {
  const plan = checkOutcomeBetInput(input, config);
  // A group serves bets of many players: on the real pool, not this player's bounded view of it.
  const onPool: TryWith = settleGroups
    ? { read: (key) => settleGroups.readState(unboundedPool(pool), key), settle: (bet) => settleGroups.settle(unboundedPool(pool), bet) }
    : { read: (key) => readBetState(pool, key), settle: (bet) => settleAlone(pool, bet) };
  const play = async () => {
    // A retry of a committed bet answers it before any hash is read or drawn.
    const result = (plan.idempotency && (await storedAnswer(pool, player, plan))) || (await settleOutcomeBet(pool, player, input, config, plan, onPool, chains).catch((error: unknown) => {
      // Its settlement runs as its own transaction: a connection lost while it was in flight may have lost a commit's answer.
      throw lostInFlight(error) ? outcomeUnknown(plan.idempotency?.key) : error;
    }));
    if (result.__typename === "HubMakeOutcomeBetSuccess") noteCommitted({ operation: OPERATION, ids: { betId: result.betId }, idempotencyKey: plan.idempotency?.key });
    return result;
  };
  return chainQueue ? chainQueue.run(String(input.hashChainId), play) : play();
}

/** Claim the bet's key in the locked try's transaction: "claimed", or the first bet's answer on a replay. */
async function claimOutcomeKey(pgClient: Queryable, player: Player, plan: OutcomePlan): Promise<"claimed" | MakeOutcomeBetResult> {
  const { key, fingerprint } = plan.idempotency!;
  const { rows } = await pgClient.query<{ status: string; operation: string; result: { betId: string; outcomeIdx: number; net: number; balance: number } | null }>(
    "select status, operation, result from hub_hidden.claim_idempotency_key($1, $2, $3, $4)",
    [playerKeyScope(player.userId), key, OPERATION, fingerprint],
  );
  const row = rows[0]!;
  if (row.status === "reused") throw idempotencyKeyReused(OPERATION, key, OPERATION, row.operation);
  if (row.status !== "replay") return "claimed";
  if (!row.result) throw new Error(`hubMakeOutcomeBet: idempotency key ${JSON.stringify(key)} was taken but holds no answer`);
  return { __typename: "HubMakeOutcomeBetSuccess", ...row.result };
}

async function settleOutcomeBet(
  pool: pg.Pool,
  player: Player,
  input: MakeOutcomeBetInput,
  config: OutcomeBetConfig,
  plan: OutcomePlan,
  onPool: TryWith,
  chains: ChainSecrets,
): Promise<MakeOutcomeBetResult> {
  for (let attempt = 1; attempt < OPTIMISTIC_TRIES; attempt++) {
    const result = await tryOutcomeBet(pool, player, input, config, plan, onPool, chains);
    if (result !== "chain-moved") return result;
  }
  return withPgPoolTransaction(pool, async (pgClient) => {
    // The key before the chain: the lock order of every keyed bet (settle_outcome_bet_once).
    const claimed = plan.idempotency && (await claimOutcomeKey(pgClient, player, plan));
    if (claimed && claimed !== "claimed") return claimed;
    const chain = await dbLockHubHashChain(pgClient, { ...player, hashChainId: input.hashChainId, active: "must-be-active" });
    const result = chain ? await tryOutcomeBet(pgClient, player, input, config, plan, inTransaction(pgClient), chains) : badChain(input.hashChainId, "is not an active chain of this player in this casino and experience");
    if (result === "chain-moved") throw new Error(`hubMakeOutcomeBet: chain ${input.hashChainId} moved while locked`);
    // A refusal answered as a value commits nothing, so the key stays unused.
    if (claimed && result.__typename !== "HubMakeOutcomeBetSuccess") {
      await pgClient.query("delete from hub_hidden.idempotency_key where scope = $1 and key = $2", [playerKeyScope(player.userId), plan.idempotency!.key]);
    }
    return result;
  });
}

/** OUTCOME_UNKNOWN for a bet whose settlement lost its connection in flight. */
function outcomeUnknown(idempotencyKey: string | undefined) {
  return clientError(ErrorCode.OUTCOME_UNKNOWN, outcomeUnknownMessage(OPERATION, idempotencyKey), {
    cause: ErrorCode.DATABASE_UNAVAILABLE,
    operation: OPERATION,
    ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
  });
}
