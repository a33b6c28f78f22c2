
create table hub.ledger (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  created_at timestamptz not null default now(),
  user_id uuid references hub.user(id),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid references hub.experience(id),
  currency_key text not null,
  account text not null check (account in ('player', 'house')),
  amount_delta float8 not null check (amount_delta <> 0 and amount_delta <> 'NaN'),
  balance_after float8 not null check (balance_after >= 0 and balance_after <> 'NaN'),
  actor text not null check (length(actor) between 1 and 200),
  reason text not null check (length(reason) <= 1000),
  bet_id uuid,
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id),
  constraint ledger_account_owner check (
    case account when 'player' then user_id is not null and experience_id is not null
                 else user_id is null and experience_id is null end)
);
create index on hub.ledger (user_id, experience_id, currency_key);
create index on hub.ledger (casino_id, currency_key);
create index on hub.ledger (experience_id);
create index on hub.ledger (bet_id) where bet_id is not null;
comment on table hub.ledger is E'Every change of a player balance (account player) or a house bankroll (account house): who, why, by how much and the amount after. Append-only.';

-- Opening entries, so the ledger sums to the amounts that existed before it.
insert into hub.ledger (user_id, casino_id, experience_id, currency_key, account, amount_delta, balance_after, actor, reason)
  select user_id, casino_id, experience_id, currency_key, 'player', amount, amount, 'migration:0006-ledger', 'opening balance'
    from hub.balance where amount > 0;
insert into hub.ledger (casino_id, currency_key, account, amount_delta, balance_after, actor, reason)
  select casino_id, currency_key, 'house', amount, amount, 'migration:0006-ledger', 'opening bankroll'
    from hub.bankroll where amount > 0;

grant select on hub.ledger to app_postgraphile;
revoke insert, update, delete, truncate on hub.ledger from public;
alter table hub.ledger enable row level security;
create policy select_ledger on hub.ledger for select
  using (hub_hidden.is_operator() or (
    account = 'player'
    and user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));

-- Append-only, even for the table's owner: rows are inserted only by the
-- triggers below (trigger depth 2: this guard fires inside them) and never
-- changed or removed.
create function hub_hidden.ledger_guard() returns trigger language plpgsql as $fn$
begin
  if tg_op = 'INSERT' then
    if pg_trigger_depth() >= 2 then return new; end if;
    raise exception 'hub.ledger is written only by changes of hub.balance and hub.bankroll; change those (hub_hidden.credit_balance & co.) instead of inserting.'
      using errcode = 'P0001', constraint = 'ledger_append_only';
  end if;
  raise exception 'hub.ledger is append-only: % is refused. Record a correction as a new balance change.', tg_op
    using errcode = 'P0001', constraint = 'ledger_append_only';
end
$fn$;
create trigger ledger_guard_insert before insert on hub.ledger for each row execute function hub_hidden.ledger_guard();
create trigger ledger_guard_change before update or delete on hub.ledger for each row execute function hub_hidden.ledger_guard();
create trigger ledger_guard_truncate before truncate on hub.ledger for each statement execute function hub_hidden.ledger_guard();

create function hub_hidden.ledger_setting(name text) returns text
language sql stable as $fn$ select nullif(current_setting(name, true), '') $fn$;

create function hub_hidden.ledger_write(
  p_user_id uuid, p_casino_id uuid, p_experience_id uuid, p_currency_key text, p_account text,
  p_delta float8, p_after float8, p_what text
) returns void language plpgsql as $fn$
begin
  if p_delta = 0 then return; end if;
  insert into hub.ledger (user_id, casino_id, experience_id, currency_key, account, amount_delta, balance_after, actor, reason, bet_id)
  values (p_user_id, p_casino_id, p_experience_id, p_currency_key, p_account, p_delta, p_after,
          coalesce(hub_hidden.ledger_setting('hub.ledger_actor'), 'sql:' || session_user),
          coalesce(hub_hidden.ledger_setting('hub.ledger_reason'), p_what || ' without a reason'),
          hub_hidden.ledger_setting('hub.ledger_bet_id')::uuid);
end
$fn$;

create function hub_hidden.ledger_record_balance() returns trigger language plpgsql as $fn$
begin
  if tg_op = 'DELETE' then
    perform hub_hidden.ledger_write(old.user_id, old.casino_id, old.experience_id, old.currency_key, 'player', -old.amount, 0, 'delete of hub.balance');
    return old;
  end if;
  perform hub_hidden.ledger_write(new.user_id, new.casino_id, new.experience_id, new.currency_key, 'player',
    new.amount - case when tg_op = 'UPDATE' then old.amount else 0 end, new.amount, lower(tg_op) || ' of hub.balance');
  return new;
