-- The logged alerts of one subscription's topic after a sequence number ($1),
-- a page at a time ($6 rows), with the counter read in the same snapshot: a
-- cursor before pruned_through was pruned, one after last_seq was never given.
-- $2: the channel; $3: the player (for bets: null, every player); $4, $5: the
-- casino and experience. A chat subscriber reads its room's messages (user_id
-- null) and its own mutes; not a message an operator has hidden since.
select c.pruned_through::text, c.last_seq::text, a.seq::text, a.channel, a.user_id, a.casino_id, a.experience_id, a.payload
  from hub_hidden.live_alert_counter c
  left join lateral (
    select l.seq, l.channel, l.user_id, l.casino_id, l.experience_id, l.payload
      from hub_hidden.live_alert l
     where l.seq > $1::bigint and l.channel = $2::text
       and case $2::text
             when 'bet' then $3::uuid is null or l.user_id = $3::uuid
             when 'chat' then l.casino_id = $4::uuid and l.experience_id = $5::uuid and (l.user_id is null or l.user_id = $3::uuid)
             else l.user_id = $3::uuid and l.casino_id = $4::uuid and l.experience_id = $5::uuid
           end
       and not (l.channel = 'chat' and l.user_id is null and exists (
             select from hub.chat_message m where m.id = (l.payload->>'chatMessageId')::uuid and m.hidden_at is not null))
     order by l.seq
     limit $6
  ) a on true
 order by a.seq
