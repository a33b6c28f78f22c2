/*
 * The running instances of a fleet that shares this database, each with the
 * number of WebSockets it holds, so an instance holding more than its share
 * can move some to the others (src/live/rebalance.ts). Each instance writes
 * its own row on a heartbeat and deletes it when it stops; a row not written
 * for a while belongs to an instance that died and is ignored, then removed.
 */
create table hub_hidden.instance (
  id uuid primary key,
  sockets integer not null check (sockets >= 0),
  seen_at timestamptz not null default now()
);
