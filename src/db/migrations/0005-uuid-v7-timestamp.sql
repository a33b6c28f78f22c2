
-- The creation time a UUIDv7 carries (its first 48 bits, in milliseconds):
-- lets bet tables list rows "newest first" without a created_at column.
create or replace function hub_hidden.uuid_v7_timestamp(id uuid) returns timestamptz
language sql immutable strict parallel safe as $fn$
  select to_timestamp(('x' || lpad(replace(left(id::text, 13), '-', ''), 16, '0'))::bit(64)::bigint / 1000.0)
$fn$;
grant execute on function hub_hidden.uuid_v7_timestamp(uuid) to app_postgraphile;
