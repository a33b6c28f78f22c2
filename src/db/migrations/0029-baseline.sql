/*
 * The hub's core schema: what core migrations 0001 to 0029 of earlier
 * versions built, written once, in the order a reader needs it. A fresh
 * database runs this file; a database where 0001 to 0029 were all applied
 * already has exactly this schema, so the runner (src/db/migrate.ts) records
 * this file as applied there without running it. Core migrations from 0030 on
 * are plain files after this one.
 *
 * Sections: schemas and roles; types; helpers the tables use; tables (with
 * their constraints, indexes, comments and grants), grouped by concern;
 * row-level security; functions and their triggers, grouped by concern
 * (credentials, ledger, bankroll reservations, settlement, hash chains and
 * dashboard, live alerts); the rows the hub needs to start.
 *
 * Security model: GraphQL requests run as app_postgraphile, and row-level
 * security decides what each identity sees from transaction settings the hub
 * sets per request (session.* for a player, operator.api_key for an
 * operator). app_postgraphile only selects: writes go through the hub's
 * plugins on the superuser pool, which check the identity first. hub_secret
 * holds what GraphQL must never read (no usage for app_postgraphile);
 * hub_hidden holds the hub's machinery. Credentials are stored only as
 * SHA-256 digests, in columns app_postgraphile has no grant on.
 *
 * Money: every amount is a whole number of base units of its currency
 * (hub.currency.display_unit_scale says how many make one display unit),
 * stored as float8 within ±(2^53 − 1), the largest integer a float8 and a
 * JavaScript number hold exactly, by constraint, whoever writes the row.
 *
 * Ids are UUIDv7 (hub_hidden.uuid_generate_v7), so they sort by creation time.
 *
 * Function bodies are exactly as the migrations before this file defined
 * them (a database upgraded from those holds those texts, and a fresh one
 * must hold the same); the notes beside them are outside the bodies.
 */

-- ==========================================================================
-- Schemas and roles
-- ==========================================================================

-- The role GraphQL requests run as; a cluster may already have it (roles are
-- the cluster's, not the database's).
do $$ begin
  if not exists (select 1 from pg_roles where rolname = 'app_postgraphile') then
    create role app_postgraphile nologin;
  end if;
end $$;
create schema if not exists hub;
create schema if not exists hub_hidden;

-- hub_secret holds what GraphQL must never expose; app_postgraphile has no usage on it.
create schema if not exists hub_secret;
revoke all on schema hub_secret from public;
grant usage on schema hub to app_postgraphile;
grant usage on schema hub_hidden to app_postgraphile;
-- PostGraphile exposes nothing of hub_hidden.
comment on schema hub_hidden is E'@behavior -*';

-- ==========================================================================
-- Types
-- ==========================================================================

-- A revealed hash of a provably fair chain: its commitment, a hash a bet used, or the preimage.
create type hub.hash_kind as enum ('TERMINAL', 'INTERMEDIATE', 'PREIMAGE');
-- One possible outcome of an outcome bet: its weight, and its profit per unit wagered.
create type hub.outcome as (weight float8, profit float8);
-- A withdrawal's status at the casino.
create type hub.transfer_status_kind as enum ('PENDING', 'COMPLETED', 'CANCELED', 'UNCLAIMED', 'EXPIRED');
create type hub.chat_message_type as enum ('user', 'system');
-- Take requests (see hub.take_request): the hub's status, the casino's, and the transfer's.
create type hub.take_request_status as enum ('PENDING', 'PROCESSING', 'COMPLETED', 'FAILED', 'REJECTED');
create type hub.mp_take_request_status as enum ('PENDING', 'TRANSFERRED', 'CONTROLLER_REJECTED', 'USER_CANCELED');
create type hub.mp_transfer_status as enum ('PENDING', 'COMPLETED', 'CANCELED', 'EXPIRED', 'UNCLAIMED');

-- ==========================================================================
-- Helpers the tables and policies use
-- ==========================================================================

-- UUIDv7: 48-bit millisecond timestamp then random bits, so ids sort by creation
-- time and index inserts stay local. Plain SQL so it works on any Postgres >= 13.
create function hub_hidden.uuid_generate_v7() returns uuid
language sql volatile parallel safe as $fn$
  select encode(
    set_bit(set_bit(
      overlay(uuid_send(gen_random_uuid())
        placing substring(int8send((extract(epoch from clock_timestamp()) * 1000)::bigint) from 3)
        from 1 for 6),
      52, 1), 53, 1),
    'hex')::uuid
$fn$;
-- The identity of the request, from the transaction settings the hub sets.
create function hub_hidden.current_setting_uuid(name text) returns uuid
language sql stable parallel safe as $fn$
  select nullif(current_setting(name, true), '')::uuid
$fn$;

create function hub_hidden.current_user_id() returns uuid
language sql stable parallel safe as $fn$ select hub_hidden.current_setting_uuid('session.user_id') $fn$;

create function hub_hidden.current_casino_id() returns uuid
language sql stable parallel safe as $fn$ select hub_hidden.current_setting_uuid('session.casino_id') $fn$;

create function hub_hidden.current_experience_id() returns uuid
language sql stable parallel safe as $fn$ select hub_hidden.current_setting_uuid('session.experience_id') $fn$;

create function hub_hidden.current_session_id() returns uuid
language sql stable parallel safe as $fn$ select hub_hidden.current_setting_uuid('session.id') $fn$;

create function hub_hidden.is_operator() returns boolean
language sql stable parallel safe as $fn$
  select coalesce(nullif(current_setting('operator.api_key', true), ''), null) is not null
$fn$;
-- Policies call these as app_postgraphile.
grant execute on function
  hub_hidden.uuid_generate_v7(), hub_hidden.current_setting_uuid(text),
  hub_hidden.current_user_id(), hub_hidden.current_casino_id(),
  hub_hidden.current_experience_id(), hub_hidden.current_session_id(),
  hub_hidden.is_operator()
  to app_postgraphile;

-- The creation time a UUIDv7 carries (its first 48 bits, in milliseconds):
-- lets bet tables list rows "newest first" without a created_at column.
create function hub_hidden.uuid_v7_timestamp(id uuid) returns timestamptz
language sql immutable strict parallel safe as $fn$
  select to_timestamp(('x' || lpad(replace(left(id::text, 13), '-', ''), 16, '0'))::bit(64)::bigint / 1000.0)
$fn$;
grant execute on function hub_hidden.uuid_v7_timestamp(uuid) to app_postgraphile;

-- Whether x is a whole number of base units from lo to 2^53 − 1. Comparisons
-- put NaN above every number, so the upper bound refuses NaN and Infinity,
-- and trunc refuses fractions. The tables every bet writes spell the same
-- rule out in their checks instead of calling it: Postgres prepares a
-- table's checks again for every statement that writes it, and a call is
-- inlined by parsing the function's body each time. It stays executable by
-- everyone: the checks call it as whoever writes the row.
create function hub_hidden.is_whole_amount(x float8, lo float8) returns boolean
language sql immutable as $fn$ select x >= lo and x <= 9007199254740991 and x = trunc(x) $fn$;

-- A user name as people read it: compatibility forms folded (NFKC: fullwidth
-- letters, ligatures), white space and invisible format characters removed,
-- ASCII case folded. Two names with the same key are the same name to a
-- reader, so a new playground name whose key is taken is refused. Unicode
-- normalisation needs a UTF8 database; elsewhere only spaces and case fold.
do $$ begin
  if current_setting('server_encoding') = 'UTF8' then
    create function hub_hidden.uname_key(uname text) returns text
    language sql immutable strict parallel safe as $fn$
      select lower(regexp_replace(normalize(uname, NFKC),
        '[[:space:]\u00AD\u034F\u061C\u115F\u1160\u17B4\u17B5\u180B-\u180F\u200B-\u200F\u202A-\u202E\u2060-\u206F\u3164\uFE00-\uFE0F\uFEFF\uFFA0]',
        '', 'g'))
    $fn$;
  else
    create function hub_hidden.uname_key(uname text) returns text
    language sql immutable strict parallel safe as $fn$ select lower(regexp_replace(uname, '[[:space:]]', '', 'g')) $fn$;
  end if;
end $$;

-- ==========================================================================
-- Tables: casinos, players, experiences, credentials
-- ==========================================================================

create table hub.casino (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  name text not null unique check (length(name) between 1 and 200),
  base_url text unique,
  is_playground boolean not null default false,
  created_at timestamptz not null default now(),
  -- The casino's GraphQL endpoint, readable like base_url (its API key is in hub_secret.casino_api_key).
  graphql_url text
);
-- updateHubBankrollById and updateHubCasinoById are the hub's own (amounts
-- through the ledger); PostGraphile must not generate its own under those names
-- even when it introspects as a role that may write the tables.
comment on table hub.casino is E'@behavior -insert -update -delete';

-- Playground players are keyed by a random id their client generated and
-- keeps: whoever presents it gets that player, nobody else does. The id is
-- that client's secret, so only its SHA-256 digest is stored, in a column
-- GraphQL neither exposes nor may select.
-- mp_user_id: the casino's id for the player, as the original's clients read
-- it. The hub knows a player by (casino, uname); the id is derived from that
-- pair, so it is stable and any hub (or the casino) computes the same value:
-- md5('<casino id>:<uname>') read as a UUID.
create table hub.user (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  casino_id uuid not null references hub.casino(id),
  uname text not null check (length(uname) between 1 and 200),
  created_at timestamptz not null default now(),
  client_id_digest bytea check (length(client_id_digest) = 32),
  mp_user_id uuid not null generated always as (md5(casino_id::text || ':' || uname)::uuid) stored,
  unique (casino_id, uname),
  constraint user_casino_id_client_id_digest_key unique (casino_id, client_id_digest)
);
create index on hub.user (casino_id);
create index user_uname_key on hub.user (casino_id, hub_hidden.uname_key(uname));
create index on hub.user (mp_user_id);
comment on column hub.user.client_id_digest is E'@behavior -*';
comment on constraint user_casino_id_client_id_digest_key on hub.user is E'@behavior -*';
comment on column hub.user.mp_user_id is E'@behavior +filterBy +orderBy\nThe casino''s id for the player: md5(''<casinoId>:<uname>'') read as a UUID.';
-- Column grants, not the table: app_postgraphile never selects the digest.
grant select (id, casino_id, uname, created_at, mp_user_id) on hub.user to app_postgraphile;

-- Experiences are shared by many players, so their client id is stored as is.
-- mp_experience_id: as mp_user_id, from (casino, name).
create table hub.experience (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  casino_id uuid not null references hub.casino(id),
  name text not null check (length(name) between 1 and 200),
  created_at timestamptz not null default now(),
  client_id uuid,
  mp_experience_id uuid not null generated always as (md5(casino_id::text || ':' || name)::uuid) stored,
  -- The player who owns the experience at the casino; the hub learns of none, so it stays null.
  user_id uuid references hub.user(id),
  unique (casino_id, name),
  constraint experience_casino_id_client_id_key unique (casino_id, client_id)
);
create index on hub.experience (casino_id);
create index on hub.experience (mp_experience_id);
create index on hub.experience (user_id);
comment on constraint experience_casino_id_client_id_key on hub.experience is E'@behavior -*';
comment on column hub.experience.mp_experience_id is E'@behavior +filterBy +orderBy\nThe casino''s id for the experience: md5(''<casinoId>:<name>'') read as a UUID.';
comment on column hub.experience.user_id is E'@behavior -filterBy -orderBy';

-- The original reads the owner from the experience only, not experiences from the user.
comment on constraint experience_user_id_fkey on hub.experience is E'@behavior -manyRelation:resource:connection -manyRelation:resource:list';

-- A player's session. The token is stored as its SHA-256 digest only.
-- user_client_id_sealed: the playground client id of the player, sealed
-- with the key of the session it was sent to obtain (16 bytes: the id XOR the
-- first 16 bytes of HMAC-SHA256 keyed with the session key), so a player can
-- read it back (HubUser.clientId). Only requests carrying that key can unseal
-- it; the key itself is stored only as token_digest, so the database holds
-- the id in no readable form. Null for sessions not created from a client id.
create table hub.session (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  user_id uuid not null references hub.user(id),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  token_digest bytea not null unique check (length(token_digest) = 32),
  created_at timestamptz not null default now(),
  expired_at timestamptz not null default now() + interval '30 days',
  revoked_at timestamptz,
  user_client_id_sealed bytea check (length(user_client_id_sealed) = 16)
);
create index on hub.session (user_id);
create index on hub.session (casino_id);
create index on hub.session (experience_id);
comment on column hub.session.token_digest is E'@behavior -*';
comment on constraint session_token_digest_key on hub.session is E'@behavior -*';
comment on column hub.session.user_client_id_sealed is E'@behavior -*';
-- Neither digest nor sealed id: app_postgraphile has no grant on them.
grant select (id, user_id, casino_id, experience_id, created_at, expired_at, revoked_at) on hub.session to app_postgraphile;

-- An operator's API key, stored as its SHA-256 digest only.
create table hub.api_key (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  key_digest bytea not null unique check (length(key_digest) = 32),
  created_at timestamptz not null default now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);
comment on column hub.api_key.key_digest is E'@behavior -*';
comment on constraint api_key_key_digest_key on hub.api_key is E'@behavior -*';
grant select (id, created_at, last_used_at, revoked_at) on hub.api_key to app_postgraphile;

