
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
