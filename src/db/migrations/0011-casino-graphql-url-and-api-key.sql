
alter table hub.casino add column graphql_url text;

create table hub_secret.casino_api_key (
  casino_id uuid primary key references hub.casino(id),
  api_key text not null check (length(api_key) between 1 and 1000),
  updated_at timestamptz not null default now()
);
revoke all on hub_secret.casino_api_key from public;
