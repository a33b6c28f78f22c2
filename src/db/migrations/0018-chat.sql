-- Chat: one room per experience. Players post to the room of their session's
-- experience; operators post system messages, name moderators (mods) and mute
-- players; mods mute players in their own experience. Every write is made by
-- the hub's GraphQL plugin on the superuser pool, after checking the caller;
-- GraphQL reads under the policies below.

create type hub.chat_message_type as enum ('user', 'system');

-- No created_at column: the ids are UUIDv7, so they order messages by time
-- and carry it (hub_hidden.uuid_v7_timestamp).
create table hub.chat_message (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  -- null for a system message
  user_id uuid references hub.user(id),
  type hub.chat_message_type not null,
  client_id uuid not null,
  body text not null check (length(body) between 1 and 500),
  hidden_at timestamptz,
  check ((type = 'user') = (user_id is not null))
);
create index on hub.chat_message (casino_id);
create index on hub.chat_message (experience_id);
create index on hub.chat_message (user_id);
-- A post is idempotent by its client id: per player for theirs, per experience for system messages.
create unique index chat_message_user_client_id on hub.chat_message (user_id, client_id) where type = 'user';
create unique index chat_message_system_client_id on hub.chat_message (experience_id, client_id) where type = 'system';
comment on index hub.chat_message_user_client_id is E'@behavior -*';
comment on index hub.chat_message_system_client_id is E'@behavior -*';
comment on table hub.chat_message is E'A message of an experience''s chat: a player''s (type user) or an operator''s (type system). hidden_at is set when an operator hid it; players no longer read it.';

create table hub.chat_mod (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  user_id uuid not null references hub.user(id),
  unique (experience_id, user_id)
);
comment on constraint chat_mod_experience_id_user_id_key on hub.chat_mod is E'@behavior -*';
create index on hub.chat_mod (casino_id);
create index on hub.chat_mod (user_id);
comment on table hub.chat_mod is E'A player who may mute players in the chat of the experience.';

-- A mute is in force while revoked_at is null and expired_at is null or ahead.
create table hub.chat_mute (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  user_id uuid not null references hub.user(id),
  expired_at timestamptz,
  reason text check (length(reason) <= 500),
  revoked_at timestamptz,
  -- Who muted: "api_key:<id>" or "user:<id>" (a mod). Not exposed.
  muted_by text not null
);
comment on column hub.chat_mute.muted_by is E'@behavior -*';
create index on hub.chat_mute (casino_id);
create index on hub.chat_mute (experience_id);
create index on hub.chat_mute (user_id);
comment on table hub.chat_mute is E'A player muted in the chat of an experience: in force while revoked_at is null and expired_at is null or ahead.';

-- Per player and experience, the posts of the current fixed window: the rate limit.
create table hub_hidden.chat_rate_bucket (
  user_id uuid not null references hub.user(id),
  experience_id uuid not null references hub.experience(id),
  window_start timestamptz not null,
  posts integer not null,
  primary key (user_id, experience_id)
);
alter table hub_hidden.chat_rate_bucket enable row level security;

-- Reads for GraphQL. A player reads the messages of their session's
-- experience that are not hidden, that experience's mods, and their own mutes
-- there (a mod reads every mute of the experience); an operator reads all.
grant select on hub.chat_message, hub.chat_mod to app_postgraphile;
grant select (id, casino_id, experience_id, user_id, expired_at, reason, revoked_at) on hub.chat_mute to app_postgraphile;
alter table hub.chat_message enable row level security;
alter table hub.chat_mod enable row level security;
alter table hub.chat_mute enable row level security;
create policy select_chat_message on hub.chat_message for select
  using (hub_hidden.is_operator() or (
    experience_id = hub_hidden.current_experience_id()
    and casino_id = hub_hidden.current_casino_id()
    and hidden_at is null));
create policy select_chat_mod on hub.chat_mod for select
  using (hub_hidden.is_operator() or (
    experience_id = hub_hidden.current_experience_id()
    and casino_id = hub_hidden.current_casino_id()));
create policy select_chat_mute on hub.chat_mute for select
  using (hub_hidden.is_operator() or (
    experience_id = hub_hidden.current_experience_id()
    and casino_id = hub_hidden.current_casino_id()
    and (user_id = hub_hidden.current_user_id()
         or exists (select 1 from hub.chat_mod m
                     where m.experience_id = chat_mute.experience_id
                       and m.user_id = hub_hidden.current_user_id()))));

-- Live delivery: each hub instance LISTENs on hub_chat_alert. Postgres sends
-- a notification when its transaction commits, so only stored changes are
-- announced. The payload carries ids only; subscribers read the message under
-- their own row-level security.
create function hub_hidden.notify_chat_message() returns trigger
language plpgsql as $fn$
begin
  perform pg_notify('hub_chat_alert', json_build_object(
    't', 'message', 'c', new.casino_id, 'e', new.experience_id, 'id', new.id)::text);
  return null;
end
$fn$;
create trigger chat_message_alert after insert on hub.chat_message
  for each row execute function hub_hidden.notify_chat_message();

create function hub_hidden.notify_chat_mute() returns trigger
language plpgsql as $fn$
declare
  kind text;
begin
  if tg_op = 'INSERT' then
    kind := 'muted';
  elsif old.revoked_at is null and new.revoked_at is not null then
    kind := 'unmuted';
  elsif new.revoked_at is null and (new.expired_at is distinct from old.expired_at or new.reason is distinct from old.reason) then
    kind := 'muted';
  else
    return null;
  end if;
  perform pg_notify('hub_chat_alert', json_build_object(
    't', kind, 'c', new.casino_id, 'e', new.experience_id, 'u', new.user_id)::text);
  return null;
end
$fn$;
create trigger chat_mute_alert after insert or update on hub.chat_mute
  for each row execute function hub_hidden.notify_chat_mute();
