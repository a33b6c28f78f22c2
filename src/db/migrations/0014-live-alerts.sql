
-- Live updates: every committed change of a player's balance, and every bet
-- row of the ledger, is announced on a NOTIFY channel that each hub instance
-- LISTENs on. Postgres delivers a notification only when its transaction
-- commits, and drops the ones of a transaction that rolls back, so nothing is
-- announced that did not happen. Identical notifications of one transaction
-- are folded into one: a transaction moving one balance twice announces it once.

create function hub_hidden.notify_ledger_alerts() returns trigger
language plpgsql as $fn$
declare
  bet_payload text;
begin
  if new.account <> 'player' then return null; end if;
  -- Ids and the currency key only (at most 150 bytes): far below the 8000-byte limit of a payload.
  perform pg_notify('hub_balance_alert', json_build_object(
    'u', new.user_id, 'c', new.casino_id, 'e', new.experience_id, 'k', new.currency_key)::text);
  if new.bet_id is not null then
    bet_payload := json_build_object(
      'betId', new.bet_id, 'userId', new.user_id, 'casinoId', new.casino_id, 'experienceId', new.experience_id,
      'currencyKey', new.currency_key, 'amountDelta', new.amount_delta, 'reason', new.reason,
      'createdAt', new.created_at, 'ledgerId', new.id)::text;
    -- A reason of 1000 characters escaped in JSON can pass the limit: shorten it rather than fail the bet.
    if octet_length(bet_payload) > 7900 then
      bet_payload := json_build_object(
        'betId', new.bet_id, 'userId', new.user_id, 'casinoId', new.casino_id, 'experienceId', new.experience_id,
        'currencyKey', new.currency_key, 'amountDelta', new.amount_delta, 'reason', left(new.reason, 200) || '…',
        'createdAt', new.created_at, 'ledgerId', new.id)::text;
    end if;
    perform pg_notify('hub_bet_alert', bet_payload);
  end if;
  return null;
end
$fn$;

create trigger ledger_live_alerts after insert on hub.ledger
  for each row execute function hub_hidden.notify_ledger_alerts();

-- A deposit credited to a player: whatever credits one calls this (or sends
-- the same pg_notify itself) inside the crediting transaction.
create function hub_hidden.notify_put_alert(user_id uuid, casino_id uuid, experience_id uuid, currency_key text, mp_transfer_id text)
returns void language sql as $fn$
  select pg_notify('hub_put_alert', json_build_object(
    'userId', user_id, 'casinoId', casino_id, 'experienceId', experience_id,
    'currencyKey', currency_key, 'mpTransferId', mp_transfer_id)::text)
$fn$;
