/*
 * Idempotency keys of money mutations: a key a client sends with a bet, a
 * withdrawal or a faucet claim is stored with the request's fingerprint and
 * its answer in the transaction of the effect, so a retry with the same key
 * answers the stored result and moves nothing.
 *
 * scope: whose keys they are ('user:<id>' for a player, 'apikey:<id>' for an
 * operator's API key). A row older than
 * the retention (24 hours) no longer counts: a claim takes its key over, and
 * the server's sweep deletes it.
 */
create table hub_hidden.idempotency_key (
  scope text not null,
  key text not null,
  operation text not null,
  fingerprint text not null,
  result_id uuid,
  result jsonb,
  created_at timestamptz not null default now(),
  primary key (scope, key),
  constraint idempotency_key_length check (length(key) between 1 and 255)
);
create index idempotency_key_created_at on hub_hidden.idempotency_key (created_at);
revoke all on hub_hidden.idempotency_key from public;

/*
 * Claim a key for this transaction. 'claimed': the key is now this
 * transaction's (do the effect, then record its answer); 'own': this
 * transaction claimed it already; 'replay': a committed request with the same
 * operation and fingerprint holds it (its answer is returned); 'reused': it
 * holds another operation or fingerprint. A concurrent claim of the same key
 * waits on the primary key until the first transaction ends, then reads what
 * it committed (or claims the key itself when the first rolled back).
 */
create function hub_hidden.claim_idempotency_key(p_scope text, p_key text, p_operation text, p_fingerprint text)
returns table (status text, operation text, result_id uuid, result jsonb)
language plpgsql as $fn$
declare
  r hub_hidden.idempotency_key;
begin
  if current_setting('hub.idempotency_claim', true) = p_scope || ' ' || p_key then
    return query select 'own'::text, p_operation, null::uuid, null::jsonb;
    return;
  end if;
  insert into hub_hidden.idempotency_key as k (scope, key, operation, fingerprint)
  values (p_scope, p_key, p_operation, p_fingerprint)
  on conflict (scope, key) do update
     set operation = excluded.operation, fingerprint = excluded.fingerprint, result_id = null, result = null, created_at = now()
   where k.created_at < now() - interval '24 hours';
  if found then
    perform set_config('hub.idempotency_claim', p_scope || ' ' || p_key, true);
    return query select 'claimed'::text, p_operation, null::uuid, null::jsonb;
    return;
  end if;
  select * into r from hub_hidden.idempotency_key k where k.scope = p_scope and k.key = p_key;
  if r.operation = p_operation and r.fingerprint = p_fingerprint then
    return query select 'replay'::text, r.operation, r.result_id, r.result;
  else
    return query select 'reused'::text, r.operation, r.result_id, null::jsonb;
  end if;
end
$fn$;

/* The answer of the effect that claimed the key, in the same transaction. */
create function hub_hidden.record_idempotency_key(p_scope text, p_key text, p_result_id uuid, p_result jsonb)
returns void
language sql as $fn$
  update hub_hidden.idempotency_key set result_id = p_result_id, result = p_result where scope = p_scope and key = p_key;
$fn$;

/*
 * hub_hidden.settle_outcome_bet with an idempotency key (p_scope, p_key,
 * p_fingerprint; a null key settles exactly as without one). The key is
 * claimed before the chain's lock, so a replay takes no hash: 'replayed' with
 * the first bet's id, or 'key-reused'. A bet settled records its answer; a
 * refusal deletes the claim, so a refused bet leaves its key unused.
 */
create function hub_hidden.settle_outcome_bet_once(
  p_user_id uuid, p_casino_id uuid, p_experience_id uuid, p_currency_key text,
  p_bet_id uuid, p_wager float8, p_payout float8, p_max_payout float8, p_expected_value float8,
  p_actor text, p_reason text,
  p_hash_chain_id uuid, p_iteration integer, p_digest bytea, p_client_seed text,
  p_kind text, p_profit float8, p_outcome_idx integer, p_weights float8[], p_profits float8[], p_metadata jsonb,
  p_scope text, p_key text, p_fingerprint text, p_answer jsonb
) returns table (status text, balance float8, bet_id uuid)
language plpgsql as $fn$
declare
  v_claim record;
  v_settled record;
begin
  if p_key is not null then
    select * into v_claim from hub_hidden.claim_idempotency_key(p_scope, p_key, 'hubMakeOutcomeBet', p_fingerprint);
    if v_claim.status = 'replay' then return query select 'replayed'::text, null::float8, v_claim.result_id; return; end if;
    if v_claim.status = 'reused' then return query select 'key-reused'::text, null::float8, null::uuid; return; end if;
  end if;
  select * into v_settled from hub_hidden.settle_outcome_bet(p_user_id, p_casino_id, p_experience_id, p_currency_key,
    p_bet_id, p_wager, p_payout, p_max_payout, p_expected_value, p_actor, p_reason,
    p_hash_chain_id, p_iteration, p_digest, p_client_seed, p_kind, p_profit, p_outcome_idx, p_weights, p_profits, p_metadata);
  if p_key is not null then
    if v_settled.status = 'settled' then
      perform hub_hidden.record_idempotency_key(p_scope, p_key, v_settled.bet_id,
        p_answer || jsonb_build_object('betId', v_settled.bet_id, 'balance', v_settled.balance));
    else
      delete from hub_hidden.idempotency_key k where k.scope = p_scope and k.key = p_key;
      perform set_config('hub.idempotency_claim', '', true);
    end if;
  end if;
  return query select v_settled.status, v_settled.balance, v_settled.bet_id;
