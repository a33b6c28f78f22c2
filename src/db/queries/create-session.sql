-- A session for user $1 of casino $2 in experience $3: token digest $4, lifetime $5 seconds
-- (null: 30 days), sealed client id $6. No row when the three do not belong together.
insert into hub.session (user_id, casino_id, experience_id, token_digest, expired_at, user_client_id_sealed)
select u.id, u.casino_id, e.id, $4,
       case when $5::float8 is null then now() + interval '30 days'
            else now() + $5::float8 * interval '1 second' end,
       $6
  from hub.user u
  join hub.experience e on e.casino_id = u.casino_id
 where u.id = $1 and u.casino_id = $2 and e.id = $3
returning id, expired_at
