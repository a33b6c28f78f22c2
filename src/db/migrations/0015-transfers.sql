
create type hub.transfer_status_kind as enum ('PENDING', 'COMPLETED', 'CANCELED', 'UNCLAIMED', 'EXPIRED');

-- Money a casino moved into an experience, credited once per (casino, mp_transfer_id).
create table hub.deposit (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  created_at timestamptz not null default now(),
  casino_id uuid not null references hub.casino(id),
  mp_transfer_id text not null check (length(mp_transfer_id) between 1 and 200),
  user_id uuid not null references hub.user(id),
  experience_id uuid not null references hub.experience(id),
  currency_key text not null,
  amount float8 not null check (amount >= 1 and amount <= 9007199254740991 and amount = trunc(amount)),
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id),
  unique (casino_id, mp_transfer_id)
);
create index on hub.deposit (user_id);
create index on hub.deposit (experience_id);

create table hub.withdrawal_request (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  created_at timestamptz not null default now(),
  casino_id uuid not null references hub.casino(id),
  user_id uuid not null references hub.user(id),
  experience_id uuid not null references hub.experience(id),
  currency_key text not null,
  amount float8 not null check (amount >= 1 and amount <= 9007199254740991 and amount = trunc(amount)),
  mp_transfer_id text,
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id)
);
create index on hub.withdrawal_request (user_id);
create index on hub.withdrawal_request (experience_id);
create index on hub.withdrawal_request (casino_id);

create table hub.withdrawal (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  created_at timestamptz not null default now(),
  withdrawal_request_id uuid not null unique references hub.withdrawal_request(id),
  casino_id uuid not null references hub.casino(id),
  user_id uuid not null references hub.user(id),
  experience_id uuid not null references hub.experience(id),
  currency_key text not null,
  amount float8 not null,
  status hub.transfer_status_kind not null default 'PENDING',
  status_at timestamptz not null default now(),
  mp_transfer_id text,
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id)
);
create index on hub.withdrawal (user_id);
create index on hub.withdrawal (experience_id);
create index on hub.withdrawal (casino_id);

-- How the hub talks to each casino about transfers.
create table hub.casino_transfer_config (
  casino_id uuid primary key references hub.casino(id),
  connector text not null default 'http' check (connector ~ '^[a-z0-9_-]{1,50}$'),
  url text check (url ~ '^https?://'),
  poll boolean not null default true,
  updated_at timestamptz not null default now()
);

-- The outbox: work every hub instance's worker picks with FOR UPDATE SKIP LOCKED.
create table hub.transfer_job (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  created_at timestamptz not null default now(),
  kind text not null check (kind in ('WITHDRAWAL', 'ACKNOWLEDGE', 'POLL', 'INCOMING')),
  casino_id uuid not null references hub.casino(id),
  withdrawal_request_id uuid unique references hub.withdrawal_request(id),
  mp_transfer_id text,
  cursor text,
  status text not null default 'PENDING' check (status in ('PENDING', 'DONE', 'FAILED')),
  attempts integer not null default 0,
  last_error text,
  last_attempt_at timestamptz,
  next_attempt_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  check ((kind = 'WITHDRAWAL') = (withdrawal_request_id is not null)),
  check ((kind in ('ACKNOWLEDGE', 'INCOMING')) = (mp_transfer_id is not null)),
  check (kind <> 'INCOMING' or status = 'FAILED')
);
create index transfer_job_due on hub.transfer_job (next_attempt_at) where status = 'PENDING';
create index on hub.transfer_job (casino_id);
create index on hub.transfer_job (status);
create index on hub.transfer_job (kind);
create unique index transfer_job_one_poll on hub.transfer_job (casino_id) where kind = 'POLL';
create unique index transfer_job_one_ack on hub.transfer_job (casino_id, mp_transfer_id) where kind = 'ACKNOWLEDGE';

-- Until when a send of the withdrawal may still be applied by the casino.
create table hub_hidden.withdrawal_send_window (
  withdrawal_request_id uuid primary key references hub.withdrawal_request(id),
  expires_at timestamptz not null
);
revoke all on hub_hidden.withdrawal_send_window from public;

grant select on hub.deposit, hub.withdrawal_request, hub.withdrawal, hub.casino_transfer_config, hub.transfer_job to app_postgraphile;
alter table hub.deposit enable row level security;
alter table hub.withdrawal_request enable row level security;
alter table hub.withdrawal enable row level security;
alter table hub.casino_transfer_config enable row level security;
alter table hub.transfer_job enable row level security;
create policy select_deposit on hub.deposit for select
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));
create policy select_withdrawal_request on hub.withdrawal_request for select
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));
create policy select_withdrawal on hub.withdrawal for select
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));
create policy select_casino_transfer_config on hub.casino_transfer_config for select
  using (hub_hidden.is_operator());
create policy select_transfer_job on hub.transfer_job for select
  using (hub_hidden.is_operator());

create function hub_hidden.deposit_put_alert() returns trigger language plpgsql as $fn$
begin
  perform pg_notify('hub_put_alert', json_build_object(
    'userId', new.user_id, 'casinoId', new.casino_id, 'experienceId', new.experience_id,
    'currencyKey', new.currency_key, 'mpTransferId', new.mp_transfer_id)::text);
  return new;
end
$fn$;
create trigger deposit_put_alert after insert on hub.deposit
  for each row execute function hub_hidden.deposit_put_alert();
revoke execute on function hub_hidden.deposit_put_alert() from public;