-- Casino token exchange: the casino's public key or JWKS URL, for verifying its tokens.
-- Public keys only, but still not for GraphQL: hub_secret is never exposed.
create table hub_secret.casino_auth (
  casino_id uuid primary key references hub.casino(id),
  public_key text,
  jwks_url text,
  issuer text,
  audience text,
  updated_at timestamptz not null default now(),
  check (public_key is not null or jwks_url is not null)
);
-- The controller's API key at the casino's GraphQL endpoint: a credential for
-- another system, so it lives in hub_secret, where app_postgraphile has no
-- usage: no GraphQL request can select it, whatever the schema exposes.
create table hub_secret.casino_api_key (
  casino_id uuid primary key references hub.casino(id),
  api_key text not null check (length(api_key) between 1 and 1000),
  updated_at timestamptz not null default now()
);
revoke all on hub_secret.casino_api_key from public;

-- A casino's token keys as last fetched from its JWKS URL, and every distinct
-- set the hub has verified tokens with. Operators only.
create table hub.jwk_set (
  casino_id uuid primary key references hub.casino(id),
  jwks jsonb not null,
  updated_at timestamptz not null default now()
);

create table hub.jwk_set_snapshot (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  casino_id uuid not null references hub.casino(id),
  jwks jsonb not null,
  created_at timestamptz not null default now()
);
create index on hub.jwk_set_snapshot (casino_id);
comment on column hub.jwk_set_snapshot.created_at is E'@behavior -*';
comment on table hub.jwk_set is E'The token keys of the casino as the hub last fetched them from its JWKS URL.';
comment on table hub.jwk_set_snapshot is E'A set of token keys the hub fetched from the casino and verified tokens with; a new one each time the set changes.';

-- The last time the hub could not fetch a casino's key set from its JWKS URL,
-- and why: the casino is unreachable or misconfigured, and its players cannot
-- log in. Kept for operators (the dashboard's casino view); one row per casino.
create table hub.jwk_set_failure (
  casino_id uuid primary key references hub.casino(id),
  jwks_url text not null,
  message text not null check (length(message) <= 1000),
  failed_at timestamptz not null default now()
);
comment on table hub.jwk_set_failure is E'The last failure to fetch the casino''s key set from its JWKS URL (timeout, refused, too large, not a JSON key set), and when.';
grant select on hub.jwk_set, hub.jwk_set_snapshot to app_postgraphile;
grant select on hub.jwk_set_failure to app_postgraphile;

-- ==========================================================================
-- Tables: money (currencies, balances, bankrolls, the ledger)
-- ==========================================================================

create table hub.currency (
  key text not null check (key ~ '^[A-Za-z0-9_]{1,32}$'),
  casino_id uuid not null references hub.casino(id),
  display_unit_name text not null,
  display_unit_scale integer not null check (display_unit_scale > 0),
  primary key (key, casino_id)
);
create index on hub.currency (casino_id);

-- A player's balance in one experience and currency.
create table hub.balance (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  user_id uuid not null references hub.user(id),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  currency_key text not null,
  amount float8 not null default 0,
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id),
  unique (user_id, experience_id, currency_key),
  constraint balance_amount_whole check (amount >= 0 and amount <= 9007199254740991 and amount = trunc(amount))
);
create index on hub.balance (casino_id);
create index on hub.balance (experience_id);
create index on hub.balance (currency_key, casino_id);

-- The house bankroll of a casino's currency: what the house can lose, and
-- the statistics of the bets settled against it. The casino's business only
-- (its policy below): a player could otherwise size the house before
-- betting against it.
create table hub.bankroll (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  casino_id uuid not null references hub.casino(id),
  currency_key text not null,
  amount float8 not null default 0,
  bets bigint not null default 0,
  wagered float8 not null default 0,
  expected_value float8 not null default 0,
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id),
  unique (casino_id, currency_key),
  constraint bankroll_amount_whole check (amount >= 0 and amount <= 9007199254740991 and amount = trunc(amount)),
  constraint bankroll_wagered_whole check (wagered >= 0 and wagered <= 9007199254740991 and wagered = trunc(wagered)),
  constraint bankroll_bets_counted check (bets >= 0),
  -- A statistic, not money: finite, not whole.
  constraint bankroll_expected_value_finite check (expected_value > '-Infinity' and expected_value < 'Infinity')
);
create index on hub.bankroll (currency_key, casino_id);
comment on table hub.bankroll is E'@behavior -insert -update -delete';
-- Read access for GraphQL (hub.user's is by column, above).
grant select on hub.casino, hub.experience, hub.currency, hub.balance, hub.bankroll to app_postgraphile;

-- Every change of a player balance or a house bankroll, with who (actor), why
-- (reason) and the amount after it. Rows are written by triggers on
-- hub.balance and hub.bankroll, not by callers, so a change from any source is
-- recorded (a plugin's own UPDATE, psql, the CLI, GraphQL) and the deltas of
-- an account always sum to its amount. Callers say who and why through the
-- ledger functions below (or the transaction settings hub.ledger_actor /
-- hub.ledger_reason / hub.ledger_bet_id before a direct UPDATE); without them
-- the row says "sql:<role>" and what was done. A bet's row may move nothing
-- (net 0): it is still the record of the bet.
create table hub.ledger (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  created_at timestamptz not null default now(),
  user_id uuid references hub.user(id),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid references hub.experience(id),
  currency_key text not null,
  account text not null check (account in ('player', 'house')),
  amount_delta float8 not null,
  balance_after float8 not null,
  actor text not null check (length(actor) between 1 and 200),
  reason text not null check (length(reason) <= 1000),
  bet_id uuid,
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id),
  constraint ledger_account_owner check (
    case account when 'player' then user_id is not null and experience_id is not null
                 else user_id is null and experience_id is null end),
  constraint ledger_amount_delta_whole check (amount_delta >= -9007199254740991 and amount_delta <= 9007199254740991 and amount_delta = trunc(amount_delta)),
  constraint ledger_balance_after_whole check (balance_after >= 0 and balance_after <= 9007199254740991 and balance_after = trunc(balance_after)),
  constraint ledger_amount_delta_moves check (amount_delta <> 0 or bet_id is not null)
);
create index on hub.ledger (user_id, experience_id, currency_key);
create index on hub.ledger (casino_id, currency_key);
create index on hub.ledger (experience_id);
create index on hub.ledger (bet_id) where bet_id is not null;
comment on table hub.ledger is E'Every change of a player balance (account player) or a house bankroll (account house): who, why, by how much and the amount after. Append-only.';
grant select on hub.ledger to app_postgraphile;
-- Append-only, even for the table's owner: see hub_hidden.ledger_guard.
revoke insert, update, delete, truncate on hub.ledger from public;

-- ==========================================================================
-- Tables: hash chains and outcome bets
-- ==========================================================================

create table hub.hash_chain (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  user_id uuid not null references hub.user(id),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  active boolean not null default true,
  max_iteration integer not null check (max_iteration between 2 and 1000000),
  current_iteration integer not null check (current_iteration between 1 and max_iteration),
  created_at timestamptz not null default now()
);
create index on hub.hash_chain (user_id, experience_id, casino_id);
create index on hub.hash_chain (casino_id);
create index on hub.hash_chain (experience_id);
create unique index hash_chain_one_active on hub.hash_chain (user_id, experience_id, casino_id) where active;
comment on index hub.hash_chain_one_active is E'@behavior -*';
comment on table hub.hash_chain is E'A provably fair hash chain of one player in one casino and experience. Bets consume its hashes from max_iteration - 1 down to 1; current_iteration is the last one revealed.';

create table hub.hash (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  hash_chain_id uuid not null references hub.hash_chain(id),
  kind hub.hash_kind not null,
  digest bytea not null check (length(digest) = 32),
  iteration integer not null check (iteration >= 0),
  client_seed text,
  metadata jsonb not null default '{}',
  created_at timestamptz not null default now(),
  unique (hash_chain_id, iteration),
  check ((kind = 'TERMINAL') or (kind = 'PREIMAGE') = (iteration = 0))
);
comment on table hub.hash is E'A revealed hash of a chain: its terminal hash (the commitment), a hash a bet used (with the client seed) or the preimage that ends the chain.';

-- The seed of a chain and its checkpoints (every checkpoint_interval-th hash)
-- reveal every future outcome: app_postgraphile has no usage on hub_secret.
create table hub_secret.hash_chain_secret (
  hash_chain_id uuid primary key references hub.hash_chain(id),
  seed bytea not null check (length(seed) = 32),
  checkpoint_interval integer not null check (checkpoint_interval >= 1),
  checkpoints bytea not null check (length(checkpoints) % 32 = 0)
);

create table hub.outcome_bet (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  kind text not null check (length(kind) between 1 and 100),
  wager float8 not null,
  profit float8 not null,
  net float8 not null,
  outcomes hub.outcome[] not null default '{}',
  outcome_idx integer not null check (outcome_idx >= 0),
  currency_key text not null,
  hash_id uuid not null references hub.hash(id),
  user_id uuid not null references hub.user(id),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  metadata jsonb not null default '{}',
  created_at timestamptz not null default now(),
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id),
  constraint outcome_bet_wager_whole check (wager >= 1 and wager <= 9007199254740991 and wager = trunc(wager)),
  constraint outcome_bet_net_whole check (net >= -9007199254740991 and net <= 9007199254740991 and net = trunc(net)),
  constraint outcome_bet_profit_finite check (profit >= -1 and profit < 'Infinity')
);
create index on hub.outcome_bet (user_id, experience_id, casino_id);
create index on hub.outcome_bet (casino_id);
create index on hub.outcome_bet (experience_id);
create index on hub.outcome_bet (hash_id);
create index on hub.outcome_bet (currency_key, casino_id);
comment on table hub.outcome_bet is E'@hubBet\nA bet of hubMakeOutcomeBet: the outcome outcome_idx was drawn by its hash; profit is that outcome''s profit per unit wagered, net what the balance moved.';
comment on column hub.outcome_bet.kind is E'@behavior +filterBy +orderBy';
grant select on hub.hash_chain, hub.hash, hub.outcome_bet to app_postgraphile;

-- ==========================================================================
-- Tables: bankroll reservations (slots and pending house sides)
-- ==========================================================================

/*
 * Bets settled by dbSettleBet need not all wait for one bankroll row. When
 * the row is busy, a bet settles against a slot: a share of the bankroll's
 * cover (what the house can still lose) and room (what it can still win
 * below 2^53 − 1) set aside in advance, under the bankroll's lock. The bet
 * locks only its slot (skipping slots other bets hold), checks its largest
 * possible win against the slot's cover, moves the slot by its house side
 * and appends that side to hub_hidden.bankroll_pending, all in the game's
 * transaction. Folding moves committed pending rows into hub.bankroll in id
 * order, one bankroll update (so one house ledger row, with the bet's id,
 * actor and reason) per bet, in one transaction; the hub folds right after
 * the game commits, so a bet's answer comes after its house side is in the
 * bankroll.
 *
 * What is set aside, per bankroll, is computed when needed (under the
 * bankroll's lock) from the slots and the pending rows:
 *   reserved = Σ slot.cover − Σ pending delta,   reserved room = Σ slot.room + Σ pending delta.
 * A bet on a slot moves slot.cover by +delta and adds a pending delta, so it
 * leaves both unchanged; folding moves pending deltas into hub.bankroll.amount.
 * Hence, at every commit:
 *   the bankroll with every committed bet = amount + Σ pending
 *                                         = (amount − reserved) + Σ slot.cover.
 * Slots never go below 0 and a grant never takes more than amount − reserved,
 * so the bankroll with every committed bet applied never goes below the
 * covers promised, and every accepted bet's largest win was covered by cover
 * set aside for its slot alone. The same holds for room and 2^53 − 1. A slot
 * is released only when it holds no pending row, so folding pending rows in
 * id order (each slot's rows are in its commit order: the slot's lock orders
 * them) never takes hub.bankroll.amount below 0 on the way.
 *
 * Crash safety by construction: a bet's balance change, slot change and
 * pending row commit together or not at all, and a fold deletes the pending
 * rows it applies in the transaction that applies them. A server that dies
 * between the two leaves committed pending rows that the next fold (the next
 * busy bet, the next server's start, its periodic sweep) applies exactly once.
 *
 * Locks, in the hub's one order: balance, then a slot, then the bankroll. A
 * slot is waited for only by a transaction that holds none (else taken with
 * skip locked); slots are released and pending rows taken only with skip
 * locked. Bankroll and slot rows are locked FOR NO KEY UPDATE, which a slot's
 * foreign key check (KEY SHARE) does not wait for.
 */
create table hub_hidden.bankroll_slot (
  id bigint generated always as identity primary key,
  bankroll_id uuid not null references hub.bankroll(id) on delete cascade,
  cover float8 not null default 0 check (cover >= 0 and cover <= 9007199254740991 and cover = trunc(cover)),
  room float8 not null default 0 check (room >= 0 and room <= 9007199254740991 and room = trunc(room)),
  used_at timestamptz not null default now()
);
create index on hub_hidden.bankroll_slot (bankroll_id, id);
comment on table hub_hidden.bankroll_slot is E'A share of a house bankroll''s cover (what the house can still lose) and room (what it can still win), taken in advance so bets lock a slot instead of the bankroll row.';
create table hub_hidden.bankroll_pending (
  id bigint generated always as identity primary key,
  -- No foreign key to hub.bankroll: its KEY SHARE check would wait for a fold's updates of the
  -- bankroll row to commit. The slot's key ties the row to its bankroll (a bankroll with pending
  -- rows cannot be deleted: its slots cannot).
  bankroll_id uuid not null,
  slot_id bigint not null references hub_hidden.bankroll_slot(id),
  bet_id uuid not null,
  -- The house's side of the bet: wager − payout.
  delta float8 not null check (delta >= -9007199254740991 and delta <= 9007199254740991 and delta = trunc(delta)),
  counted integer not null check (counted in (0, 1)),
  wagered float8 not null check (wagered >= 0 and wagered <= 9007199254740991 and wagered = trunc(wagered)),
  expected_value float8 not null check (expected_value > '-Infinity' and expected_value < 'Infinity'),
  actor text not null,
  reason text not null,
  created_at timestamptz not null default now()
);
create index on hub_hidden.bankroll_pending (bankroll_id, id);
create index on hub_hidden.bankroll_pending (slot_id);
comment on table hub_hidden.bankroll_pending is E'House sides of committed bets not yet folded into hub.bankroll (and so not yet in the house ledger).';
revoke all on hub_hidden.bankroll_slot, hub_hidden.bankroll_pending from public;

