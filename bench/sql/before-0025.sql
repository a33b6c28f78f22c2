-- The checks of the tables a bet writes as they were before core migration 0025 (calling
-- hub_hidden.is_whole_amount, and the three that others imply), for bench/settle-cost.ts --sql.
alter table hub.balance
  drop constraint balance_amount_whole, add constraint balance_amount_whole check (hub_hidden.is_whole_amount(amount, 0));
alter table hub.bankroll
  drop constraint bankroll_amount_whole, add constraint bankroll_amount_whole check (hub_hidden.is_whole_amount(amount, 0)),
  drop constraint bankroll_wagered_whole, add constraint bankroll_wagered_whole check (hub_hidden.is_whole_amount(wagered, 0));
alter table hub.ledger
  add constraint ledger_balance_after_check check (balance_after >= 0 and balance_after <> 'NaN'),
  drop constraint ledger_amount_delta_whole, add constraint ledger_amount_delta_whole check (hub_hidden.is_whole_amount(amount_delta, -9007199254740991)),
  drop constraint ledger_balance_after_whole, add constraint ledger_balance_after_whole check (hub_hidden.is_whole_amount(balance_after, 0));
alter table hub.outcome_bet
  add constraint outcome_bet_wager_check check (wager >= 1),
  add constraint outcome_bet_profit_check check (profit >= -1),
  drop constraint outcome_bet_wager_whole, add constraint outcome_bet_wager_whole check (hub_hidden.is_whole_amount(wager, 1)),
  drop constraint outcome_bet_net_whole, add constraint outcome_bet_net_whole check (hub_hidden.is_whole_amount(net, -9007199254740991));
alter table hub_hidden.bankroll_slot
  drop constraint bankroll_slot_cover_check, add constraint bankroll_slot_cover_check check (hub_hidden.is_whole_amount(cover, 0)),
  drop constraint bankroll_slot_room_check, add constraint bankroll_slot_room_check check (hub_hidden.is_whole_amount(room, 0));
alter table hub_hidden.bankroll_pending
  drop constraint bankroll_pending_delta_check, add constraint bankroll_pending_delta_check check (hub_hidden.is_whole_amount(abs(delta), 0)),
  drop constraint bankroll_pending_wagered_check, add constraint bankroll_pending_wagered_check check (hub_hidden.is_whole_amount(wagered, 0));
