-- Player $1 muted in experiences $2 (of casino $6) until $3 (null: until unmuted), for reason $4, by $5:
-- the mutes in force take the new expiry and reason; the experiences without one get a new one.
-- One statement however many experiences the casino has.
with updated as (
  update hub.chat_mute set expired_at = $3, reason = $4, muted_by = $5
   where user_id = $1 and experience_id = any($2::uuid[])
     and revoked_at is null and (expired_at is null or expired_at > now())
  returning id, experience_id),
inserted as (
  insert into hub.chat_mute (casino_id, experience_id, user_id, expired_at, reason, muted_by)
  select $6, e, $1, $3, $4, $5 from unnest($2::uuid[]) as e
   where e not in (select experience_id from updated)
  returning id, experience_id)
select id, experience_id from updated
union all
select id, experience_id from inserted
