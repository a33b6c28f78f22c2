-- The reference games' amounts are money: whole base units within ±(2^53 − 1),
-- by constraint, as the hub's own tables hold them (NaN and Infinity refused).
-- A row that breaks the rule stops this migration with Postgres naming the constraint.
alter table app.coinflip_bet
  add constraint coinflip_bet_wager_whole check (wager >= 1 and wager <= 9007199254740991 and wager = trunc(wager)),
  add constraint coinflip_bet_net_whole check (net >= -9007199254740991 and net <= 9007199254740991 and net = trunc(net)),
  add constraint coinflip_bet_balance_after_whole check (balance_after >= 0 and balance_after <= 9007199254740991 and balance_after = trunc(balance_after));
alter table app.tower_game
  add constraint tower_game_wager_whole check (wager >= 1 and wager <= 9007199254740991 and wager = trunc(wager)),
  add constraint tower_game_net_whole check (net >= -9007199254740991 and net <= 9007199254740991 and net = trunc(net)),
  add constraint tower_game_payout_whole check (payout >= 0 and payout <= 9007199254740991 and payout = trunc(payout));
