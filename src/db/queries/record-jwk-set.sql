-- Casino $1's JWK set $2: stored when it changed, and kept in the snapshots once per distinct set.
with changed as (
  insert into hub.jwk_set as s (casino_id, jwks) values ($1, $2::jsonb)
  on conflict (casino_id) do update set jwks = excluded.jwks, updated_at = now()
   where s.jwks is distinct from excluded.jwks
  returning casino_id)
insert into hub.jwk_set_snapshot (casino_id, jwks)
select $1, $2::jsonb from changed
 where not exists (select 1 from hub.jwk_set_snapshot p where p.casino_id = $1 and p.jwks = $2::jsonb)
returning id
