/**
 * The database's own ceilings for bets, measured with pgbench on the bench's
 * Postgres, so every run shows the hub's bets per second against what
 * Postgres alone reaches on this machine at that moment. Each pgbench
 * transaction is one bet's money in one round trip: hub_hidden.settle_bet
 * (balance and bankroll locks, the cover check, both ledger rows through the
 * triggers), autocommitted, 50 clients. The function is a copy of
 * hub_hidden.settle_bet as core migration 0017 made it, the least a bet
 * writes on one row (the hub's own entry points now also read what bankroll
 * slots hold), so the ceilings stay comparable from run to run:
 *
 *   shared  every bet updates the one house bankroll row of its currency
 *   own     each client's bets touch only its own rows (its own currency)
 *   grouped the shared row again, each commit carrying the bets of GROUP
 *           players (one statement, players / GROUP clients): what
 *           grouping bets of one currency into one commit can reach
 *
 * pgbench is the PostgreSQL client tool (Debian: postgresql-client); without
 * it the bench says so and skips this part.
 */
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type pg from "pg";
import type { ScenarioResult } from "./report.js";

export interface Ceiling {
  id: "shared" | "own" | "grouped";
  title: string;
  /** Bets per second (pgbench transactions × bets per transaction). */
  betsPerSecond: number;
  clients: number;
}

export type CeilingsResult = { ceilings: (Ceiling & { runs: number[] })[]; skipped?: string };

export interface CeilingPlayer {
  userId: string;
  casinoId: string;
  experienceId: string;
  ownCurrency: string;
}

/** Bets per commit in the grouped ceiling. */
export const GROUP = 10;

/** The pgbench on PATH, or null (with why) when there is none. */
export function findPgbench(): { bin: string | null; why?: string } {
  const found = spawnSync("pgbench", ["--version"], { encoding: "utf8" });
  if (found.error || found.status !== 0) return { bin: null, why: "pgbench is not installed (it comes with the PostgreSQL client tools, e.g. Debian's postgresql-client)" };
  return { bin: "pgbench" };
}

const SETTLE = (currency: string) =>
  `bench_ceiling.settle_bet(p.user_id, p.casino_id, p.experience_id, ${currency}, hub_hidden.uuid_generate_v7(), 2, (:payout)::float8, 4, 0.04, 'bench pgbench', 'pgbench ceiling')`;

/** One bet on the bankroll row, as core migration 0017 wrote hub_hidden.settle_bet. */
const SETTLE_0017 = `create function bench_ceiling.settle_bet(
  p_user_id uuid, p_casino_id uuid, p_experience_id uuid, p_currency_key text,
  p_bet_id uuid, p_wager float8, p_payout float8, p_max_payout float8, p_expected_value float8,
  p_actor text, p_reason text
) returns table (status text, balance float8)
language plpgsql as $fn$
declare
  v_balance_id uuid;
  v_amount float8;
  v_bankroll float8;
  v_previous text[];
begin
  if p_bet_id is null or not hub_hidden.is_whole_amount(p_wager, 0) or not hub_hidden.is_whole_amount(p_payout, 0)
     or not hub_hidden.is_whole_amount(p_max_payout, p_payout) or not (p_expected_value > '-Infinity' and p_expected_value < 'Infinity') then
    raise exception 'settle_bet: wager %, payout % and max_payout % must be whole base units from 0 to 9007199254740991 with max_payout >= payout, the expected value % finite, and a bet id given.',
      hub_hidden.ledger_amount_text(p_wager), hub_hidden.ledger_amount_text(p_payout), hub_hidden.ledger_amount_text(p_max_payout), p_expected_value
      using errcode = 'P0001', constraint = 'ledger_amount_whole';
  end if;
  select b.id, b.amount into v_balance_id, v_amount from hub.balance b
   where b.user_id = p_user_id and b.experience_id = p_experience_id and b.currency_key = p_currency_key and b.casino_id = p_casino_id
   for update;
  if not found then
    if not exists (select 1 from hub.currency c where c.key = p_currency_key and c.casino_id = p_casino_id) then
      return query select 'unknown-currency'::text, null::float8; return;
    end if;
    return query select 'no-balance'::text, null::float8; return;
  end if;
  if v_amount < p_wager then return query select 'insufficient-funds'::text, v_amount; return; end if;
  -- Differences of two amounts are exact; a sum past 2^53 may round, but only
  -- to a number that is still past 2^53 − 1, so the comparisons stay right.
  if v_amount + (p_max_payout - p_wager) > 9007199254740991 then return query select 'balance-overflow'::text, v_amount; return; end if;

  v_previous := hub_hidden.ledger_begin('settle_bet', p_actor, p_reason, p_bet_id);
  update hub.bankroll r
     set amount = r.amount - (p_payout - p_wager), bets = r.bets + (p_wager > 0)::int,
         -- A statistic: it stops at 2^53 − 1 rather than refuse bets.
         wagered = least(r.wagered + p_wager, 9007199254740991), expected_value = r.expected_value + p_expected_value
   where r.casino_id = p_casino_id and r.currency_key = p_currency_key
     and r.amount >= p_max_payout - p_wager
     and (p_payout >= p_wager or r.amount <= 9007199254740991 + (p_payout - p_wager));
  if not found then
    perform hub_hidden.ledger_end(v_previous);
    select r.amount into v_bankroll from hub.bankroll r where r.casino_id = p_casino_id and r.currency_key = p_currency_key;
    if not found then return query select 'no-bankroll'::text, v_amount; return; end if;
    if v_bankroll < p_max_payout - p_wager then return query select 'no-cover'::text, v_amount; return; end if;
    return query select 'bankroll-overflow'::text, v_amount; return;
  end if;
  update hub.balance b set amount = b.amount + (p_payout - p_wager) where b.id = v_balance_id returning b.amount into v_amount;
  perform hub_hidden.ledger_end(v_previous);
  return query select 'settled'::text, v_amount;
end
$fn$;`;

