
-- Public keys only, but still not for GraphQL: hub_secret is never exposed.
create table hub_secret.casino_auth (
  casino_id uuid primary key references hub.casino(id),
  public_key text,
  jwks_url text,
  issuer text,
  audience text,
  updated_at timestamptz not null default now(),
  check (public_key is not null or jwks_url is not null)
);

-- Every hub instance LISTENs here and drops its cached identities.
create or replace function hub_hidden.notify_credentials_changed() returns trigger
language plpgsql as $fn$
begin
  perform pg_notify('hub_credentials_changed', tg_table_name);
  return null;
end
$fn$;

create trigger session_credentials_changed
  after update of revoked_at, expired_at or delete on hub.session
  for each statement execute function hub_hidden.notify_credentials_changed();
create trigger api_key_credentials_changed
  after update of revoked_at or delete on hub.api_key
  for each statement execute function hub_hidden.notify_credentials_changed();
