-- Money is exact in the database itself: every amount column holds finite whole
-- base units within ±(2^53 − 1), by constraint, whoever writes it (a plugin,
-- psql as superuser, the CLI). Every bet settles through one function,
-- hub_hidden.settle_bet, and a bet whose net is 0 is ledgered like any other.

-- Whether x is a whole number of base units from lo to 2^53 − 1. Comparisons
-- put NaN above every number, so the upper bound refuses NaN and Infinity,
-- and trunc refuses fractions (`amount >= 0` alone accepted NaN).
create function hub_hidden.is_whole_amount(x float8, lo float8) returns boolean
language sql immutable as $fn$ select x >= lo and x <= 9007199254740991 and x = trunc(x) $fn$;

-- Each amount column, its least value and its constraint, in one list: the
-- stored rows are checked against it, then the constraints are added from it.
-- A row that breaks the rule stops the migration, named: converting it
-- silently would change somebody's money.
create temporary table amount_rule (tbl text, col text, lo bigint, name text) on commit drop;
insert into amount_rule values
  ('hub.balance', 'amount', 0, 'balance_amount_whole'),
  ('hub.bankroll', 'amount', 0, 'bankroll_amount_whole'),
  ('hub.bankroll', 'wagered', 0, 'bankroll_wagered_whole'),
  ('hub.ledger', 'amount_delta', -9007199254740991, 'ledger_amount_delta_whole'),
  ('hub.ledger', 'balance_after', 0, 'ledger_balance_after_whole'),
  ('hub.withdrawal', 'amount', 1, 'withdrawal_amount_whole'),
  ('hub.outcome_bet', 'wager', 1, 'outcome_bet_wager_whole'),
  ('hub.outcome_bet', 'net', -9007199254740991, 'outcome_bet_net_whole');

do $mig$
declare
  rule record;
  found text;
  bad text := '';
begin
  for rule in select * from amount_rule loop
    execute format(
      'select string_agg(format(%L, id, hub_hidden.ledger_amount_text(%I)), E''\n'') from (select id, %I from %s where not hub_hidden.is_whole_amount(%I, %s) limit 20) x',
      rule.tbl || ' %s: ' || rule.col || ' = %s', rule.col, rule.col, rule.tbl, rule.col, rule.lo) into found;
    if found is not null then bad := bad || found || E'\n'; end if;
  end loop;
  select bad || coalesce(string_agg(format('hub.outcome_bet %s: profit = %s', id, profit), E'\n'), '') into bad
    from (select id, profit from hub.outcome_bet where not (profit >= -1 and profit < 'Infinity') limit 20) x;
  if bad <> '' then
    raise exception E'0017-exact-money: these stored amounts are not whole base units within ±9007199254740991 (or a profit is not finite), so the constraints that enforce it cannot be added:\n%', bad
      using errcode = 'P0001',
            hint = 'Correct each row (a whole number of base units; for hub.balance and hub.bankroll through hub_hidden.credit_balance / debit_balance / adjust_bankroll so the ledger records it), then start the hub again.';
  end if;
  for rule in select * from amount_rule loop
    execute format('alter table %s add constraint %I check (hub_hidden.is_whole_amount(%I, %s))', rule.tbl, rule.name, rule.col, rule.lo);
  end loop;
end
$mig$;

