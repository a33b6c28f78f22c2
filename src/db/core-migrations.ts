/**
 * The hub's own schema, applied before the user's migrations. Each entry runs
 * once, in its own transaction, and is recorded in hub_secret.migration; once
 * released an entry is never edited: changes go in a new entry.
 *
 * Security model: GraphQL requests run as `app_postgraphile`, and
 * row-level security decides what each identity sees from transaction
 * settings the hub sets per request (session.* for a player, operator.api_key
 * for an operator). Credentials are stored only as SHA-256 digests.
 */
export interface CoreMigration {
  name: string;
  sql: string;
}

export const coreMigrations: CoreMigration[] = [
  {
    name: "0001-schemas-roles-helpers",
    sql: /* sql */ `
do $$ begin
  if not exists (select 1 from pg_roles where rolname = 'app_postgraphile') then
    create role app_postgraphile nologin;
  end if;
end $$;

create schema if not exists hub;
create schema if not exists hub_hidden;
-- hub_secret holds what GraphQL must never expose; app_postgraphile has no usage on it.
create schema if not exists hub_secret;
revoke all on schema hub_secret from public;

grant usage on schema hub to app_postgraphile;
grant usage on schema hub_hidden to app_postgraphile;

-- UUIDv7: 48-bit millisecond timestamp then random bits, so ids sort by creation
-- time and index inserts stay local. Plain SQL so it works on any Postgres >= 13.
create or replace function hub_hidden.uuid_generate_v7() returns uuid
language sql volatile parallel safe as $fn$
  select encode(
    set_bit(set_bit(
      overlay(uuid_send(gen_random_uuid())
        placing substring(int8send((extract(epoch from clock_timestamp()) * 1000)::bigint) from 3)
        from 1 for 6),
      52, 1), 53, 1),
    'hex')::uuid
$fn$;

create or replace function hub_hidden.current_setting_uuid(name text) returns uuid
language sql stable parallel safe as $fn$
  select nullif(current_setting(name, true), '')::uuid
$fn$;

create or replace function hub_hidden.current_user_id() returns uuid
language sql stable parallel safe as $fn$ select hub_hidden.current_setting_uuid('session.user_id') $fn$;
create or replace function hub_hidden.current_casino_id() returns uuid
language sql stable parallel safe as $fn$ select hub_hidden.current_setting_uuid('session.casino_id') $fn$;
create or replace function hub_hidden.current_experience_id() returns uuid
language sql stable parallel safe as $fn$ select hub_hidden.current_setting_uuid('session.experience_id') $fn$;
create or replace function hub_hidden.current_session_id() returns uuid
language sql stable parallel safe as $fn$ select hub_hidden.current_setting_uuid('session.id') $fn$;
create or replace function hub_hidden.is_operator() returns boolean
language sql stable parallel safe as $fn$
  select coalesce(nullif(current_setting('operator.api_key', true), ''), null) is not null
$fn$;

grant execute on all functions in schema hub_hidden to app_postgraphile;
comment on schema hub_hidden is E'@behavior -*';
`,
  },
  {
    name: "0002-core-tables",
    sql: /* sql */ `
create table hub.casino (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  name text not null unique check (length(name) between 1 and 200),
  base_url text unique,
  is_playground boolean not null default false,
  created_at timestamptz not null default now()
);

create table hub.user (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  casino_id uuid not null references hub.casino(id),
  uname text not null check (length(uname) between 1 and 200),
  created_at timestamptz not null default now(),
  unique (casino_id, uname)
);
create index on hub.user (casino_id);

create table hub.experience (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  casino_id uuid not null references hub.casino(id),
  name text not null check (length(name) between 1 and 200),
  created_at timestamptz not null default now(),
  unique (casino_id, name)
);
create index on hub.experience (casino_id);

create table hub.session (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  user_id uuid not null references hub.user(id),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  token_digest bytea not null unique check (length(token_digest) = 32),
  created_at timestamptz not null default now(),
  expired_at timestamptz not null default now() + interval '30 days',
  revoked_at timestamptz
);
create index on hub.session (user_id);
create index on hub.session (casino_id);
create index on hub.session (experience_id);
comment on column hub.session.token_digest is E'@behavior -*';
comment on constraint session_token_digest_key on hub.session is E'@behavior -*';

create table hub.api_key (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  key_digest bytea not null unique check (length(key_digest) = 32),
  created_at timestamptz not null default now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);
comment on column hub.api_key.key_digest is E'@behavior -*';
comment on constraint api_key_key_digest_key on hub.api_key is E'@behavior -*';

create table hub.currency (
  key text not null check (key ~ '^[A-Za-z0-9_]{1,32}$'),
  casino_id uuid not null references hub.casino(id),
  display_unit_name text not null,
  display_unit_scale integer not null check (display_unit_scale > 0),
  primary key (key, casino_id)
);
create index on hub.currency (casino_id);

create table hub.balance (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  user_id uuid not null references hub.user(id),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  currency_key text not null,
  amount float8 not null default 0 check (amount >= 0),
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id),
  unique (user_id, experience_id, currency_key)
);
create index on hub.balance (casino_id);
create index on hub.balance (experience_id);
create index on hub.balance (currency_key, casino_id);

create table hub.bankroll (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  casino_id uuid not null references hub.casino(id),
  currency_key text not null,
  amount float8 not null default 0 check (amount >= 0),
  bets bigint not null default 0,
  wagered float8 not null default 0,
  expected_value float8 not null default 0,
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id),
  unique (casino_id, currency_key)
);
create index on hub.bankroll (currency_key, casino_id);
`,
  },
  {
    name: "0003-row-level-security",
    sql: /* sql */ `
-- Read access for GraphQL. Writes go through plugins on superuserPool, which
-- check the identity themselves, so app_postgraphile gets select only.
grant select on hub.casino, hub.user, hub.experience, hub.currency, hub.balance, hub.bankroll to app_postgraphile;
grant select (id, user_id, casino_id, experience_id, created_at, expired_at, revoked_at) on hub.session to app_postgraphile;
grant select (id, created_at, last_used_at, revoked_at) on hub.api_key to app_postgraphile;

alter table hub.casino enable row level security;
alter table hub.user enable row level security;
alter table hub.experience enable row level security;
alter table hub.session enable row level security;
alter table hub.api_key enable row level security;
alter table hub.currency enable row level security;
alter table hub.balance enable row level security;
alter table hub.bankroll enable row level security;

create policy select_casino on hub.casino for select
  using (hub_hidden.is_operator() or id = hub_hidden.current_casino_id());
create policy select_user on hub.user for select
  using (hub_hidden.is_operator() or (id = hub_hidden.current_user_id() and casino_id = hub_hidden.current_casino_id()));
create policy select_experience on hub.experience for select
  using (hub_hidden.is_operator() or id = hub_hidden.current_experience_id());
create policy select_session on hub.session for select
  using (hub_hidden.is_operator() or id = hub_hidden.current_session_id());
create policy select_api_key on hub.api_key for select
  using (hub_hidden.is_operator());
create policy select_currency on hub.currency for select
  using (hub_hidden.is_operator() or casino_id = hub_hidden.current_casino_id());
create policy select_balance on hub.balance for select
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));
create policy select_bankroll on hub.bankroll for select
  using (hub_hidden.is_operator() or casino_id = hub_hidden.current_casino_id());
`,
  },
  {
    name: "0004-playground-casino",
    sql: /* sql */ `
insert into hub.casino (name, is_playground) values ('playground', true)
  on conflict (name) do nothing;
insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale)
  select 'HOUSE', id, 'house units', 1 from hub.casino where name = 'playground'
  on conflict do nothing;
`,
  },
  {
    name: "0005-uuid-v7-timestamp",
    sql: /* sql */ `
-- The creation time a UUIDv7 carries (its first 48 bits, in milliseconds):
-- lets bet tables list rows "newest first" without a created_at column.
create or replace function hub_hidden.uuid_v7_timestamp(id uuid) returns timestamptz
language sql immutable strict parallel safe as $fn$
  select to_timestamp(('x' || lpad(replace(left(id::text, 13), '-', ''), 16, '0'))::bit(64)::bigint / 1000.0)
$fn$;
grant execute on function hub_hidden.uuid_v7_timestamp(uuid) to app_postgraphile;
`,
  },
  {
    // The ledger: every change of a player balance or a house bankroll, with who
    // (actor), why (reason) and the amount after it. Rows are written by
    // triggers on hub.balance and hub.bankroll, not by callers, so a change from
    // any source is recorded (a plugin's own UPDATE, psql, the CLI, GraphQL) and
    // the deltas of an account always sum to its amount. Callers say who and
    // why through the functions below (or the transaction settings
    // hub.ledger_actor / hub.ledger_reason / hub.ledger_bet_id before a direct
    // UPDATE); without them the row says "sql:<role>" and what was done.
    name: "0006-ledger",
    sql: /* sql */ `
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
`,
  },
  {
    // Casino token exchange (hub_secret.casino_auth) and cross-instance
    // revocation: every hub LISTENs on hub_credentials_changed.
    name: "0007-casino-auth-and-credential-events",
    sql: /* sql */ `
-- Public keys only, but still not for GraphQL: hub_secret is never exposed.
create table hub_secret.casino_auth (
  casino_id uuid primary key references hub.casino(id),
  public_key text,
  jwks_url text,
  issuer text,
  audience text,
  updated_at timestamptz not null default now(),
  check (public_key is not null or jwks_url is not null)
);

-- Every hub instance LISTENs here and drops its cached identities.
create or replace function hub_hidden.notify_credentials_changed() returns trigger
language plpgsql as $fn$
begin
  perform pg_notify('hub_credentials_changed', tg_table_name);
  return null;
end
$fn$;

create trigger session_credentials_changed
  after update of revoked_at, expired_at or delete on hub.session
  for each statement execute function hub_hidden.notify_credentials_changed();
create trigger api_key_credentials_changed
  after update of revoked_at or delete on hub.api_key
  for each statement execute function hub_hidden.notify_credentials_changed();
`,
  },
  {
    // Playground players are keyed by a random id their client generated and
    // keeps: whoever presents it gets that player, nobody else does. The id is
    // that client's secret, so only its SHA-256 digest is stored, in a column
    // GraphQL neither exposes nor may select. Experiences are shared by many
    // players, so their client id is stored as is.
    name: "0008-playground-client-ids",
    sql: /* sql */ `
alter table hub.user add column client_id_digest bytea check (length(client_id_digest) = 32);
alter table hub.user add constraint user_casino_id_client_id_digest_key unique (casino_id, client_id_digest);
comment on column hub.user.client_id_digest is E'@behavior -*';
comment on constraint user_casino_id_client_id_digest_key on hub.user is E'@behavior -*';
-- Column grants instead of the table grant: app_postgraphile never selects the digest.
revoke select on hub.user from app_postgraphile;
grant select (id, casino_id, uname, created_at) on hub.user to app_postgraphile;

alter table hub.experience add column client_id uuid;
alter table hub.experience add constraint experience_casino_id_client_id_key unique (casino_id, client_id);
comment on constraint experience_casino_id_client_id_key on hub.experience is E'@behavior -*';

-- A user name as people read it: compatibility forms folded (NFKC: fullwidth
-- letters, ligatures), white space and invisible format characters removed,
-- ASCII case folded. Two names with the same key are the same name to a
-- reader, so a new playground name whose key is taken is refused. Unicode
-- normalisation needs a UTF8 database; elsewhere only spaces and case fold.
do $$ begin
  if current_setting('server_encoding') = 'UTF8' then
    create function hub_hidden.uname_key(uname text) returns text
    language sql immutable strict parallel safe as $fn$
      select lower(regexp_replace(normalize(uname, NFKC),
        '[[:space:]\\u00AD\\u034F\\u061C\\u115F\\u1160\\u17B4\\u17B5\\u180B-\\u180F\\u200B-\\u200F\\u202A-\\u202E\\u2060-\\u206F\\u3164\\uFE00-\\uFE0F\\uFEFF\\uFFA0]',
        '', 'g'))
    $fn$;
  else
    create function hub_hidden.uname_key(uname text) returns text
    language sql immutable strict parallel safe as $fn$ select lower(regexp_replace(uname, '[[:space:]]', '', 'g')) $fn$;
  end if;
end $$;
create index user_uname_key on hub.user (casino_id, hub_hidden.uname_key(uname));
`,
  },
  {
    // The house bankroll (its amount, bets, wagered, expected value) is the
    // casino's business: a player could otherwise size the house before betting
    // against it. Players see no bankroll rows at all, by any path (the root
    // connection, lookups, relations from their casino or currency); operators
    // see every row. Plugins read it on the superuser connection as before.
    name: "0009-bankroll-operators-only",
    sql: /* sql */ `
drop policy select_bankroll on hub.bankroll;
create policy select_bankroll on hub.bankroll for select
  using (hub_hidden.is_operator());
`,
  },
  {
    // Amounts are whole base units of the currency (hub.currency's
    // display_unit_scale says how many make one display unit), so every change
    // a caller asks for must be a whole number from 1 to 2^53 - 1, the largest
    // integer a float8 (and a JavaScript number) holds exactly: 0.5, 5e-324 or
    // 1e300 would move nothing, or move money nobody can count. No CHECK
    // constraint is added on the tables: rows written before this rule may
    // hold fractions, and they stay valid; only new movements are checked.
    name: "0010-whole-amounts",
    sql: /* sql */ `
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
`,
  },
];
