-- Where applied migrations are recorded; created before the first migration runs.
create schema if not exists hub_secret;
create table if not exists hub_secret.migration (
  kind text not null,
  name text not null,
  checksum text not null,
  applied_at timestamptz not null default now(),
  primary key (kind, name)
);
