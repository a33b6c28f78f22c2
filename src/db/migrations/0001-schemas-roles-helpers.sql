
do $$ begin
  if not exists (select 1 from pg_roles where rolname = 'app_postgraphile') then
    create role app_postgraphile nologin;
  end if;
end $$;

create schema if not exists hub;
create schema if not exists hub_hidden;
-- hub_secret holds what GraphQL must never expose; app_postgraphile has no usage on it.
create schema if not exists hub_secret;
revoke all on schema hub_secret from public;

grant usage on schema hub to app_postgraphile;
grant usage on schema hub_hidden to app_postgraphile;

-- UUIDv7: 48-bit millisecond timestamp then random bits, so ids sort by creation
-- time and index inserts stay local. Plain SQL so it works on any Postgres >= 13.
create or replace function hub_hidden.uuid_generate_v7() returns uuid
language sql volatile parallel safe as $fn$
  select encode(
    set_bit(set_bit(
      overlay(uuid_send(gen_random_uuid())
        placing substring(int8send((extract(epoch from clock_timestamp()) * 1000)::bigint) from 3)
        from 1 for 6),
      52, 1), 53, 1),
    'hex')::uuid
$fn$;

create or replace function hub_hidden.current_setting_uuid(name text) returns uuid
language sql stable parallel safe as $fn$
  select nullif(current_setting(name, true), '')::uuid
$fn$;

create or replace function hub_hidden.current_user_id() returns uuid
language sql stable parallel safe as $fn$ select hub_hidden.current_setting_uuid('session.user_id') $fn$;
create or replace function hub_hidden.current_casino_id() returns uuid
language sql stable parallel safe as $fn$ select hub_hidden.current_setting_uuid('session.casino_id') $fn$;
create or replace function hub_hidden.current_experience_id() returns uuid
language sql stable parallel safe as $fn$ select hub_hidden.current_setting_uuid('session.experience_id') $fn$;
create or replace function hub_hidden.current_session_id() returns uuid
language sql stable parallel safe as $fn$ select hub_hidden.current_setting_uuid('session.id') $fn$;
create or replace function hub_hidden.is_operator() returns boolean
language sql stable parallel safe as $fn$
  select coalesce(nullif(current_setting('operator.api_key', true), ''), null) is not null
$fn$;

grant execute on all functions in schema hub_hidden to app_postgraphile;
comment on schema hub_hidden is E'@behavior -*';
