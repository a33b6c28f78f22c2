
create table hub.hash_chain (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  user_id uuid not null references hub.user(id),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  active boolean not null default true,
  max_iteration integer not null check (max_iteration between 2 and 1000000),
  current_iteration integer not null check (current_iteration between 1 and max_iteration),
  created_at timestamptz not null default now()
);
create index on hub.hash_chain (user_id, experience_id, casino_id);
create index on hub.hash_chain (casino_id);
create index on hub.hash_chain (experience_id);
create unique index hash_chain_one_active on hub.hash_chain (user_id, experience_id, casino_id) where active;
comment on index hub.hash_chain_one_active is E'@behavior -*';
comment on table hub.hash_chain is E'A provably fair hash chain of one player in one casino and experience. Bets consume its hashes from max_iteration - 1 down to 1; current_iteration is the last one revealed.';

create type hub.hash_kind as enum ('TERMINAL', 'INTERMEDIATE', 'PREIMAGE');

create table hub.hash (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  hash_chain_id uuid not null references hub.hash_chain(id),
  kind hub.hash_kind not null,
  digest bytea not null check (length(digest) = 32),
  iteration integer not null check (iteration >= 0),
  client_seed text,
  metadata jsonb not null default '{}',
  created_at timestamptz not null default now(),
  unique (hash_chain_id, iteration),
  check ((kind = 'TERMINAL') or (kind = 'PREIMAGE') = (iteration = 0))
);
comment on table hub.hash is E'A revealed hash of a chain: its terminal hash (the commitment), a hash a bet used (with the client seed) or the preimage that ends the chain.';

-- The seed of a chain and its checkpoints (every checkpoint_interval-th hash)
-- reveal every future outcome: app_postgraphile has no usage on hub_secret.
create table hub_secret.hash_chain_secret (
  hash_chain_id uuid primary key references hub.hash_chain(id),
  seed bytea not null check (length(seed) = 32),
  checkpoint_interval integer not null check (checkpoint_interval >= 1),
  checkpoints bytea not null check (length(checkpoints) % 32 = 0)
);

create type hub.outcome as (weight float8, profit float8);

create table hub.outcome_bet (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  kind text not null check (length(kind) between 1 and 100),
  wager float8 not null check (wager >= 1),
  profit float8 not null check (profit >= -1),
  net float8 not null,
  outcomes hub.outcome[] not null default '{}',
  outcome_idx integer not null check (outcome_idx >= 0),
  currency_key text not null,
  hash_id uuid not null references hub.hash(id),
  user_id uuid not null references hub.user(id),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  metadata jsonb not null default '{}',
  created_at timestamptz not null default now(),
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id)
);
create index on hub.outcome_bet (user_id, experience_id, casino_id);
create index on hub.outcome_bet (casino_id);
create index on hub.outcome_bet (experience_id);
create index on hub.outcome_bet (hash_id);
create index on hub.outcome_bet (currency_key, casino_id);
comment on table hub.outcome_bet is E'@hubBet\nA bet of hubMakeOutcomeBet: the outcome outcome_idx was drawn by its hash; profit is that outcome''s profit per unit wagered, net what the balance moved.';

grant select on hub.hash_chain, hub.hash, hub.outcome_bet to app_postgraphile;
alter table hub.hash_chain enable row level security;
alter table hub.hash enable row level security;
alter table hub.outcome_bet enable row level security;

create policy select_hash_chain on hub.hash_chain for select
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));
-- The chain's own policy applies inside this subquery: a hash is visible
-- exactly when its chain is.
create policy select_hash on hub.hash for select
  using (exists (select 1 from hub.hash_chain c where c.id = hash_chain_id));
create policy select_outcome_bet on hub.outcome_bet for select
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));

-- HubHashChain.preimageHash: null until the chain is revealed.
create function hub.hash_chain_preimage_hash(chain hub.hash_chain) returns hub.hash
language sql stable as $fn$
  select h.* from hub.hash h where h.hash_chain_id = chain.id and h.kind = 'PREIMAGE'
$fn$;
