/*
 * Bets settled by dbSettleBet no longer all wait for one bankroll row.
 *
 * A game's transaction used to update its currency's hub.bankroll row and hold
 * that row's lock until the game committed, so every bet of a casino's
 * currency passed one commit at a time. Now, when the row is busy, a bet
 * settles against a slot: a share of the bankroll's cover (what the house can
 * still lose) and room (what it can still win below 2^53 − 1) set aside in
 * advance, under the bankroll's lock. The bet locks only its slot (skipping
 * slots other bets hold), checks its largest possible win against the slot's
 * cover, moves the slot by its house side and appends that side to
 * hub_hidden.bankroll_pending, all in the game's transaction. Folding moves
 * committed pending rows into hub.bankroll in id order, one bankroll update
 * (so one house ledger row, with the bet's id, actor and reason) per bet, in
 * one transaction; the hub folds right after the game commits, so a bet's
 * answer comes after its house side is in the bankroll.
 *
 * What is set aside, per bankroll, is computed when needed (under the
 * bankroll's lock) from the slots and the pending rows:
 *   reserved = Σ slot.cover − Σ pending delta,   reserved room = Σ slot.room + Σ pending delta.
 * A bet on a slot moves slot.cover by +delta and adds a pending delta, so it
 * leaves both unchanged; folding moves pending deltas into hub.bankroll.amount.
 * Hence, at every commit:
 *   the bankroll with every committed bet = amount + Σ pending
 *                                         = (amount − reserved) + Σ slot.cover.
 * Slots never go below 0 and a grant never takes more than amount − reserved,
 * so the bankroll with every committed bet applied never goes below the
 * covers promised, and every accepted bet's largest win was covered by cover
 * set aside for its slot alone. The same holds for room and 2^53 − 1. A slot
 * is released only when it holds no pending row, so folding pending rows in
 * id order (each slot's rows are in its commit order: the slot's lock orders
 * them) never takes hub.bankroll.amount below 0 on the way.
 *
 * Crash safety by construction: a bet's balance change, slot change and
 * pending row commit together or not at all, and a fold deletes the pending
 * rows it applies in the transaction that applies them. A server that dies
 * between the two leaves committed pending rows that the next fold (the next
 * busy bet, the next server's start, its periodic sweep) applies exactly once.
 *
 * Locks, in the hub's one order: balance, then a slot, then the bankroll. A
 * slot is waited for only by a transaction that holds none (else taken with
 * skip locked); slots are released and pending rows taken only with skip
 * locked. Bankroll and slot rows are locked FOR NO KEY UPDATE, which a slot's
 * foreign key check (KEY SHARE) does not wait for.
 */

create table hub_hidden.bankroll_slot (
  id bigint generated always as identity primary key,
  bankroll_id uuid not null references hub.bankroll(id) on delete cascade,
  cover float8 not null default 0 check (hub_hidden.is_whole_amount(cover, 0)),
  room float8 not null default 0 check (hub_hidden.is_whole_amount(room, 0)),
  used_at timestamptz not null default now()
);
create index on hub_hidden.bankroll_slot (bankroll_id, id);
comment on table hub_hidden.bankroll_slot is E'A share of a house bankroll''s cover (what the house can still lose) and room (what it can still win), taken in advance so bets lock a slot instead of the bankroll row.';

create table hub_hidden.bankroll_pending (
  id bigint generated always as identity primary key,
  -- No foreign key to hub.bankroll: its KEY SHARE check would wait for a fold's updates of the
  -- bankroll row to commit. The slot's key ties the row to its bankroll (a bankroll with pending
  -- rows cannot be deleted: its slots cannot).
  bankroll_id uuid not null,
  slot_id bigint not null references hub_hidden.bankroll_slot(id),
  bet_id uuid not null,
  -- The house's side of the bet: wager − payout.
  delta float8 not null check (hub_hidden.is_whole_amount(abs(delta), 0)),
  counted integer not null check (counted in (0, 1)),
  wagered float8 not null check (hub_hidden.is_whole_amount(wagered, 0)),
  expected_value float8 not null check (expected_value > '-Infinity' and expected_value < 'Infinity'),
  actor text not null,
  reason text not null,
  created_at timestamptz not null default now()
);
create index on hub_hidden.bankroll_pending (bankroll_id, id);
create index on hub_hidden.bankroll_pending (slot_id);
comment on table hub_hidden.bankroll_pending is E'House sides of committed bets not yet folded into hub.bankroll (and so not yet in the house ledger).';