-- ==========================================================================
-- Tables: idempotency keys
-- ==========================================================================

/*
 * Idempotency keys of money mutations: a key a client sends with a bet, a
 * withdrawal or a faucet claim is stored with the request's fingerprint and
 * its answer in the transaction of the effect, so a retry with the same key
 * answers the stored result and moves nothing.
 *
 * scope: whose keys they are ('user:<id>' for a player, 'apikey:<id>' for an
 * operator's API key). A row older than the retention (24 hours) no longer
 * counts: a claim takes its key over, and the server's sweep deletes it.
 */
create table hub_hidden.idempotency_key (
  scope text not null,
  key text not null,
  operation text not null,
  fingerprint text not null,
  result_id uuid,
  result jsonb,
  created_at timestamptz not null default now(),
  primary key (scope, key),
  constraint idempotency_key_length check (length(key) between 1 and 255)
);
create index idempotency_key_created_at on hub_hidden.idempotency_key (created_at);
revoke all on hub_hidden.idempotency_key from public;

-- ==========================================================================
-- Tables: transfers (deposits, withdrawals, take requests, the worker's outbox)
-- ==========================================================================

-- Deposits are unique per casino and casino transfer id, so a repeated report
-- cannot credit twice; a trigger (hub_hidden.deposit_put_alert) announces
-- each, so the alert leaves only with a committed deposit, whichever path
-- wrote it. A withdrawal is its request (the debit) and its status at the
-- casino.
create table hub.deposit (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  created_at timestamptz not null default now(),
  casino_id uuid not null references hub.casino(id),
  mp_transfer_id text not null check (length(mp_transfer_id) between 1 and 200),
  user_id uuid not null references hub.user(id),
  experience_id uuid not null references hub.experience(id),
  currency_key text not null,
  amount float8 not null check (amount >= 1 and amount <= 9007199254740991 and amount = trunc(amount)),
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id),
  unique (casino_id, mp_transfer_id)
);
create index on hub.deposit (user_id);
create index on hub.deposit (experience_id);

create table hub.withdrawal_request (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  created_at timestamptz not null default now(),
  casino_id uuid not null references hub.casino(id),
  user_id uuid not null references hub.user(id),
  experience_id uuid not null references hub.experience(id),
  currency_key text not null,
  amount float8 not null check (amount >= 1 and amount <= 9007199254740991 and amount = trunc(amount)),
  mp_transfer_id text,
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id)
);
create index on hub.withdrawal_request (user_id);
create index on hub.withdrawal_request (experience_id);
create index on hub.withdrawal_request (casino_id);

create table hub.withdrawal (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  created_at timestamptz not null default now(),
  withdrawal_request_id uuid not null unique references hub.withdrawal_request(id),
  casino_id uuid not null references hub.casino(id),
  user_id uuid not null references hub.user(id),
  experience_id uuid not null references hub.experience(id),
  currency_key text not null,
  amount float8 not null,
  status hub.transfer_status_kind not null default 'PENDING',
  status_at timestamptz not null default now(),
  mp_transfer_id text,
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id),
  constraint withdrawal_amount_whole check (hub_hidden.is_whole_amount(amount, 1))
);
create index on hub.withdrawal (user_id);
create index on hub.withdrawal (experience_id);
create index on hub.withdrawal (casino_id);
comment on column hub.withdrawal.mp_transfer_id is E'@behavior +filterBy +orderBy';

-- Take requests: the casino asks the hub to give a player's funds back. The
-- hub reserves the amount from the balance (a ledger debit) when it receives
-- the request, then has the casino apply the transfer, idempotently by the
-- take request's id; a refusal or a give-up returns the reserve through the
-- ledger once. The names and shapes are the original's.
create table hub.take_request (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  -- The casino's id; unique across casinos (the original looks it up by this id alone).
  mp_take_request_id uuid not null unique,
  casino_id uuid not null references hub.casino(id),
  user_id uuid not null references hub.user(id),
  experience_id uuid not null references hub.experience(id),
  currency_key text not null,
  -- What the casino asked for; null: the whole balance.
  amount float8 check (amount is null or hub_hidden.is_whole_amount(amount, 1)),
  reserved_amount float8 not null default 0 check (hub_hidden.is_whole_amount(reserved_amount, 0)),
  status hub.take_request_status not null default 'PENDING',
  status_changed_at timestamptz not null default now(),
  mp_status hub.mp_take_request_status not null default 'PENDING',
  mp_transfer_id uuid,
  mp_transfer_status hub.mp_transfer_status,
  transfer_needs_completion boolean not null default false,
  transfer_completion_attempted_at timestamptz,
  completion_attempt_count integer default 0,
  insufficient_balance_error boolean,
  refunded_at timestamptz,
  debug text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id),
  -- A reserve exists exactly while the request is being transferred or once it was.
  check ((reserved_amount > 0) = (status in ('PROCESSING', 'COMPLETED') or refunded_at is not null))
);
create index on hub.take_request (casino_id);
create index on hub.take_request (user_id);
create index on hub.take_request (experience_id);
create index on hub.take_request (updated_at);
comment on table hub.take_request is E'A casino''s request to take a player''s funds back: reserved from the balance through the ledger, then transferred to the casino, or refunded.';
comment on column hub.take_request.created_at is E'@behavior -*';
comment on column hub.take_request.status is E'@behavior +filterBy -orderBy';
grant select on hub.take_request to app_postgraphile;

-- How the hub talks to each casino about transfers; take_requests: whether it fetches the casino's take requests.
create table hub.casino_transfer_config (
  casino_id uuid primary key references hub.casino(id),
  connector text not null default 'http' check (connector ~ '^[a-z0-9_-]{1,50}$'),
  url text check (url ~ '^https?://'),
  poll boolean not null default true,
  updated_at timestamptz not null default now(),
  take_requests boolean not null default false
);

-- The outbox: work every hub instance's worker picks with FOR UPDATE SKIP
-- LOCKED. The worker claims an item with a lease instead of holding a
-- transaction (and a connection) open while it calls the casino: locked_by
-- names the worker, locked_until ends its claim. An item whose lease ended is
-- due again for any instance. TAKE_POLL fetches a casino's take requests (its
-- cursor), TAKE settles one take request with the casino (transfer or
-- rejection).
create table hub.transfer_job (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  created_at timestamptz not null default now(),
  kind text not null check (kind in ('WITHDRAWAL', 'ACKNOWLEDGE', 'POLL', 'INCOMING', 'TAKE_POLL', 'TAKE')),
  casino_id uuid not null references hub.casino(id),
  withdrawal_request_id uuid unique references hub.withdrawal_request(id),
  mp_transfer_id text,
  cursor text,
  status text not null default 'PENDING' check (status in ('PENDING', 'DONE', 'FAILED')),
  attempts integer not null default 0,
  last_error text,
  last_attempt_at timestamptz,
  next_attempt_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  locked_by text,
  locked_until timestamptz,
  take_request_id uuid unique references hub.take_request(id),
  check ((kind = 'WITHDRAWAL') = (withdrawal_request_id is not null)),
  check ((kind in ('ACKNOWLEDGE', 'INCOMING')) = (mp_transfer_id is not null)),
  check (kind <> 'INCOMING' or status = 'FAILED'),
  constraint transfer_job_take_request check ((kind = 'TAKE') = (take_request_id is not null))
);
create index transfer_job_due on hub.transfer_job (next_attempt_at) where status = 'PENDING';
create index on hub.transfer_job (casino_id);
create index on hub.transfer_job (status);
create index on hub.transfer_job (kind);
create unique index transfer_job_one_poll on hub.transfer_job (casino_id) where kind = 'POLL';
create unique index transfer_job_one_ack on hub.transfer_job (casino_id, mp_transfer_id) where kind = 'ACKNOWLEDGE';
create unique index transfer_job_one_take_poll on hub.transfer_job (casino_id) where kind = 'TAKE_POLL';
comment on column hub.transfer_job.locked_by is E'@behavior -*';
comment on column hub.transfer_job.locked_until is E'@behavior -*';

-- The item shows its take request's id; the take request does not list items (the original's type has no such field).
comment on constraint transfer_job_take_request_id_fkey on hub.transfer_job is E'@behavior -singularRelation:resource:single';

grant select on hub.deposit, hub.withdrawal_request, hub.withdrawal, hub.casino_transfer_config, hub.transfer_job to app_postgraphile;

-- Until when a send of the withdrawal may still be applied by the casino. It
-- is written outside the sender's transaction, so a refund can trust it after
-- a crash.
create table hub_hidden.withdrawal_send_window (
  withdrawal_request_id uuid primary key references hub.withdrawal_request(id),
  expires_at timestamptz not null
);
revoke all on hub_hidden.withdrawal_send_window from public;

-- When the hub stops sending a take request's transfer (give_up_at), and until
-- when a send already made may still be applied (send_expires_at). Written on
-- its own connection before each send, so it survives the sender's crash; the
-- reserve is returned only once both have passed and the casino says it never
-- applied the transfer.
create table hub_hidden.take_request_window (
  take_request_id uuid primary key references hub.take_request(id),
  give_up_at timestamptz not null,
  send_expires_at timestamptz
);
revoke all on hub_hidden.take_request_window from public;

-- ==========================================================================
-- Tables: faucet
-- ==========================================================================

-- The faucet: free play money an operator enables per casino and currency.
-- A player claims `amount` into the session's experience at most once per
-- `cooldown_seconds` in that currency and experience; the credit goes through
-- the ledger (hub_hidden.credit_balance) like any other.
create table hub.faucet_currency (
  casino_id uuid not null references hub.casino(id),
  currency_key text not null,
  amount float8 not null check (amount >= 1 and amount <= 9007199254740991 and amount = trunc(amount)),
  cooldown_seconds integer not null default 86400 check (cooldown_seconds between 1 and 31622400),
  updated_at timestamptz not null default now(),
  primary key (casino_id, currency_key),
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id)
);
create index on hub.faucet_currency (currency_key, casino_id);
comment on table hub.faucet_currency is E'@behavior -*';

create table hub.faucet_claim (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  user_id uuid not null references hub.user(id),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  currency_key text not null,
  amount float8 not null check (amount >= 1 and amount <= 9007199254740991 and amount = trunc(amount)),
  created_at timestamptz not null default now(),
  foreign key (currency_key, casino_id) references hub.currency(key, casino_id)
);
create index on hub.faucet_claim (user_id, experience_id, currency_key, created_at);
create index on hub.faucet_claim (casino_id);
create index on hub.faucet_claim (experience_id);
create index on hub.faucet_claim (currency_key, casino_id);

-- The original's type has no timestamp; the id is time-ordered (UUID v7).
comment on column hub.faucet_claim.created_at is E'@behavior -*';
comment on table hub.faucet_claim is E'A claim of free play money from the faucet, credited through the ledger.';
grant select on hub.faucet_claim to app_postgraphile;

-- ==========================================================================
-- Tables: chat
-- ==========================================================================

-- No created_at column: the ids are UUIDv7, so they order messages by time
-- and carry it (hub_hidden.uuid_v7_timestamp).
create table hub.chat_message (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  -- null for a system message
  user_id uuid references hub.user(id),
  type hub.chat_message_type not null,
  client_id uuid not null,
  body text not null check (length(body) between 1 and 500),
  hidden_at timestamptz,
  check ((type = 'user') = (user_id is not null))
);
create index on hub.chat_message (casino_id);
create index on hub.chat_message (experience_id);
create index on hub.chat_message (user_id);

-- A post is idempotent by its client id: per player for theirs, per experience for system messages.
create unique index chat_message_user_client_id on hub.chat_message (user_id, client_id) where type = 'user';
create unique index chat_message_system_client_id on hub.chat_message (experience_id, client_id) where type = 'system';
comment on index hub.chat_message_user_client_id is E'@behavior -*';
comment on index hub.chat_message_system_client_id is E'@behavior -*';
comment on table hub.chat_message is E'A message of an experience''s chat: a player''s (type user) or an operator''s (type system). hidden_at is set when an operator hid it; players no longer read it.';

create table hub.chat_mod (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  user_id uuid not null references hub.user(id),
  unique (experience_id, user_id)
);
comment on constraint chat_mod_experience_id_user_id_key on hub.chat_mod is E'@behavior -*';
create index on hub.chat_mod (casino_id);
create index on hub.chat_mod (user_id);
comment on table hub.chat_mod is E'A player who may mute players in the chat of the experience.';

