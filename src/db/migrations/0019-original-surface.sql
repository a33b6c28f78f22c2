-- The casino's own ids, as the original's clients read them. The hub knows a
-- player by (casino, uname) and an experience by (casino, name); these UUIDs
-- are derived from those pairs, so they are stable and any hub (or the casino)
-- computes the same value: md5('<casino id>:<uname>') read as a UUID.
alter table hub.user
  add column mp_user_id uuid not null generated always as (md5(casino_id::text || ':' || uname)::uuid) stored;
create index on hub.user (mp_user_id);
grant select (mp_user_id) on hub.user to app_postgraphile;
-- hubUserSearch lists the row type's columns: it gains the new one.
create or replace function hub.user_search(name_contains text) returns setof hub.user
language sql stable
as $fn$
  -- The row type has a column GraphQL may not read (client_id_digest): left null.
  select u.id, u.casino_id, u.uname, u.created_at, null::bytea, u.mp_user_id from hub.user u
   where strpos(lower(u.uname), lower(coalesce(user_search.name_contains, ''))) > 0
   order by u.uname, u.id
$fn$;
comment on column hub.user.mp_user_id is E'@behavior +filterBy +orderBy\nThe casino''s id for the player: md5(''<casinoId>:<uname>'') read as a UUID.';

alter table hub.experience
  add column mp_experience_id uuid not null generated always as (md5(casino_id::text || ':' || name)::uuid) stored,
  -- The player who owns the experience at the casino; the hub learns of none, so it stays null.
  add column user_id uuid references hub.user(id);
create index on hub.experience (mp_experience_id);
create index on hub.experience (user_id);
comment on column hub.experience.mp_experience_id is E'@behavior +filterBy +orderBy\nThe casino''s id for the experience: md5(''<casinoId>:<name>'') read as a UUID.';
comment on column hub.experience.user_id is E'@behavior -filterBy -orderBy';
-- The original reads the owner from the experience only, not experiences from the user.
comment on constraint experience_user_id_fkey on hub.experience is E'@behavior -manyRelation:resource:connection -manyRelation:resource:list';

-- updateHubBankrollById and updateHubCasinoById are the hub's own (amounts
-- through the ledger); PostGraphile must not generate its own under those names
-- even when it introspects as a role that may write the tables.
comment on table hub.bankroll is E'@behavior -insert -update -delete';
comment on table hub.casino is E'@behavior -insert -update -delete';

comment on column hub.withdrawal.mp_transfer_id is E'@behavior +filterBy +orderBy';
comment on column hub.outcome_bet.kind is E'@behavior +filterBy +orderBy';

-- The faucet: free play money an operator enables per casino and currency.
-- A player claims `amount` into the session's experience at most once per
-- `cooldown_seconds` in that currency and experience; the credit goes through
-- the ledger (hub_hidden.credit_balance) like any other.
create table hub.faucet_currency (
  casino_id uuid not null references hub.casino(id),
  currency_key text not null,
  amount float8 not null check (amount >= 1 and amount <= 9007199254740991 and amount = trunc(amount)),
  cooldown_seconds integer not null default 86400 check (cooldown_seconds between 1 and 31622400),
  updated_at timestamptz not null default now(),
  primary key (casino_id, currency_key),
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id)
);
create index on hub.faucet_currency (currency_key, casino_id);
alter table hub.faucet_currency enable row level security;
comment on table hub.faucet_currency is E'@behavior -*';

create table hub.faucet_claim (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  user_id uuid not null references hub.user(id),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  currency_key text not null,
  amount float8 not null check (amount >= 1 and amount <= 9007199254740991 and amount = trunc(amount)),
  created_at timestamptz not null default now(),
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id)
);
create index on hub.faucet_claim (user_id, experience_id, currency_key, created_at);
create index on hub.faucet_claim (casino_id);
create index on hub.faucet_claim (experience_id);
create index on hub.faucet_claim (currency_key, casino_id);
-- The original's type has no timestamp; the id is time-ordered (UUID v7).
comment on column hub.faucet_claim.created_at is E'@behavior -*';
comment on table hub.faucet_claim is E'A claim of free play money from the faucet, credited through the ledger.';
alter table hub.faucet_claim enable row level security;
grant select on hub.faucet_claim to app_postgraphile;
create policy select_faucet_claim on hub.faucet_claim for select
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));

-- A casino's token keys as last fetched from its JWKS URL, and every distinct
-- set the hub has verified tokens with. Operators only.
create table hub.jwk_set (
  casino_id uuid primary key references hub.casino(id),
  jwks jsonb not null,
  updated_at timestamptz not null default now()
);
create table hub.jwk_set_snapshot (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  casino_id uuid not null references hub.casino(id),
  jwks jsonb not null,
  created_at timestamptz not null default now()
);
create index on hub.jwk_set_snapshot (casino_id);
comment on column hub.jwk_set_snapshot.created_at is E'@behavior -*';
comment on table hub.jwk_set is E'The token keys of the casino as the hub last fetched them from its JWKS URL.';
comment on table hub.jwk_set_snapshot is E'A set of token keys the hub fetched from the casino and verified tokens with; a new one each time the set changes.';
alter table hub.jwk_set enable row level security;
alter table hub.jwk_set_snapshot enable row level security;
grant select on hub.jwk_set, hub.jwk_set_snapshot to app_postgraphile;
create policy select_jwk_set on hub.jwk_set for select using (hub_hidden.is_operator());
create policy select_jwk_set_snapshot on hub.jwk_set_snapshot for select using (hub_hidden.is_operator());

-- The original's `condition: { key }` on API keys and sessions: the digest
-- columns stay unreadable to GraphQL, so the comparison runs here. Keys issued
-- as UUIDs are lower case; a key's digest is SHA-256 of its text.
create function hub_hidden.api_key_id_by_key(key text) returns uuid
  language sql stable security definer set search_path = pg_catalog as $fn$
  select id from hub.api_key where key_digest = sha256(convert_to(lower(key), 'UTF8'))
$fn$;
create function hub_hidden.session_id_by_key(key text) returns uuid
  language sql stable security definer set search_path = pg_catalog as $fn$
  select id from hub.session where token_digest = sha256(convert_to(lower(key), 'UTF8'))
$fn$;
