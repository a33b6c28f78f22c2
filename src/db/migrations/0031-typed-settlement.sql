/*
 * hubMakeOutcomeBet's settlement takes one named row per bet,
 * hub_hidden.outcome_settlement, instead of 21 (25 with a key) positional
 * arguments; the grouped forms take an array of them. The server sends each
 * bet as one JSON object with the type's field names, read by
 * hub_hidden.outcome_settlement_of (one bet) or outcome_settlements_of (a
 * group). What each function checks, locks and writes is as before.
 *
 * Lock order (the hub's, at the top of 0030-lock-order): 1. idempotency keys
 * by (scope, key); 2. hash chains by id; 3. balances by id; 6. the bankroll
 * row. Outcome bets never take a bankroll slot (step 5): settle_bet settles
 * on the row.
 */

/*
 * The positional functions of the baseline (settle_outcome_bet with 21
 * arguments, settle_outcome_bet_once with 25, settle_outcome_bets(jsonb),
 * settle_outcome_bets_once(jsonb)) stay for one release: during a rolling
 * restart the instances of the previous version still call them on the
 * database the first new instance migrated. Nothing of this version calls
 * them; a later migration drops them.
 */

/*
 * One outcome bet as hubMakeOutcomeBet drew it (src/fair/settle-group.ts,
 * OutcomeSettlement, is the same row in TypeScript).
 *
 *   user_id, casino_id, experience_id, currency_key   whose balance, which bankroll;
 *   bet_id          the bet's id, or null for a new one;
 *   wager, payout, max_payout   whole base units: the balance pays wager and
 *                   receives payout; the bankroll must cover max_payout;
 *   expected_value  the house's expected gain, added to the bankroll's statistic;
 *   actor, reason   the ledger rows' tags;
 *   hash_chain_id, iteration   the chain and the hash the outcome was drawn
 *                   from: its next one, or the bet is 'chain-moved';
 *   digest, client_seed   that hash and the client's seed, stored with it;
 *   kind, profit, outcome_idx   the game, the drawn outcome's profit and index;
 *   weights, profits   every outcome, stored with the bet (empty: not stored);
 *   metadata        the client's JSON, or null;
 *   idempotency_scope, idempotency_key, fingerprint   the client's key (null:
 *                   none), read only by the *_once functions;
 *   answer          what the key stores as the first bet's answer (the
 *                   bet's id and balance are added).
 */
create type hub_hidden.outcome_settlement as (
  user_id uuid, casino_id uuid, experience_id uuid, currency_key text,
  bet_id uuid, wager float8, payout float8, max_payout float8, expected_value float8,
  actor text, reason text,
  hash_chain_id uuid, iteration integer, digest bytea, client_seed text,
  kind text, profit float8, outcome_idx integer, weights float8[], profits float8[], metadata jsonb,
  idempotency_scope text, idempotency_key text, fingerprint text, answer jsonb
);

/*
 * One bet from its JSON object: every field by name (a missing one is null,
 * an unknown one ignored; the digest as "\x" and hex). A value that does not
 * fit its field's type raises Postgres's own error (22P02 and the like).
 */
create function hub_hidden.outcome_settlement_of(p_bet jsonb) returns hub_hidden.outcome_settlement
language sql stable as $fn$
  select jsonb_populate_record(null::hub_hidden.outcome_settlement, p_bet)
$fn$;

/* A group from a JSON array of such objects, in the array's order. */
create function hub_hidden.outcome_settlements_of(p_bets jsonb) returns hub_hidden.outcome_settlement[]
language plpgsql stable as $fn$
begin
  if jsonb_typeof(p_bets) is distinct from 'array' then
    raise exception 'outcome_settlements_of: p_bets must be a JSON array of bets; received %.', coalesce(jsonb_typeof(p_bets), 'null')
      using errcode = 'P0001';
  end if;
  return array(select jsonb_populate_record(null::hub_hidden.outcome_settlement, e) from jsonb_array_elements(p_bets) with ordinality x(e, k) order by k);
end
$fn$;

/*
 * One bet, in one statement (the idempotency fields are ignored: see
 * settle_outcome_bet_once).
 *
 * Locks: the chain (step 2), then, in settle_bet, the balance (3) and the
 * bankroll row (6).
 * Checks: every field but bet_id, metadata and the idempotency fields is
 * given (else it raises: a JSON null, or a NaN that JSON wrote as null,
 * must not reach the amounts' checks as an unknown). The chain is the
 * player's, in this casino and experience, active,
 * and its next hash is still p_bet.iteration (the caller drew the outcome
 * from it without a lock); else 'chain-moved' and nothing is written. Then
 * settle_bet's checks: whole amounts (else it raises), the currency, the
 * balance and its funds, the bankroll's free cover of max_payout, 2^53 − 1
 * (a refusal is its status, and nothing is written).
 * Writes, when settled: the balance and bankroll with their ledger rows
 * (tagged with the bet's id), the chain's next iteration, the revealed hash
 * (INTERMEDIATE, with the client seed) and the hub.outcome_bet row.
 * Returns: one row, status ('settled' or the refusal), the balance after
 * (null when unknown), the bet's id (only when settled).
 */
