-- The playground client id of the player, sealed with the key of the session
-- it was sent to obtain (16 bytes: the id XOR the first 16 bytes of
-- HMAC-SHA256 keyed with the session key). Only requests carrying that key
-- can unseal it; the key itself is stored only as token_digest, so the
-- database holds the id in no readable form. Null for sessions not created
-- from a client id.
alter table hub.session add column user_client_id_sealed bytea check (length(user_client_id_sealed) = 16);
comment on column hub.session.user_client_id_sealed is E'@behavior -*';
-- app_postgraphile has column grants on hub.session (0003), none for this one.