end
$fn$;
create function hub_hidden.ledger_record_bankroll() returns trigger language plpgsql as $fn$
begin
  if tg_op = 'DELETE' then
    perform hub_hidden.ledger_write(null, old.casino_id, null, old.currency_key, 'house', -old.amount, 0, 'delete of hub.bankroll');
    return old;
  end if;
  perform hub_hidden.ledger_write(null, new.casino_id, null, new.currency_key, 'house',
    new.amount - case when tg_op = 'UPDATE' then old.amount else 0 end, new.amount, lower(tg_op) || ' of hub.bankroll');
  return new;
end
$fn$;
create trigger ledger_record after insert or update of amount or delete on hub.balance
  for each row execute function hub_hidden.ledger_record_balance();
create trigger ledger_record after insert or update of amount or delete on hub.bankroll
  for each row execute function hub_hidden.ledger_record_bankroll();

-- Who and why for the changes made until ledger_end; returns the previous
-- settings so nested calls restore them.
create function hub_hidden.ledger_begin(fn text, actor text, reason text, bet_id uuid) returns text[]
language plpgsql as $fn$
declare
  previous text[] := array[current_setting('hub.ledger_actor', true), current_setting('hub.ledger_reason', true), current_setting('hub.ledger_bet_id', true)];
begin
  if actor is null or length(actor) not between 1 and 200 then
    raise exception '%: actor (who makes the change) must be 1 to 200 characters; received %.', fn, coalesce(length(actor)::text || ' characters', 'null')
      using errcode = 'P0001', constraint = 'ledger_actor';
  end if;
  if reason is null or length(reason) > 1000 then
    raise exception '%: reason must be a text of at most 1000 characters; received %.', fn, coalesce(length(reason)::text || ' characters', 'null')
      using errcode = 'P0001', constraint = 'ledger_reason';
  end if;
  perform set_config('hub.ledger_actor', actor, true);
  perform set_config('hub.ledger_reason', reason, true);
  perform set_config('hub.ledger_bet_id', coalesce(bet_id::text, ''), true);
  return previous;
end
$fn$;
create function hub_hidden.ledger_end(previous text[]) returns void language sql as $fn$
  select set_config('hub.ledger_actor', coalesce(previous[1], ''), true),
         set_config('hub.ledger_reason', coalesce(previous[2], ''), true),
         set_config('hub.ledger_bet_id', coalesce(previous[3], ''), true)
$fn$;

create function hub_hidden.ledger_check_amount(fn text, amount float8) returns void
language plpgsql immutable as $fn$
begin
  if amount is null or amount <= 0 or amount = 'Infinity' or amount = 'NaN' then
    raise exception '%: amount must be a finite number greater than 0; received %.', fn, coalesce(amount::text, 'null')
      using errcode = 'P0001', constraint = 'ledger_amount_positive';
  end if;
end
$fn$;

create function hub_hidden.ledger_check_currency(fn text, casino_id uuid, currency_key text) returns void
language plpgsql stable as $fn$
begin
  if not exists (select 1 from hub.currency c where c.casino_id = ledger_check_currency.casino_id and c.key = ledger_check_currency.currency_key) then
    raise exception '%: casino % has no currency %.', fn, casino_id, coalesce(quote_literal(currency_key), 'null')
      using errcode = 'P0001', constraint = 'ledger_known_account';
  end if;
end
$fn$;

create function hub_hidden.ledger_check_player(fn text, user_id uuid, casino_id uuid, experience_id uuid, currency_key text) returns void
language plpgsql stable as $fn$
begin
  if not exists (select 1 from hub.user u where u.id = ledger_check_player.user_id and u.casino_id = ledger_check_player.casino_id) then
    raise exception '%: no user % in casino %.', fn, coalesce(user_id::text, 'null'), coalesce(casino_id::text, 'null')
      using errcode = 'P0001', constraint = 'ledger_known_account';
  end if;
  if not exists (select 1 from hub.experience e where e.id = ledger_check_player.experience_id and e.casino_id = ledger_check_player.casino_id) then
    raise exception '%: no experience % in casino %.', fn, coalesce(experience_id::text, 'null'), casino_id
      using errcode = 'P0001', constraint = 'ledger_known_account';
  end if;
  perform hub_hidden.ledger_check_currency(fn, casino_id, currency_key);
end
$fn$;

-- Add amount (> 0) to a player's balance, creating the balance when missing.
create function hub_hidden.credit_balance(
  user_id uuid, casino_id uuid, experience_id uuid, currency_key text, amount float8, actor text, reason text, bet_id uuid default null
) returns hub.balance language plpgsql as $fn$
declare
  previous text[];
  result hub.balance;
