-- The tables whose smart comment has the tag @hubBet (on a line of its own, as
-- PostGraphile reads smart tags): every game's bets, for the bet history.
select n.nspname as "schema", c.relname as "table"
  from pg_catalog.pg_class c
  join pg_catalog.pg_namespace n on n.oid = c.relnamespace
 where c.relkind in ('r', 'p')
   and obj_description(c.oid, 'pg_class') ~ '(^|\n)@hubBet(\s|$)'
 order by c.relname, n.nspname