revoke all on hub_hidden.bankroll_slot, hub_hidden.bankroll_pending from public;


-- What the slots hold back from hub.bankroll.amount: (cover, room). Read under the bankroll's lock.
create function hub_hidden.bankroll_reserved(p_bankroll_id uuid, out cover float8, out room float8)
language sql stable as $fn$
  select coalesce((select sum(s.cover) from hub_hidden.bankroll_slot s where s.bankroll_id = p_bankroll_id), 0) - coalesce(q.d, 0),
         coalesce((select sum(s.room) from hub_hidden.bankroll_slot s where s.bankroll_id = p_bankroll_id), 0) + coalesce(q.d, 0)
    from (select sum(x.delta) as d from hub_hidden.bankroll_pending x where x.bankroll_id = p_bankroll_id) q
$fn$;

/*
 * Apply one bankroll's committed pending rows (at most p_limit, in id order),
 * one bankroll update and so one house ledger row each, then release the
 * slots that no bet holds, hold no pending row and were last used before
 * now() − p_idle. The caller holds the bankroll's lock. Answers how many
 * bets were folded.
 */
create function hub_hidden.fold_bankroll_locked(p_bankroll_id uuid, p_limit integer, p_idle interval)
returns integer language plpgsql as $fn$
declare
  p record;
  y record;
  v_previous text[];
  v_n integer := 0;
begin
  for p in
    with taken as (
      delete from hub_hidden.bankroll_pending d
       where d.id in (select x.id from hub_hidden.bankroll_pending x where x.bankroll_id = p_bankroll_id order by x.id limit p_limit for update skip locked)
      returning d.*)
    select * from taken order by id
  loop
    v_previous := hub_hidden.ledger_begin('fold_bankroll', p.actor, p.reason, p.bet_id);
    update hub.bankroll r
       set amount = r.amount + p.delta, bets = r.bets + p.counted,
           wagered = least(r.wagered + p.wagered, 9007199254740991), expected_value = r.expected_value + p.expected_value
     where r.id = p_bankroll_id;
    perform hub_hidden.ledger_end(v_previous);
    v_n := v_n + 1;
  end loop;
  for y in
    select s.id from hub_hidden.bankroll_slot s
     where s.bankroll_id = p_bankroll_id and (s.cover > 0 or s.room > 0) and s.used_at <= now() - p_idle
     order by s.id for no key update skip locked
  loop
    -- Checked once the slot is locked: every bet on it has committed by now, so its pending rows are visible.
    if not exists (select 1 from hub_hidden.bankroll_pending q where q.slot_id = y.id) then
      update hub_hidden.bankroll_slot s set cover = 0, room = 0 where s.id = y.id;
    end if;
  end loop;
  return v_n;
end
$fn$;

-- Fold one bankroll (taking its lock); 0 when it does not exist.
create function hub_hidden.fold_bankroll(p_bankroll_id uuid, p_idle interval default interval '2 seconds')
returns integer language plpgsql as $fn$
begin
  perform 1 from hub.bankroll r where r.id = p_bankroll_id for no key update;
  if not found then return 0; end if;
  return hub_hidden.fold_bankroll_locked(p_bankroll_id, 10000, p_idle);
end
$fn$;

/*
 * One bet's money, as hub_hidden.settle_bet (0017) describes it, with one
 * difference when p_use_slots, in this order: (1) a free slot (not locked)
 * with enough cover and room: the bet settles against it and its house side
 * waits in hub_hidden.bankroll_pending (answered as pending_bankroll, to fold
 * after the commit); (2) when the free cover looks short (read without
 * locks) and a slot holds enough, the bet waits for that slot, as bets waited
 * for the row before; (3) the bankroll row free and no slot holding cover
 * (no recent contention): the bet settles on it directly; (4) else the bet
 * waits for the row and, holding it, gives a slot a 64th of the free cover
 * (at most 64 slots) and settles against that slot, so the bets after it
 * need not wait; or, when its cover is more than that 64th (near the
 * edge), settles on the row. Without p_use_slots every bet
 * settles directly, as before. Either way the free cover is amount − what
 * slots hold (bankroll_reserved); when short, pending rows are folded and
 * idle slots released before refusing.
 */
