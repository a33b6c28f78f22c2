
drop policy select_bankroll on hub.bankroll;
create policy select_bankroll on hub.bankroll for select
  using (hub_hidden.is_operator());