-- A mute is in force while revoked_at is null and expired_at is null or ahead.
create table hub.chat_mute (
  id uuid primary key default hub_hidden.uuid_generate_v7(),
  casino_id uuid not null references hub.casino(id),
  experience_id uuid not null references hub.experience(id),
  user_id uuid not null references hub.user(id),
  expired_at timestamptz,
  reason text check (length(reason) <= 500),
  revoked_at timestamptz,
  -- Who muted: "api_key:<id>" or "user:<id>" (a mod). Not exposed.
  muted_by text not null
);
comment on column hub.chat_mute.muted_by is E'@behavior -*';
create index on hub.chat_mute (casino_id);
create index on hub.chat_mute (experience_id);
create index on hub.chat_mute (user_id);
comment on table hub.chat_mute is E'A player muted in the chat of an experience: in force while revoked_at is null and expired_at is null or ahead.';

-- Per player and experience, the posts of the current fixed window: the rate limit.
create table hub_hidden.chat_rate_bucket (
  user_id uuid not null references hub.user(id),
  experience_id uuid not null references hub.experience(id),
  window_start timestamptz not null,
  posts integer not null,
  primary key (user_id, experience_id)
);

-- Reads for GraphQL. A player reads the messages of their session's
-- experience that are not hidden, that experience's mods, and their own mutes
-- there (a mod reads every mute of the experience); an operator reads all.
grant select on hub.chat_message, hub.chat_mod to app_postgraphile;
grant select (id, casino_id, experience_id, user_id, expired_at, reason, revoked_at) on hub.chat_mute to app_postgraphile;

-- ==========================================================================
-- Tables: the live alert log
-- ==========================================================================

-- Live alerts get a cursor every instance agrees on: the triggers below
-- (ledger, deposits, chat) and notify_put_alert insert one row per alert (a
-- transaction's balance alerts of one player and currency fold into one row)
-- and NOTIFY hub_live_pending. hub_hidden.live_alert_sequence numbers
-- committed rows under the counter row's lock, so a number is visible only
-- once every smaller one is: clients resume after the last cursor without a
-- gap. The log is pruned of what is both an hour old (by
-- hub_hidden.live_alert_mark) and more than 10,000 alerts behind.
-- Live alerts with a cursor: each alert is a row of hub_hidden.live_alert,
-- numbered (seq) by hub_hidden.live_alert_sequence once its transaction has
-- committed, so that every hub instance delivers the alerts of a topic in
-- one order and a client can resume after the last cursor it saw.

-- Lean on purpose, as every bet writes here: no primary key (the sequencer
-- finds rows by ctid), one index on seq (which also finds the rows not
-- sequenced yet: btree indexes nulls).
create table hub_hidden.live_alert (
  id bigint generated always as identity,
  -- null until sequenced; then the alert's place in the order every instance delivers
  seq bigint,
  channel text not null check (channel in ('balance', 'bet', 'put', 'chat')),
  -- the writing transaction, to announce a balance once per transaction
  tx bigint not null default txid_current(),
  user_id uuid,
  casino_id uuid,
  experience_id uuid,
  payload jsonb not null,
  created_at timestamptz not null default now(),
  sequenced_at timestamptz
);
create unique index live_alert_seq on hub_hidden.live_alert (seq);
create unique index live_alert_balance_once on hub_hidden.live_alert (tx, user_id, casino_id, experience_id, (payload->>'currencyKey'))
  where channel = 'balance' and seq is null;

-- No key: a logical-replication publication of all tables must still accept the sequencer's updates.
alter table hub_hidden.live_alert replica identity full;

create table hub_hidden.live_alert_counter (
  id boolean primary key default true check (id),
  last_seq bigint not null,
  pruned_through bigint not null
);

-- (seq, time) marks, one per thousand alerts: the rows sequenced before a mark
-- at least an hour old may be pruned.
create table hub_hidden.live_alert_mark (
  seq bigint primary key,
  at timestamptz not null
);

-- ==========================================================================
-- Tables: instances
-- ==========================================================================

-- Written on a heartbeat through the superuser pool and deleted at a clean
-- stop. Not granted to app_postgraphile: no GraphQL request reads the fleet.
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

-- ==========================================================================
-- Row-level security: what app_postgraphile (GraphQL) reads
-- ==========================================================================

-- An operator (operator.api_key set) reads every row; a player reads what
-- belongs to their session (session.user_id, casino_id, experience_id).
alter table hub.casino enable row level security;
create policy select_casino on hub.casino for select
  using (hub_hidden.is_operator() or id = hub_hidden.current_casino_id());
alter table hub.user enable row level security;
create policy select_user on hub.user for select
  using (hub_hidden.is_operator() or (id = hub_hidden.current_user_id() and casino_id = hub_hidden.current_casino_id()));
alter table hub.experience enable row level security;
create policy select_experience on hub.experience for select
  using (hub_hidden.is_operator() or id = hub_hidden.current_experience_id());
alter table hub.session enable row level security;
create policy select_session on hub.session for select
  using (hub_hidden.is_operator() or id = hub_hidden.current_session_id());
alter table hub.api_key enable row level security;
create policy select_api_key on hub.api_key for select
  using (hub_hidden.is_operator());
alter table hub.currency enable row level security;
create policy select_currency on hub.currency for select
  using (hub_hidden.is_operator() or casino_id = hub_hidden.current_casino_id());
alter table hub.balance enable row level security;
create policy select_balance on hub.balance for select
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));
-- The house bankroll (its amount, bets, wagered, expected value) is the
-- casino's business: players see no bankroll rows by any path (the root
-- connection, lookups, relations from their casino or currency). Plugins read
-- it on the superuser connection.
alter table hub.bankroll enable row level security;
create policy select_bankroll on hub.bankroll for select
  using (hub_hidden.is_operator());
alter table hub.ledger enable row level security;
create policy select_ledger on hub.ledger for select
  using (hub_hidden.is_operator() or (
    account = 'player'
    and user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));

alter table hub.hash_chain enable row level security;
create policy select_hash_chain on hub.hash_chain for select
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));
alter table hub.hash enable row level security;
create policy select_hash on hub.hash for select
  using (exists (select 1 from hub.hash_chain c where c.id = hash_chain_id));
alter table hub.outcome_bet enable row level security;
create policy select_outcome_bet on hub.outcome_bet for select
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));

alter table hub.deposit enable row level security;
create policy select_deposit on hub.deposit for select
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));
alter table hub.withdrawal_request enable row level security;
create policy select_withdrawal_request on hub.withdrawal_request for select
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));
alter table hub.withdrawal enable row level security;
create policy select_withdrawal on hub.withdrawal for select
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));
alter table hub.casino_transfer_config enable row level security;
create policy select_casino_transfer_config on hub.casino_transfer_config for select
  using (hub_hidden.is_operator());
alter table hub.transfer_job enable row level security;
create policy select_transfer_job on hub.transfer_job for select
  using (hub_hidden.is_operator());
alter table hub.take_request enable row level security;
create policy select_take_request on hub.take_request for select
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));

-- The faucet's settings are read by the hub on the superuser pool only: no policy.
alter table hub.faucet_currency enable row level security;
alter table hub.faucet_claim enable row level security;
create policy select_faucet_claim on hub.faucet_claim for select
  using (hub_hidden.is_operator() or (
    user_id = hub_hidden.current_user_id()
    and casino_id = hub_hidden.current_casino_id()
    and experience_id = hub_hidden.current_experience_id()));

alter table hub.jwk_set enable row level security;
create policy select_jwk_set on hub.jwk_set for select using (hub_hidden.is_operator());
alter table hub.jwk_set_snapshot enable row level security;
create policy select_jwk_set_snapshot on hub.jwk_set_snapshot for select using (hub_hidden.is_operator());
alter table hub.jwk_set_failure enable row level security;
create policy select_jwk_set_failure on hub.jwk_set_failure for select using (hub_hidden.is_operator());

alter table hub_hidden.chat_rate_bucket enable row level security;
alter table hub.chat_message enable row level security;
create policy select_chat_message on hub.chat_message for select
  using (hub_hidden.is_operator() or (
    experience_id = hub_hidden.current_experience_id()
    and casino_id = hub_hidden.current_casino_id()
    and hidden_at is null));
alter table hub.chat_mod enable row level security;
create policy select_chat_mod on hub.chat_mod for select
  using (hub_hidden.is_operator() or (
    experience_id = hub_hidden.current_experience_id()
    and casino_id = hub_hidden.current_casino_id()));
alter table hub.chat_mute enable row level security;
create policy select_chat_mute on hub.chat_mute for select
  using (hub_hidden.is_operator() or (
    experience_id = hub_hidden.current_experience_id()
    and casino_id = hub_hidden.current_casino_id()
    and (user_id = hub_hidden.current_user_id()
         or exists (select 1 from hub.chat_mod m
                     where m.experience_id = chat_mute.experience_id
                       and m.user_id = hub_hidden.current_user_id()))));

-- The live alert log is read by the hub's sequencer on the superuser pool only.
alter table hub_hidden.live_alert enable row level security;
alter table hub_hidden.live_alert_counter enable row level security;
alter table hub_hidden.live_alert_mark enable row level security;

-- ==========================================================================
-- Functions: credentials
-- ==========================================================================

-- Cross-instance revocation: the NOTIFY fires on any change that can end a
-- credential's validity (revoked, expired, deleted, truncated, a changed
-- digest or owner), so every instance re-checks its open WebSockets.
-- Every hub instance LISTENs here and drops its cached identities.
create function hub_hidden.notify_credentials_changed() returns trigger
language plpgsql as $fn$
begin
  perform pg_notify('hub_credentials_changed', tg_table_name);
  return null;
end
$fn$;
create trigger session_credentials_changed
  after update of revoked_at, expired_at, token_digest, user_id, casino_id, experience_id or delete on hub.session
  for each statement execute function hub_hidden.notify_credentials_changed();
create trigger session_credentials_truncated
  after truncate on hub.session
  for each statement execute function hub_hidden.notify_credentials_changed();
create trigger api_key_credentials_changed
  after update of revoked_at, key_digest or delete on hub.api_key
  for each statement execute function hub_hidden.notify_credentials_changed();
create trigger api_key_credentials_truncated
  after truncate on hub.api_key
  for each statement execute function hub_hidden.notify_credentials_changed();

-- The original's `condition: { key }` on API keys and sessions: the digest
-- columns stay unreadable to GraphQL, so the comparison runs here. Keys issued
-- as UUIDs are lower case; a key's digest is SHA-256 of its text.
create function hub_hidden.api_key_id_by_key(key text) returns uuid
  language sql stable security definer set search_path = pg_catalog as $fn$
  select id from hub.api_key where key_digest = sha256(convert_to(lower(key), 'UTF8'))
$fn$;

create function hub_hidden.session_id_by_key(key text) returns uuid
  language sql stable security definer set search_path = pg_catalog as $fn$
  select id from hub.session where token_digest = sha256(convert_to(lower(key), 'UTF8'))
$fn$;

-- ==========================================================================
-- Functions: balances and the ledger
-- ==========================================================================

-- Money moves through these on the superuser connection (plugins check the
-- identity first); none is executable by app_postgraphile. Amounts a caller
-- asks to move are whole numbers from 1 to 2^53 − 1 (ledger_check_amount):
-- 0.5, 5e-324 or 1e300 would move nothing, or money nobody can count.
-- An amount as people write it: float8's text form switches to exponents
-- from 1e15 (9.00719925474e+15), so whole amounts are printed digit by digit.
create function hub_hidden.ledger_amount_text(amount float8) returns text
language sql immutable as $fn$
  select case when amount is null then 'null'
              when amount = trunc(amount) and abs(amount) < 9e18 then amount::bigint::text
              else amount::text end
$fn$;

-- Append-only, even for the table's owner: rows are inserted only by the
-- triggers below (trigger depth 2: this guard fires inside them) and never
-- changed or removed.
create function hub_hidden.ledger_guard() returns trigger language plpgsql as $fn$
begin
  if tg_op = 'INSERT' then
    if pg_trigger_depth() >= 2 then return new; end if;
    raise exception 'hub.ledger is written only by changes of hub.balance and hub.bankroll; change those (hub_hidden.credit_balance & co.) instead of inserting.'
      using errcode = 'P0001', constraint = 'ledger_append_only';
  end if;
  raise exception 'hub.ledger is append-only: % is refused. Record a correction as a new balance change.', tg_op
    using errcode = 'P0001', constraint = 'ledger_append_only';
end
$fn$;
create trigger ledger_guard_insert before insert on hub.ledger for each row execute function hub_hidden.ledger_guard();
create trigger ledger_guard_change before update or delete on hub.ledger for each row execute function hub_hidden.ledger_guard();
create trigger ledger_guard_truncate before truncate on hub.ledger for each statement execute function hub_hidden.ledger_guard();

create function hub_hidden.ledger_setting(name text) returns text
language sql stable as $fn$ select nullif(current_setting(name, true), '') $fn$;

-- Zero-delta rows are written for bets (hub.ledger_bet_id set), so a bet
-- whose net is 0 reaches the ledger, its alerts and the dashboard's counts.
create function hub_hidden.ledger_write(
  p_user_id uuid, p_casino_id uuid, p_experience_id uuid, p_currency_key text, p_account text,
  p_delta float8, p_after float8, p_what text
) returns void language plpgsql as $fn$
declare
  bet_id uuid := hub_hidden.ledger_setting('hub.ledger_bet_id')::uuid;
begin
  if p_delta = 0 and bet_id is null then return; end if;
  insert into hub.ledger (user_id, casino_id, experience_id, currency_key, account, amount_delta, balance_after, actor, reason, bet_id)
  values (p_user_id, p_casino_id, p_experience_id, p_currency_key, p_account, p_delta, p_after,
          coalesce(hub_hidden.ledger_setting('hub.ledger_actor'), 'sql:' || session_user),
          coalesce(hub_hidden.ledger_setting('hub.ledger_reason'), p_what || ' without a reason'),
          bet_id);