create function hub_hidden.settle_bet_shared(
  p_user_id uuid, p_casino_id uuid, p_experience_id uuid, p_currency_key text,
  p_bet_id uuid, p_wager float8, p_payout float8, p_max_payout float8, p_expected_value float8,
  p_actor text, p_reason text, p_use_slots boolean
) returns table (status text, balance float8, pending_bankroll uuid)
language plpgsql as $fn$
declare
  v_balance_id uuid;
  v_amount float8;
  v_bankroll_id uuid;
  v_bankroll float8;
  v_reserved record;
  v_previous text[];
  v_need float8 := p_max_payout - p_wager;
  v_delta float8 := p_wager - p_payout;
  v_gain float8 := greatest(p_wager - p_payout, 0);
  v_slot bigint;
  v_waited boolean := false;
  v_direct boolean;
  v_free float8;
  v_free_room float8;
  v_cover float8;
  v_room float8;
begin
  if p_bet_id is null or not hub_hidden.is_whole_amount(p_wager, 0) or not hub_hidden.is_whole_amount(p_payout, 0)
     or not hub_hidden.is_whole_amount(p_max_payout, p_payout) or not (p_expected_value > '-Infinity' and p_expected_value < 'Infinity') then
    raise exception 'settle_bet: wager %, payout % and max_payout % must be whole base units from 0 to 9007199254740991 with max_payout >= payout, the expected value % finite, and a bet id given.',
      hub_hidden.ledger_amount_text(p_wager), hub_hidden.ledger_amount_text(p_payout), hub_hidden.ledger_amount_text(p_max_payout), p_expected_value
      using errcode = 'P0001', constraint = 'ledger_amount_whole';
  end if;
  select b.id, b.amount into v_balance_id, v_amount from hub.balance b
   where b.user_id = p_user_id and b.experience_id = p_experience_id and b.currency_key = p_currency_key and b.casino_id = p_casino_id
   for update;
  if not found then
    if not exists (select 1 from hub.currency c where c.key = p_currency_key and c.casino_id = p_casino_id) then
      return query select 'unknown-currency'::text, null::float8, null::uuid; return;
    end if;
    return query select 'no-balance'::text, null::float8, null::uuid; return;
  end if;
  if v_amount < p_wager then return query select 'insufficient-funds'::text, v_amount, null::uuid; return; end if;
  if v_amount + (p_max_payout - p_wager) > 9007199254740991 then return query select 'balance-overflow'::text, v_amount, null::uuid; return; end if;
  select r.id into v_bankroll_id from hub.bankroll r where r.casino_id = p_casino_id and r.currency_key = p_currency_key;
  if not found then return query select 'no-bankroll'::text, v_amount, null::uuid; return; end if;

  if p_use_slots then
    update hub_hidden.bankroll_slot s set cover = s.cover + v_delta, room = s.room - v_delta, used_at = now()
     where s.id = (select y.id from hub_hidden.bankroll_slot y
                    where y.bankroll_id = v_bankroll_id and y.cover >= v_need and y.room >= v_gain
                    order by y.id limit 1 for no key update skip locked)
    returning s.id into v_slot;
    -- Near the edge (by a reading without locks) the cover is in slots: wait for one, as bets
    -- waited for the row before. Only a transaction holding no slot waits for one, so two
    -- transactions never wait for each other's slots.
    if v_slot is null and hub_hidden.ledger_setting('hub.bankroll_slot_held') is null then
      select r.amount - x.cover into v_free from hub.bankroll r, hub_hidden.bankroll_reserved(v_bankroll_id) x where r.id = v_bankroll_id;
      if v_free < v_need then
        update hub_hidden.bankroll_slot s set cover = s.cover + v_delta, room = s.room - v_delta, used_at = now()
         where s.id = (select y.id from hub_hidden.bankroll_slot y
                        where y.bankroll_id = v_bankroll_id and y.cover >= v_need and y.room >= v_gain
                        order by y.id limit 1 for no key update)
        returning s.id into v_slot;
      end if;
    end if;
    if v_slot is null then
      -- Directly on the row only while no slot holds cover (no recent contention): a bet on the
      -- row holds it to its commit, and the folds that answer the slots' bets would wait for it.
      v_direct := false;
      if not exists (select 1 from hub_hidden.bankroll_slot y where y.bankroll_id = v_bankroll_id and (y.cover > 0 or y.room > 0)) then
        perform 1 from hub.bankroll r where r.id = v_bankroll_id for no key update skip locked;
        v_direct := found;
      end if;
      if not v_direct then
        perform 1 from hub.bankroll r where r.id = v_bankroll_id for no key update;
        v_waited := true;
      end if;
    end if;
  else
    perform 1 from hub.bankroll r where r.id = v_bankroll_id for no key update;
  end if;

  if v_slot is null then
    -- The bankroll's lock is held from here on.
    select r.amount into v_bankroll from hub.bankroll r where r.id = v_bankroll_id;
    select * into v_reserved from hub_hidden.bankroll_reserved(v_bankroll_id);
    v_free := v_bankroll - v_reserved.cover;
    v_free_room := 9007199254740991 - v_bankroll - v_reserved.room;
    if v_free < v_need or v_free_room < v_gain then
      perform hub_hidden.fold_bankroll_locked(v_bankroll_id, 10000, interval '0');
      select r.amount into v_bankroll from hub.bankroll r where r.id = v_bankroll_id;
      select * into v_reserved from hub_hidden.bankroll_reserved(v_bankroll_id);
      v_free := v_bankroll - v_reserved.cover;
      v_free_room := 9007199254740991 - v_bankroll - v_reserved.room;
    end if;
    if v_free < v_need then return query select 'no-cover'::text, v_amount, null::uuid; return; end if;
    if v_free_room < v_gain then return query select 'bankroll-overflow'::text, v_amount, null::uuid; return; end if;
    -- A slot only where the bankroll is large against the bet: near its edge one bet's cover is most
    -- of what is free, and a bet on the row, as before slots, lets the next bet use what it leaves.
    if v_waited and floor(v_free / 64) >= v_need then
      v_cover := least(v_free, greatest(v_need, floor(v_free / 64)));
      v_room := least(v_free_room, greatest(v_gain, floor(v_free_room / 64)));
      update hub_hidden.bankroll_slot s set cover = s.cover + v_cover + v_delta, room = s.room + v_room - v_delta, used_at = now()
       where s.id = (select y.id from hub_hidden.bankroll_slot y where y.bankroll_id = v_bankroll_id
                      order by y.cover, y.id limit 1 for no key update skip locked)
      returning s.id into v_slot;
      if v_slot is null and (select count(*) from hub_hidden.bankroll_slot y where y.bankroll_id = v_bankroll_id) < 64 then
        insert into hub_hidden.bankroll_slot (bankroll_id, cover, room) values (v_bankroll_id, v_cover + v_delta, v_room - v_delta)
        returning id into v_slot;
      end if;
    end if;
  end if;

  v_previous := hub_hidden.ledger_begin('settle_bet', p_actor, p_reason, p_bet_id);
  if v_slot is null then
    update hub.bankroll r
       set amount = r.amount + v_delta, bets = r.bets + (p_wager > 0)::int,
           -- A statistic: it stops at 2^53 − 1 rather than refuse bets.
           wagered = least(r.wagered + p_wager, 9007199254740991), expected_value = r.expected_value + p_expected_value
     where r.id = v_bankroll_id;
  else
    perform set_config('hub.bankroll_slot_held', 'yes', true);
    insert into hub_hidden.bankroll_pending (bankroll_id, slot_id, bet_id, delta, counted, wagered, expected_value, actor, reason)
    values (v_bankroll_id, v_slot, p_bet_id, v_delta, (p_wager > 0)::int, p_wager, p_expected_value, p_actor, p_reason);
  end if;
  update hub.balance b set amount = b.amount - v_delta where b.id = v_balance_id returning b.amount into v_amount;
  perform hub_hidden.ledger_end(v_previous);
  return query select 'settled'::text, v_amount, case when v_slot is null then null::uuid else v_bankroll_id end;