create function hub_hidden.settle_outcome_bet(p_bet hub_hidden.outcome_settlement)
returns table (status text, balance float8, bet_id uuid)
language plpgsql as $fn$
declare
  v_settled record;
  v_hash_id uuid;
  v_bet_id uuid := coalesce(p_bet.bet_id, hub_hidden.uuid_generate_v7());
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
  if not found then return query select 'chain-moved'::text, null::float8, null::uuid; return; end if;
  select * into v_settled from hub_hidden.settle_bet(p_bet.user_id, p_bet.casino_id, p_bet.experience_id, p_bet.currency_key,
    v_bet_id, p_bet.wager, p_bet.payout, p_bet.max_payout, p_bet.expected_value, p_bet.actor, p_bet.reason);
  if v_settled.status <> 'settled' then return query select v_settled.status, v_settled.balance, null::uuid; return; end if;
  update hub.hash_chain set current_iteration = p_bet.iteration where id = p_bet.hash_chain_id;
  insert into hub.hash (hash_chain_id, kind, digest, iteration, client_seed)
  values (p_bet.hash_chain_id, 'INTERMEDIATE', p_bet.digest, p_bet.iteration, p_bet.client_seed) returning id into v_hash_id;
  insert into hub.outcome_bet (id, kind, wager, profit, net, outcomes, outcome_idx, currency_key, hash_id, user_id, casino_id, experience_id, metadata)
  values (v_bet_id, p_bet.kind, p_bet.wager, p_bet.profit, p_bet.payout - p_bet.wager,
          coalesce((select array_agg(row(u.weight, u.profit)::hub.outcome order by u.n)
                      from unnest(p_bet.weights, p_bet.profits) with ordinality as u(weight, profit, n)), '{}'),
          p_bet.outcome_idx, p_bet.currency_key, v_hash_id, p_bet.user_id, p_bet.casino_id, p_bet.experience_id, coalesce(p_bet.metadata, '{}'));
  return query select 'settled'::text, v_settled.balance, v_bet_id;
end
$fn$;

/*
 * A group of bets of one casino's currency, in one statement and so one
 * commit (the idempotency fields are ignored: see settle_outcome_bets_once).
 *
 * Locks: every chain of the group by id (step 2), then every balance by id
 * (3), then the bankroll row (6), taken by the first bet's settlement and
 * held to the commit. Holding all of one step before the next keeps the
 * hub's order, so groups and single bets cannot deadlock.
 * Checks and writes: each bet's, by settle_outcome_bet exactly as alone, in
 * the array's order; each bet's cover is checked with the bets before it
 * applied.
 * Returns: one row per bet, n its index from 0.
 */
create function hub_hidden.settle_outcome_bets(p_bets hub_hidden.outcome_settlement[])
returns table (n integer, status text, balance float8, bet_id uuid)
language plpgsql as $fn$
declare
  v_bet hub_hidden.outcome_settlement;
  i integer := 0;
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
  foreach v_bet in array coalesce(p_bets, '{}') loop
    return query select i, s.status, s.balance, s.bet_id from hub_hidden.settle_outcome_bet(v_bet) s;
    i := i + 1;
  end loop;
end
$fn$;

/*
 * settle_outcome_bet with the bet's idempotency key (a null key settles
 * exactly as without one).
 *
 * Locks: the key (step 1, claim_idempotency_key), before the chain: a
 * replay takes no hash and no lock after the key's.
 * Checks: the key's claim. 'replayed' with the first bet's id when a
 * committed bet of the same fingerprint holds it; 'key-reused' when another
 * operation or fingerprint does; neither writes anything.
 * Writes: a settled bet records `answer` with its id and balance on the key;
 * a refused bet deletes its claim, so its key stays unused.
 * Returns: settle_outcome_bet's row, or the replay's.
 */
create function hub_hidden.settle_outcome_bet_once(p_bet hub_hidden.outcome_settlement)
returns table (status text, balance float8, bet_id uuid)
language plpgsql as $fn$
declare
  v_claim record;
  v_settled record;
begin
  if p_bet.idempotency_key is not null then
    select * into v_claim from hub_hidden.claim_idempotency_key(p_bet.idempotency_scope, p_bet.idempotency_key, 'hubMakeOutcomeBet', p_bet.fingerprint);
    if v_claim.status = 'replay' then return query select 'replayed'::text, null::float8, v_claim.result_id; return; end if;
    if v_claim.status = 'reused' then return query select 'key-reused'::text, null::float8, null::uuid; return; end if;
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
  return query select v_settled.status, v_settled.balance, v_settled.bet_id;
end
$fn$;

/*
 * settle_outcome_bets for a group in which some bets carry keys.
 *
 * Locks: every key of the group first, in (scope, key) order (step 1), then
 * settle_outcome_bets' chains, balances and bankroll: a single keyed bet's
 * order (key, chain, balance, bankroll), so groups and single bets cannot
 * deadlock.
 * Checks: each key's claim, afresh (two bets of the group with one key are
 * a replay of each other only once the first commits). A replayed or reused
 * key's bet takes no other lock and writes nothing.
 * Writes: the rest settle as settle_outcome_bets settles them; then each
 * settled bet's key records its answer, and each refused bet's claim is
 * deleted.
 * Returns: one row per bet, n its index from 0 in p_bets.
 */
create function hub_hidden.settle_outcome_bets_once(p_bets hub_hidden.outcome_settlement[])
returns table (n integer, status text, balance float8, bet_id uuid)
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
      return query select i - 1, case v_claimed[i] when 'replay' then 'replayed' else 'key-reused' end, null::float8, v_result[i];
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
    return query select v_index[v_row.n + 1], v_row.status, v_row.balance, v_row.bet_id;
  end loop;
end
$fn$;

revoke execute on function
  hub_hidden.outcome_settlement_of(jsonb),
  hub_hidden.outcome_settlements_of(jsonb),
  hub_hidden.settle_outcome_bet(hub_hidden.outcome_settlement),
  hub_hidden.settle_outcome_bets(hub_hidden.outcome_settlement[]),
  hub_hidden.settle_outcome_bet_once(hub_hidden.outcome_settlement),
  hub_hidden.settle_outcome_bets_once(hub_hidden.outcome_settlement[])
  from public;
