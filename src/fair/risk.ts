/**
 * Risk policies: how much one bet may pay, given the house bankroll. A game
 * computes its largest possible payout and asks validateRisk; a bet over the
 * limit is refused before any money moves.
 */

/**
 * What a policy is told: the bankroll in base units and the currency with its
 * display unit. The hub always passes every field; a game that calls its
 * policy itself may pass the other revision's shape, `{ type: "get-limits",
 * currency, bankroll }`, so the policy can rely on currency and bankroll only
 * unless it knows its callers.
 */
export interface RiskPolicyArgs {
  /** What is asked: always "get-limits" (the other revision's callers name it). */
  type?: "get-limits";
  currency: string;
  bankroll: number;
  displayUnitName?: string;
  displayUnitScale?: number;
}

export interface RiskLimits {
  /** The largest total a bet may pay back (wager included), in base units. */
  maxPayout: number;
}

export type RiskPolicy = (args: RiskPolicyArgs) => RiskLimits;

export interface ValidateRiskInput {
  type: "validate-bet";
  currency: string;
  wager: number;
  /** The house bankroll in this currency, in base units. */
  bankroll: number;
  /** The limits of the game's policy, or the policy itself (then called with the bankroll and currency). */
  riskLimits: RiskLimits | RiskPolicy;
  /** The most the bet can pay back, wager included, in base units. */
  maxPotentialPayout: number;
  displayUnitName: string;
  displayUnitScale: number;
  outcomes?: readonly { weight: number; profit: number }[];
}

export type ValidateRiskResult = { ok: true } | { ok: false; error: { message: string; riskLimits: RiskLimits } };

/** With no policy, a bet may pay at most the whole bankroll. */
export const unlimitedRisk: RiskPolicy = ({ bankroll }) => ({ maxPayout: bankroll });

/** The limits a policy gives for this bankroll, checked: a policy returning nonsense limits every bet to 0. */
export function riskLimitsOf(policy: RiskPolicy | undefined, args: RiskPolicyArgs): RiskLimits {
  const limits = (policy ?? unlimitedRisk)({ type: "get-limits", ...args });
  const maxPayout = Number(limits?.maxPayout);
  return { maxPayout: Number.isFinite(maxPayout) && maxPayout > 0 ? Math.floor(maxPayout) : 0 };
}

/**
 * What a player may learn of the house's limits: the largest of 1, 2 or 5
 * times a power of ten not above `amount` (0 below 1), in base units. A limit
 * follows the bankroll (a policy's share of it, or all of it), so an exact
 * one would tell a player the bankroll to the unit; this one tells its order
 * of magnitude and within a factor of about 2 only, and keeps at least 40%
 * of the exact limit.
 */
export function coarseLimit(amount: number): number {
  if (!(amount >= 1)) return 0;
  let power = 1;
  while (power * 10 <= amount) power *= 10;
  return (amount >= 5 * power ? 5 : amount >= 2 * power ? 2 : 1) * power;
}

/**
 * The limits a player is shown and held to: the policy's, at most the
 * bankroll, rounded down by coarseLimit. Enforced at that value as well as
 * shown, or a player could find the exact limit, hence the bankroll, by
 * bisecting wagers. Operators read bankrolls as they are.
 */
export function playerRiskLimits(policy: RiskPolicy | undefined, args: RiskPolicyArgs): RiskLimits {
  return { maxPayout: coarseLimit(Math.min(riskLimitsOf(policy, args).maxPayout, args.bankroll)) };
}

const display = (amount: number, name: string, scale: number) => `${amount / scale} ${name}`;

/**
 * Whether a bet stays within the policy: its largest payout at most the
 * policy's limit, and its largest net win at most the bankroll, each rounded
 * down by coarseLimit (so refusals reveal no more than hubRiskLimits shows).
 * A refusal reports the limits a player is shown (playerRiskLimits).
 */
export function validateRisk(input: ValidateRiskInput): ValidateRiskResult {
  const args = { currency: input.currency, bankroll: input.bankroll, displayUnitName: input.displayUnitName, displayUnitScale: input.displayUnitScale };
  const given = input.riskLimits;
  const policy: RiskPolicy = typeof given === "function" ? given : () => given;
  const riskLimits = playerRiskLimits(policy, args);
  const unit = (n: number) => display(n, input.displayUnitName, input.displayUnitScale);
  if (input.maxPotentialPayout > coarseLimit(riskLimitsOf(policy, args).maxPayout)) {
    return {
      ok: false,
      error: {
        message: `This bet could pay ${unit(input.maxPotentialPayout)}; the most a bet in ${input.currency} may pay now is ${unit(riskLimits.maxPayout)}. Lower the wager or the multiplier.`,
        riskLimits,
      },
    };
  }
  if (input.maxPotentialPayout - input.wager > coarseLimit(input.bankroll)) {
    return {
      ok: false,
      error: { message: `The house cannot cover this bet's largest win in ${input.currency} now. Lower the wager or the multiplier.`, riskLimits },
    };
  }
  return { ok: true };
}
