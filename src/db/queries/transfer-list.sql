-- Every transfer item still PENDING or FAILED, then the $1 most recent DONE ones (hub transfers list).
select j.id, j.kind, j.status, c.name as casino,
       coalesce(j.withdrawal_request_id::text, t.mp_take_request_id::text, j.mp_transfer_id) as subject,
       coalesce(r.amount, t.reserved_amount, d.amount) as amount,
       coalesce(r.currency_key, t.currency_key, d.currency_key) as currency_key,
       j.attempts, j.last_error, j.next_attempt_at, j.updated_at
  from (select * from hub.transfer_job where status <> 'DONE'
        union all (select * from hub.transfer_job where status = 'DONE' order by updated_at desc limit $1)) j
  join hub.casino c on c.id = j.casino_id
  left join hub.withdrawal_request r on r.id = j.withdrawal_request_id
  left join hub.take_request t on t.id = j.take_request_id
  left join hub.deposit d on j.kind = 'ACKNOWLEDGE' and d.casino_id = j.casino_id and d.mp_transfer_id = j.mp_transfer_id
 order by (j.status = 'DONE'), j.updated_at desc