end
$fn$;

/*
 * hub_hidden.settle_outcome_bets for bets with keys: each element has the 25
 * arguments of settle_outcome_bet_once. The keys are claimed first, in key
 * order, before any chain or balance: the same order as a single bet's
 * (key, chain, balance, bankroll), so groups and single bets cannot deadlock.
 * A bet whose key is replayed or reused takes no lock and writes nothing.
 */
create function hub_hidden.settle_outcome_bets_once(p_bets jsonb)
returns table (n integer, status text, balance float8, bet_id uuid)
language plpgsql as $fn$
declare
  b jsonb;
  i integer := 0;
  v_claims jsonb := '{}';
  v_claim record;
  v_settle jsonb := '[]';
  v_index integer[] := '{}';
  v_row record;
begin
  if jsonb_typeof(p_bets) is distinct from 'array' then
    raise exception 'settle_outcome_bets_once: p_bets must be a JSON array of bets; received %.', coalesce(jsonb_typeof(p_bets), 'null')
      using errcode = 'P0001';
  end if;
  for b, i in
    select e, (k - 1)::integer from jsonb_array_elements(p_bets) with ordinality x(e, k)
     where e->>22 is not null order by e->>21, e->>22
  loop
    -- Each key is claimed afresh: two bets of the group with one key are a replay of each other only once the first commits.
    perform set_config('hub.idempotency_claim', '', true);
    select * into v_claim from hub_hidden.claim_idempotency_key(b->>21, b->>22, 'hubMakeOutcomeBet', b->>23);
    v_claims := v_claims || jsonb_build_object(i::text, jsonb_build_object('status', v_claim.status, 'result_id', v_claim.result_id));
  end loop;
  perform set_config('hub.idempotency_claim', '', true);
  i := 0;
  for b in select e from jsonb_array_elements(p_bets) e loop
    if v_claims ? i::text and v_claims->i::text->>'status' <> 'claimed' then
      return query select i,
        case v_claims->i::text->>'status' when 'replay' then 'replayed' else 'key-reused' end,
        null::float8, (v_claims->i::text->>'result_id')::uuid;
    else
      v_settle := v_settle || jsonb_build_array(b);
      v_index := v_index || i;
    end if;
    i := i + 1;
  end loop;
  if jsonb_array_length(v_settle) = 0 then return; end if;
  for v_row in select * from hub_hidden.settle_outcome_bets(v_settle) loop
    b := v_settle->v_row.n;
    if b->>22 is not null then
      if v_row.status = 'settled' then
        perform hub_hidden.record_idempotency_key(b->>21, b->>22, v_row.bet_id,
          (b->24) || jsonb_build_object('betId', v_row.bet_id, 'balance', v_row.balance));
      else
        delete from hub_hidden.idempotency_key k where k.scope = b->>21 and k.key = b->>22;
      end if;
    end if;
    return query select v_index[v_row.n + 1], v_row.status, v_row.balance, v_row.bet_id;
  end loop;
end
$fn$;

/*
 * dbSettleBet with an idempotency key, in one statement (so one transaction
 * even on a client outside one): the key is claimed before the balance's lock;
 * 'replayed' answers the stored settlement (p_answer then unused), 'key-reused'
 * the operation that holds the key. A settlement records p_answer with the
 * bet's id and balance; a refusal deletes a claim it made itself (a claim the
 * caller's transaction made first stays the caller's to keep or roll back).
 */
create function hub_hidden.settle_bet_once(
  p_scope text, p_key text, p_operation text, p_fingerprint text,
  p_user_id uuid, p_casino_id uuid, p_experience_id uuid, p_currency_key text,
  p_bet_id uuid, p_wager float8, p_payout float8, p_max_payout float8, p_expected_value float8,
  p_actor text, p_reason text, p_answer jsonb
) returns table (status text, balance float8, bet_id uuid, pending_bankroll uuid, stored jsonb, stored_operation text)
language plpgsql as $fn$
declare
  v_claim record;
  v_settled record;
  v_bet_id uuid := coalesce(p_bet_id, hub_hidden.uuid_generate_v7());
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
  select * into v_settled from hub_hidden.settle_bet_shared(p_user_id, p_casino_id, p_experience_id, p_currency_key,
    v_bet_id, p_wager, p_payout, p_max_payout, p_expected_value, p_actor, p_reason, true);
  if v_settled.status = 'settled' then
    perform hub_hidden.record_idempotency_key(p_scope, p_key, v_bet_id,
      p_answer || jsonb_build_object('betId', v_bet_id, 'balance', v_settled.balance));
  elsif v_claim.status = 'claimed' then
    delete from hub_hidden.idempotency_key k where k.scope = p_scope and k.key = p_key;
    perform set_config('hub.idempotency_claim', '', true);
  end if;
  return query select v_settled.status, v_settled.balance, v_bet_id, v_settled.pending_bankroll, null::jsonb, p_operation;
end
$fn$;

revoke execute on function
  hub_hidden.settle_bet_once(text, text, text, text, uuid, uuid, uuid, text, uuid, float8, float8, float8, float8, text, text, jsonb),
  hub_hidden.claim_idempotency_key(text, text, text, text),
  hub_hidden.record_idempotency_key(text, text, uuid, jsonb),
  hub_hidden.settle_outcome_bet_once(uuid, uuid, uuid, text, uuid, float8, float8, float8, float8, text, text, uuid, integer, bytea, text, text, float8, integer, float8[], float8[], jsonb, text, text, text, jsonb),
  hub_hidden.settle_outcome_bets_once(jsonb)
  from public;
