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
 * One bet, in one transaction on the superuser pool. The house bankroll of a
 * casino's currency is one row every bet of every player updates, so it is
 * touched last and once: lock the chain, then the balance; check the risk
 * against the bankroll as last committed (no lock); then one statement
 * debits the bankroll only if it still covers the bet's largest possible win
 * and, only if it did, consumes the hash, moves the balance and stores the
 * bet. Its row lock is held for that statement and the commit alone. When
 * the bankroll no longer covers the bet, nothing is written (the hash stays
 * unused and unrevealed) and the bet is a HubRiskError; the refusal depends
 * on the largest win, not the drawn outcome, so it reveals nothing. A thrown
 * client error rolls everything back.
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
    const known = await pgClient.query<{ display_unit_name: string; display_unit_scale: number; bankroll_id: string | null; bankroll: number | null }>({
      name: "hub-outcome-bet-currency-bankroll",
      text: `select c.display_unit_name, c.display_unit_scale, b.id as bankroll_id, b.amount as bankroll
               from hub.currency c left join hub.bankroll b on b.casino_id = c.casino_id and b.currency_key = c.key
              where c.key = $1 and c.casino_id = $2`,
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

    // The balance's lock, with the bet's id and the ledger's tags for the triggers of the final write.
    const locked = await pgClient.query<{ id: string; amount: number; bet_id: string }>({
      name: "hub-outcome-bet-balance",
      text: `select id, amount, b.bet_id,
                    set_config('hub.ledger_bet_id', b.bet_id::text, true),
                    set_config('hub.ledger_actor', 'hub:hubMakeOutcomeBet', true),
                    set_config('hub.ledger_reason', 'outcome bet ' || $5, true)
               from hub.balance, (select hub_hidden.uuid_generate_v7() as bet_id) b
              where user_id = $1 and experience_id = $2 and currency_key = $3 and casino_id = $4
              for update of balance`,
      values: [userId, experienceId, currency, casinoId, input.kind],
    });
    const dbPlayerBalance = locked.rows[0];
    if (!dbPlayerBalance) {
      const balance = await pgClient.query("select 1 from hub.balance where user_id = $1 and experience_id = $2 and currency_key = $3", [userId, experienceId, currency]);
      if (balance.rowCount === 0) throw refuse(ErrorCode.INSUFFICIENT_FUNDS, `the wager is ${wager} ${currency} but this player has no ${currency} balance.`);
      throw refuse(ErrorCode.UNKNOWN_CURRENCY, `the house has no bankroll in ${currency}.`);
    }
    if (unit.bankroll_id === null || unit.bankroll === null) throw refuse(ErrorCode.UNKNOWN_CURRENCY, `the house has no bankroll in ${currency}.`);
    if (dbPlayerBalance.amount < wager) {
      throw refuse(ErrorCode.INSUFFICIENT_FUNDS, `the wager is ${wager} ${currency} but the balance is ${dbPlayerBalance.amount} ${currency}.`);
    }

    const nets = outcomes.map((o) => netOf(wager, o.profit));
    const totalWeight = outcomes.reduce((sum, o) => sum + o.weight, 0);
    let maxNet = -wager;
    for (const [i, o] of outcomes.entries()) if (o.weight > 0) maxNet = Math.max(maxNet, nets[i]!);
    const riskArgs = { currency, bankroll: unit.bankroll, displayUnitName: unit.display_unit_name, displayUnitScale: unit.display_unit_scale };
    const riskLimits = riskLimitsOf(config.riskPolicy, riskArgs);
    const risk = validateRisk({ type: "validate-bet", ...riskArgs, wager, riskLimits, maxPotentialPayout: wager + maxNet, outcomes });
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

    // Every other write reads the bankroll's row: when the guard refuses,
    // the statement writes nothing at all.
    const { rows } = await pgClient.query<{ covered: boolean; balance: number | null; bet: boolean }>({
      name: "hub-outcome-bet-write",
      text: `with bankroll as (
         update hub.bankroll set amount = amount - $5, bets = bets + 1, wagered = wagered + $3, expected_value = expected_value + $16
          where id = $17 and amount >= $18 returning 1
       ), advanced as (
         update hub.hash_chain set current_iteration = $19 from bankroll where hash_chain.id = $20 and current_iteration = $19 + 1 returning hash_chain.id
       ), hash as (
         insert into hub.hash (hash_chain_id, kind, digest, iteration, client_seed)
         select id, 'INTERMEDIATE', $21, $19, $22 from advanced returning id
       ), balance as (
         update hub.balance set amount = amount + $5 from bankroll where balance.id = $15 returning balance.amount
       ), bet as (
         insert into hub.outcome_bet (id, kind, wager, profit, net, outcomes, outcome_idx, currency_key, hash_id, user_id, casino_id, experience_id, metadata)
         select $1, $2, $3, $4, $5, o.outcomes, $6, $7, hash.id, $8, $9, $10, coalesce($11::jsonb, '{}')
           from hash cross join lateral (
             select coalesce(array_agg(row(u.weight, u.profit)::hub.outcome order by u.n) filter (where $12), '{}') as outcomes
               from unnest($13::float8[], $14::float8[]) with ordinality as u(weight, profit, n)
           ) o
         returning 1
       )
       select exists (select from bankroll) as covered, (select amount from balance) as balance, exists (select from bet) as bet`,
      values: [
        dbPlayerBalance.bet_id, input.kind, wager, outcomes[outcomeIdx]!.profit, net, outcomeIdx, currency, userId, casinoId, experienceId,
        input.metadata === undefined || input.metadata === null ? null : JSON.stringify(input.metadata),
        config.saveOutcomes, outcomes.map((o) => o.weight), outcomes.map((o) => o.profit),
        dbPlayerBalance.id, expectedValue, unit.bankroll_id, Math.max(0, maxNet),
        iteration, chain.id, Buffer.from(derived.hash), clientSeed,
      ],
    });
    const written = rows[0]!;
    if (!written.covered) {
      return {
        __typename: "HubRiskError",
        message: `The house cannot cover this bet's largest win in ${currency} now. Lower the wager or the multiplier.`,
        riskLimits,
      };
    }
    if (!written.bet || written.balance === null) throw new Error(`hubMakeOutcomeBet: chain ${chain.id} moved past iteration ${iteration + 1} while locked, or the balance was not written`);
    return { __typename: "HubMakeOutcomeBetSuccess", betId: dbPlayerBalance.bet_id, outcomeIdx, net, balance: written.balance };
  });
}
