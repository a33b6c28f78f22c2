-- Take requests: the casino asks the hub to give a player's funds back. The
-- hub reserves the amount from the balance (a ledger debit) when it receives
-- the request, then has the casino apply the transfer, idempotently by the
-- take request's id; a refusal or a give-up returns the reserve through the
-- ledger once. The names and shapes are the original's.
create type hub.take_request_status as enum ('PENDING', 'PROCESSING', 'COMPLETED', 'FAILED', 'REJECTED');
create type hub.mp_take_request_status as enum ('PENDING', 'TRANSFERRED', 'CONTROLLER_REJECTED', 'USER_CANCELED');
create type hub.mp_transfer_status as enum ('PENDING', 'COMPLETED', 'CANCELED', 'EXPIRED', 'UNCLAIMED');

create table hub.take_request (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  -- The casino's id; unique across casinos (the original looks it up by this id alone).
  mp_take_request_id uuid not null unique,
  casino_id uuid not null references hub.casino(id),
  user_id uuid not null references hub.user(id),
  experience_id uuid not null references hub.experience(id),
  currency_key text not null,
  -- What the casino asked for; null: the whole balance.
  amount float8 check (amount is null or hub_hidden.is_whole_amount(amount, 1)),
  reserved_amount float8 not null default 0 check (hub_hidden.is_whole_amount(reserved_amount, 0)),
  status hub.take_request_status not null default 'PENDING',
  status_changed_at timestamptz not null default now(),
  mp_status hub.mp_take_request_status not null default 'PENDING',
  mp_transfer_id uuid,
  mp_transfer_status hub.mp_transfer_status,
  transfer_needs_completion boolean not null default false,
  transfer_completion_attempted_at timestamptz,
  completion_attempt_count integer default 0,
  insufficient_balance_error boolean,
  refunded_at timestamptz,
  debug text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id),
  -- A reserve exists exactly while the request is being transferred or once it was.
  check ((reserved_amount > 0) = (status in ('PROCESSING', 'COMPLETED') or refunded_at is not null))
);
create index on hub.take_request (casino_id);
create index on hub.take_request (user_id);
create index on hub.take_request (experience_id);
create index on hub.take_request (updated_at);
comment on table hub.take_request is E'A casino''s request to take a player''s funds back: reserved from the balance through the ledger, then transferred to the casino, or refunded.';
comment on column hub.take_request.created_at is E'@behavior -*';
comment on column hub.take_request.status is E'@behavior +filterBy -orderBy';
alter table hub.take_request enable row level security;
grant select on hub.take_request to app_postgraphile;
create policy select_take_request on hub.take_request for select
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));

-- When the hub stops sending a take request's transfer (give_up_at), and until
-- when a send already made may still be applied (send_expires_at). Written on
-- its own connection before each send, so it survives the sender's crash; the
-- reserve is returned only once both have passed and the casino says it never
-- applied the transfer.
create table hub_hidden.take_request_window (
  take_request_id uuid primary key references hub.take_request(id),
  give_up_at timestamptz not null,
  send_expires_at timestamptz
);
revoke all on hub_hidden.take_request_window from public;

-- The worker's items: TAKE_POLL fetches a casino's take requests (its cursor),
-- TAKE settles one take request with the casino (transfer or rejection).
alter table hub.transfer_job add column take_request_id uuid unique references hub.take_request(id);
alter table hub.transfer_job drop constraint transfer_job_kind_check;
alter table hub.transfer_job add constraint transfer_job_kind_check
  check (kind in ('WITHDRAWAL', 'ACKNOWLEDGE', 'POLL', 'INCOMING', 'TAKE_POLL', 'TAKE'));
alter table hub.transfer_job add constraint transfer_job_take_request check ((kind = 'TAKE') = (take_request_id is not null));
create unique index transfer_job_one_take_poll on hub.transfer_job (casino_id) where kind = 'TAKE_POLL';
-- The item shows its take request's id; the take request does not list items (the original's type has no such field).
comment on constraint transfer_job_take_request_id_fkey on hub.transfer_job is E'@behavior -singularRelation:resource:single';

alter table hub.casino_transfer_config add column take_requests boolean not null default false;
