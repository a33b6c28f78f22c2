-- ==========================================================================
-- Functions: SETTLEMENT, the one way every bet moves money
-- ==========================================================================
/*
 * Every bet of every game settles through hub_hidden.settle_bet: dbSettleBet
 * (the reference games and the user's) calls it in the game's transaction;
 * hubMakeOutcomeBet calls it through settle_outcome_bet, which adds the hash
 * chain and the bet's row around it.
 *
 *   settle_bet(bet_settlement)           one bet's money: the player's balance
 *                                        and the house's side;
 *   settle_bet_once(bet_settlement, …)   the same with an idempotency key;
 *   settle_outcome_bet(outcome_settlement)       hubMakeOutcomeBet: the chain's
 *                                        next hash, settle_bet, the hash
 *                                        revealed, the bet stored;
 *   settle_outcome_bets(outcome_settlement[])    several of those in one
 *                                        statement, so one commit;
 *   *_once                               the same with idempotency keys;
 *   fold_bankroll_alone(bankroll)        (baseline) after a commit: the house
 *                                        sides a bet left pending, into
 *                                        hub.bankroll.
 *
 * What else a bet runs, unchanged and defined once: the baseline's sections
 * "balances and the ledger" (ledger_begin / ledger_end, and the triggers that
 * write the ledger from every change of hub.balance and hub.bankroll),
 * "bankroll reservations" (bankroll_reserved, fold_bankroll_locked,
 * fold_bankroll, fold_bankroll_alone), "SETTLEMENT" (claim_ and
 * record_idempotency_key) and "live alerts" (the ledger's alert trigger);
 * 0031-typed-settlement (the outcome_settlement type, outcome_settlement_of,
 * outcome_settlements_of). The TypeScript: src/money/settle.ts (dbSettleBet),
 * src/fair/outcome-settlement.ts (hubMakeOutcomeBet's statements),
 * src/money/fold.ts (the folds after a commit, the sweep).
 *
 * The house's side. Every bet of a currency changes that currency's one
 * bankroll row, and a transaction holds a row's lock until its commit is
 * flushed: bets that all updated the row would settle one flush at a time.
 * So while the row is in demand a bet settles against cover set aside in
 * advance (a bankroll slot, hub_hidden.bankroll_slot: cover the house may
 * still lose, room it may still win), locked with SKIP LOCKED, and writes
 * its house side as a pending row (hub_hidden.bankroll_pending) in its own
 * transaction. Right after that transaction commits, the server folds the
 * bankroll's pending rows into hub.bankroll (fold_bankroll_alone: its own
 * statement, one bankroll update and so one house ledger row per bet),
 * before the game answers. A bet that finds the row free and no slot in use
 * settles on the row itself and leaves nothing to fold; so do the bets of an
 * outcome group after the first took the row.
 *
 * When the bankroll includes a bet: settled on the row, at its commit;
 * settled on a slot, when the fold after its commit commits, which is before
 * the game answers (src/money/fold.ts). A fold that fails is logged with the
 * bankroll and retried until it succeeds, and every server sweeps every
 * second what no fold took (a game that committed its transaction itself, a
 * server that died between a commit and its fold). Until then the house side
 * is in bankroll_pending, committed: bankroll + pending is always exact, and
 * the free cover a bet is checked against already counts it.
 *
 * Lock order (the hub's, at the top of 0030-lock-order): 1. idempotency
 * keys, by (scope, key); 2. hash chains, by id; 3. player balances, by id;
 * 5. slots, only ever with SKIP LOCKED (no transaction waits for a slot);
 * 6. bankroll rows, and a transaction that takes several (an outcome group)
 * takes them in (casino_id, currency_key) order. A fold takes one bankroll
 * row, then its pending rows and slots with SKIP LOCKED.
 *
 * Invariants, each kept by the SQL below it:
 *   - A bet is all or nothing: its balance change, its house side (on the
 *     row, or a slot and a pending row), its ledger rows and (outcome bets)
 *     its hash and bet row are written in one transaction; a refusal writes
 *     nothing and says why in `status` (settled, unknown-currency,
 *     no-balance, insufficient-funds, balance-overflow, no-bankroll,
 *     no-cover, bankroll-overflow; chain-moved for outcome bets; replayed,
 *     key-reused for the *_once forms).
 *   - The house covers every accepted bet's largest payout. The bankroll's
 *     free cover is amount − what slots hold back (bankroll_reserved, pending
 *     rows counted); a bet on the row needs free cover ≥ max_payout − wager;
 *     a bet on a slot needs the slot's cover ≥ the same, and a slot's cover
 *     was free cover when set aside. So the bankroll with every committed bet
 *     applied is never below 0.
 *   - No account passes 2^53 − 1: a balance by the bet's largest payout
 *     (balance-overflow), the bankroll by the wager (bankroll-overflow, the
 *     slots' room).
 *   - Every settled bet is in the ledger with its id, actor and reason, a net
 *     of 0 included: the player's row when it settles, the house's row at the
 *     same commit (on the row) or at its fold.
 *   - A pending row is folded exactly once: a fold deletes the rows it
 *     applies in its own transaction, taking them FOR UPDATE SKIP LOCKED.
 *   - An idempotency key makes one effect: a replay answers the first answer
 *     and takes no hash; a refused bet leaves its key unused.
 *
 * The functions of earlier versions (settle_bet_shared, settle_bet and
 * settle_bet_once with positional arguments, the positional
 * settle_outcome_bet(s) and *_once of the baseline) stay for one release:
 * during a rolling restart the instances of the previous version still call
 * them on a database a new instance migrated (the house sides they leave
 * pending reach the bankroll by the sweep). Nothing of this version calls
 * them; a later migration drops them. The typed functions of 0031 are
 * replaced here with the same arguments, each answering pending_bankroll
 * too, which the previous version's queries do not select.
 */

