-- Casino $1 keeps its newest $2 key-set snapshots (by time stored: UUIDv7 ids of one millisecond need not sort in order).
delete from hub.jwk_set_snapshot
 where casino_id = $1
   and id not in (select id from hub.jwk_set_snapshot where casino_id = $1 order by created_at desc, id desc limit $2)
