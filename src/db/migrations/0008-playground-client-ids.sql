
alter table hub.user add column client_id_digest bytea check (length(client_id_digest) = 32);
alter table hub.user add constraint user_casino_id_client_id_digest_key unique (casino_id, client_id_digest);
comment on column hub.user.client_id_digest is E'@behavior -*';
comment on constraint user_casino_id_client_id_digest_key on hub.user is E'@behavior -*';
-- Column grants instead of the table grant: app_postgraphile never selects the digest.
revoke select on hub.user from app_postgraphile;
grant select (id, casino_id, uname, created_at) on hub.user to app_postgraphile;

alter table hub.experience add column client_id uuid;
alter table hub.experience add constraint experience_casino_id_client_id_key unique (casino_id, client_id);
comment on constraint experience_casino_id_client_id_key on hub.experience is E'@behavior -*';

-- A user name as people read it: compatibility forms folded (NFKC: fullwidth
-- letters, ligatures), white space and invisible format characters removed,
-- ASCII case folded. Two names with the same key are the same name to a
-- reader, so a new playground name whose key is taken is refused. Unicode
-- normalisation needs a UTF8 database; elsewhere only spaces and case fold.
do $$ begin
  if current_setting('server_encoding') = 'UTF8' then
    create function hub_hidden.uname_key(uname text) returns text
    language sql immutable strict parallel safe as $fn$
      select lower(regexp_replace(normalize(uname, NFKC),
        '[[:space:]\u00AD\u034F\u061C\u115F\u1160\u17B4\u17B5\u180B-\u180F\u200B-\u200F\u202A-\u202E\u2060-\u206F\u3164\uFE00-\uFE0F\uFEFF\uFFA0]',
        '', 'g'))
    $fn$;
  else
    create function hub_hidden.uname_key(uname text) returns text
    language sql immutable strict parallel safe as $fn$ select lower(regexp_replace(uname, '[[:space:]]', '', 'g')) $fn$;
  end if;
end $$;
create index user_uname_key on hub.user (casino_id, hub_hidden.uname_key(uname));