-- A statistic, not money: a non-finite expected value (0 × Infinity in an
-- earlier version's sum) carries no information, so it restarts from 0.
update hub.bankroll set expected_value = 0 where not (expected_value > '-Infinity' and expected_value < 'Infinity');

-- The new constraints replace these.
alter table hub.balance drop constraint balance_amount_check;
alter table hub.bankroll drop constraint bankroll_amount_check;
alter table hub.ledger drop constraint ledger_amount_delta_check;
alter table hub.bankroll
  add constraint bankroll_bets_counted check (bets >= 0),
  add constraint bankroll_expected_value_finite check (expected_value > '-Infinity' and expected_value < 'Infinity');
-- A bet's row may move nothing (net 0): it is still the record of the bet.
alter table hub.ledger add constraint ledger_amount_delta_moves check (amount_delta <> 0 or bet_id is not null);
alter table hub.outcome_bet add constraint outcome_bet_profit_finite check (profit >= -1 and profit < 'Infinity');

-- Zero-delta rows are written for bets (hub.ledger_bet_id set), so a bet
-- whose net is 0 reaches the ledger, its alerts and the dashboard's counts.
create or replace function hub_hidden.ledger_write(
  p_user_id uuid, p_casino_id uuid, p_experience_id uuid, p_currency_key text, p_account text,
  p_delta float8, p_after float8, p_what text
) returns void language plpgsql as $fn$
declare
  bet_id uuid := hub_hidden.ledger_setting('hub.ledger_bet_id')::uuid;
begin
  if p_delta = 0 and bet_id is null then return; end if;
  insert into hub.ledger (user_id, casino_id, experience_id, currency_key, account, amount_delta, balance_after, actor, reason, bet_id)
  values (p_user_id, p_casino_id, p_experience_id, p_currency_key, p_account, p_delta, p_after,
          coalesce(hub_hidden.ledger_setting('hub.ledger_actor'), 'sql:' || session_user),
          coalesce(hub_hidden.ledger_setting('hub.ledger_reason'), p_what || ' without a reason'),
          bet_id);
end
$fn$;

/*
 * One bet's money, in one call: the player's balance pays `wager` into the
 * house bankroll and receives `payout` from it (net = payout − wager).
 * Locks in the hub's one order: the player's balance, then the bankroll (the
 * bankroll's lock is taken by its guarded update, so it is held for the least
 * time). The bankroll must cover the bet's largest possible payout:
 * amount + wager − max_payout ≥ 0. A refusal writes nothing and says why in
 * `status`: settled, unknown-currency, no-balance, insufficient-funds,
 * balance-overflow, no-bankroll, no-cover, bankroll-overflow (the house's
 * winnings would take the bankroll past 2^53 − 1). Both updates are ledgered with
 * the bet's id, actor and reason (rows of 0 included).
 */
create function hub_hidden.settle_bet(
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
$fn$;

/*
 * hubMakeOutcomeBet's write, in one statement: the chain's next hash must
 * still be `p_iteration` (the caller drew the outcome from it without a lock;
 * 'chain-moved' otherwise, nothing written), then the bet settles, then the
 * hash is revealed and the bet stored (with p_bet_id, or a new id when null).
 * Lock order: chain, balance, bankroll.
 */
create function hub_hidden.settle_outcome_bet(
  p_user_id uuid, p_casino_id uuid, p_experience_id uuid, p_currency_key text,
  p_bet_id uuid, p_wager float8, p_payout float8, p_max_payout float8, p_expected_value float8,
  p_actor text, p_reason text,
  p_hash_chain_id uuid, p_iteration integer, p_digest bytea, p_client_seed text,
  p_kind text, p_profit float8, p_outcome_idx integer, p_weights float8[], p_profits float8[], p_metadata jsonb
) returns table (status text, balance float8, bet_id uuid)
language plpgsql as $fn$
declare
  v_settled record;
  v_hash_id uuid;
  v_bet_id uuid := coalesce(p_bet_id, hub_hidden.uuid_generate_v7());
begin
  perform 1 from hub.hash_chain c
   where c.id = p_hash_chain_id and c.user_id = p_user_id and c.casino_id = p_casino_id and c.experience_id = p_experience_id
     and c.active and c.current_iteration = p_iteration + 1
   for update;
  if not found then return query select 'chain-moved'::text, null::float8, null::uuid; return; end if;
  select * into v_settled from hub_hidden.settle_bet(p_user_id, p_casino_id, p_experience_id, p_currency_key,
    v_bet_id, p_wager, p_payout, p_max_payout, p_expected_value, p_actor, p_reason);
  if v_settled.status <> 'settled' then return query select v_settled.status, v_settled.balance, null::uuid; return; end if;
  update hub.hash_chain set current_iteration = p_iteration where id = p_hash_chain_id;
  insert into hub.hash (hash_chain_id, kind, digest, iteration, client_seed)
  values (p_hash_chain_id, 'INTERMEDIATE', p_digest, p_iteration, p_client_seed) returning id into v_hash_id;
  insert into hub.outcome_bet (id, kind, wager, profit, net, outcomes, outcome_idx, currency_key, hash_id, user_id, casino_id, experience_id, metadata)
  values (v_bet_id, p_kind, p_wager, p_profit, p_payout - p_wager,
          coalesce((select array_agg(row(u.weight, u.profit)::hub.outcome order by u.n)
                      from unnest(p_weights, p_profits) with ordinality as u(weight, profit, n)), '{}'),
          p_outcome_idx, p_currency_key, v_hash_id, p_user_id, p_casino_id, p_experience_id, coalesce(p_metadata, '{}'));
  return query select 'settled'::text, v_settled.balance, v_bet_id;
end
$fn$;

-- is_whole_amount stays executable: the constraints call it as whoever writes the row.
revoke execute on function
  hub_hidden.settle_bet(uuid, uuid, uuid, text, uuid, float8, float8, float8, float8, text, text),
  hub_hidden.settle_outcome_bet(uuid, uuid, uuid, text, uuid, float8, float8, float8, float8, text, text, uuid, integer, bytea, text, text, float8, integer, float8[], float8[], jsonb)
  from public;
