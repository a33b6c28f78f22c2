-- app.coinflip: one row per flip of the makeCoinflip reference plugins (a wager
-- and its net result for a player of a casino's experience), written by those
-- plugins through superuserPool and read by players through the generated API.
-- Only this comment changed since the text databases applied first:
-- hub:replaces-checksum 428d44d54766e96ff35811419709a0a20c1d820822b00f790155d6b1cad2d876
create table app.coinflip (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  wager float8 not null,
  net float8 not null,
  currency_key text not null,
  user_id uuid not null references hub.user(id),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  -- Named so makeCoinflip can tell an unknown currency apart from other failures.
  constraint coinflip_currency_fkey foreign key (currency_key, casino_id) references hub.currency(key, casino_id)
);
-- One index per foreign key: the generated relations and the RLS predicate
-- filter on them, and deleting a referenced row must not scan the table.
create index on app.coinflip (user_id);
create index on app.coinflip (casino_id);
create index on app.coinflip (experience_id);
create index on app.coinflip (currency_key, casino_id);

-- Read-only for GraphQL (select is the only grant, so PostGraphile generates no
-- create/update/delete mutations): rows are written only by plugins, on
-- superuserPool, after they have checked the identity themselves.
grant select on app.coinflip to app_postgraphile;
alter table app.coinflip enable row level security;
create policy select_coinflip on app.coinflip for select to app_postgraphile
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));

-- @hubBet: the hub's Bet interface plugin makes the generated type implement `Bet`.
comment on table app.coinflip is E'@hubBet\nA coin flip made with makeCoinflip: net is wager * 0.99 on a win and -wager on a loss.';
