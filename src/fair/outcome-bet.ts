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
import { dbLockPlayerBalanceAndHouseBankroll } from "../db/locks.js";
import { dbLockHubHashChain } from "./db.js";
import { getIntermediateHash } from "./chain-secret.js";
import { outcomeIndexOf } from "./hash.js";
import { riskLimitsOf, validateRisk, type RiskLimits, type RiskPolicy } from "./risk.js";

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
}

export type MakeOutcomeBetResult =
  | { __typename: "HubMakeOutcomeBetSuccess"; betId: string; outcomeIdx: number; net: number; balance: number }
  | { __typename: "HubBadHashChainError"; message: string }
  | { __typename: "HubRiskError"; message: string; riskLimits: RiskLimits };

const refuse = (code: ErrorCode, message: string) => clientError(code, `hubMakeOutcomeBet: ${message}`);

/**
 * What the balance moves for a wager on an outcome: wager × profit rounded
 * down to a whole base unit (the rounding is the house's). A product within
 * 1e-9 of a whole number is that number, so 100 × 0.29 pays 29, not 28.
 */
export function netOf(wager: number, profit: number): number {
  const exact = wager * profit;
  const nearest = Math.round(exact);
  if (Math.abs(exact - nearest) <= 1e-9 * Math.max(1, Math.abs(exact))) return nearest === 0 ? 0 : nearest;
  return Math.floor(exact);
}

/** Refuse a malformed bet before any lock is taken. */
export function checkOutcomeBetInput(input: MakeOutcomeBetInput, config: OutcomeBetConfig): void {
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
}

/**
 * One bet, in one transaction on the superuser pool: lock the chain, then
 * the balance, then the bankroll; take the chain's next iteration; store the
 * hash and the bet; move the money through the ledger; count the bet in the
 * bankroll. A thrown client error rolls everything back.
 */