/*
 * One bet's money (src/money/settle.ts, SettleBetInput, builds it).
 *
 *   user_id, casino_id, experience_id, currency_key   whose balance, which bankroll;
 *   bet_id          the bet's id, or null for a new one (UUIDv7);
 *   wager, payout   whole base units: the balance pays wager into the house
 *                   and receives payout from it (net = payout − wager);
 *   max_payout      the bet's largest possible payout (≥ payout): the house
 *                   must cover max_payout − wager;
 *   expected_value  the house's expected gain, added to the bankroll's statistic;
 *   actor, reason   the ledger rows' tags.
 */
create type hub_hidden.bet_settlement as (
  user_id uuid, casino_id uuid, experience_id uuid, currency_key text,
  bet_id uuid, wager float8, payout float8, max_payout float8, expected_value float8,
  actor text, reason text
);

/* One bet from a JSON object with the type's field names (a missing one is null, an unknown one ignored). */
create function hub_hidden.bet_settlement_of(p_bet jsonb) returns hub_hidden.bet_settlement
language sql stable as $fn$
  select jsonb_populate_record(null::hub_hidden.bet_settlement, p_bet)
$fn$;

/*
 * Set aside cover for bets to come and settle a bet against it: put a 64th
 * of the bankroll's free cover and room (at least this bet's) into the
 * least-filled slot not in use, or a new one (at most 64 a bankroll), with
 * the bet's house side p_delta applied. The caller holds the bankroll row
 * and has checked that the free cover holds p_need. Answers the slot, or
 * null when every slot is in use (nothing written).
 */
create function hub_hidden.fill_bankroll_slot(p_bankroll_id uuid, p_free float8, p_free_room float8, p_need float8, p_gain float8, p_delta float8)
returns bigint language plpgsql as $fn$
declare
  v_cover float8 := least(p_free, greatest(p_need, floor(p_free / 64)));
  v_room float8 := least(p_free_room, greatest(p_gain, floor(p_free_room / 64)));
  v_slot bigint;
begin
  update hub_hidden.bankroll_slot s set cover = s.cover + v_cover + p_delta, room = s.room + v_room - p_delta, used_at = now()
   where s.id = (select y.id from hub_hidden.bankroll_slot y where y.bankroll_id = p_bankroll_id
                  order by y.cover, y.id limit 1 for no key update skip locked)
  returning s.id into v_slot;
  if v_slot is null and (select count(*) from hub_hidden.bankroll_slot y where y.bankroll_id = p_bankroll_id) < 64 then
    insert into hub_hidden.bankroll_slot (bankroll_id, cover, room) values (p_bankroll_id, v_cover + p_delta, v_room - p_delta)
    returning id into v_slot;
  end if;
  return v_slot;
end
$fn$;

