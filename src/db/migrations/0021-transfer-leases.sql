-- The transfer worker claims an item with a lease instead of holding a
-- transaction (and a connection) open while it calls the casino: locked_by
-- names the worker, locked_until ends its claim. An item whose lease ended is
-- due again for any instance, as one whose transaction died was before.
alter table hub.transfer_job add column locked_by text, add column locked_until timestamptz;
comment on column hub.transfer_job.locked_by is E'@behavior -*';
comment on column hub.transfer_job.locked_until is E'@behavior -*';
