/*
 * The hub's folds commit without waiting for their WAL flush
 * (synchronous_commit off for the fold's own transaction only).
 *
 * A fold moves house sides that are already committed, durably, as pending
 * rows into hub.bankroll, and deletes those rows in the same transaction. If
 * the machine fails before the fold's commit reaches the disk, both its
 * bankroll updates and its deletions are lost together: the pending rows are
 * back, and the next fold (a busy bet, the server's start, its sweep) applies
 * them exactly once. Nothing else can depend on a lost fold durably: any
 * later commit that waits for its flush (every bet does) flushes the fold's
 * commit record before its own, as the WAL is written in order. What the
 * fold's visibility promises (a bet's answer comes after its house side is in
 * the bankroll for every reader) does not depend on the flush.
 *
 * So a bet that settled against a slot no longer waits for a second flush
 * (its own commit's, then the fold's) before it is answered.
 *
 * A function of its own, for a statement sent alone (its own transaction):
 * called inside a transaction that also moves money, the setting would make
 * that transaction's commit asynchronous too. hub_hidden.fold_bankroll stays
 * as it was for any other caller.
 */
create function hub_hidden.fold_bankroll_alone(p_bankroll_id uuid, p_idle interval default interval '2 seconds')
returns integer language plpgsql as $fn$
begin
  -- What can be checked: the transaction has written nothing yet.
  if pg_current_xact_id_if_assigned() is not null then
    raise exception 'fold_bankroll_alone: must be its own transaction (a statement sent outside BEGIN … COMMIT); use hub_hidden.fold_bankroll inside one.'
      using errcode = 'P0001';
  end if;
  perform set_config('synchronous_commit', 'off', true);
  return hub_hidden.fold_bankroll(p_bankroll_id, p_idle);
end
$fn$;

revoke execute on function hub_hidden.fold_bankroll_alone(uuid, interval) from public;
