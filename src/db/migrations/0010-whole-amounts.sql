
-- An amount as people write it: float8's text form switches to exponents
-- from 1e15 (9.00719925474e+15), so whole amounts are printed digit by digit.
create function hub_hidden.ledger_amount_text(amount float8) returns text
language sql immutable as $fn$
  select case when amount is null then 'null'
              when amount = trunc(amount) and abs(amount) < 9e18 then amount::bigint::text
              else amount::text end
$fn$;

create or replace function hub_hidden.ledger_check_amount(fn text, amount float8) returns void
language plpgsql immutable as $fn$
begin
  if amount is null or amount = 'NaN' or amount < 1 or amount > 9007199254740991 or amount <> trunc(amount) then
    raise exception '%: amount must be a whole number of base units from 1 to 9007199254740991; received %.', fn, hub_hidden.ledger_amount_text(amount)
      using errcode = 'P0001', constraint = 'ledger_amount_whole',
            hint = 'Amounts are whole base units of the currency; display_unit_scale says how many make one display unit.';
  end if;
end
$fn$;

-- A credit that would take an account past 2^53 - 1 would no longer be exact.
create function hub_hidden.ledger_check_total(fn text, what text, amount float8, delta float8) returns void
language plpgsql immutable as $fn$
begin
  if amount + delta > 9007199254740991 then
    raise exception '%: % would exceed 9007199254740991 base units (it is %, the credit %).', fn, what, hub_hidden.ledger_amount_text(amount), hub_hidden.ledger_amount_text(delta)
      using errcode = 'P0001', constraint = 'ledger_amount_whole';
  end if;
end
$fn$;

create or replace function hub_hidden.credit_balance(
  user_id uuid, casino_id uuid, experience_id uuid, currency_key text, amount float8, actor text, reason text, bet_id uuid default null
) returns hub.balance language plpgsql as $fn$
declare
  previous text[];
  existing hub.balance;
  result hub.balance;
begin
  perform hub_hidden.ledger_check_amount('credit_balance', credit_balance.amount);
  perform hub_hidden.ledger_check_player('credit_balance', credit_balance.user_id, credit_balance.casino_id, credit_balance.experience_id, credit_balance.currency_key);
  select * into existing from hub.balance b
   where b.user_id = credit_balance.user_id and b.experience_id = credit_balance.experience_id and b.currency_key = credit_balance.currency_key
   for update;
  if found then
    perform hub_hidden.ledger_check_total('credit_balance', 'the balance', existing.amount, credit_balance.amount);
  end if;
  previous := hub_hidden.ledger_begin('credit_balance', credit_balance.actor, credit_balance.reason, credit_balance.bet_id);
  insert into hub.balance as b (user_id, casino_id, experience_id, currency_key, amount)
  values (credit_balance.user_id, credit_balance.casino_id, credit_balance.experience_id, credit_balance.currency_key, credit_balance.amount)
  on conflict on constraint balance_user_id_experience_id_currency_key_key do update set amount = b.amount + excluded.amount
  returning b.* into result;
  perform hub_hidden.ledger_end(previous);
  return result;
end
$fn$;

create or replace function hub_hidden.debit_balance(
  user_id uuid, casino_id uuid, experience_id uuid, currency_key text, amount float8, actor text, reason text, bet_id uuid default null
) returns hub.balance language plpgsql as $fn$
declare
  previous text[];
  existing hub.balance;
  result hub.balance;
begin
  perform hub_hidden.ledger_check_amount('debit_balance', debit_balance.amount);
  perform hub_hidden.ledger_check_player('debit_balance', debit_balance.user_id, debit_balance.casino_id, debit_balance.experience_id, debit_balance.currency_key);
  select * into existing from hub.balance b
   where b.user_id = debit_balance.user_id and b.experience_id = debit_balance.experience_id and b.currency_key = debit_balance.currency_key
   for update;
  if not found or existing.amount < debit_balance.amount then
    raise exception 'debit_balance: insufficient funds: the balance is % %, the debit %.', hub_hidden.ledger_amount_text(coalesce(existing.amount, 0)), debit_balance.currency_key, hub_hidden.ledger_amount_text(debit_balance.amount)
      using errcode = 'P0001', constraint = 'ledger_sufficient_funds';
  end if;
  previous := hub_hidden.ledger_begin('debit_balance', debit_balance.actor, debit_balance.reason, debit_balance.bet_id);
  update hub.balance b set amount = b.amount - debit_balance.amount where b.id = existing.id returning b.* into result;
  perform hub_hidden.ledger_end(previous);
  return result;