export async function makeOutcomeBet(
  pool: pg.Pool,
  player: { userId: string; casinoId: string; experienceId: string },
  input: MakeOutcomeBetInput,
  config: OutcomeBetConfig,
): Promise<MakeOutcomeBetResult> {
  checkOutcomeBetInput(input, config);
  const { userId, casinoId, experienceId } = player;
  const { wager, currency, outcomes, hashChainId, clientSeed } = input;
  return withPgPoolTransaction(pool, async (pgClient) => {
    // Named statements: each connection parses and plans them once, not at every bet.
    const known = await pgClient.query<{ display_unit_name: string; display_unit_scale: number }>({
      name: "hub-outcome-bet-currency",
      text: "select display_unit_name, display_unit_scale from hub.currency where key = $1 and casino_id = $2",
      values: [currency, casinoId],
    });
    const unit = known.rows[0];
    if (!unit) throw refuse(ErrorCode.UNKNOWN_CURRENCY, `unknown currency ${JSON.stringify(currency)}; the casino of this session has no such currency.`);

    const chain = await dbLockHubHashChain(pgClient, { userId, experienceId, casinoId, hashChainId, active: "must-be-active" });
    if (!chain) {
      return { __typename: "HubBadHashChainError", message: `Hash chain ${hashChainId} is not an active chain of this player in this casino and experience; create a new one (hubCreateHashChain) and retry.` };
    }
    if (chain.current_iteration <= 1) {
      return { __typename: "HubBadHashChainError", message: `Hash chain ${hashChainId} is exhausted (all its ${chain.max_iteration - 1} hashes are used); create a new one (hubCreateHashChain) and retry.` };
    }

    const locked = await dbLockPlayerBalanceAndHouseBankroll(pgClient, { userId, casinoId, experienceId, currencyKey: currency });
    if (!locked.found) {
      const balance = await pgClient.query("select 1 from hub.balance where user_id = $1 and experience_id = $2 and currency_key = $3", [userId, experienceId, currency]);
      if (balance.rowCount === 0) throw refuse(ErrorCode.INSUFFICIENT_FUNDS, `the wager is ${wager} ${currency} but this player has no ${currency} balance.`);
      throw refuse(ErrorCode.UNKNOWN_CURRENCY, `the house has no bankroll in ${currency}.`);
    }
    const { dbPlayerBalance, dbHouseBankroll } = locked;
    if (dbPlayerBalance.amount < wager) {
      throw refuse(ErrorCode.INSUFFICIENT_FUNDS, `the wager is ${wager} ${currency} but the balance is ${dbPlayerBalance.amount} ${currency}.`);
    }

    const nets = outcomes.map((o) => netOf(wager, o.profit));
    const totalWeight = outcomes.reduce((sum, o) => sum + o.weight, 0);
    let maxNet = -wager;
    for (const [i, o] of outcomes.entries()) if (o.weight > 0) maxNet = Math.max(maxNet, nets[i]!);
    const riskArgs = { currency, bankroll: dbHouseBankroll.amount, displayUnitName: unit.display_unit_name, displayUnitScale: unit.display_unit_scale };
    const risk = validateRisk({
      type: "validate-bet",
      ...riskArgs,
      wager,
      riskLimits: riskLimitsOf(config.riskPolicy, riskArgs),
      maxPotentialPayout: wager + maxNet,
      outcomes,
    });
    if (!risk.ok) return { __typename: "HubRiskError", message: risk.error.message, riskLimits: risk.error.riskLimits };
    if (dbPlayerBalance.amount + maxNet > Number.MAX_SAFE_INTEGER) {
      throw refuse(ErrorCode.INVALID_AMOUNT, `a win of ${maxNet} ${currency} would take the balance past ${Number.MAX_SAFE_INTEGER} base units.`);
    }

    // The chain is locked: its next iteration is known before any write.
    const iteration = chain.current_iteration - 1;
    const derived = await getIntermediateHash({ hashChainId: chain.id, iteration, pgClient });
    if (derived.type === "error") throw new Error(`hubMakeOutcomeBet: cannot derive hash ${iteration} of chain ${chain.id}: ${derived.reason}`);
    const outcomeIdx = outcomeIndexOf({ serverHash: derived.hash, clientSeed, weights: outcomes.map((o) => o.weight) });
    const net = nets[outcomeIdx]!;
    // The house's expected gain: minus the player's expected net over the weights.
    const expectedValue = -outcomes.reduce((sum, o, i) => sum + (o.weight / totalWeight) * nets[i]!, 0);

    // Two statements, so a bet holds the bankroll's lock for few round trips.
    // First: consume the iteration, store the hash, and name the bet for the
    // ledger rows the balance and bankroll triggers write in the second.
    const first = await pgClient.query<{ bet_id: string; hash_id: string }>({
      name: "hub-outcome-bet-hash",
      text: `with advanced as (
         update hub.hash_chain set current_iteration = $2 where id = $1 and current_iteration = $2 + 1 returning id
       ), hash as (
         insert into hub.hash (hash_chain_id, kind, digest, iteration, client_seed)
         select id, 'INTERMEDIATE', $3, $2, $4 from advanced returning id
       ), bet as (select hub_hidden.uuid_generate_v7() as id)
       select bet.id as bet_id, hash.id as hash_id,
              set_config('hub.ledger_bet_id', bet.id::text, true),
              set_config('hub.ledger_actor', 'hub:hubMakeOutcomeBet', true),
              set_config('hub.ledger_reason', 'outcome bet ' || $5, true)
         from bet, hash`,
      values: [chain.id, iteration, Buffer.from(derived.hash), clientSeed, input.kind],
    });
    if (!first.rows[0]) throw new Error(`hubMakeOutcomeBet: chain ${chain.id} moved past iteration ${iteration + 1} while locked`);
    const { bet_id: betId, hash_id: hashId } = first.rows[0];
    const second = await pgClient.query<{ amount: number }>({
      name: "hub-outcome-bet-money",
      text: `with balance as (
         update hub.balance set amount = amount + $5 where id = $16 returning amount
       ), bankroll as (
         update hub.bankroll set amount = amount - $5, bets = bets + 1, wagered = wagered + $3, expected_value = expected_value + $17
          where id = $18 returning 1
       ), bet as (
         insert into hub.outcome_bet (id, kind, wager, profit, net, outcomes, outcome_idx, currency_key, hash_id, user_id, casino_id, experience_id, metadata)
         select $1, $2, $3, $4, $5, coalesce(array_agg(row(o.weight, o.profit)::hub.outcome order by o.n) filter (where $13), '{}'),
                $6, $7, $8, $9, $10, $11, coalesce($12::jsonb, '{}')
           from unnest($14::float8[], $15::float8[]) with ordinality as o(weight, profit, n)
         returning 1
       )
       select balance.amount from balance, bankroll, bet`,
      values: [
        betId, input.kind, wager, outcomes[outcomeIdx]!.profit, net, outcomeIdx, currency, hashId, userId, casinoId, experienceId,
        input.metadata === undefined || input.metadata === null ? null : JSON.stringify(input.metadata),
        config.saveOutcomes, outcomes.map((o) => o.weight), outcomes.map((o) => o.profit),
        dbPlayerBalance.id, expectedValue, dbHouseBankroll.id,
      ],
    });
    if (!second.rows[0]) throw new Error("hubMakeOutcomeBet: the balance, bankroll or bet row was not written");
    return { __typename: "HubMakeOutcomeBetSuccess", betId, outcomeIdx, net, balance: second.rows[0].amount };
  });
}