/*
 * One bet's money, in one call (dbSettleBet; settle_outcome_bet).
 *
 * Locks: the player's balance (step 3); then a slot not in use with enough
 * cover and room (step 5, SKIP LOCKED); else the bankroll row (step 6).
 * Checks: every field but bet_id given, whole amounts, max_payout ≥ payout,
 * a finite expected value (else it raises: a caller's bug, not a refusal);
 * the currency, the balance and its funds, 2^53 − 1 for the balance; then
 * the house's free cover and room (on a slot, the slot's). Short on the row: the bankroll's pending rows are
 * folded and its idle slots released, and checked again, before refusing.
 * Writes, when settled: the balance (its ledger row tagged with the bet's
 * id); the house side either on the row (bets, wagered, expected value; its
 * ledger row) or, on a slot, the slot's cover and room and a pending row.
 * The bet goes on a slot when one not in use holds enough; or when it had to
 * wait for the row, or slots are in use, and a 64th of the free cover holds
 * its cover: then it sets that much aside in a slot and settles against it
 * (fill_bankroll_slot), so the bets after it need not wait. Near the edge (a
 * bet's cover more than a 64th of what is free) it settles on the row.
 * Returns: one row: status ('settled' or the refusal), the balance after
 * (null when unknown), the bet's id, and pending_bankroll: the bankroll to
 * fold after the commit (null when the bet settled on the row).
 */
create function hub_hidden.settle_bet(p_bet hub_hidden.bet_settlement)
returns table (status text, balance float8, bet_id uuid, pending_bankroll uuid)
language plpgsql as $fn$
declare
  v_bet_id uuid := coalesce(p_bet.bet_id, hub_hidden.uuid_generate_v7());
  v_need float8 := p_bet.max_payout - p_bet.wager;
  v_delta float8 := p_bet.wager - p_bet.payout;
  v_gain float8 := greatest(p_bet.wager - p_bet.payout, 0);
  v_balance_id uuid;
  v_amount float8;
  v_bankroll_id uuid;
  v_bankroll float8;
  v_reserved record;
  v_previous text[];
  v_slot bigint;
  v_busy boolean;
  v_free float8;
  v_free_room float8;