end
$fn$;

create function hub_hidden.ledger_record_balance() returns trigger language plpgsql as $fn$
begin
  if tg_op = 'DELETE' then
    perform hub_hidden.ledger_write(old.user_id, old.casino_id, old.experience_id, old.currency_key, 'player', -old.amount, 0, 'delete of hub.balance');
    return old;
  end if;
  perform hub_hidden.ledger_write(new.user_id, new.casino_id, new.experience_id, new.currency_key, 'player',
    new.amount - case when tg_op = 'UPDATE' then old.amount else 0 end, new.amount, lower(tg_op) || ' of hub.balance');
  return new;
end
$fn$;

create function hub_hidden.ledger_record_bankroll() returns trigger language plpgsql as $fn$
begin
  if tg_op = 'DELETE' then
    perform hub_hidden.ledger_write(null, old.casino_id, null, old.currency_key, 'house', -old.amount, 0, 'delete of hub.bankroll');
    return old;
  end if;
  perform hub_hidden.ledger_write(null, new.casino_id, null, new.currency_key, 'house',
    new.amount - case when tg_op = 'UPDATE' then old.amount else 0 end, new.amount, lower(tg_op) || ' of hub.bankroll');
  return new;
end
$fn$;
create trigger ledger_record after insert or update of amount or delete on hub.balance
  for each row execute function hub_hidden.ledger_record_balance();
create trigger ledger_record after insert or update of amount or delete on hub.bankroll
  for each row execute function hub_hidden.ledger_record_bankroll();

-- Who and why for the changes made until ledger_end; returns the previous
-- settings so nested calls restore them.
create function hub_hidden.ledger_begin(fn text, actor text, reason text, bet_id uuid) returns text[]
language plpgsql as $fn$
declare
  previous text[] := array[current_setting('hub.ledger_actor', true), current_setting('hub.ledger_reason', true), current_setting('hub.ledger_bet_id', true)];
begin
  if actor is null or length(actor) not between 1 and 200 then
    raise exception '%: actor (who makes the change) must be 1 to 200 characters; received %.', fn, coalesce(length(actor)::text || ' characters', 'null')
      using errcode = 'P0001', constraint = 'ledger_actor';
  end if;
  if reason is null or length(reason) > 1000 then
    raise exception '%: reason must be a text of at most 1000 characters; received %.', fn, coalesce(length(reason)::text || ' characters', 'null')
      using errcode = 'P0001', constraint = 'ledger_reason';
  end if;
  perform set_config('hub.ledger_actor', actor, true);
  perform set_config('hub.ledger_reason', reason, true);
  perform set_config('hub.ledger_bet_id', coalesce(bet_id::text, ''), true);
  return previous;
end
$fn$;

create function hub_hidden.ledger_end(previous text[]) returns void language sql as $fn$
  select set_config('hub.ledger_actor', coalesce(previous[1], ''), true),
         set_config('hub.ledger_reason', coalesce(previous[2], ''), true),
         set_config('hub.ledger_bet_id', coalesce(previous[3], ''), true)
$fn$;

create function hub_hidden.ledger_check_amount(fn text, amount float8) returns void
language plpgsql immutable as $fn$
begin
  if amount is null or amount = 'NaN' or amount < 1 or amount > 9007199254740991 or amount <> trunc(amount) then
    raise exception '%: amount must be a whole number of base units from 1 to 9007199254740991; received %.', fn, hub_hidden.ledger_amount_text(amount)
      using errcode = 'P0001', constraint = 'ledger_amount_whole',
            hint = 'Amounts are whole base units of the currency; display_unit_scale says how many make one display unit.';
  end if;
end
$fn$;

create function hub_hidden.ledger_check_currency(fn text, casino_id uuid, currency_key text) returns void
language plpgsql stable as $fn$
begin
  if not exists (select 1 from hub.currency c where c.casino_id = ledger_check_currency.casino_id and c.key = ledger_check_currency.currency_key) then
    raise exception '%: casino % has no currency %.', fn, casino_id, coalesce(quote_literal(currency_key), 'null')
      using errcode = 'P0001', constraint = 'ledger_known_account';
  end if;
end
$fn$;

create function hub_hidden.ledger_check_player(fn text, user_id uuid, casino_id uuid, experience_id uuid, currency_key text) returns void
language plpgsql stable as $fn$
begin
  if not exists (select 1 from hub.user u where u.id = ledger_check_player.user_id and u.casino_id = ledger_check_player.casino_id) then
    raise exception '%: no user % in casino %.', fn, coalesce(user_id::text, 'null'), coalesce(casino_id::text, 'null')
      using errcode = 'P0001', constraint = 'ledger_known_account';
  end if;
  if not exists (select 1 from hub.experience e where e.id = ledger_check_player.experience_id and e.casino_id = ledger_check_player.casino_id) then
    raise exception '%: no experience % in casino %.', fn, coalesce(experience_id::text, 'null'), casino_id
      using errcode = 'P0001', constraint = 'ledger_known_account';
  end if;
  perform hub_hidden.ledger_check_currency(fn, casino_id, currency_key);
end
$fn$;

-- A credit that would take an account past 2^53 - 1 would no longer be exact.
create function hub_hidden.ledger_check_total(fn text, what text, amount float8, delta float8) returns void
language plpgsql immutable as $fn$
begin
  if amount + delta > 9007199254740991 then
    raise exception '%: % would exceed 9007199254740991 base units (it is %, the credit %).', fn, what, hub_hidden.ledger_amount_text(amount), hub_hidden.ledger_amount_text(delta)
      using errcode = 'P0001', constraint = 'ledger_amount_whole';
  end if;
end
$fn$;

create function hub_hidden.credit_balance(
  user_id uuid, casino_id uuid, experience_id uuid, currency_key text, amount float8, actor text, reason text, bet_id uuid default null
) returns hub.balance language plpgsql as $fn$
declare
  previous text[];
  existing hub.balance;
  result hub.balance;
begin
  perform hub_hidden.ledger_check_amount('credit_balance', credit_balance.amount);
  perform hub_hidden.ledger_check_player('credit_balance', credit_balance.user_id, credit_balance.casino_id, credit_balance.experience_id, credit_balance.currency_key);
  select * into existing from hub.balance b
   where b.user_id = credit_balance.user_id and b.experience_id = credit_balance.experience_id and b.currency_key = credit_balance.currency_key
   for update;
  if found then
    perform hub_hidden.ledger_check_total('credit_balance', 'the balance', existing.amount, credit_balance.amount);
  end if;
  previous := hub_hidden.ledger_begin('credit_balance', credit_balance.actor, credit_balance.reason, credit_balance.bet_id);
  insert into hub.balance as b (user_id, casino_id, experience_id, currency_key, amount)
  values (credit_balance.user_id, credit_balance.casino_id, credit_balance.experience_id, credit_balance.currency_key, credit_balance.amount)
  on conflict on constraint balance_user_id_experience_id_currency_key_key do update set amount = b.amount + excluded.amount
  returning b.* into result;
  perform hub_hidden.ledger_end(previous);
  return result;
end
$fn$;

create function hub_hidden.debit_balance(
  user_id uuid, casino_id uuid, experience_id uuid, currency_key text, amount float8, actor text, reason text, bet_id uuid default null
) returns hub.balance language plpgsql as $fn$
declare
  previous text[];
  existing hub.balance;
  result hub.balance;
begin
  perform hub_hidden.ledger_check_amount('debit_balance', debit_balance.amount);
  perform hub_hidden.ledger_check_player('debit_balance', debit_balance.user_id, debit_balance.casino_id, debit_balance.experience_id, debit_balance.currency_key);
  select * into existing from hub.balance b
   where b.user_id = debit_balance.user_id and b.experience_id = debit_balance.experience_id and b.currency_key = debit_balance.currency_key
   for update;
  if not found or existing.amount < debit_balance.amount then
    raise exception 'debit_balance: insufficient funds: the balance is % %, the debit %.', hub_hidden.ledger_amount_text(coalesce(existing.amount, 0)), debit_balance.currency_key, hub_hidden.ledger_amount_text(debit_balance.amount)
      using errcode = 'P0001', constraint = 'ledger_sufficient_funds';
  end if;
  previous := hub_hidden.ledger_begin('debit_balance', debit_balance.actor, debit_balance.reason, debit_balance.bet_id);
  update hub.balance b set amount = b.amount - debit_balance.amount where b.id = existing.id returning b.* into result;
  perform hub_hidden.ledger_end(previous);
  return result;
end
$fn$;

-- An operator's debit may take only what no slot holds: idle slots are released first.
create function hub_hidden.adjust_bankroll(
  casino_id uuid, currency_key text, amount_delta float8, actor text, reason text, bet_id uuid default null
) returns hub.bankroll language plpgsql as $fn$
declare
  previous text[];
  existing hub.bankroll;
  result hub.bankroll;
  v_reserved_cover float8 := 0;
  v_reserved_room float8 := 0;
begin
  if amount_delta is null or amount_delta = 'NaN' or abs(amount_delta) < 1 or abs(amount_delta) > 9007199254740991 or amount_delta <> trunc(amount_delta) then
    raise exception 'adjust_bankroll: amount_delta must be a whole number of base units from 1 to 9007199254740991, or from -9007199254740991 to -1; received %.', hub_hidden.ledger_amount_text(amount_delta)
      using errcode = 'P0001', constraint = 'ledger_amount_whole',
            hint = 'Amounts are whole base units of the currency; display_unit_scale says how many make one display unit.';
  end if;
  perform hub_hidden.ledger_check_currency('adjust_bankroll', adjust_bankroll.casino_id, adjust_bankroll.currency_key);
  select * into existing from hub.bankroll b
   where b.casino_id = adjust_bankroll.casino_id and b.currency_key = adjust_bankroll.currency_key
   for no key update;
  if found then
    -- Pending bets folded and idle slots released, so the check below sees what is truly free.
    perform hub_hidden.fold_bankroll_locked(existing.id, 10000, interval '0');
    select * into existing from hub.bankroll b where b.id = existing.id;
    select greatest(r.cover, 0), greatest(r.room, 0) into v_reserved_cover, v_reserved_room from hub_hidden.bankroll_reserved(existing.id) r;
  end if;
  if amount_delta > 0 then
    if existing.id is not null then
      perform hub_hidden.ledger_check_total('adjust_bankroll', 'the house bankroll', existing.amount + v_reserved_room, amount_delta);
    end if;
    previous := hub_hidden.ledger_begin('adjust_bankroll', adjust_bankroll.actor, adjust_bankroll.reason, adjust_bankroll.bet_id);
    insert into hub.bankroll as b (casino_id, currency_key, amount)
    values (adjust_bankroll.casino_id, adjust_bankroll.currency_key, amount_delta)
    on conflict on constraint bankroll_casino_id_currency_key_key do update set amount = b.amount + excluded.amount
    returning b.* into result;
  else
    if existing.id is null or existing.amount < -amount_delta then
      raise exception 'adjust_bankroll: insufficient funds: the house bankroll is % %, the debit %.', hub_hidden.ledger_amount_text(coalesce(existing.amount, 0)), adjust_bankroll.currency_key, hub_hidden.ledger_amount_text(-amount_delta)
        using errcode = 'P0001', constraint = 'ledger_sufficient_funds';
    end if;
    if existing.amount - v_reserved_cover < -amount_delta then
      raise exception 'adjust_bankroll: insufficient funds: the house bankroll is % %, of which % cover bets in flight; the debit %.', hub_hidden.ledger_amount_text(existing.amount), adjust_bankroll.currency_key, hub_hidden.ledger_amount_text(v_reserved_cover), hub_hidden.ledger_amount_text(-amount_delta)
        using errcode = 'P0001', constraint = 'ledger_sufficient_funds';
    end if;
    previous := hub_hidden.ledger_begin('adjust_bankroll', adjust_bankroll.actor, adjust_bankroll.reason, adjust_bankroll.bet_id);
    update hub.bankroll b set amount = b.amount + amount_delta where b.id = existing.id returning b.* into result;
  end if;
  perform hub_hidden.ledger_end(previous);
  return result;
end
$fn$;

-- The opening amount of a new bankroll: 0 is allowed (an empty bankroll).
create function hub_hidden.ensure_bankroll(
  casino_id uuid, currency_key text, amount float8, reason text, actor text default 'hub'
) returns hub.bankroll language plpgsql as $fn$
declare
  previous text[];
  result hub.bankroll;
begin
  if amount is null or amount = 'NaN' or amount < 0 or amount > 9007199254740991 or amount <> trunc(amount) then
    raise exception 'ensure_bankroll: amount must be a whole number of base units from 0 to 9007199254740991; received %.', hub_hidden.ledger_amount_text(amount)
      using errcode = 'P0001', constraint = 'ledger_amount_whole',
            hint = 'Amounts are whole base units of the currency; display_unit_scale says how many make one display unit.';
  end if;
  perform hub_hidden.ledger_check_currency('ensure_bankroll', ensure_bankroll.casino_id, ensure_bankroll.currency_key);
  previous := hub_hidden.ledger_begin('ensure_bankroll', ensure_bankroll.actor, ensure_bankroll.reason, null);
  insert into hub.bankroll as b (casino_id, currency_key, amount)
  values (ensure_bankroll.casino_id, ensure_bankroll.currency_key, ensure_bankroll.amount)
  on conflict on constraint bankroll_casino_id_currency_key_key do nothing
  returning b.* into result;
  perform hub_hidden.ledger_end(previous);
  if result.id is null then
    select * into result from hub.bankroll b where b.casino_id = ensure_bankroll.casino_id and b.currency_key = ensure_bankroll.currency_key;
  end if;
  return result;