/** pgbench scripts: one bet (or GROUP bets) per transaction, one round trip. */
function scripts(sharedCurrency: string): Record<Ceiling["id"], string> {
  const lit = `'${sharedCurrency.replace(/'/g, "''")}'`;
  return {
    shared: `\\set payout random(0, 1) * 4\nselect s.status from bench_ceiling.player p, ${SETTLE(lit)} s where p.n = (:client_id)::int;\n`,
    own: `\\set payout random(0, 1) * 4\nselect s.status from bench_ceiling.player p, ${SETTLE("p.own_currency")} s where p.n = (:client_id)::int;\n`,
    // One commit for the bets of GROUP players, in the players' order.
    grouped: `\\set payout random(0, 1) * 4\nselect count(s.status) from bench_ceiling.player p, ${SETTLE(lit)} s where p.n / ${GROUP} = (:client_id)::int;\n`,
  };
}

/** Seed the lookup table pgbench's scripts read the players from. */
async function prepare(pool: pg.Pool, players: CeilingPlayer[]): Promise<void> {
  await pool.query("drop schema if exists bench_ceiling cascade");
  await pool.query("create schema bench_ceiling");
  await pool.query("create table bench_ceiling.player (n int primary key, user_id uuid, casino_id uuid, experience_id uuid, own_currency text)");
  await pool.query(SETTLE_0017);
  for (const [n, p] of players.entries()) {
    await pool.query("insert into bench_ceiling.player values ($1, $2, $3, $4, $5)", [n, p.userId, p.casinoId, p.experienceId, p.ownCurrency]);
  }
}

function tps(output: string): number {
  const m = /tps = ([\d.]+) \(without initial connection time\)/.exec(output) ?? /tps = ([\d.]+)/.exec(output);
  if (!m) throw new Error(`pgbench printed no tps:\n${output.slice(-800)}`);
  return Number(m[1]);
}

