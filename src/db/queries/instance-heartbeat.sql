-- This instance ($1) holds $2 sockets: record it, forget instances silent for ten times $3 seconds,
-- and read the instances seen within $3 seconds other than this one (the write is not visible to the read).
with recorded as (
  insert into hub_hidden.instance (id, sockets, seen_at) values ($1, $2, now())
  on conflict (id) do update set sockets = excluded.sockets, seen_at = excluded.seen_at
), forgotten as (
  delete from hub_hidden.instance where seen_at < now() - 10 * $3::float8 * interval '1 second' and id <> $1
)
select count(*)::int as instances, coalesce(sum(sockets), 0)::int as sockets, coalesce(min(sockets), 0)::int as fewest
  from hub_hidden.instance
 where id <> $1 and seen_at >= now() - $3::float8 * interval '1 second'