begin
  if num_nulls(p_bet.user_id, p_bet.casino_id, p_bet.experience_id, p_bet.currency_key, p_bet.wager, p_bet.payout, p_bet.max_payout,
               p_bet.expected_value, p_bet.actor, p_bet.reason) > 0 then
    raise exception 'settle_bet: every field of the bet but bet_id must be given (bet %).', coalesce(p_bet.bet_id::text, 'new')
      using errcode = 'P0001';
  end if;
  if not hub_hidden.is_whole_amount(p_bet.wager, 0) or not hub_hidden.is_whole_amount(p_bet.payout, 0)
     or not hub_hidden.is_whole_amount(p_bet.max_payout, p_bet.payout) or not (p_bet.expected_value > '-Infinity' and p_bet.expected_value < 'Infinity') then
    raise exception 'settle_bet: wager %, payout % and max_payout % must be whole base units from 0 to 9007199254740991 with max_payout >= payout, and the expected value % finite.',
      hub_hidden.ledger_amount_text(p_bet.wager), hub_hidden.ledger_amount_text(p_bet.payout), hub_hidden.ledger_amount_text(p_bet.max_payout), p_bet.expected_value
      using errcode = 'P0001', constraint = 'ledger_amount_whole';
  end if;
  select b.id, b.amount into v_balance_id, v_amount from hub.balance b
   where b.user_id = p_bet.user_id and b.experience_id = p_bet.experience_id and b.currency_key = p_bet.currency_key and b.casino_id = p_bet.casino_id
   for update;
  if not found then
    if not exists (select 1 from hub.currency c where c.key = p_bet.currency_key and c.casino_id = p_bet.casino_id) then
      return query select 'unknown-currency'::text, null::float8, null::uuid, null::uuid; return;
    end if;
    return query select 'no-balance'::text, null::float8, null::uuid, null::uuid; return;
  end if;
  if v_amount < p_bet.wager then return query select 'insufficient-funds'::text, v_amount, null::uuid, null::uuid; return; end if;
  if v_amount + v_need > 9007199254740991 then return query select 'balance-overflow'::text, v_amount, null::uuid, null::uuid; return; end if;
  select r.id into v_bankroll_id from hub.bankroll r where r.casino_id = p_bet.casino_id and r.currency_key = p_bet.currency_key;
  if not found then return query select 'no-bankroll'::text, v_amount, null::uuid, null::uuid; return; end if;

  -- A slot not in use that holds this bet's cover and room.
  update hub_hidden.bankroll_slot s set cover = s.cover + v_delta, room = s.room - v_delta, used_at = now()
   where s.id = (select y.id from hub_hidden.bankroll_slot y
                  where y.bankroll_id = v_bankroll_id and y.cover >= v_need and y.room >= v_gain
                  order by y.id limit 1 for no key update skip locked)
  returning s.id into v_slot;

  if v_slot is null then
    -- The row. Busy: slots in use (recent demand), or another bet holds it now.
    v_busy := exists (select 1 from hub_hidden.bankroll_slot y where y.bankroll_id = v_bankroll_id and (y.cover > 0 or y.room > 0));
    if not v_busy then
      perform 1 from hub.bankroll r where r.id = v_bankroll_id for no key update skip locked;
      v_busy := not found;
    end if;
    if v_busy then
      perform 1 from hub.bankroll r where r.id = v_bankroll_id for no key update;
    end if;
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
    if v_free < v_need then return query select 'no-cover'::text, v_amount, null::uuid, null::uuid; return; end if;
    if v_free_room < v_gain then return query select 'bankroll-overflow'::text, v_amount, null::uuid, null::uuid; return; end if;
    if v_busy and floor(v_free / 64) >= v_need then
      v_slot := hub_hidden.fill_bankroll_slot(v_bankroll_id, v_free, v_free_room, v_need, v_gain, v_delta);
    end if;
  end if;

  v_previous := hub_hidden.ledger_begin('settle_bet', p_bet.actor, p_bet.reason, v_bet_id);
  if v_slot is null then
    update hub.bankroll r
       set amount = r.amount + v_delta, bets = r.bets + (p_bet.wager > 0)::int,
           -- A statistic: it stops at 2^53 − 1 rather than refuse bets.
           wagered = least(r.wagered + p_bet.wager, 9007199254740991), expected_value = r.expected_value + p_bet.expected_value
     where r.id = v_bankroll_id;
  else
    insert into hub_hidden.bankroll_pending (bankroll_id, slot_id, bet_id, delta, counted, wagered, expected_value, actor, reason)
    values (v_bankroll_id, v_slot, v_bet_id, v_delta, (p_bet.wager > 0)::int, p_bet.wager, p_bet.expected_value, p_bet.actor, p_bet.reason);
  end if;
  update hub.balance b set amount = b.amount - v_delta where b.id = v_balance_id returning b.amount into v_amount;
  perform hub_hidden.ledger_end(v_previous);
  return query select 'settled'::text, v_amount, v_bet_id, case when v_slot is null then null::uuid else v_bankroll_id end;
end
$fn$;

/*
 * settle_bet with an idempotency key, in one statement (so one transaction
 * even on a client outside one).
 *
 * Locks: the key (step 1, claim_idempotency_key) before the balance: a
 * replay answers even once the first bet spent the balance.
 * Checks: the key's claim: 'replayed' answers the stored settlement (p_answer
 * then unused), 'key-reused' names the operation that holds the key.
 * Writes: settle_bet's; a settlement records p_answer with the bet's id and
 * balance on the key; a refusal deletes a claim it made itself (a claim the
 * caller's transaction made first stays the caller's to keep or roll back).
 */
create function hub_hidden.settle_bet_once(
  p_bet hub_hidden.bet_settlement, p_scope text, p_key text, p_operation text, p_fingerprint text, p_answer jsonb
) returns table (status text, balance float8, bet_id uuid, pending_bankroll uuid, stored jsonb, stored_operation text)
language plpgsql as $fn$
declare
  v_claim record;
  v_settled record;
begin
  select * into v_claim from hub_hidden.claim_idempotency_key(p_scope, p_key, p_operation, p_fingerprint);
  if v_claim.status = 'replay' then
    return query select 'replayed'::text, null::float8, v_claim.result_id, null::uuid, v_claim.result, v_claim.operation;
    return;
  end if;
  if v_claim.status = 'reused' then
    return query select 'key-reused'::text, null::float8, null::uuid, null::uuid, null::jsonb, v_claim.operation;
    return;
  end if;
  select * into v_settled from hub_hidden.settle_bet(p_bet);
  if v_settled.status = 'settled' then
    perform hub_hidden.record_idempotency_key(p_scope, p_key, v_settled.bet_id,
      p_answer || jsonb_build_object('betId', v_settled.bet_id, 'balance', v_settled.balance));
  elsif v_claim.status = 'claimed' then
    delete from hub_hidden.idempotency_key k where k.scope = p_scope and k.key = p_key;
    perform set_config('hub.idempotency_claim', '', true);
  end if;
  return query select v_settled.status, v_settled.balance, v_settled.bet_id, v_settled.pending_bankroll, null::jsonb, p_operation;