function runPgbench(bin: string, url: string, script: string, clients: number, durationS: number): number {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hub-pgbench-"));
  const file = path.join(dir, "bet.sql");
  fs.writeFileSync(file, script);
  try {
    const out = execFileSync(bin, ["-n", "-M", "prepared", "-c", String(clients), "-j", String(Math.min(clients, Math.max(1, os.cpus().length))), "-T", String(durationS), "-f", file, url], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    return tps(out);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Measure the ceilings with `players.length` clients (shared, own) and
 * players.length / GROUP clients of GROUP bets (grouped). `rounds` runs of
 * each, interleaved; the median is reported with every run's figure.
 */
export async function measureCeilings(
  pool: pg.Pool,
  url: string,
  players: CeilingPlayer[],
  sharedCurrency: string,
  opts: { durationS: number; rounds: number },
): Promise<CeilingsResult> {
  const { bin, why } = findPgbench();
  if (!bin) return { ceilings: [], skipped: why };
  await prepare(pool, players);
  const s = scripts(sharedCurrency);
  const defs: { id: Ceiling["id"]; title: string; clients: number; perTx: number }[] = [
    { id: "shared", title: `pgbench: ${players.length} clients, every bet updates one shared bankroll row`, clients: players.length, perTx: 1 },
    { id: "own", title: `pgbench: ${players.length} clients, each bet touches only its client's own rows`, clients: players.length, perTx: 1 },
    { id: "grouped", title: `pgbench: ${players.length} players on one shared row, ${GROUP} bets per commit (${Math.floor(players.length / GROUP)} clients)`, clients: Math.floor(players.length / GROUP), perTx: GROUP },
  ];
  const runs = new Map<Ceiling["id"], number[]>();
  try {
    for (let r = 0; r < opts.rounds; r++) {
      for (const d of defs) runs.set(d.id, [...(runs.get(d.id) ?? []), runPgbench(bin, url, s[d.id], d.clients, opts.durationS) * d.perTx]);
    }
  } catch (error) {
    const e = error as { stderr?: string; message: string };
    return { ceilings: [], skipped: `pgbench failed: ${(e.stderr ?? e.message).split("\n").find((l) => /error/i.test(l)) ?? e.message}` };
  } finally {
    await pool.query("drop schema if exists bench_ceiling cascade");
  }
  return {
    ceilings: defs.map((d) => {
      const xs = [...runs.get(d.id)!].sort((a, b) => a - b);
      return { id: d.id, title: d.title, clients: d.clients, betsPerSecond: xs[Math.floor(xs.length / 2)]!, runs: runs.get(d.id)! };
    }),
  };
}

const hubMedian = (r: ScenarioResult | undefined) => {
  const xs = (r?.rounds ?? []).map((x) => x.hub?.rps).filter((x): x is number => x !== undefined).sort((a, b) => a - b);
  return xs.length ? xs[Math.floor(xs.length / 2)]! : undefined;
};

/** The ceilings, and the hub's outcome bet rates against them and against each other. */
export function ceilingsMarkdown(result: CeilingsResult, scenarios: ScenarioResult[]): string {
  if (result.skipped) return `## The database's own ceilings\n\nSkipped: ${result.skipped}.\n`;
  const lines = ["## The database's own ceilings (pgbench, hub_hidden.settle_bet in one round trip per bet, ledger triggers firing)", "", "| ceiling | bets/s (median) | runs |", "|---|---|---|"];
  for (const c of result.ceilings) lines.push(`| ${c.title} | ${c.betsPerSecond.toFixed(0)} | ${c.runs.map((x) => x.toFixed(0)).join(", ")} |`);
  const shared = result.ceilings.find((c) => c.id === "shared")?.betsPerSecond;
  const own = result.ceilings.find((c) => c.id === "own")?.betsPerSecond;
  const one = hubMedian(scenarios.find((s) => s.scenario.id === "outcomeBet50"));
  const each = hubMedian(scenarios.find((s) => s.scenario.id === "outcomeBet50x50"));
  const ratio = (a: number | undefined, b: number | undefined) => (a !== undefined && b ? `${(a / b).toFixed(2)}×` : "n/a");
  lines.push("", "| the hub (median of its rounds) | bets/s | ÷ shared-row ceiling | ÷ own-rows ceiling |", "|---|---|---|---|");
  if (one !== undefined) lines.push(`| outcomeBet50: 50 players, one currency | ${one.toFixed(0)} | ${ratio(one, shared)} (target ≥ 1.5×) | ${ratio(one, own)} |`);
  if (each !== undefined) lines.push(`| outcomeBet50x50: 50 players, each in their own currency | ${each.toFixed(0)} | ${ratio(each, shared)} | ${ratio(each, own)} |`);
  const flipOne = hubMedian(scenarios.find((s) => s.scenario.id === "makeCoinflipBet50"));
  const flipEach = hubMedian(scenarios.find((s) => s.scenario.id === "makeCoinflipBet50x50"));
  if (flipOne !== undefined) lines.push(`| makeCoinflipBet50 (dbSettleBet): 50 players, one currency | ${flipOne.toFixed(0)} | ${ratio(flipOne, shared)} | ${ratio(flipOne, own)} |`);
  if (flipEach !== undefined) lines.push(`| makeCoinflipBet50x50 (dbSettleBet): 50 players, each in their own currency | ${flipEach.toFixed(0)} | ${ratio(flipEach, shared)} | ${ratio(flipEach, own)} |`);
  if (one !== undefined && each !== undefined) lines.push("", `hubMakeOutcomeBet, one currency ÷ one currency each: ${ratio(one, each)} (target ≥ 0.9×).`);
  if (flipOne !== undefined && flipEach !== undefined) lines.push("", `makeCoinflipBet, one currency ÷ one currency each: ${ratio(flipOne, flipEach)} (target ≥ 0.9×).`);
  return `${lines.join("\n")}\n`;
}
