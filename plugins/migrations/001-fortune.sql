-- The reference plugins live in the schema `app` (pass extraPgSchemas: ["app"]).
create schema if not exists app;
grant usage on schema app to app_postgraphile;

-- FortunePlugin reads and writes this table through superuserPool and declares
-- its own `Fortune` type, so the generated API must not expose it a second time.
-- The identity column makes ids sequential and unique however many addFortune
-- calls run at once (a sequence never hands out the same value twice).
create table app.fortune (
  id int generated always as identity primary key,
  text text not null check (length(btrim(text)) > 0 and length(text) <= 280)
);
comment on table app.fortune is E'@behavior -*';

insert into app.fortune (text) values
  ('A journey of a thousand miles begins with a single step.'),
  ('Fortune favours the bold.'),
  ('The house always has an edge; play for fun.'),
  ('Today is a good day to double-check your migrations.'),
  ('What is random today is fair tomorrow.');
