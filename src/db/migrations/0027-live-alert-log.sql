-- Live alerts with a cursor: each alert is a row of hub_hidden.live_alert,
-- numbered (seq) by hub_hidden.live_alert_sequence once its transaction has
-- committed, so that every hub instance delivers the alerts of a topic in
-- one order and a client can resume after the last cursor it saw.

-- Lean on purpose, as every bet writes here: no primary key (the sequencer
-- finds rows by ctid), one index on seq (which also finds the rows not
-- sequenced yet: btree indexes nulls).
create table hub_hidden.live_alert (
  id bigint generated always as identity,
  -- null until sequenced; then the alert's place in the order every instance delivers
  seq bigint,
  channel text not null check (channel in ('balance', 'bet', 'put', 'chat')),
  -- the writing transaction, to announce a balance once per transaction
  tx bigint not null default txid_current(),
  user_id uuid,
  casino_id uuid,
  experience_id uuid,
  payload jsonb not null,
  created_at timestamptz not null default now(),
  sequenced_at timestamptz
);
create unique index live_alert_seq on hub_hidden.live_alert (seq);
create unique index live_alert_balance_once on hub_hidden.live_alert (tx, user_id, casino_id, experience_id, (payload->>'currencyKey'))
  where channel = 'balance' and seq is null;
alter table hub_hidden.live_alert enable row level security;
-- No key: a logical-replication publication of all tables must still accept the sequencer's updates.
alter table hub_hidden.live_alert replica identity full;

create table hub_hidden.live_alert_counter (
  id boolean primary key default true check (id),
  last_seq bigint not null,
  pruned_through bigint not null
);
insert into hub_hidden.live_alert_counter (last_seq, pruned_through) values (0, 0);
alter table hub_hidden.live_alert_counter enable row level security;

-- (seq, time) marks, one per thousand alerts: the rows sequenced before a mark
-- at least an hour old may be pruned.
create table hub_hidden.live_alert_mark (
  seq bigint primary key,
  at timestamptz not null
);
alter table hub_hidden.live_alert_mark enable row level security;

create or replace function hub_hidden.notify_ledger_alerts() returns trigger
language plpgsql as $fn$
begin
  if new.account <> 'player' then return null; end if;
  insert into hub_hidden.live_alert (channel, user_id, casino_id, experience_id, payload)
    values ('balance', new.user_id, new.casino_id, new.experience_id, jsonb_build_object('currencyKey', new.currency_key))
    on conflict (tx, user_id, casino_id, experience_id, (payload->>'currencyKey')) where channel = 'balance' and seq is null do nothing;
  if new.bet_id is not null then
    insert into hub_hidden.live_alert (channel, user_id, casino_id, experience_id, payload)
      values ('bet', new.user_id, new.casino_id, new.experience_id, jsonb_build_object(
        'betId', new.bet_id, 'userId', new.user_id, 'casinoId', new.casino_id, 'experienceId', new.experience_id,
        'currencyKey', new.currency_key, 'amountDelta', new.amount_delta, 'reason', new.reason,
        'createdAt', new.created_at, 'ledgerId', new.id));
  end if;
  perform pg_notify('hub_live_pending', '');
  return null;
end
$fn$;

create or replace function hub_hidden.notify_put_alert(user_id uuid, casino_id uuid, experience_id uuid, currency_key text, mp_transfer_id text)
returns void language sql as $fn$
  insert into hub_hidden.live_alert (channel, user_id, casino_id, experience_id, payload)
    values ('put', user_id, casino_id, experience_id, jsonb_build_object('currencyKey', currency_key, 'mpTransferId', mp_transfer_id));
  select pg_notify('hub_live_pending', '');
$fn$;

create or replace function hub_hidden.deposit_put_alert() returns trigger language plpgsql as $fn$
begin
  perform hub_hidden.notify_put_alert(new.user_id, new.casino_id, new.experience_id, new.currency_key, new.mp_transfer_id);
  return new;
