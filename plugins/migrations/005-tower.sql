-- The tables of the tower game (plugins/tower.ts): a climb started with a
-- wager, one floor per move, each floor's trap drawn from the next hash of the
-- player's hash chain. Become the GraphQL types TowerGame, TowerMove and the
-- enum TowerStatus.
create type app.tower_status as enum ('ACTIVE', 'CASHED_OUT', 'BUSTED');

create table app.tower_game (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  wager float8 not null check (wager >= 1),
  -- What the player's balance moved so far: -wager while climbing or once
  -- busted, payout - wager once cashed out.
  net float8 not null,
  currency_key text not null,
  user_id uuid not null references hub.user(id),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  status app.tower_status not null default 'ACTIVE',
  -- Floors cleared (0 at the start).
  floor integer not null default 0 check (floor >= 0 and floor <= max_floor),
  max_floor integer not null check (max_floor between 1 and 20),
  payout float8 not null default 0 check (payout >= 0),
  created_at timestamptz not null default now(),
  finished_at timestamptz,
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id),
  check ((status = 'ACTIVE') = (finished_at is null)),
  check (status = 'CASHED_OUT' or payout = 0),
  check (net = payout - wager)
);
create index on app.tower_game (user_id, experience_id, id);
create index on app.tower_game (casino_id);
create index on app.tower_game (experience_id);
create index on app.tower_game (currency_key, casino_id);

create table app.tower_move (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  game_id uuid not null references app.tower_game(id),
  -- The floor this move tried to clear (1 for the first move).
  floor integer not null check (floor >= 1),
  -- The tile the player stepped on and the tile the hash put the trap under (0, 1 or 2).
  tile integer not null check (tile between 0 and 2),
  trap_tile integer not null check (trap_tile between 0 and 2),
  -- The chain's hash that drew the trap, with the client seed (hub.hash.client_seed).
  hash_id uuid not null unique references hub.hash(id),
  user_id uuid not null references hub.user(id),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  created_at timestamptz not null default now(),
  unique (game_id, floor)
);
create index on app.tower_move (user_id, experience_id, casino_id);
create index on app.tower_move (casino_id);
create index on app.tower_move (experience_id);

grant select on app.tower_game, app.tower_move to app_postgraphile;
alter table app.tower_game enable row level security;
alter table app.tower_move enable row level security;
create policy select_tower_game on app.tower_game for select to app_postgraphile
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));
create policy select_tower_move on app.tower_move for select to app_postgraphile
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));

comment on table app.tower_game is E'@hubBet\nA climb of the tower game: started with a wager, one floor per move (startTower, moveTower, cashOutTower).';
comment on table app.tower_move is E'One floor of a tower climb: the tile the player chose and the trap the hash drew.';
