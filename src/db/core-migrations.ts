/**
 * The hub's own schema, applied before the user's migrations. Each entry runs
 * once, in its own transaction, and is recorded in hub_secret.migration; once
 * released an entry is never edited: changes go in a new entry.
 *
 * Security model (design §4): GraphQL requests run as `app_postgraphile`, and
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
];
