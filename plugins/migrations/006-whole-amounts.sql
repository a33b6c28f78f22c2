-- The reference games' amounts are money: whole base units within ±(2^53 − 1),
-- by constraint, as the hub's own tables hold them (NaN and Infinity refused).
-- A row that breaks the rule stops this migration, named, as core 0017 does:
-- converting it silently would change somebody's money. The check below was
-- added after this file was first released; a database that applied the first
-- text had no such row (its constraints were added), so it records this text.
-- hub:replaces-checksum 11d87a7b89c90e0da8b04f8cf63129730a9192886994ca61699e9baab792752e
do $mig$
declare
  rule record;
  found text;
  bad text := '';
begin
  for rule in select * from (values
      ('app.coinflip_bet', 'wager', 1), ('app.coinflip_bet', 'net', -9007199254740991), ('app.coinflip_bet', 'balance_after', 0),
      ('app.tower_game', 'wager', 1), ('app.tower_game', 'net', -9007199254740991), ('app.tower_game', 'payout', 0)) r(tbl, col, lo) loop
    execute format(
      'select string_agg(format(%L, id, hub_hidden.ledger_amount_text(%I)), E''\n'') from (select id, %I from %s where not hub_hidden.is_whole_amount(%I, %s) order by id limit 20) x',
      rule.tbl || ' %s: ' || rule.col || ' = %s', rule.col, rule.col, rule.tbl, rule.col, rule.lo) into found;
    if found is not null then bad := bad || found || E'\n'; end if;
  end loop;
  if bad <> '' then
    raise exception E'006-whole-amounts: these stored amounts are not whole base units within ±9007199254740991, so the constraints that enforce it cannot be added:\n%', rtrim(bad, E'\n')
      using errcode = 'P0001',
            hint = 'Correct each row (a whole number of base units), then start the hub again.';
  end if;
end
$mig$;
alter table app.coinflip_bet
  add constraint coinflip_bet_wager_whole check (wager >= 1 and wager <= 9007199254740991 and wager = trunc(wager)),
  add constraint coinflip_bet_net_whole check (net >= -9007199254740991 and net <= 9007199254740991 and net = trunc(net)),
  add constraint coinflip_bet_balance_after_whole check (balance_after >= 0 and balance_after <= 9007199254740991 and balance_after = trunc(balance_after));
alter table app.tower_game
  add constraint tower_game_wager_whole check (wager >= 1 and wager <= 9007199254740991 and wager = trunc(wager)),
  add constraint tower_game_net_whole check (net >= -9007199254740991 and net <= 9007199254740991 and net = trunc(net)),
  add constraint tower_game_payout_whole check (payout >= 0 and payout <= 9007199254740991 and payout = trunc(payout));
