
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
