/**
 * The risk limit a player is shown for an exact one (the hub rounds down to
 * 1, 2 or 5 × a power of ten): written from the decimal digits, apart from
 * the hub's own arithmetic, so a test checks the hub against it.
 */
export function shownLimit(exact: number): number {
  const whole = Math.floor(Number(exact));
  if (whole < 1) return 0;
  const digits = String(whole);
  const lead = Number(digits[0]);
  return (lead >= 5 ? 5 : lead >= 2 ? 2 : 1) * 10 ** (digits.length - 1);
}
