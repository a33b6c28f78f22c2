-- Every change that can end a credential's validity notifies the instances,
-- so open WebSockets are re-checked (and held to the new expiry) at once: a
-- changed digest or owner of a session or key, and TRUNCATE, which fires no
-- row or UPDATE/DELETE trigger.
drop trigger session_credentials_changed on hub.session;
create trigger session_credentials_changed
  after update of revoked_at, expired_at, token_digest, user_id, casino_id, experience_id or delete on hub.session
  for each statement execute function hub_hidden.notify_credentials_changed();
create trigger session_credentials_truncated
  after truncate on hub.session
  for each statement execute function hub_hidden.notify_credentials_changed();
drop trigger api_key_credentials_changed on hub.api_key;
create trigger api_key_credentials_changed
  after update of revoked_at, key_digest or delete on hub.api_key
  for each statement execute function hub_hidden.notify_credentials_changed();
create trigger api_key_credentials_truncated
  after truncate on hub.api_key
  for each statement execute function hub_hidden.notify_credentials_changed();

-- The last time the hub could not fetch a casino's key set from its JWKS URL,
-- and why: the casino is unreachable or misconfigured, and its players cannot
-- log in. Kept for operators (the dashboard's casino view); one row per casino.
create table hub.jwk_set_failure (
  casino_id uuid primary key references hub.casino(id),
  jwks_url text not null,
  message text not null check (length(message) <= 1000),
  failed_at timestamptz not null default now()
);
comment on table hub.jwk_set_failure is E'The last failure to fetch the casino''s key set from its JWKS URL (timeout, refused, too large, not a JSON key set), and when.';
alter table hub.jwk_set_failure enable row level security;
grant select on hub.jwk_set_failure to app_postgraphile;
create policy select_jwk_set_failure on hub.jwk_set_failure for select using (hub_hidden.is_operator());
