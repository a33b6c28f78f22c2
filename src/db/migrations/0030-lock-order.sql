/*
 * The hub's one order of row locks, followed by every path that moves money
 * (bets of every game, grouped or alone, deposits, withdrawals, take
 * requests, operator credits and debits, folds):
 *
 *   1. claims: the transfer worker's item (hub.transfer_job), then
 *      idempotency keys (hub_hidden.idempotency_key), by scope and key;
 *   2. hash chains, by id; a game's own row (the tower's game) after its chain;
 *   3. player balances, by id ascending. A transaction that locks more than
 *      one balance (a group of outcome bets, a page of deposits or take
 *      requests) locks them all here, in that order, before anything below;
 *   4. the rows that record a transfer: deposits, withdrawals, take requests;
 *   5. bankroll slots (hub_hidden.bankroll_slot): waited for only by a
 *      transaction that holds none, else taken with SKIP LOCKED;
 *   6. the house bankroll row (hub.bankroll).
 *
 * A path may skip a step but never goes back to an earlier one, so no two
 * transactions can each hold a lock the other waits for. Rows taken with
 * SKIP LOCKED or NOWAIT never wait and may come in any order; a row a
 * transaction inserts is new to every other (a unique key's wait on an
 * uncommitted insert counts as the lock of its step: a deposit's or take
 * request's key is step 4, a new balance step 3).
 *
 * The functions below lock a set of balances at step 3, in id order, in one
 * statement: Postgres locks rows in the order of the sorted result.
 * Balances that do not exist yet lock nothing (the credit that inserts one
 * waits on its unique key instead).
 */

-- p_balances: a JSON array of [user_id, experience_id, currency_key].
create or replace function hub_hidden.lock_balances(p_balances jsonb)
returns void language plpgsql as $fn$
begin
  perform 1 from hub.balance b
   where (b.user_id, b.experience_id, b.currency_key) in
         (select (e->>0)::uuid, (e->>1)::uuid, e->>2 from jsonb_array_elements(p_balances) e)
   order by b.id
   for update;
end
$fn$;

-- The same for a casino's report, which names players and experiences: p_balances is a JSON array of [uname, experience name, currency_key].
create or replace function hub_hidden.lock_casino_balances(p_casino_id uuid, p_balances jsonb)
returns void language plpgsql as $fn$
begin
  perform 1 from hub.balance b
    join hub.user u on u.id = b.user_id
    join hub.experience x on x.id = b.experience_id
   where b.casino_id = p_casino_id and u.casino_id = p_casino_id and x.casino_id = p_casino_id
     and (u.uname, x.name, b.currency_key) in (select e->>0, e->>1, e->>2 from jsonb_array_elements(p_balances) e)
   order by b.id
   for update of b;
end
$fn$;

revoke execute on function hub_hidden.lock_balances(jsonb), hub_hidden.lock_casino_balances(uuid, jsonb) from public;
