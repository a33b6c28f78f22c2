-- The ledger's live alerts as they were before core migration 0027 (a NOTIFY per alert, no log to
-- sequence), for bench/settle-cost.ts --sql: the cost of the alert log is the difference.
create or replace function hub_hidden.notify_ledger_alerts() returns trigger
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