end
$fn$;

-- Money moves only on the superuser connection (plugins check the identity first).
revoke execute on function
  hub_hidden.ledger_guard(), hub_hidden.ledger_write(uuid, uuid, uuid, text, text, float8, float8, text),
  hub_hidden.ledger_record_balance(), hub_hidden.ledger_record_bankroll(),
  hub_hidden.ledger_begin(text, text, text, uuid), hub_hidden.ledger_end(text[]),
  hub_hidden.credit_balance(uuid, uuid, uuid, text, float8, text, text, uuid),
  hub_hidden.debit_balance(uuid, uuid, uuid, text, float8, text, text, uuid),
  hub_hidden.adjust_bankroll(uuid, text, float8, text, text, uuid),
  hub_hidden.ensure_bankroll(uuid, text, float8, text, text)
  from public;
revoke execute on function
  hub_hidden.ledger_amount_text(float8),
  hub_hidden.ledger_check_amount(text, float8),
  hub_hidden.ledger_check_total(text, text, float8, float8)
  from public;

-- ==========================================================================
-- Functions: bankroll reservations (see hub_hidden.bankroll_slot)
-- ==========================================================================

-- What the slots hold back from hub.bankroll.amount: (cover, room). Read under the bankroll's lock.
create function hub_hidden.bankroll_reserved(p_bankroll_id uuid, out cover float8, out room float8)
language sql stable as $fn$
  select coalesce((select sum(s.cover) from hub_hidden.bankroll_slot s where s.bankroll_id = p_bankroll_id), 0) - coalesce(q.d, 0),
         coalesce((select sum(s.room) from hub_hidden.bankroll_slot s where s.bankroll_id = p_bankroll_id), 0) + coalesce(q.d, 0)
    from (select sum(x.delta) as d from hub_hidden.bankroll_pending x where x.bankroll_id = p_bankroll_id) q
$fn$;

/*
 * Apply one bankroll's committed pending rows (at most p_limit, in id order),
 * one bankroll update and so one house ledger row each, then release the
 * slots that no bet holds, hold no pending row and were last used before
 * now() − p_idle. The caller holds the bankroll's lock. Answers how many
 * bets were folded.
 */
create function hub_hidden.fold_bankroll_locked(p_bankroll_id uuid, p_limit integer, p_idle interval)
returns integer language plpgsql as $fn$
declare
  p record;
  y record;
  v_previous text[];
  v_n integer := 0;
begin
  for p in
    with taken as (
      delete from hub_hidden.bankroll_pending d
       where d.id in (select x.id from hub_hidden.bankroll_pending x where x.bankroll_id = p_bankroll_id order by x.id limit p_limit for update skip locked)
      returning d.*)
    select * from taken order by id
  loop
    v_previous := hub_hidden.ledger_begin('fold_bankroll', p.actor, p.reason, p.bet_id);
    update hub.bankroll r
       set amount = r.amount + p.delta, bets = r.bets + p.counted,
           wagered = least(r.wagered + p.wagered, 9007199254740991), expected_value = r.expected_value + p.expected_value
     where r.id = p_bankroll_id;
    perform hub_hidden.ledger_end(v_previous);
    v_n := v_n + 1;
  end loop;
  for y in
    select s.id from hub_hidden.bankroll_slot s
     where s.bankroll_id = p_bankroll_id and (s.cover > 0 or s.room > 0) and s.used_at <= now() - p_idle
     order by s.id for no key update skip locked
  loop
    -- Checked once the slot is locked: every bet on it has committed by now, so its pending rows are visible.
    if not exists (select 1 from hub_hidden.bankroll_pending q where q.slot_id = y.id) then
      update hub_hidden.bankroll_slot s set cover = 0, room = 0 where s.id = y.id;
    end if;
  end loop;
  return v_n;
end
$fn$;

-- Fold one bankroll (taking its lock); 0 when it does not exist.
create function hub_hidden.fold_bankroll(p_bankroll_id uuid, p_idle interval default interval '2 seconds')
returns integer language plpgsql as $fn$
begin
  perform 1 from hub.bankroll r where r.id = p_bankroll_id for no key update;
  if not found then return 0; end if;
  return hub_hidden.fold_bankroll_locked(p_bankroll_id, 10000, p_idle);