end
$fn$;

-- Chat: a message goes to its room (user_id null), a mute or unmute to its player.
create or replace function hub_hidden.notify_chat_message() returns trigger
language plpgsql as $fn$
begin
  insert into hub_hidden.live_alert (channel, casino_id, experience_id, payload)
    values ('chat', new.casino_id, new.experience_id, jsonb_build_object('kind', 'message', 'chatMessageId', new.id));
  perform pg_notify('hub_live_pending', '');
  return null;
end
$fn$;

create or replace function hub_hidden.notify_chat_mute() returns trigger
language plpgsql as $fn$
declare
  kind text;
begin
  if tg_op = 'INSERT' then
    kind := 'muted';
  elsif old.revoked_at is null and new.revoked_at is not null then
    kind := 'unmuted';
  elsif new.revoked_at is null and (new.expired_at is distinct from old.expired_at or new.reason is distinct from old.reason) then
    kind := 'muted';
  else
    return null;
  end if;
  insert into hub_hidden.live_alert (channel, user_id, casino_id, experience_id, payload)
    values ('chat', new.user_id, new.casino_id, new.experience_id, jsonb_build_object('kind', kind));
  perform pg_notify('hub_live_pending', '');
  return null;
end
$fn$;

-- Numbers every committed, unsequenced alert after the last number, in id
-- order, and answers the last number. VOLATILE: under READ COMMITTED each
-- statement takes a new snapshot, so the rows numbered are the ones
-- committed once the counter's lock is held; the lock serialises every
-- instance's sequencer, so numbers are never given twice and, once a number
-- is visible, no smaller one can appear later.
create function hub_hidden.live_alert_sequence() returns bigint
language plpgsql volatile as $fn$
declare
  v_last bigint;
  v_pruned bigint;
  v_count bigint;
  v_now timestamptz;
  v_prune_to bigint;
begin
  -- Nothing committed to number (every instance is woken by each commit): no lock taken.
  if not exists (select from hub_hidden.live_alert where seq is null) then
    return (select last_seq from hub_hidden.live_alert_counter);
  end if;
  select last_seq, pruned_through into v_last, v_pruned from hub_hidden.live_alert_counter where id for update;
  -- After the lock: sequenced_at grows with seq.
  v_now := clock_timestamp();
  with pending as (
    select ctid as row_at, row_number() over (order by id) as n from hub_hidden.live_alert where seq is null
  )
  update hub_hidden.live_alert a set seq = v_last + p.n, sequenced_at = v_now
    from pending p where a.ctid = p.row_at;
  get diagnostics v_count = row_count;
  if v_count = 0 then return v_last; end if;
  update hub_hidden.live_alert_counter set last_seq = v_last + v_count where id;
  perform pg_notify('hub_live_sequenced', (v_last + v_count)::text);
  -- Each time a thousand is crossed: a mark, and pruning of what is both an
  -- hour old and more than 10,000 alerts behind.
  if (v_last + v_count) / 1000 > v_last / 1000 then
    insert into hub_hidden.live_alert_mark (seq, at) values (v_last + v_count, v_now);
    select max(seq) into v_prune_to from hub_hidden.live_alert_mark where at < v_now - interval '1 hour';
    -- (least() would skip a null: no mark an hour old means nothing to prune.)
    if v_prune_to is not null and least(v_prune_to, v_last + v_count - 10000) > v_pruned then
      v_prune_to := least(v_prune_to, v_last + v_count - 10000);
      delete from hub_hidden.live_alert where seq > v_pruned and seq <= v_prune_to;
      delete from hub_hidden.live_alert_mark where seq <= v_prune_to;
      update hub_hidden.live_alert_counter set pruned_through = v_prune_to where id;
    end if;
  end if;
  return v_last + v_count;
end
$fn$;
revoke execute on function hub_hidden.live_alert_sequence() from public;