end
$fn$;

-- The 0017 entry point (hubMakeOutcomeBet's settlements): always on the bankroll row, against its free cover.
create or replace function hub_hidden.settle_bet(
  p_user_id uuid, p_casino_id uuid, p_experience_id uuid, p_currency_key text,
  p_bet_id uuid, p_wager float8, p_payout float8, p_max_payout float8, p_expected_value float8,
  p_actor text, p_reason text
) returns table (status text, balance float8)
language sql as $fn$
  select s.status, s.balance from hub_hidden.settle_bet_shared($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, false) s
$fn$;

-- An operator's debit may take only what no slot holds: idle slots are released first.
create or replace function hub_hidden.adjust_bankroll(
  casino_id uuid, currency_key text, amount_delta float8, actor text, reason text, bet_id uuid default null
) returns hub.bankroll language plpgsql as $fn$
declare
  previous text[];
  existing hub.bankroll;
  result hub.bankroll;
  v_reserved_cover float8 := 0;
  v_reserved_room float8 := 0;
begin
  if amount_delta is null or amount_delta = 'NaN' or abs(amount_delta) < 1 or abs(amount_delta) > 9007199254740991 or amount_delta <> trunc(amount_delta) then
    raise exception 'adjust_bankroll: amount_delta must be a whole number of base units from 1 to 9007199254740991, or from -9007199254740991 to -1; received %.', hub_hidden.ledger_amount_text(amount_delta)
      using errcode = 'P0001', constraint = 'ledger_amount_whole',
            hint = 'Amounts are whole base units of the currency; display_unit_scale says how many make one display unit.';
  end if;
  perform hub_hidden.ledger_check_currency('adjust_bankroll', adjust_bankroll.casino_id, adjust_bankroll.currency_key);
  select * into existing from hub.bankroll b
   where b.casino_id = adjust_bankroll.casino_id and b.currency_key = adjust_bankroll.currency_key
   for no key update;
  if found then
    -- Pending bets folded and idle slots released, so the check below sees what is truly free.
    perform hub_hidden.fold_bankroll_locked(existing.id, 10000, interval '0');
    select * into existing from hub.bankroll b where b.id = existing.id;
    select greatest(r.cover, 0), greatest(r.room, 0) into v_reserved_cover, v_reserved_room from hub_hidden.bankroll_reserved(existing.id) r;
  end if;
  if amount_delta > 0 then
    if existing.id is not null then
      perform hub_hidden.ledger_check_total('adjust_bankroll', 'the house bankroll', existing.amount + v_reserved_room, amount_delta);
    end if;
    previous := hub_hidden.ledger_begin('adjust_bankroll', adjust_bankroll.actor, adjust_bankroll.reason, adjust_bankroll.bet_id);
    insert into hub.bankroll as b (casino_id, currency_key, amount)
    values (adjust_bankroll.casino_id, adjust_bankroll.currency_key, amount_delta)
    on conflict on constraint bankroll_casino_id_currency_key_key do update set amount = b.amount + excluded.amount
    returning b.* into result;
  else
    if existing.id is null or existing.amount < -amount_delta then
      raise exception 'adjust_bankroll: insufficient funds: the house bankroll is % %, the debit %.', hub_hidden.ledger_amount_text(coalesce(existing.amount, 0)), adjust_bankroll.currency_key, hub_hidden.ledger_amount_text(-amount_delta)
        using errcode = 'P0001', constraint = 'ledger_sufficient_funds';
    end if;
    if existing.amount - v_reserved_cover < -amount_delta then
      raise exception 'adjust_bankroll: insufficient funds: the house bankroll is % %, of which % cover bets in flight; the debit %.', hub_hidden.ledger_amount_text(existing.amount), adjust_bankroll.currency_key, hub_hidden.ledger_amount_text(v_reserved_cover), hub_hidden.ledger_amount_text(-amount_delta)
        using errcode = 'P0001', constraint = 'ledger_sufficient_funds';
    end if;
    previous := hub_hidden.ledger_begin('adjust_bankroll', adjust_bankroll.actor, adjust_bankroll.reason, adjust_bankroll.bet_id);
    update hub.bankroll b set amount = b.amount + amount_delta where b.id = existing.id returning b.* into result;
  end if;
  perform hub_hidden.ledger_end(previous);
  return result;
end
$fn$;

revoke execute on function
  hub_hidden.bankroll_reserved(uuid),
  hub_hidden.fold_bankroll_locked(uuid, integer, interval),
  hub_hidden.fold_bankroll(uuid, interval),
  hub_hidden.settle_bet_shared(uuid, uuid, uuid, text, uuid, float8, float8, float8, float8, text, text, boolean)
  from public;
