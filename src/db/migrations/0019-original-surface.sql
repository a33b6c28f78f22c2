-- The casino's own ids, as the original's clients read them. The hub knows a
-- player by (casino, uname) and an experience by (casino, name); these UUIDs
-- are derived from those pairs, so they are stable and any hub (or the casino)
-- computes the same value: md5('<casino id>:<uname>') read as a UUID.
alter table hub.user
  add column mp_user_id uuid not null generated always as (md5(casino_id::text || ':' || uname)::uuid) stored;
create index on hub.user (mp_user_id);
grant select (mp_user_id) on hub.user to app_postgraphile;
comment on column hub.user.mp_user_id is E'@behavior +filterBy +orderBy\nThe casino''s id for the player: md5(''<casinoId>:<uname>'') read as a UUID.';

alter table hub.experience
  add column mp_experience_id uuid not null generated always as (md5(casino_id::text || ':' || name)::uuid) stored,
  -- The player who owns the experience at the casino; the hub learns of none, so it stays null.
  add column user_id uuid references hub.user(id);
create index on hub.experience (mp_experience_id);
create index on hub.experience (user_id);
comment on column hub.experience.mp_experience_id is E'@behavior +filterBy +orderBy\nThe casino''s id for the experience: md5(''<casinoId>:<name>'') read as a UUID.';
comment on column hub.experience.user_id is E'@behavior -filterBy -orderBy';
-- The original reads the owner from the experience only, not experiences from the user.
comment on constraint experience_user_id_fkey on hub.experience is E'@behavior -manyRelation:resource:connection -manyRelation:resource:list';

comment on column hub.withdrawal.mp_transfer_id is E'@behavior +filterBy +orderBy';
comment on column hub.outcome_bet.kind is E'@behavior +filterBy +orderBy';