end
$fn$;

-- hubMakeOutcomeBet's functions answer the bankroll to fold too (a new result column: replaced, not altered).
drop function hub_hidden.settle_outcome_bet_once(hub_hidden.outcome_settlement);
drop function hub_hidden.settle_outcome_bet(hub_hidden.outcome_settlement);

/*
 * One outcome bet, in one statement (the idempotency fields are ignored: see
 * settle_outcome_bet_once). The row p_bet is hub_hidden.outcome_settlement
 * (0031-typed-settlement; OutcomeSettlement in src/fair/outcome-settlement.ts).
 *
 * Locks: the chain (step 2), then settle_bet's.
 * Checks: every field but bet_id, metadata and the idempotency fields is
 * given (else it raises: a JSON null, or a NaN that JSON wrote as null, must
 * not reach the amounts' checks as an unknown). The chain is the player's,
 * in this casino and experience, active, and its next hash is still
 * p_bet.iteration (the caller drew the outcome from it without a lock); else
 * 'chain-moved' and nothing is written. Then settle_bet's checks.
 * Writes, when settled: settle_bet's, the chain's next iteration, the
 * revealed hash (INTERMEDIATE, with the client seed) and the hub.outcome_bet row.
 * Returns: settle_bet's row (the bet's id only when settled).
 */
create function hub_hidden.settle_outcome_bet(p_bet hub_hidden.outcome_settlement)
returns table (status text, balance float8, bet_id uuid, pending_bankroll uuid)
language plpgsql as $fn$
declare
  v_settled record;
  v_hash_id uuid;
begin
  if num_nulls(p_bet.user_id, p_bet.casino_id, p_bet.experience_id, p_bet.currency_key, p_bet.wager, p_bet.payout, p_bet.max_payout,
               p_bet.expected_value, p_bet.actor, p_bet.reason, p_bet.hash_chain_id, p_bet.iteration, p_bet.digest, p_bet.client_seed,
               p_bet.kind, p_bet.profit, p_bet.outcome_idx, p_bet.weights, p_bet.profits) > 0 then
    raise exception 'settle_outcome_bet: every field of the bet but bet_id, metadata and the idempotency fields must be given (bet %, chain %).',
      coalesce(p_bet.bet_id::text, 'new'), coalesce(p_bet.hash_chain_id::text, 'none')
      using errcode = 'P0001';
  end if;
  perform 1 from hub.hash_chain c
   where c.id = p_bet.hash_chain_id and c.user_id = p_bet.user_id and c.casino_id = p_bet.casino_id and c.experience_id = p_bet.experience_id
     and c.active and c.current_iteration = p_bet.iteration + 1
   for update;
  if not found then return query select 'chain-moved'::text, null::float8, null::uuid, null::uuid; return; end if;
  select * into v_settled from hub_hidden.settle_bet(row(p_bet.user_id, p_bet.casino_id, p_bet.experience_id, p_bet.currency_key,
    p_bet.bet_id, p_bet.wager, p_bet.payout, p_bet.max_payout, p_bet.expected_value, p_bet.actor, p_bet.reason)::hub_hidden.bet_settlement);
  if v_settled.status <> 'settled' then return query select v_settled.status, v_settled.balance, null::uuid, null::uuid; return; end if;
  update hub.hash_chain set current_iteration = p_bet.iteration where id = p_bet.hash_chain_id;
  insert into hub.hash (hash_chain_id, kind, digest, iteration, client_seed)
  values (p_bet.hash_chain_id, 'INTERMEDIATE', p_bet.digest, p_bet.iteration, p_bet.client_seed) returning id into v_hash_id;
  insert into hub.outcome_bet (id, kind, wager, profit, net, outcomes, outcome_idx, currency_key, hash_id, user_id, casino_id, experience_id, metadata)
  values (v_settled.bet_id, p_bet.kind, p_bet.wager, p_bet.profit, p_bet.payout - p_bet.wager,
          coalesce((select array_agg(row(u.weight, u.profit)::hub.outcome order by u.n)
                      from unnest(p_bet.weights, p_bet.profits) with ordinality as u(weight, profit, n)), '{}'),
          p_bet.outcome_idx, p_bet.currency_key, v_hash_id, p_bet.user_id, p_bet.casino_id, p_bet.experience_id, coalesce(p_bet.metadata, '{}'));
  return query select 'settled'::text, v_settled.balance, v_settled.bet_id, v_settled.pending_bankroll;
