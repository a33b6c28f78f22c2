-- Read-only queries for the operator's dashboard.

-- Hourly figures of one house bankroll, from the ledger, for the operator's
-- dashboard: per hour the bets that moved it (distinct bet ids), the house's
-- realised profit from them, that profit summed from the beginning, and the
-- bankroll's amount at the end of the hour. The last `hours` hours (1 to 744),
-- the current one included. Operators only: anyone else gets no rows.
create function hub.bankroll_hourly(casino_id uuid, currency_key text, hours integer default 24)
returns table (hour timestamptz, bets bigint, house_profit float8, realised_profit float8, bankroll float8)
language sql stable
as $fn$
  with bounds as (
    select date_trunc('hour', now()) - make_interval(hours => greatest(least(coalesce(bankroll_hourly.hours, 24), 744), 1) - 1) as first_hour
  ),
  house as (
    select l.id, l.created_at, l.amount_delta, l.balance_after, l.bet_id
      from hub.ledger l
     where hub_hidden.is_operator()
       and l.casino_id = bankroll_hourly.casino_id and l.currency_key = bankroll_hourly.currency_key and l.account = 'house'
  ),
  per_hour as (
    select date_trunc('hour', x.created_at) as hour,
           count(distinct x.bet_id) as bets,
           coalesce(sum(x.amount_delta) filter (where x.bet_id is not null), 0) as profit
      from house x, bounds b
     where x.created_at >= b.first_hour
     group by 1
  ),
  earlier as (
    select coalesce(sum(x.amount_delta), 0) as profit
      from house x, bounds b
     where x.bet_id is not null and x.created_at < b.first_hour
  )
  select h.hour,
         coalesce(p.bets, 0),
         coalesce(p.profit, 0)::float8,
         ((select e.profit from earlier e) + sum(coalesce(p.profit, 0)) over (order by h.hour))::float8,
         (select x.balance_after from house x
           where x.created_at < h.hour + interval '1 hour'
           order by x.created_at desc, x.id desc limit 1)
    from bounds b
   cross join lateral generate_series(b.first_hour, date_trunc('hour', now()), interval '1 hour') as h(hour)
    left join per_hour p on p.hour = h.hour
   where hub_hidden.is_operator()
   order by h.hour
$fn$;
comment on function hub.bankroll_hourly(uuid, text, integer) is E'Hourly figures of a house bankroll from the ledger (operators only): bets, the house''s realised profit in the hour and since the beginning, and the bankroll at the end of the hour.';

-- Players whose name contains the text, case-insensitively (row-level security
-- applies: an operator searches every casino, a player finds only themself).
create function hub.user_search(name_contains text) returns setof hub.user
language sql stable
as $fn$
  -- The row type has a column GraphQL may not read (client_id_digest): left null.
  select u.id, u.casino_id, u.uname, u.created_at, null::bytea from hub.user u
   where strpos(lower(u.uname), lower(coalesce(user_search.name_contains, ''))) > 0
   order by u.uname, u.id
$fn$;
comment on function hub.user_search(text) is E'Players whose name contains the text, ignoring case, by name.';
