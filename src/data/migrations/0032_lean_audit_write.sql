-- Issue 33, part 2: a lean audit write (docs/audit.md).
--
-- The audit statement writes audit rows only. The usage meter and the key-use meter, which rode on
-- every audit INSERT as data-modifying CTEs, are folded from audit_log by their sweeps instead,
-- through the audit feed (src/audit/audit-feed.ts): each consumer has a position in
-- audit_feed_cursors, moved in the same transaction as what it folded, and only past ids that
-- every transaction which could still write them has settled.
--
-- Every INSERT into audit_log must have its transaction id before it draws a record id (the audit
-- store's statement does, `WHERE pg_current_xact_id() IS NOT NULL`): a later migration that
-- inserts audit rows does it after a write of its own, or the same way.

-- Waits for every audit write in flight (all of them hold ROW EXCLUSIVE until they commit) and
-- holds new ones back: below, the sequence's value is the last id any committed or running write
-- drew, and usage_counters and key_use_events hold the meters' counts of exactly those records.
LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE;

-- Ids are drawn in time order (the service stamps a record as it writes it), so the tenant's
-- (tenant_id, id DESC) index serves time ranges once `from` and `to` are turned into id bounds
-- (audit_time_map below); the time index cost every record's write its upkeep
-- (bench/audit-query.ts). The action index stays: without it a filter on an action the tenant
-- rarely or never has reads the tenant's whole history (bench/audit-query.ts).
DROP INDEX audit_log_tenant_time_idx;

-- GET /audit reads a page of records: a parallel plan (which the planner chose when a filter
-- looked selective) spent ~20 ms starting its workers, and took every core for one request.
ALTER TABLE audit_log SET (parallel_workers = 0);

-- One row per consumer of the feed: every record with an id at or below `position` is folded,
-- none above. `settled`: no transaction that could still commit a record at or below it is
-- running (position <= settled; folding goes in chunks). `pending_position`/`pending_xid`: the
-- sequence's value read at a sweep, and a transaction id assigned after that read: once no
-- transaction older than `pending_xid` runs, every id up to `pending_position` is settled.
CREATE TABLE audit_feed_cursors (
  consumer text PRIMARY KEY CHECK (consumer ~ '^[a-z][a-z0-9_.]{0,63}$'),
  position bigint NOT NULL DEFAULT 0,
  settled bigint NOT NULL DEFAULT 0,
  pending_position bigint,
  pending_xid xid8,
  CHECK (position <= settled),
  CHECK ((pending_position IS NULL) = (pending_xid IS NULL))
);

-- Record ids against time, folded by the audit module's own sweep: ranges of ids (id_from,
-- id_to], consecutive, with the latest time of every record up to id_to (`max_at_upto`, never
-- decreasing) and the earliest time of every folded record after id_from (`suffix_min`, never
-- decreasing either: a range folded later with an earlier time lowers the ones before it). A time
-- range [from, to) lies in ids above the last range whose max_at_upto < from, and at or below the
-- last range whose suffix_min < to, or above the map (not folded yet): exact whatever order the
-- times were written in.
CREATE TABLE audit_time_map (
  id_to bigint PRIMARY KEY,
  id_from bigint NOT NULL,
  max_at_upto timestamptz NOT NULL,
  suffix_min timestamptz NOT NULL,
  CHECK (id_from < id_to)
);
CREATE INDEX audit_time_map_upto_idx ON audit_time_map (max_at_upto, id_to);
CREATE INDEX audit_time_map_after_idx ON audit_time_map (suffix_min, id_to);

-- Usage per tenant, month and kind, folded from the feed by the billing sweep (one writer: an
-- upsert). usage_counters, which the previous release's meter appends to with its audit writes,
-- is left to that release while instances are rolled (its counts up to here are copied below;
-- what it adds later is also in audit_log above the billing position, so it is not read again).
CREATE TABLE usage_totals (
  tenant_id uuid NOT NULL,
  period text NOT NULL CHECK (period ~ '^[0-9]{4}-[0-9]{2}$'),
  kind text NOT NULL CHECK (length(kind) <= 64),
  count bigint NOT NULL CHECK (count > 0),
  PRIMARY KEY (tenant_id, period, kind)
);
INSERT INTO usage_totals (tenant_id, period, kind, count)
SELECT tenant_id, period, kind, sum(count) FROM usage_counters GROUP BY tenant_id, period, kind;

-- The key-use events not folded yet go into key_last_use (a later time wins: folding twice, as
-- the previous release's sweep may still do, changes nothing). key_use_events is left to that
-- release as usage_counters is.
INSERT INTO key_last_use (tenant_id, key_id, last_attempt_at, last_success_at)
SELECT tenant_id, key_id, max(attempted_at), max(succeeded_at) FROM key_use_events GROUP BY tenant_id, key_id
ON CONFLICT (tenant_id, key_id) DO UPDATE SET
  last_attempt_at = GREATEST(key_last_use.last_attempt_at, EXCLUDED.last_attempt_at),
  last_success_at = GREATEST(key_last_use.last_success_at, EXCLUDED.last_success_at);

-- The meters counted every record up to here: their consumers start after them. The time map
-- starts at the beginning (its sweep folds the existing records in chunks).
INSERT INTO audit_feed_cursors (consumer, position, settled)
SELECT consumer, last, last
FROM (VALUES ('billing.usage'), ('intelligence.key_use')) AS c(consumer),
  (SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('audit_log', 'id')::regclass), 0) AS last) AS s;
INSERT INTO audit_feed_cursors (consumer) VALUES ('audit.time_map');