begin
  perform hub_hidden.ledger_check_amount('credit_balance', credit_balance.amount);
  perform hub_hidden.ledger_check_player('credit_balance', credit_balance.user_id, credit_balance.casino_id, credit_balance.experience_id, credit_balance.currency_key);
  previous := hub_hidden.ledger_begin('credit_balance', credit_balance.actor, credit_balance.reason, credit_balance.bet_id);
  insert into hub.balance as b (user_id, casino_id, experience_id, currency_key, amount)
  values (credit_balance.user_id, credit_balance.casino_id, credit_balance.experience_id, credit_balance.currency_key, credit_balance.amount)
  on conflict on constraint balance_user_id_experience_id_currency_key_key do update set amount = b.amount + excluded.amount
  returning b.* into result;
  perform hub_hidden.ledger_end(previous);
  return result;
end
$fn$;

-- Take amount (> 0) from a player's balance; refuses to go below 0.
create function hub_hidden.debit_balance(
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
    raise exception 'debit_balance: insufficient funds: the balance is % %, the debit %.', coalesce(existing.amount, 0), debit_balance.currency_key, debit_balance.amount
      using errcode = 'P0001', constraint = 'ledger_sufficient_funds';
  end if;
  previous := hub_hidden.ledger_begin('debit_balance', debit_balance.actor, debit_balance.reason, debit_balance.bet_id);
  update hub.balance b set amount = b.amount - debit_balance.amount where b.id = existing.id returning b.* into result;
  perform hub_hidden.ledger_end(previous);
  return result;
end
$fn$;

-- Move a casino's house bankroll by amount_delta (positive: credit, creating
-- the bankroll when missing; negative: debit, refusing to go below 0).
create function hub_hidden.adjust_bankroll(
  casino_id uuid, currency_key text, amount_delta float8, actor text, reason text, bet_id uuid default null
) returns hub.bankroll language plpgsql as $fn$
declare
  previous text[];
  existing hub.bankroll;
  result hub.bankroll;
begin
  if amount_delta is null or amount_delta = 0 or amount_delta in ('Infinity', '-Infinity', 'NaN') then
    raise exception 'adjust_bankroll: amount_delta must be a finite number other than 0; received %.', coalesce(amount_delta::text, 'null')
      using errcode = 'P0001', constraint = 'ledger_amount_positive';
  end if;
  perform hub_hidden.ledger_check_currency('adjust_bankroll', adjust_bankroll.casino_id, adjust_bankroll.currency_key);
  if amount_delta > 0 then
    previous := hub_hidden.ledger_begin('adjust_bankroll', adjust_bankroll.actor, adjust_bankroll.reason, adjust_bankroll.bet_id);
    insert into hub.bankroll as b (casino_id, currency_key, amount)
    values (adjust_bankroll.casino_id, adjust_bankroll.currency_key, amount_delta)
    on conflict on constraint bankroll_casino_id_currency_key_key do update set amount = b.amount + excluded.amount
    returning b.* into result;
  else
    select * into existing from hub.bankroll b
     where b.casino_id = adjust_bankroll.casino_id and b.currency_key = adjust_bankroll.currency_key
     for update;
    if not found or existing.amount < -amount_delta then
      raise exception 'adjust_bankroll: insufficient funds: the house bankroll is % %, the debit %.', coalesce(existing.amount, 0), adjust_bankroll.currency_key, -amount_delta
        using errcode = 'P0001', constraint = 'ledger_sufficient_funds';
    end if;
    previous := hub_hidden.ledger_begin('adjust_bankroll', adjust_bankroll.actor, adjust_bankroll.reason, adjust_bankroll.bet_id);
    update hub.bankroll b set amount = b.amount + amount_delta where b.id = existing.id returning b.* into result;
  end if;
  perform hub_hidden.ledger_end(previous);
  return result;
end
$fn$;

-- The casino's house bankroll in a currency, created with amount (>= 0) when
-- missing; an existing one is returned unchanged.
create function hub_hidden.ensure_bankroll(
  casino_id uuid, currency_key text, amount float8, reason text, actor text default 'hub'
) returns hub.bankroll language plpgsql as $fn$
declare
  previous text[];
  result hub.bankroll;
begin
  if amount is null or amount < 0 or amount in ('Infinity', 'NaN') then
    raise exception 'ensure_bankroll: amount must be a finite number of at least 0; received %.', coalesce(amount::text, 'null')
      using errcode = 'P0001', constraint = 'ledger_amount_positive';
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

-- Money moves only on the superuser connection (plugins check the identity first).
revoke execute on function
  hub_hidden.ledger_guard(), hub_hidden.ledger_write(uuid, uuid, uuid, text, text, float8, float8, text),
  hub_hidden.ledger_record_balance(), hub_hidden.ledger_record_bankroll(),
  hub_hidden.ledger_begin(text, text, text, uuid), hub_hidden.ledger_end(text[]),
  hub_hidden.credit_balance(uuid, uuid, uuid, text, float8, text, text, uuid),
  hub_hidden.debit_balance(uuid, uuid, uuid, text, float8, text, text, uuid),
  hub_hidden.adjust_bankroll(uuid, text, float8, text, text, uuid),
  hub_hidden.ensure_bankroll(uuid, text, float8, text, text)
  from public;
