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