end
$fn$;

/*
 * settle_outcome_bet with the bet's idempotency key (a null key settles
 * exactly as without one).
 *
 * Locks: the key (step 1, claim_idempotency_key), before the chain: a replay
 * takes no hash and no lock after the key's.
 * Checks: the key's claim: 'replayed' with the first bet's id when a
 * committed bet of the same fingerprint holds it; 'key-reused' when another
 * operation or fingerprint does; neither writes anything.
 * Writes: a settled bet records `answer` with its id and balance on the key;
 * a refused bet deletes its claim, so its key stays unused.
 * Returns: settle_outcome_bet's row, or the replay's.
 */
create function hub_hidden.settle_outcome_bet_once(p_bet hub_hidden.outcome_settlement)
returns table (status text, balance float8, bet_id uuid, pending_bankroll uuid)
language plpgsql as $fn$
declare
  v_claim record;
  v_settled record;
begin
  if p_bet.idempotency_key is not null then
    select * into v_claim from hub_hidden.claim_idempotency_key(p_bet.idempotency_scope, p_bet.idempotency_key, 'hubMakeOutcomeBet', p_bet.fingerprint);
    if v_claim.status = 'replay' then return query select 'replayed'::text, null::float8, v_claim.result_id, null::uuid; return; end if;
    if v_claim.status = 'reused' then return query select 'key-reused'::text, null::float8, null::uuid, null::uuid; return; end if;
  end if;
  select * into v_settled from hub_hidden.settle_outcome_bet(p_bet);
  if p_bet.idempotency_key is not null then
    if v_settled.status = 'settled' then
      perform hub_hidden.record_idempotency_key(p_bet.idempotency_scope, p_bet.idempotency_key, v_settled.bet_id,
        p_bet.answer || jsonb_build_object('betId', v_settled.bet_id, 'balance', v_settled.balance));
    else
      delete from hub_hidden.idempotency_key k where k.scope = p_bet.idempotency_scope and k.key = p_bet.idempotency_key;
      perform set_config('hub.idempotency_claim', '', true);
    end if;
  end if;
  return query select v_settled.status, v_settled.balance, v_settled.bet_id, v_settled.pending_bankroll;
end
$fn$;

-- The same for the groups, which now settle their bets bankroll by bankroll, in the order of step 6.
drop function hub_hidden.settle_outcome_bets_once(hub_hidden.outcome_settlement[]);
drop function hub_hidden.settle_outcome_bets(hub_hidden.outcome_settlement[]);

/*
 * Outcome bets of one or many bankrolls in one statement, so one commit: a
 * group shares the commit's cost (its flush, the live alerts' wake-up, the
 * round trip) and, for one bankroll, the row's lock once. Each bet settles
 * through settle_outcome_bet exactly as alone (the idempotency fields are
 * ignored: see settle_outcome_bets_once).
 *
 * Locks: every chain of the group by id (step 2), then every balance by id
 * (3), then bet by bet in the order (casino_id, currency_key), the array's
 * order within one bankroll: settle_bet's slot (5, SKIP LOCKED) or bankroll
 * row (6). Holding all of one step before the next, and the bankroll rows in
 * one global order, keeps the hub's order, so groups, single bets and other
 * groups cannot deadlock.
 * Checks and writes: each bet's, by settle_outcome_bet; a bet's cover is
 * checked with the bets before it of its bankroll applied.
 * Returns: one row per bet, n its index from 0 in p_bets.
 */
create function hub_hidden.settle_outcome_bets(p_bets hub_hidden.outcome_settlement[])
returns table (n integer, status text, balance float8, bet_id uuid, pending_bankroll uuid)
language plpgsql as $fn$
declare
  i integer;
