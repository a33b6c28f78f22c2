-- The example game's table, in the schema `app` (extraPgSchemas: ["app"] in
-- src/options.ts exposes it through GraphQL as the type DiceBet).
create schema if not exists app;
-- GraphQL runs as the role app_postgraphile: it sees a schema only with USAGE,
-- a table only with SELECT (and nothing else: the game writes through
-- superuserPool, inside the same transaction as dbSettleBet).
grant usage on schema app to app_postgraphile;

create table app.dice_bet (
  id uuid primary key,                 -- the bet id dbSettleBet returned: the ledger rows name it
  wager float8 not null check (wager >= 1 and wager <= 9007199254740991 and wager = trunc(wager)),
  net float8 not null check (net >= -9007199254740991 and net <= 9007199254740991 and net = trunc(net)),
  currency_key text not null,
  user_id uuid not null references hub.user(id),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  -- The player wins when the roll (0 to 99) is below the target.
  target int not null check (target between 2 and 98),
  roll int not null check (roll between 0 and 99),
  created_at timestamptz not null default now(),
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id)
);
create index on app.dice_bet (user_id);
create index on app.dice_bet (casino_id);
create index on app.dice_bet (experience_id);
create index on app.dice_bet (currency_key, casino_id);

-- A table with a user column has row-level security: a player sees only their
-- own bets, in the casino and experience of their session; an operator (API
-- key) sees all.
grant select on app.dice_bet to app_postgraphile;
alter table app.dice_bet enable row level security;
create policy select_dice_bet on app.dice_bet for select to app_postgraphile
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));

-- @hubBet: DiceBet implements the Bet interface every game's bets share.
comment on table app.dice_bet is E'@hubBet\nA roll of rollDice: won when roll < target.';
