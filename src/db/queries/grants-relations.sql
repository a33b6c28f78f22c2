-- Each relation of the schemas $1 with what the role $2 may do with it (src/db/grants.ts).
select n.nspname as schema, c.relname as name, c.relkind as kind,
       case when c.relkind = 'S' then has_sequence_privilege($2, c.oid, 'USAGE')
            else has_table_privilege($2, c.oid, 'SELECT') end as can_use,
       c.relkind in ('r', 'p') and has_table_privilege($2, c.oid, 'INSERT') as can_insert,
       c.relrowsecurity as rls,
       exists (select 1 from pg_policy p where p.polrelid = c.oid) as has_policy,
       exists (select 1 from pg_attribute a where a.attrelid = c.oid and a.attname = 'user_id' and a.attnum > 0 and not a.attisdropped) as has_user,
       array(select a.attname::text from pg_attribute a
              where a.attrelid = c.oid and a.attname in ('casino_id', 'experience_id') and a.attnum > 0 and not a.attisdropped
              order by a.attname) as scope_columns,
       coalesce(obj_description(c.oid, 'pg_class'), '') as comment,
       owner.relname as owner_table,
       coalesce(obj_description(owner.oid, 'pg_class'), '') as owner_comment,
       coalesce(has_table_privilege($2, owner.oid, 'INSERT'), false) as owner_insert
  from pg_class c
  join pg_namespace n on n.oid = c.relnamespace
  left join pg_depend d on c.relkind = 'S' and d.classid = 'pg_class'::regclass and d.objid = c.oid
                        and d.refclassid = 'pg_class'::regclass and d.deptype in ('a', 'i')
  left join pg_class owner on owner.oid = d.refobjid
 where n.nspname = any($1::text[]) and c.relkind in ('r', 'p', 'v', 'm', 'f', 'S')
 order by n.nspname, c.relname
