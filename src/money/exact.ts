/**
 * Exact money arithmetic. Amounts are whole base units up to 2^53 − 1, which
 * a double holds exactly; their products with a multiplier do not fit, so
 * they are computed in integers.
 */

/** The largest amount: every whole number up to it is exact in a double. */
export const MAX_AMOUNT = Number.MAX_SAFE_INTEGER;

/** Whether x is a whole number of base units from `least` to MAX_AMOUNT. */
export const isWholeAmount = (x: unknown, least = 0): x is number => Number.isSafeInteger(x) && (x as number) >= least;

/**
 * A finite double as the decimal a person wrote: the shortest decimal that
 * reads back as the same double (what JSON printed: 0.29 is 29/100, not the
 * double's 0.28999999999999998002…). Returns digits × 10^exponent.
 */
export function decimalOf(x: number): { digits: bigint; exponent: number } {
  if (!Number.isFinite(x)) throw new RangeError(`decimalOf: ${x} is not a finite number`);
  const [mantissa, exp = "0"] = String(x).split("e");
  const [whole, fraction = ""] = mantissa!.split(".");
  return { digits: BigInt(whole! + fraction), exponent: Number(exp) - fraction.length };
}

/** floor(n / d) for bigints of any sign (bigint division truncates toward 0). */
function floorDiv(n: bigint, d: bigint): bigint {
  const q = n / d;
  return n % d !== 0n && (n < 0n) !== (d < 0n) ? q - 1n : q;
}

/**
 * floor(wager × profit) with no rounding error for any wager up to 2^53 − 1:
 * the profit is taken as its decimal (decimalOf), the product is formed in
 * bigints and floored once. Undefined when the result is beyond ±MAX_AMOUNT
 * (such a payout cannot be paid exactly).
 */
export function exactNet(wager: number, profit: number): number | undefined {
  const { digits, exponent } = decimalOf(profit);
  const product = BigInt(wager) * digits;
  const net = exponent >= 0 ? product * 10n ** BigInt(exponent) : floorDiv(product, 10n ** BigInt(-exponent));
  if (net > BigInt(MAX_AMOUNT) || net < -BigInt(MAX_AMOUNT)) return undefined;
  // Number(-0n) is 0: a net of nothing is never -0.
  return Number(net);
}