end
$fn$;

create or replace function hub_hidden.adjust_bankroll(
  casino_id uuid, currency_key text, amount_delta float8, actor text, reason text, bet_id uuid default null
) returns hub.bankroll language plpgsql as $fn$
declare
  previous text[];
  existing hub.bankroll;
  result hub.bankroll;
begin
  if amount_delta is null or amount_delta = 'NaN' or abs(amount_delta) < 1 or abs(amount_delta) > 9007199254740991 or amount_delta <> trunc(amount_delta) then
    raise exception 'adjust_bankroll: amount_delta must be a whole number of base units from 1 to 9007199254740991, or from -9007199254740991 to -1; received %.', hub_hidden.ledger_amount_text(amount_delta)
      using errcode = 'P0001', constraint = 'ledger_amount_whole',
            hint = 'Amounts are whole base units of the currency; display_unit_scale says how many make one display unit.';
  end if;
  perform hub_hidden.ledger_check_currency('adjust_bankroll', adjust_bankroll.casino_id, adjust_bankroll.currency_key);
  select * into existing from hub.bankroll b
   where b.casino_id = adjust_bankroll.casino_id and b.currency_key = adjust_bankroll.currency_key
   for update;
  if amount_delta > 0 then
    if found then
      perform hub_hidden.ledger_check_total('adjust_bankroll', 'the house bankroll', existing.amount, amount_delta);
    end if;
    previous := hub_hidden.ledger_begin('adjust_bankroll', adjust_bankroll.actor, adjust_bankroll.reason, adjust_bankroll.bet_id);
    insert into hub.bankroll as b (casino_id, currency_key, amount)
    values (adjust_bankroll.casino_id, adjust_bankroll.currency_key, amount_delta)
    on conflict on constraint bankroll_casino_id_currency_key_key do update set amount = b.amount + excluded.amount
    returning b.* into result;
  else
    if not found or existing.amount < -amount_delta then
      raise exception 'adjust_bankroll: insufficient funds: the house bankroll is % %, the debit %.', hub_hidden.ledger_amount_text(coalesce(existing.amount, 0)), adjust_bankroll.currency_key, hub_hidden.ledger_amount_text(-amount_delta)
        using errcode = 'P0001', constraint = 'ledger_sufficient_funds';
    end if;
    previous := hub_hidden.ledger_begin('adjust_bankroll', adjust_bankroll.actor, adjust_bankroll.reason, adjust_bankroll.bet_id);
    update hub.bankroll b set amount = b.amount + amount_delta where b.id = existing.id returning b.* into result;
  end if;
  perform hub_hidden.ledger_end(previous);
  return result;
end
$fn$;

-- The opening amount of a new bankroll: 0 is allowed (an empty bankroll).
create or replace function hub_hidden.ensure_bankroll(
  casino_id uuid, currency_key text, amount float8, reason text, actor text default 'hub'
) returns hub.bankroll language plpgsql as $fn$
declare
  previous text[];
  result hub.bankroll;
begin
  if amount is null or amount = 'NaN' or amount < 0 or amount > 9007199254740991 or amount <> trunc(amount) then
    raise exception 'ensure_bankroll: amount must be a whole number of base units from 0 to 9007199254740991; received %.', hub_hidden.ledger_amount_text(amount)
      using errcode = 'P0001', constraint = 'ledger_amount_whole',
            hint = 'Amounts are whole base units of the currency; display_unit_scale says how many make one display unit.';
  end if;
  perform hub_hidden.ledger_check_currency('ensure_bankroll', ensure_bankroll.casino_id, ensure_bankroll.currency_key);
  previous := hub_hidden.ledger_begin('ensure_bankroll', ensure_bankroll.actor, ensure_bankroll.reason, null);
  insert into hub.bankroll as b (casino_id, currency_key, amount)
  values (ensure_bankroll.casino_id, ensure_bankroll.currency_key, ensure_bankroll.amount)
  on conflict on constraint bankroll_casino_id_currency_key_key do nothing
  returning b.* into result;
  perform hub_hidden.ledger_end(previous);
  if result.id is null then
    select * into result from hub.bankroll b where b.casino_id = ensure_bankroll.casino_id and b.currency_key = ensure_bankroll.currency_key;
  end if;
  return result;
end
$fn$;

revoke execute on function
  hub_hidden.ledger_amount_text(float8),
  hub_hidden.ledger_check_amount(text, float8),
  hub_hidden.ledger_check_total(text, text, float8, float8)
  from public;
