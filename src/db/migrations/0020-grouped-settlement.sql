/*
 * Bets of one casino's currency settled together in one statement, so one
 * commit (one WAL flush, the bankroll row's lock held once) carries many
 * bets. Each bet is settled by hub_hidden.settle_outcome_bet exactly as when
 * alone: the same checks, the bankroll's cover checked before each bet with
 * the bets before it applied, one ledger row per balance and bankroll update.
 *
 * p_bets: a JSON array, one element per bet, each the arguments of
 * settle_outcome_bet in its order (the digest as hex, the weights and
 * profits as JSON arrays, the metadata as JSON text or null). Answers one
 * row per bet, n from 0 in the array's order.
 *
 * Locks: every chain of the group, then every balance, each in id order, and
 * only then the bankroll (by the first settlement). A single bet takes chain,
 * balance, bankroll; holding all of one kind before the next keeps the
 * hub's order, so a group and single bets, or two groups, cannot deadlock.
 */
create function hub_hidden.settle_outcome_bets(p_bets jsonb)
returns table (n integer, status text, balance float8, bet_id uuid)
language plpgsql as $fn$
declare
  b jsonb;
  i integer := 0;
begin
  if jsonb_typeof(p_bets) is distinct from 'array' then
    raise exception 'settle_outcome_bets: p_bets must be a JSON array of bets; received %.', coalesce(jsonb_typeof(p_bets), 'null')
      using errcode = 'P0001';
  end if;
  perform 1 from hub.hash_chain c
   where c.id in (select (e->>11)::uuid from jsonb_array_elements(p_bets) e)
   order by c.id
   for update;
  perform 1 from hub.balance x
   where (x.user_id, x.experience_id, x.currency_key, x.casino_id) in
         (select (e->>0)::uuid, (e->>2)::uuid, e->>3, (e->>1)::uuid from jsonb_array_elements(p_bets) e)
   order by x.id
   for update;
  for b in select e from jsonb_array_elements(p_bets) e loop
    return query
      select i, s.status, s.balance, s.bet_id
        from hub_hidden.settle_outcome_bet(
          (b->>0)::uuid, (b->>1)::uuid, (b->>2)::uuid, b->>3,
          (b->>4)::uuid, (b->>5)::float8, (b->>6)::float8, (b->>7)::float8, (b->>8)::float8,
          b->>9, b->>10,
          (b->>11)::uuid, (b->>12)::integer, decode(b->>13, 'hex'), b->>14,
          b->>15, (b->>16)::float8, (b->>17)::integer,
          array(select w.x::float8 from jsonb_array_elements_text(b->18) with ordinality w(x, k) order by w.k),
          array(select w.x::float8 from jsonb_array_elements_text(b->19) with ordinality w(x, k) order by w.k),
          (b->>20)::jsonb) s;
    i := i + 1;
  end loop;
end
$fn$;

revoke execute on function hub_hidden.settle_outcome_bets(jsonb) from public;
