-- The table of the makeCoinflipBet plugin (plugins/coinflip-bet.ts): a coin flip
-- on a chosen side that moves money between the player's balance and the
-- house bankroll. Becomes the GraphQL enum CoinSide and the type CoinflipBet.
create type app.coin_side as enum ('HEADS', 'TAILS');

create table app.coinflip_bet (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  wager float8 not null check (wager > 0),
  net float8 not null,
  currency_key text not null,
  user_id uuid not null references hub.user(id),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  side app.coin_side not null,
  outcome app.coin_side not null,
  -- The player's balance right after this bet, so a bet history can be audited
  -- against the balance without replaying every bet.
  balance_after float8 not null check (balance_after >= 0),
  created_at timestamptz not null default now(),
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id),
  -- A bet that says it was won must have the positive net of a win, and vice versa.
  check ((side = outcome) = (net > 0))
);
create index on app.coinflip_bet (user_id);
create index on app.coinflip_bet (casino_id);
create index on app.coinflip_bet (experience_id);
create index on app.coinflip_bet (currency_key, casino_id);

grant select on app.coinflip_bet to app_postgraphile;
alter table app.coinflip_bet enable row level security;
create policy select_coinflip_bet on app.coinflip_bet for select to app_postgraphile
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));

comment on table app.coinflip_bet is E'@hubBet\nA coin flip on a chosen side made with makeCoinflipBet; the balance and the house bankroll moved by net.';