end
$fn$;

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
 * So a bet that settled against a slot waits for one flush (its own
 * commit's), not two, before it is answered.
 *
 * A function of its own, for a statement sent alone (its own transaction):
 * called inside a transaction that also moves money, the setting would make
 * that transaction's commit asynchronous too. hub_hidden.fold_bankroll is
 * the one for any other caller.
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

-- ==========================================================================
-- Functions: SETTLEMENT
-- ==========================================================================
/*
 * Every bet's money moves through this section, and only through it:
 *
 *   settle_bet_shared      one bet's balance and house side (dbSettleBet);
 *   settle_bet             the same, always on the bankroll row (outcome bets);
 *   settle_outcome_bet     hubMakeOutcomeBet: the chain's next hash, then
 *                          settle_bet, then the hash revealed and the bet stored;
 *   settle_outcome_bets    a group of outcome bets of one currency, one statement;
 *   *_once                 the same with an idempotency key;
 *   claim_ / record_idempotency_key   the keys those use.
 *
 * Invariants, each kept by the SQL below it:
 *   - A bet is all or nothing: its balance change, its house side (on the
 *     bankroll row, or on a slot with a pending row), its ledger rows, its
 *     hash and its bet row are written in one statement's transaction; a
 *     refusal writes nothing and says why in `status` (settled,
 *     unknown-currency, no-balance, insufficient-funds, balance-overflow,
 *     no-bankroll, no-cover, bankroll-overflow, chain-moved, and for the
 *     *_once forms replayed / key-reused).
 *   - The house covers every accepted bet's largest payout: amount − what
 *     slots hold + wager − max_payout ≥ 0 before the bet (on a slot: its own
 *     cover), so the bankroll with every committed bet applied is never below 0.
 *   - No account passes 2^53 − 1: a win that would take a balance or the
 *     bankroll past it is refused (balance-overflow, bankroll-overflow).
 *   - Every settled bet is in the ledger with its id, actor and reason, net 0
 *     included (ledger_write writes zero-delta rows when hub.ledger_bet_id is set).
 *   - One lock order everywhere: idempotency key, chain, balance, slot,
 *     bankroll. A group takes all of one kind, each in id (or key) order,
 *     before the next kind, so groups and single bets cannot deadlock.
 *   - An idempotency key makes one effect: a replay answers the first
 *     answer and takes no hash; a refused bet leaves its key unused.
 */

/*
 * One bet's money, in one call: the player's balance pays `wager` into the
 * house bankroll and receives `payout` from it (net = payout − wager).
 * Locks in the hub's one order: the player's balance, then the bankroll (the
 * bankroll's lock is taken by its guarded update, so it is held for the least
 * time). The bankroll must cover the bet's largest possible payout:
 * amount + wager − max_payout ≥ 0. A refusal writes nothing and says why in
 * `status`. Both updates are ledgered with the bet's id, actor and reason
 * (rows of 0 included).
 *
 * With p_use_slots (dbSettleBet), in this order: (1) a free slot (not locked)
 * with enough cover and room: the bet settles against it and its house side
 * waits in hub_hidden.bankroll_pending (answered as pending_bankroll, to fold
 * after the commit); (2) when the free cover looks short (read without
 * locks) and a slot holds enough, the bet waits for that slot; (3) the
 * bankroll row free and no slot holding cover (no recent contention): the
 * bet settles on it directly; (4) else the bet waits for the row and,
 * holding it, gives a slot a 64th of the free cover (at most 64 slots) and
 * settles against that slot, so the bets after it need not wait; or, when
 * its cover is more than that 64th (near the edge), settles on the row.
 * Without p_use_slots every bet settles directly. Either way the free cover
 * is amount − what slots hold (bankroll_reserved); when short, pending rows
 * are folded and idle slots released before refusing.
 */
create function hub_hidden.settle_bet_shared(
  p_user_id uuid, p_casino_id uuid, p_experience_id uuid, p_currency_key text,
  p_bet_id uuid, p_wager float8, p_payout float8, p_max_payout float8, p_expected_value float8,
  p_actor text, p_reason text, p_use_slots boolean
) returns table (status text, balance float8, pending_bankroll uuid)
language plpgsql as $fn$
declare
  v_balance_id uuid;
  v_amount float8;
  v_bankroll_id uuid;
  v_bankroll float8;
  v_reserved record;
  v_previous text[];
  v_need float8 := p_max_payout - p_wager;
  v_delta float8 := p_wager - p_payout;
  v_gain float8 := greatest(p_wager - p_payout, 0);
  v_slot bigint;
  v_waited boolean := false;
  v_direct boolean;
  v_free float8;
  v_free_room float8;
  v_cover float8;
  v_room float8;
begin
  if p_bet_id is null or not hub_hidden.is_whole_amount(p_wager, 0) or not hub_hidden.is_whole_amount(p_payout, 0)
     or not hub_hidden.is_whole_amount(p_max_payout, p_payout) or not (p_expected_value > '-Infinity' and p_expected_value < 'Infinity') then
    raise exception 'settle_bet: wager %, payout % and max_payout % must be whole base units from 0 to 9007199254740991 with max_payout >= payout, the expected value % finite, and a bet id given.',
      hub_hidden.ledger_amount_text(p_wager), hub_hidden.ledger_amount_text(p_payout), hub_hidden.ledger_amount_text(p_max_payout), p_expected_value
      using errcode = 'P0001', constraint = 'ledger_amount_whole';
  end if;
  select b.id, b.amount into v_balance_id, v_amount from hub.balance b
   where b.user_id = p_user_id and b.experience_id = p_experience_id and b.currency_key = p_currency_key and b.casino_id = p_casino_id
   for update;
  if not found then
    if not exists (select 1 from hub.currency c where c.key = p_currency_key and c.casino_id = p_casino_id) then
      return query select 'unknown-currency'::text, null::float8, null::uuid; return;
    end if;
    return query select 'no-balance'::text, null::float8, null::uuid; return;
  end if;
  if v_amount < p_wager then return query select 'insufficient-funds'::text, v_amount, null::uuid; return; end if;
  if v_amount + (p_max_payout - p_wager) > 9007199254740991 then return query select 'balance-overflow'::text, v_amount, null::uuid; return; end if;
  select r.id into v_bankroll_id from hub.bankroll r where r.casino_id = p_casino_id and r.currency_key = p_currency_key;
  if not found then return query select 'no-bankroll'::text, v_amount, null::uuid; return; end if;

  if p_use_slots then
    update hub_hidden.bankroll_slot s set cover = s.cover + v_delta, room = s.room - v_delta, used_at = now()
     where s.id = (select y.id from hub_hidden.bankroll_slot y
                    where y.bankroll_id = v_bankroll_id and y.cover >= v_need and y.room >= v_gain
                    order by y.id limit 1 for no key update skip locked)
    returning s.id into v_slot;
    -- Near the edge (by a reading without locks) the cover is in slots: wait for one, as bets
    -- waited for the row before. Only a transaction holding no slot waits for one, so two
    -- transactions never wait for each other's slots.
    if v_slot is null and hub_hidden.ledger_setting('hub.bankroll_slot_held') is null then
      select r.amount - x.cover into v_free from hub.bankroll r, hub_hidden.bankroll_reserved(v_bankroll_id) x where r.id = v_bankroll_id;
      if v_free < v_need then
        update hub_hidden.bankroll_slot s set cover = s.cover + v_delta, room = s.room - v_delta, used_at = now()
         where s.id = (select y.id from hub_hidden.bankroll_slot y
                        where y.bankroll_id = v_bankroll_id and y.cover >= v_need and y.room >= v_gain
                        order by y.id limit 1 for no key update)
        returning s.id into v_slot;
      end if;
    end if;
    if v_slot is null then
      -- Directly on the row only while no slot holds cover (no recent contention): a bet on the
      -- row holds it to its commit, and the folds that answer the slots' bets would wait for it.
      v_direct := false;
      if not exists (select 1 from hub_hidden.bankroll_slot y where y.bankroll_id = v_bankroll_id and (y.cover > 0 or y.room > 0)) then
        perform 1 from hub.bankroll r where r.id = v_bankroll_id for no key update skip locked;
        v_direct := found;
      end if;
      if not v_direct then
        perform 1 from hub.bankroll r where r.id = v_bankroll_id for no key update;
        v_waited := true;
      end if;
    end if;
  else
    perform 1 from hub.bankroll r where r.id = v_bankroll_id for no key update;
  end if;

  if v_slot is null then
    -- The bankroll's lock is held from here on.
    select r.amount into v_bankroll from hub.bankroll r where r.id = v_bankroll_id;
    select * into v_reserved from hub_hidden.bankroll_reserved(v_bankroll_id);
    v_free := v_bankroll - v_reserved.cover;
    v_free_room := 9007199254740991 - v_bankroll - v_reserved.room;
    if v_free < v_need or v_free_room < v_gain then
      perform hub_hidden.fold_bankroll_locked(v_bankroll_id, 10000, interval '0');
      select r.amount into v_bankroll from hub.bankroll r where r.id = v_bankroll_id;
      select * into v_reserved from hub_hidden.bankroll_reserved(v_bankroll_id);
      v_free := v_bankroll - v_reserved.cover;
      v_free_room := 9007199254740991 - v_bankroll - v_reserved.room;
    end if;
    if v_free < v_need then return query select 'no-cover'::text, v_amount, null::uuid; return; end if;
    if v_free_room < v_gain then return query select 'bankroll-overflow'::text, v_amount, null::uuid; return; end if;
    -- A slot only where the bankroll is large against the bet: near its edge one bet's cover is most
    -- of what is free, and a bet on the row, as before slots, lets the next bet use what it leaves.
    if v_waited and floor(v_free / 64) >= v_need then
      v_cover := least(v_free, greatest(v_need, floor(v_free / 64)));
      v_room := least(v_free_room, greatest(v_gain, floor(v_free_room / 64)));
      update hub_hidden.bankroll_slot s set cover = s.cover + v_cover + v_delta, room = s.room + v_room - v_delta, used_at = now()
       where s.id = (select y.id from hub_hidden.bankroll_slot y where y.bankroll_id = v_bankroll_id
                      order by y.cover, y.id limit 1 for no key update skip locked)
      returning s.id into v_slot;
      if v_slot is null and (select count(*) from hub_hidden.bankroll_slot y where y.bankroll_id = v_bankroll_id) < 64 then
        insert into hub_hidden.bankroll_slot (bankroll_id, cover, room) values (v_bankroll_id, v_cover + v_delta, v_room - v_delta)
        returning id into v_slot;
      end if;
    end if;
  end if;

  v_previous := hub_hidden.ledger_begin('settle_bet', p_actor, p_reason, p_bet_id);
  if v_slot is null then
    update hub.bankroll r
       set amount = r.amount + v_delta, bets = r.bets + (p_wager > 0)::int,
           -- A statistic: it stops at 2^53 − 1 rather than refuse bets.
           wagered = least(r.wagered + p_wager, 9007199254740991), expected_value = r.expected_value + p_expected_value
     where r.id = v_bankroll_id;
  else
    perform set_config('hub.bankroll_slot_held', 'yes', true);
    insert into hub_hidden.bankroll_pending (bankroll_id, slot_id, bet_id, delta, counted, wagered, expected_value, actor, reason)
    values (v_bankroll_id, v_slot, p_bet_id, v_delta, (p_wager > 0)::int, p_wager, p_expected_value, p_actor, p_reason);
  end if;
  update hub.balance b set amount = b.amount - v_delta where b.id = v_balance_id returning b.amount into v_amount;
  perform hub_hidden.ledger_end(v_previous);
  return query select 'settled'::text, v_amount, case when v_slot is null then null::uuid else v_bankroll_id end;
end
$fn$;
-- hubMakeOutcomeBet's settlements: always on the bankroll row, against its free cover.
create function hub_hidden.settle_bet(
  p_user_id uuid, p_casino_id uuid, p_experience_id uuid, p_currency_key text,
  p_bet_id uuid, p_wager float8, p_payout float8, p_max_payout float8, p_expected_value float8,
  p_actor text, p_reason text
) returns table (status text, balance float8)
language sql as $fn$
  select s.status, s.balance from hub_hidden.settle_bet_shared($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, false) s
$fn$;

/*
 * hubMakeOutcomeBet's write, in one statement: the chain's next hash must
 * still be `p_iteration` (the caller drew the outcome from it without a lock;
 * 'chain-moved' otherwise, nothing written), then the bet settles, then the
 * hash is revealed and the bet stored (with p_bet_id, or a new id when null).
 * Lock order: chain, balance, bankroll.
 */
create function hub_hidden.settle_outcome_bet(
  p_user_id uuid, p_casino_id uuid, p_experience_id uuid, p_currency_key text,
  p_bet_id uuid, p_wager float8, p_payout float8, p_max_payout float8, p_expected_value float8,
  p_actor text, p_reason text,
  p_hash_chain_id uuid, p_iteration integer, p_digest bytea, p_client_seed text,
  p_kind text, p_profit float8, p_outcome_idx integer, p_weights float8[], p_profits float8[], p_metadata jsonb
) returns table (status text, balance float8, bet_id uuid)
language plpgsql as $fn$
declare
  v_settled record;
  v_hash_id uuid;
  v_bet_id uuid := coalesce(p_bet_id, hub_hidden.uuid_generate_v7());
begin
  perform 1 from hub.hash_chain c
   where c.id = p_hash_chain_id and c.user_id = p_user_id and c.casino_id = p_casino_id and c.experience_id = p_experience_id
     and c.active and c.current_iteration = p_iteration + 1
   for update;
  if not found then return query select 'chain-moved'::text, null::float8, null::uuid; return; end if;
  select * into v_settled from hub_hidden.settle_bet(p_user_id, p_casino_id, p_experience_id, p_currency_key,
    v_bet_id, p_wager, p_payout, p_max_payout, p_expected_value, p_actor, p_reason);
  if v_settled.status <> 'settled' then return query select v_settled.status, v_settled.balance, null::uuid; return; end if;
  update hub.hash_chain set current_iteration = p_iteration where id = p_hash_chain_id;
  insert into hub.hash (hash_chain_id, kind, digest, iteration, client_seed)
  values (p_hash_chain_id, 'INTERMEDIATE', p_digest, p_iteration, p_client_seed) returning id into v_hash_id;
  insert into hub.outcome_bet (id, kind, wager, profit, net, outcomes, outcome_idx, currency_key, hash_id, user_id, casino_id, experience_id, metadata)
  values (v_bet_id, p_kind, p_wager, p_profit, p_payout - p_wager,
          coalesce((select array_agg(row(u.weight, u.profit)::hub.outcome order by u.n)
                      from unnest(p_weights, p_profits) with ordinality as u(weight, profit, n)), '{}'),
          p_outcome_idx, p_currency_key, v_hash_id, p_user_id, p_casino_id, p_experience_id, coalesce(p_metadata, '{}'));
  return query select 'settled'::text, v_settled.balance, v_bet_id;
end
$fn$;
revoke execute on function
  hub_hidden.settle_bet(uuid, uuid, uuid, text, uuid, float8, float8, float8, float8, text, text),
  hub_hidden.settle_outcome_bet(uuid, uuid, uuid, text, uuid, float8, float8, float8, float8, text, text, uuid, integer, bytea, text, text, float8, integer, float8[], float8[], jsonb)
  from public;
revoke execute on function
  hub_hidden.bankroll_reserved(uuid),
  hub_hidden.fold_bankroll_locked(uuid, integer, interval),
  hub_hidden.fold_bankroll(uuid, interval),
  hub_hidden.settle_bet_shared(uuid, uuid, uuid, text, uuid, float8, float8, float8, float8, text, text, boolean)
  from public;

/*
 * Bets of one casino's currency settled together in one statement, so one
 * commit (one WAL flush, the bankroll row's lock held once) carries many
 * bets. Each bet is settled by hub_hidden.settle_outcome_bet exactly as when
 * alone: the same checks, the bankroll's cover checked before each bet with
 * the bets before it applied, one ledger row per balance and bankroll update.
 *
 * p_bets: a JSON array, one element per bet, each the arguments of
 * settle_outcome_bet in its order (the digest as hex, the weights and
 * profits as JSON arrays, the metadata as JSON text or null). Answers one
 * row per bet, n from 0 in the array's order.
 *
 * Locks: every chain of the group, then every balance, each in id order, and
 * only then the bankroll (by the first settlement). A single bet takes chain,
 * balance, bankroll; holding all of one kind before the next keeps the
 * hub's order, so a group and single bets, or two groups, cannot deadlock.
 */
create function hub_hidden.settle_outcome_bets(p_bets jsonb)
returns table (n integer, status text, balance float8, bet_id uuid)
language plpgsql as $fn$
declare
  b jsonb;
  i integer := 0;
begin
  if jsonb_typeof(p_bets) is distinct from 'array' then
    raise exception 'settle_outcome_bets: p_bets must be a JSON array of bets; received %.', coalesce(jsonb_typeof(p_bets), 'null')
      using errcode = 'P0001';
  end if;
  perform 1 from hub.hash_chain c
   where c.id in (select (e->>11)::uuid from jsonb_array_elements(p_bets) e)
   order by c.id
   for update;
  perform 1 from hub.balance x
   where (x.user_id, x.experience_id, x.currency_key, x.casino_id) in
         (select (e->>0)::uuid, (e->>2)::uuid, e->>3, (e->>1)::uuid from jsonb_array_elements(p_bets) e)
   order by x.id
   for update;
  for b in select e from jsonb_array_elements(p_bets) e loop
    return query
      select i, s.status, s.balance, s.bet_id
        from hub_hidden.settle_outcome_bet(
          (b->>0)::uuid, (b->>1)::uuid, (b->>2)::uuid, b->>3,
          (b->>4)::uuid, (b->>5)::float8, (b->>6)::float8, (b->>7)::float8, (b->>8)::float8,
          b->>9, b->>10,
          (b->>11)::uuid, (b->>12)::integer, decode(b->>13, 'hex'), b->>14,
          b->>15, (b->>16)::float8, (b->>17)::integer,
          array(select w.x::float8 from jsonb_array_elements_text(b->18) with ordinality w(x, k) order by w.k),
          array(select w.x::float8 from jsonb_array_elements_text(b->19) with ordinality w(x, k) order by w.k),
          (b->>20)::jsonb) s;
    i := i + 1;
  end loop;
end
$fn$;
revoke execute on function hub_hidden.settle_outcome_bets(jsonb) from public;

/*
 * Claim a key for this transaction. 'claimed': the key is now this
 * transaction's (do the effect, then record its answer); 'own': this
 * transaction claimed it already; 'replay': a committed request with the same
 * operation and fingerprint holds it (its answer is returned); 'reused': it
 * holds another operation or fingerprint. A concurrent claim of the same key
 * waits on the primary key until the first transaction ends, then reads what
 * it committed (or claims the key itself when the first rolled back).
 */
create function hub_hidden.claim_idempotency_key(p_scope text, p_key text, p_operation text, p_fingerprint text)
returns table (status text, operation text, result_id uuid, result jsonb)
language plpgsql as $fn$
declare
  r hub_hidden.idempotency_key;
begin
  if current_setting('hub.idempotency_claim', true) = p_scope || ' ' || p_key then
    return query select 'own'::text, p_operation, null::uuid, null::jsonb;
    return;
  end if;
  insert into hub_hidden.idempotency_key as k (scope, key, operation, fingerprint)
  values (p_scope, p_key, p_operation, p_fingerprint)
  on conflict (scope, key) do update
     set operation = excluded.operation, fingerprint = excluded.fingerprint, result_id = null, result = null, created_at = now()
   where k.created_at < now() - interval '24 hours';
  if found then
    perform set_config('hub.idempotency_claim', p_scope || ' ' || p_key, true);
    return query select 'claimed'::text, p_operation, null::uuid, null::jsonb;
    return;
  end if;
  select * into r from hub_hidden.idempotency_key k where k.scope = p_scope and k.key = p_key;
  if r.operation = p_operation and r.fingerprint = p_fingerprint then
    return query select 'replay'::text, r.operation, r.result_id, r.result;
  else
    return query select 'reused'::text, r.operation, r.result_id, null::jsonb;
  end if;
end
$fn$;

/* The answer of the effect that claimed the key, in the same transaction. */
create function hub_hidden.record_idempotency_key(p_scope text, p_key text, p_result_id uuid, p_result jsonb)
returns void
language sql as $fn$
  update hub_hidden.idempotency_key set result_id = p_result_id, result = p_result where scope = p_scope and key = p_key;
$fn$;

/*
 * hub_hidden.settle_outcome_bet with an idempotency key (p_scope, p_key,
 * p_fingerprint; a null key settles exactly as without one). The key is
 * claimed before the chain's lock, so a replay takes no hash: 'replayed' with
 * the first bet's id, or 'key-reused'. A bet settled records its answer; a
 * refusal deletes the claim, so a refused bet leaves its key unused.
 */
create function hub_hidden.settle_outcome_bet_once(
  p_user_id uuid, p_casino_id uuid, p_experience_id uuid, p_currency_key text,
  p_bet_id uuid, p_wager float8, p_payout float8, p_max_payout float8, p_expected_value float8,
  p_actor text, p_reason text,
  p_hash_chain_id uuid, p_iteration integer, p_digest bytea, p_client_seed text,
  p_kind text, p_profit float8, p_outcome_idx integer, p_weights float8[], p_profits float8[], p_metadata jsonb,
  p_scope text, p_key text, p_fingerprint text, p_answer jsonb
) returns table (status text, balance float8, bet_id uuid)
language plpgsql as $fn$
declare
  v_claim record;
  v_settled record;
begin
  if p_key is not null then
    select * into v_claim from hub_hidden.claim_idempotency_key(p_scope, p_key, 'hubMakeOutcomeBet', p_fingerprint);
    if v_claim.status = 'replay' then return query select 'replayed'::text, null::float8, v_claim.result_id; return; end if;
    if v_claim.status = 'reused' then return query select 'key-reused'::text, null::float8, null::uuid; return; end if;
  end if;
  select * into v_settled from hub_hidden.settle_outcome_bet(p_user_id, p_casino_id, p_experience_id, p_currency_key,
    p_bet_id, p_wager, p_payout, p_max_payout, p_expected_value, p_actor, p_reason,
    p_hash_chain_id, p_iteration, p_digest, p_client_seed, p_kind, p_profit, p_outcome_idx, p_weights, p_profits, p_metadata);
  if p_key is not null then
    if v_settled.status = 'settled' then
      perform hub_hidden.record_idempotency_key(p_scope, p_key, v_settled.bet_id,
        p_answer || jsonb_build_object('betId', v_settled.bet_id, 'balance', v_settled.balance));
    else
      delete from hub_hidden.idempotency_key k where k.scope = p_scope and k.key = p_key;
      perform set_config('hub.idempotency_claim', '', true);
    end if;
  end if;
  return query select v_settled.status, v_settled.balance, v_settled.bet_id;
end
$fn$;

/*
 * hub_hidden.settle_outcome_bets for bets with keys: each element has the 25
 * arguments of settle_outcome_bet_once. The keys are claimed first, in key
 * order, before any chain or balance: the same order as a single bet's
 * (key, chain, balance, bankroll), so groups and single bets cannot deadlock.
 * A bet whose key is replayed or reused takes no lock and writes nothing.
 */
create function hub_hidden.settle_outcome_bets_once(p_bets jsonb)
returns table (n integer, status text, balance float8, bet_id uuid)
language plpgsql as $fn$
declare
  b jsonb;
  i integer := 0;
  v_claims jsonb := '{}';
  v_claim record;
  v_settle jsonb := '[]';
  v_index integer[] := '{}';
  v_row record;
begin
  if jsonb_typeof(p_bets) is distinct from 'array' then
    raise exception 'settle_outcome_bets_once: p_bets must be a JSON array of bets; received %.', coalesce(jsonb_typeof(p_bets), 'null')
      using errcode = 'P0001';
  end if;
  for b, i in
    select e, (k - 1)::integer from jsonb_array_elements(p_bets) with ordinality x(e, k)
     where e->>22 is not null order by e->>21, e->>22
  loop
    -- Each key is claimed afresh: two bets of the group with one key are a replay of each other only once the first commits.
    perform set_config('hub.idempotency_claim', '', true);
    select * into v_claim from hub_hidden.claim_idempotency_key(b->>21, b->>22, 'hubMakeOutcomeBet', b->>23);
    v_claims := v_claims || jsonb_build_object(i::text, jsonb_build_object('status', v_claim.status, 'result_id', v_claim.result_id));
  end loop;
  perform set_config('hub.idempotency_claim', '', true);
  i := 0;
  for b in select e from jsonb_array_elements(p_bets) e loop
    if v_claims ? i::text and v_claims->i::text->>'status' <> 'claimed' then
      return query select i,
        case v_claims->i::text->>'status' when 'replay' then 'replayed' else 'key-reused' end,
        null::float8, (v_claims->i::text->>'result_id')::uuid;
    else
      v_settle := v_settle || jsonb_build_array(b);
      v_index := v_index || i;
    end if;
    i := i + 1;
  end loop;
  if jsonb_array_length(v_settle) = 0 then return; end if;
  for v_row in select * from hub_hidden.settle_outcome_bets(v_settle) loop
    b := v_settle->v_row.n;
    if b->>22 is not null then
      if v_row.status = 'settled' then
        perform hub_hidden.record_idempotency_key(b->>21, b->>22, v_row.bet_id,
          (b->24) || jsonb_build_object('betId', v_row.bet_id, 'balance', v_row.balance));
      else
        delete from hub_hidden.idempotency_key k where k.scope = b->>21 and k.key = b->>22;
      end if;
    end if;
    return query select v_index[v_row.n + 1], v_row.status, v_row.balance, v_row.bet_id;
  end loop;
end
$fn$;

/*
 * dbSettleBet with an idempotency key, in one statement (so one transaction
 * even on a client outside one): the key is claimed before the balance's lock;
 * 'replayed' answers the stored settlement (p_answer then unused), 'key-reused'
 * the operation that holds the key. A settlement records p_answer with the
 * bet's id and balance; a refusal deletes a claim it made itself (a claim the
 * caller's transaction made first stays the caller's to keep or roll back).
 */
create function hub_hidden.settle_bet_once(
  p_scope text, p_key text, p_operation text, p_fingerprint text,
  p_user_id uuid, p_casino_id uuid, p_experience_id uuid, p_currency_key text,
  p_bet_id uuid, p_wager float8, p_payout float8, p_max_payout float8, p_expected_value float8,
  p_actor text, p_reason text, p_answer jsonb
) returns table (status text, balance float8, bet_id uuid, pending_bankroll uuid, stored jsonb, stored_operation text)
language plpgsql as $fn$
declare
  v_claim record;
  v_settled record;
  v_bet_id uuid := coalesce(p_bet_id, hub_hidden.uuid_generate_v7());
begin
  select * into v_claim from hub_hidden.claim_idempotency_key(p_scope, p_key, p_operation, p_fingerprint);
  if v_claim.status = 'replay' then
    return query select 'replayed'::text, null::float8, v_claim.result_id, null::uuid, v_claim.result, v_claim.operation;
    return;
  end if;
  if v_claim.status = 'reused' then
    return query select 'key-reused'::text, null::float8, null::uuid, null::uuid, null::jsonb, v_claim.operation;
    return;
  end if;
  select * into v_settled from hub_hidden.settle_bet_shared(p_user_id, p_casino_id, p_experience_id, p_currency_key,
    v_bet_id, p_wager, p_payout, p_max_payout, p_expected_value, p_actor, p_reason, true);
  if v_settled.status = 'settled' then
    perform hub_hidden.record_idempotency_key(p_scope, p_key, v_bet_id,
      p_answer || jsonb_build_object('betId', v_bet_id, 'balance', v_settled.balance));
  elsif v_claim.status = 'claimed' then
    delete from hub_hidden.idempotency_key k where k.scope = p_scope and k.key = p_key;
    perform set_config('hub.idempotency_claim', '', true);
  end if;
  return query select v_settled.status, v_settled.balance, v_bet_id, v_settled.pending_bankroll, null::jsonb, p_operation;
end
$fn$;
revoke execute on function
  hub_hidden.settle_bet_once(text, text, text, text, uuid, uuid, uuid, text, uuid, float8, float8, float8, float8, text, text, jsonb),
  hub_hidden.claim_idempotency_key(text, text, text, text),
  hub_hidden.record_idempotency_key(text, text, uuid, jsonb),
  hub_hidden.settle_outcome_bet_once(uuid, uuid, uuid, text, uuid, float8, float8, float8, float8, text, text, uuid, integer, bytea, text, text, float8, integer, float8[], float8[], jsonb, text, text, text, jsonb),
  hub_hidden.settle_outcome_bets_once(jsonb)
  from public;

-- ==========================================================================
-- Functions: hash chains and the operator's dashboard
-- ==========================================================================

-- HubHashChain.preimageHash: null until the chain is revealed.
create function hub.hash_chain_preimage_hash(chain hub.hash_chain) returns hub.hash
language sql stable as $fn$
  select h.* from hub.hash h where h.hash_chain_id = chain.id and h.kind = 'PREIMAGE'
$fn$;

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
  select u.id, u.casino_id, u.uname, u.created_at, null::bytea, u.mp_user_id from hub.user u
   where strpos(lower(u.uname), lower(coalesce(user_search.name_contains, ''))) > 0
   order by u.uname, u.id
$fn$;
comment on function hub.user_search(text) is E'Players whose name contains the text, ignoring case, by name.';

-- ==========================================================================
-- Functions: live alerts (see hub_hidden.live_alert)
-- ==========================================================================

-- A balance alert per transaction, player and currency; a bet alert per bet row.
create function hub_hidden.notify_ledger_alerts() returns trigger
language plpgsql as $fn$
begin
  if new.account <> 'player' then return null; end if;
  insert into hub_hidden.live_alert (channel, user_id, casino_id, experience_id, payload)
    values ('balance', new.user_id, new.casino_id, new.experience_id, jsonb_build_object('currencyKey', new.currency_key))
    on conflict (tx, user_id, casino_id, experience_id, (payload->>'currencyKey')) where channel = 'balance' and seq is null do nothing;
  if new.bet_id is not null then
    insert into hub_hidden.live_alert (channel, user_id, casino_id, experience_id, payload)
      values ('bet', new.user_id, new.casino_id, new.experience_id, jsonb_build_object(
        'betId', new.bet_id, 'userId', new.user_id, 'casinoId', new.casino_id, 'experienceId', new.experience_id,
        'currencyKey', new.currency_key, 'amountDelta', new.amount_delta, 'reason', new.reason,
        'createdAt', new.created_at, 'ledgerId', new.id));
  end if;
  perform pg_notify('hub_live_pending', '');
  return null;
end
$fn$;
create trigger ledger_live_alerts after insert on hub.ledger
  for each row execute function hub_hidden.notify_ledger_alerts();
-- A deposit or withdrawal's alert to its player.
create function hub_hidden.notify_put_alert(user_id uuid, casino_id uuid, experience_id uuid, currency_key text, mp_transfer_id text)
returns void language sql as $fn$
  insert into hub_hidden.live_alert (channel, user_id, casino_id, experience_id, payload)
    values ('put', user_id, casino_id, experience_id, jsonb_build_object('currencyKey', currency_key, 'mpTransferId', mp_transfer_id));
  select pg_notify('hub_live_pending', '');
$fn$;

create function hub_hidden.deposit_put_alert() returns trigger language plpgsql as $fn$
begin
  perform hub_hidden.notify_put_alert(new.user_id, new.casino_id, new.experience_id, new.currency_key, new.mp_transfer_id);
  return new;
end
$fn$;
create trigger deposit_put_alert after insert on hub.deposit
  for each row execute function hub_hidden.deposit_put_alert();
revoke execute on function hub_hidden.deposit_put_alert() from public;
-- Chat: a message goes to its room (user_id null), a mute or unmute to its player.
create function hub_hidden.notify_chat_message() returns trigger
language plpgsql as $fn$
begin
  insert into hub_hidden.live_alert (channel, casino_id, experience_id, payload)
    values ('chat', new.casino_id, new.experience_id, jsonb_build_object('kind', 'message', 'chatMessageId', new.id));
  perform pg_notify('hub_live_pending', '');
  return null;
end
$fn$;
create trigger chat_message_alert after insert on hub.chat_message
  for each row execute function hub_hidden.notify_chat_message();

create function hub_hidden.notify_chat_mute() returns trigger
language plpgsql as $fn$
declare
  kind text;
begin
  if tg_op = 'INSERT' then
    kind := 'muted';
  elsif old.revoked_at is null and new.revoked_at is not null then
    kind := 'unmuted';
  elsif new.revoked_at is null and (new.expired_at is distinct from old.expired_at or new.reason is distinct from old.reason) then
    kind := 'muted';
  else
    return null;
  end if;
  insert into hub_hidden.live_alert (channel, user_id, casino_id, experience_id, payload)
    values ('chat', new.user_id, new.casino_id, new.experience_id, jsonb_build_object('kind', kind));
  perform pg_notify('hub_live_pending', '');
  return null;
end
$fn$;
create trigger chat_mute_alert after insert or update on hub.chat_mute
  for each row execute function hub_hidden.notify_chat_mute();

-- Numbers every committed, unsequenced alert after the last number, in id
-- order, and answers the last number. VOLATILE: under READ COMMITTED each
-- statement takes a new snapshot, so the rows numbered are the ones
-- committed once the counter's lock is held; the lock serialises every
-- instance's sequencer, so numbers are never given twice and, once a number
-- is visible, no smaller one can appear later.
create function hub_hidden.live_alert_sequence() returns bigint
language plpgsql volatile as $fn$
declare
  v_last bigint;
  v_pruned bigint;
  v_count bigint;
  v_now timestamptz;
  v_prune_to bigint;
begin
  -- Nothing committed to number (every instance is woken by each commit): no lock taken.
  if not exists (select from hub_hidden.live_alert where seq is null) then
    return (select last_seq from hub_hidden.live_alert_counter);
  end if;
  select last_seq, pruned_through into v_last, v_pruned from hub_hidden.live_alert_counter where id for update;
  -- After the lock: sequenced_at grows with seq.
  v_now := clock_timestamp();
  with pending as (
    select ctid as row_at, row_number() over (order by id) as n from hub_hidden.live_alert where seq is null
  )
  update hub_hidden.live_alert a set seq = v_last + p.n, sequenced_at = v_now
    from pending p where a.ctid = p.row_at;
  get diagnostics v_count = row_count;
  if v_count = 0 then return v_last; end if;
  update hub_hidden.live_alert_counter set last_seq = v_last + v_count where id;
  perform pg_notify('hub_live_sequenced', (v_last + v_count)::text);
  -- Each time a thousand is crossed: a mark, and pruning of what is both an
  -- hour old and more than 10,000 alerts behind.
  if (v_last + v_count) / 1000 > v_last / 1000 then
    insert into hub_hidden.live_alert_mark (seq, at) values (v_last + v_count, v_now);
    select max(seq) into v_prune_to from hub_hidden.live_alert_mark where at < v_now - interval '1 hour';
    -- (least() would skip a null: no mark an hour old means nothing to prune.)
    if v_prune_to is not null and least(v_prune_to, v_last + v_count - 10000) > v_pruned then
      v_prune_to := least(v_prune_to, v_last + v_count - 10000);
      delete from hub_hidden.live_alert where seq > v_pruned and seq <= v_prune_to;
      delete from hub_hidden.live_alert_mark where seq <= v_prune_to;
      update hub_hidden.live_alert_counter set pruned_through = v_prune_to where id;
    end if;
  end if;
  return v_last + v_count;
end
$fn$;
revoke execute on function hub_hidden.live_alert_sequence() from public;

-- ==========================================================================
-- Rows the hub needs: the playground casino and its currency, the alert counter
-- ==========================================================================

insert into hub.casino (name, is_playground) values ('playground', true)
  on conflict (name) do nothing;
insert into hub.currency (key, casino_id, display_unit_name, display_unit_scale)
  select 'HOUSE', id, 'house units', 1 from hub.casino where name = 'playground'
  on conflict do nothing;
insert into hub_hidden.live_alert_counter (last_seq, pruned_through) values (0, 0);