begin
  perform 1 from hub.hash_chain c
   where c.id in (select b.hash_chain_id from unnest(p_bets) b)
   order by c.id
   for update;
  perform 1 from hub.balance x
   where (x.user_id, x.experience_id, x.currency_key, x.casino_id) in
         (select b.user_id, b.experience_id, b.currency_key, b.casino_id from unnest(p_bets) b)
   order by x.id
   for update;
  for i in
    select g from generate_subscripts(p_bets, 1) g order by p_bets[g].casino_id, p_bets[g].currency_key, g
  loop
    return query select i - 1, s.status, s.balance, s.bet_id, s.pending_bankroll from hub_hidden.settle_outcome_bet(p_bets[i]) s;
  end loop;
end
$fn$;

/*
 * settle_outcome_bets for a group in which some bets carry keys.
 *
 * Locks: every key of the group first, in (scope, key) order (step 1), then
 * settle_outcome_bets': a single keyed bet's order (key, chain, balance,
 * slot or bankroll), so groups and single bets cannot deadlock.
 * Checks: each key's claim, afresh (two bets of the group with one key are
 * a replay of each other only once the first commits). A replayed or reused
 * key's bet takes no other lock and writes nothing.
 * Writes: the rest settle as settle_outcome_bets settles them; then each
 * settled bet's key records its answer, and each refused bet's claim is
 * deleted.
 * Returns: one row per bet, n its index from 0 in p_bets.
 */
create function hub_hidden.settle_outcome_bets_once(p_bets hub_hidden.outcome_settlement[])
returns table (n integer, status text, balance float8, bet_id uuid, pending_bankroll uuid)
language plpgsql as $fn$
declare
  v_bet hub_hidden.outcome_settlement;
  i integer;
  v_claim record;
  v_claimed text[] := array_fill(null::text, array[coalesce(cardinality(p_bets), 0)]);
  v_result uuid[] := array_fill(null::uuid, array[coalesce(cardinality(p_bets), 0)]);
  v_settle hub_hidden.outcome_settlement[] := '{}';
  v_index integer[] := '{}';
  v_row record;
begin
  for i in
    select g from generate_subscripts(p_bets, 1) g
     where p_bets[g].idempotency_key is not null
     order by p_bets[g].idempotency_scope, p_bets[g].idempotency_key
  loop
    perform set_config('hub.idempotency_claim', '', true);
    select * into v_claim from hub_hidden.claim_idempotency_key(p_bets[i].idempotency_scope, p_bets[i].idempotency_key, 'hubMakeOutcomeBet', p_bets[i].fingerprint);
    v_claimed[i] := v_claim.status;
    v_result[i] := v_claim.result_id;
  end loop;
  perform set_config('hub.idempotency_claim', '', true);
  for i in 1 .. coalesce(cardinality(p_bets), 0) loop
    if v_claimed[i] is not null and v_claimed[i] <> 'claimed' then
      return query select i - 1, case v_claimed[i] when 'replay' then 'replayed' else 'key-reused' end, null::float8, v_result[i], null::uuid;
    else
      v_settle := v_settle || p_bets[i];
      v_index := v_index || (i - 1);
    end if;
  end loop;
  if cardinality(v_settle) = 0 then return; end if;
  for v_row in select * from hub_hidden.settle_outcome_bets(v_settle) loop
    v_bet := v_settle[v_row.n + 1];
    if v_bet.idempotency_key is not null then
      if v_row.status = 'settled' then
        perform hub_hidden.record_idempotency_key(v_bet.idempotency_scope, v_bet.idempotency_key, v_row.bet_id,
          v_bet.answer || jsonb_build_object('betId', v_row.bet_id, 'balance', v_row.balance));
      else
        delete from hub_hidden.idempotency_key k where k.scope = v_bet.idempotency_scope and k.key = v_bet.idempotency_key;
      end if;
    end if;
    return query select v_index[v_row.n + 1], v_row.status, v_row.balance, v_row.bet_id, v_row.pending_bankroll;
  end loop;
end
$fn$;

revoke execute on function
  hub_hidden.bet_settlement_of(jsonb),
  hub_hidden.fill_bankroll_slot(uuid, float8, float8, float8, float8, float8),
  hub_hidden.settle_bet(hub_hidden.bet_settlement),
  hub_hidden.settle_bet_once(hub_hidden.bet_settlement, text, text, text, text, jsonb),
  hub_hidden.settle_outcome_bet(hub_hidden.outcome_settlement),
  hub_hidden.settle_outcome_bet_once(hub_hidden.outcome_settlement),
  hub_hidden.settle_outcome_bets(hub_hidden.outcome_settlement[]),
  hub_hidden.settle_outcome_bets_once(hub_hidden.outcome_settlement[])
  from public;
