import "./helpers/env.js";
import t from "tap";
import { gql } from "./helpers/http.js";
import { bettingTable, referencePlayer, useReferenceHubs } from "./helpers/reference-hubs.js";

/*
 * The reference coins are fair: both makeCoinflip variants and makeCoinflipBet,
 * flipped through the product. The rest of what the reference plugins do is
 * tested in reference-graphql.test.ts; these checks are most of the flips and
 * of the time, and how many flips they need varies from run to run, so they
 * have a file of their own that runs beside the others.
 */
const hubs = useReferenceHubs(t);

/*
 * Fairness, as a sequential test (Wald's SPRT) on flips made through the
 * product: the GraphQL mutation, the plugin's own random draw, the stored row.
 *
 * Telling a 52% coin from a fair one needs tens of thousands of flips; a fixed
 * sample large enough (about 50,000 per coin) would take minutes for the bet
 * coin, whose bets serialise on the bankroll's lock. A sequential test stops
 * as soon as the evidence suffices, about 10,000 flips for a fair coin.
 *
 * After n flips with k successes, for each alternative q in {0.52, 0.48} the
 * log-likelihood ratio against p = 1/2 is
 *   L_q = k·ln(2q) + (n − k)·ln(2(1 − q)).
 * - Unfair as soon as some L_q ≥ ln(1/α). Under a fair coin e^{L_q} is a
 *   nonnegative martingale starting at 1, so by Ville's inequality
 *   P(it ever reaches 1/α) ≤ α, however often and however long we look: no
 *   approximation. α = 1e-6 / 8 covers the 2 alternatives of each of the
 *   file's 4 checks (makeCoinflip in both variants, makeCoinflipBet's heads
 *   and wins): a fair coin fails this file less than once in a million runs.
 * - Fair once every L_q ≤ ln(β), β = 1e-3: a 52% (or 48%) coin stops there
 *   instead of failing with probability about β (Wald's approximation). Its
 *   L_q drifts up by KL(0.52‖0.5) ≈ 0.0008 a flip and reaches ln(1/α) ≈ 15.9
 *   after about 20,000 flips; a fair coin's drifts down as fast and reaches
 *   ln(β) ≈ −6.9 after about 8,600.
 * - At FAIR_MAX_FLIPS still undecided: no evidence of bias at the α level,
 *   so fair (this cannot raise the false-failure rate; at 100,000 flips a 52%
 *   coin is almost never undecided).
 * The old test (one 4.5σ bound over 2000 flips) let a 55% coin pass about
 * half the time.
 */
const FAIR_ALPHA = 1e-6 / 8;
const FAIR_BETA = 1e-3;
const FAIR_MAX_FLIPS = 100_000;
const FAIR_ALTERNATIVES = [0.52, 0.48];

class FairnessTest {
  n = 0;
  k = 0;
  verdict: "fair" | "unfair" | undefined;
  private peak = -Infinity;
  readonly what: string;
  constructor(what: string) {
    this.what = what;
  }
  add(successes: number, flips: number): void {
    if (this.verdict) return;
    this.k += successes;
    this.n += flips;
    const llrs = FAIR_ALTERNATIVES.map((q) => this.k * Math.log(2 * q) + (this.n - this.k) * Math.log(2 * (1 - q)));
    this.peak = Math.max(this.peak, ...llrs);
    if (llrs.some((l) => l >= Math.log(1 / FAIR_ALPHA))) this.verdict = "unfair";
    else if (llrs.every((l) => l <= Math.log(FAIR_BETA)) || this.n >= FAIR_MAX_FLIPS) this.verdict = "fair";
  }
  report(t: { ok(condition: boolean, message: string): unknown }): void {
    const z = (this.k - this.n / 2) / (Math.sqrt(this.n) / 2);
    t.ok(
      this.verdict === "fair",
      `${this.what}: ${this.verdict ?? "undecided"} after ${this.n} flips, ${this.k} successes (${(100 * this.k / this.n).toFixed(2)}%, ${z.toFixed(2)}σ; ` +
        `highest log-likelihood ratio for a ${FAIR_ALTERNATIVES.join("/")} coin ${this.peak.toFixed(1)}, failing at ${Math.log(1 / FAIR_ALPHA).toFixed(1)})`,
    );
  }
}

/**
 * Flip until every test has decided: `width` requests in flight, each answer's counts added as it comes,
 * so a decision waits for the requests then in flight only, not for the rest of a round. Slot `s` has one
 * request in flight at a time. The order of i.i.d. flips does not matter to the test, and checking after
 * every answer is closer to Wald's flip-by-flip boundaries.
 */
async function flipUntilDecided(tests: FairnessTest[], width: number, request: (slot: number) => Promise<number[][]>): Promise<void> {
  let failed = false; // a failed request stops every slot, so none keeps flipping after the test has failed
  const going = () => !failed && tests.some((test) => !test.verdict);
  await Promise.all(
    Array.from({ length: width }, async (_, slot) => {
      try {
        while (going()) {
          const counts = await request(slot); // per test: [successes, flips]
          tests.forEach((test, i) => test.add(counts[i]![0]!, counts[i]![1]!));
        }
      } catch (error) {
        failed = true;
        throw error;
      }
    }),
  );
}

