create table hub_secret.user_client_id (
  user_id uuid primary key references hub.user(id) on delete cascade,
  client_id uuid not null
);
revoke all on hub_secret.user_client_id from public;

-- Runs as its owner, so it can read hub_secret; it answers only the player of
-- the request's own session, about itself. Everyone else, operators included,
-- gets null.
create function hub_hidden.user_client_id(user_id uuid) returns uuid
language sql stable security definer
set search_path = pg_catalog, pg_temp
as $fn$
  select c.client_id from hub_secret.user_client_id c
  where c.user_id = $1 and $1 = hub_hidden.current_user_id()
$fn$;
revoke all on function hub_hidden.user_client_id(uuid) from public;
grant execute on function hub_hidden.user_client_id(uuid) to app_postgraphile;