const variants = [
  { name: "resolver variant", hub: () => hubs.resolverHub },
  { name: "plan variant", hub: () => hubs.planHub },
];

for (const variant of variants) {
  t.test(`makeCoinflip (${variant.name}): the coin is fair`, async (t) => {
    const p = await referencePlayer(hubs, `fair-${variant.name.split(" ")[0]}`);
    const perRequest = 200;
    const wins = new FairnessTest("wins");
    let flips = 0;
    let won = 0;
    let badNets = 0;
    const fields = Array.from({ length: perRequest }, (_, i) => `f${i}: makeCoinflip(input: { currency: "HOUSE", wager: 2 }) { net }`).join(" ");
    await flipUntilDecided([wins], 4, async () => {
      const res = await gql(variant.hub().url, `mutation { ${fields} }`, {}, p.header);
      if (res.body.errors) t.same(res.body.errors, undefined);
      const nets = Object.values(res.body.data ?? {}).map((v: any) => v.net as number);
      badNets += nets.filter((net) => net !== 2 * 0.99 && net !== -2).length;
      const roundWins = nets.filter((net) => net > 0).length;
      flips += nets.length;
      won += roundWins;
      return [[roundWins, nets.length]];
    });
    t.equal(badNets, 0, "every net is a win of 1.98 or a loss of 2");
    wins.report(t);
    const stored = await hubs.db.query("select count(*)::int as n, count(*) filter (where net > 0)::int as wins from app.coinflip where user_id = $1", [p.userId]);
    t.same(stored.rows[0], { n: flips, wins: won }, "the stored rows are the answers");
  });
}

t.test("makeCoinflipBet: the coin is fair whichever side is chosen", async (t) => {
  // A mutation's fields run one after another, each bet a few round trips: one request at a time waits
  // on latency, which a loaded machine stretches most. 32 casinos of one player bet side by side, 50
  // fields each, so the file waits on the CPU instead (8 casinos of 200: 28 s alone, 259 s in a suite run).
  const balance = 1e7;
  const tables = await Promise.all(Array.from({ length: 32 }, (_, i) => bettingTable(hubs, { casino: `fairbets${i}`, players: 1, balance, bankroll: 1e7 })));
  const perRequest = 50;
  const sideOf = (i: number) => (i % 2 ? "HEADS" : "TAILS");
  // Each bet's money is read from the balances the payloads answer: a mutation's fields run in order, and
  // only these requests move these players' balances (the stored rows are compared with the answers below).
  const balances = tables.map(() => balance);
  // Both checks: a coin always landing on HEADS wins half of alternating bets, and one that reads the side wins none.
  const heads = new FairnessTest("heads");
  const wins = new FairnessTest("wins");
  const answered = { bets: 0, heads: 0, won: 0 };
  let mismatched = 0;
  // Slot r bets at table r only, one request at a time: its balance moves only by that request's bets.
  await flipUntilDecided([heads, wins], tables.length, async (r) => {
    const { players, currency } = tables[r]!;
    const fields = Array.from(
      { length: perRequest },
      (_, i) => `b${i}: makeCoinflipBet(input: { wager: 2, currency: "${currency}", side: ${sideOf(i)} }) { outcome balance }`,
    ).join(" ");
    const res = await gql(hubs.resolverHub.url, `mutation { ${fields} }`, {}, players[0]!.header);
    if (res.body.errors) t.same(res.body.errors, undefined);
    const data = (res.body.data ?? {}) as Record<string, { outcome: string; balance: number } | null>;
    const bets = Array.from({ length: perRequest }, (_, i) => {
      const bet = data[`b${i}`];
      if (!bet) throw new Error(`table ${r}: bet b${i} answered no payload`);
      const { outcome, balance: after } = bet;
      const net = after - balances[r]!;
      balances[r] = after;
      return { outcome, side: sideOf(i), net };
    });
    // A win pays floor(2 × 0.99) = 1, a loss takes the wager of 2.
    mismatched += bets.filter((b) => (b.outcome === b.side ? b.net !== 1 : b.net !== -2)).length;
    const roundHeads = bets.filter((b) => b.outcome === "HEADS").length;
    const roundWon = bets.filter((b) => b.net > 0).length;
    answered.bets += bets.length;
    answered.heads += roundHeads;
    answered.won += roundWon;
    return [
      [roundHeads, bets.length],
      [roundWon, bets.length],
    ];
  });
  t.equal(mismatched, 0, "each balance moved by the win (1) exactly when the coin landed on the chosen side, else by the wager (-2)");
  heads.report(t);
  wins.report(t);
  const stored = await hubs.db.query(
    `select count(*)::int as bets, count(*) filter (where outcome = 'HEADS')::int as heads, count(*) filter (where net > 0)::int as won,
            count(*) filter (where (outcome = side) <> (net > 0))::int as mismatched
       from app.coinflip_bet where casino_id = any($1)`,
    [tables.map((table) => table.casinoId)],
  );
  t.same(stored.rows[0], { ...answered, mismatched: 0 }, "the stored bets are the answers: as many, as many heads, as many won, each won exactly when the coin landed on its side");
});
