//! What pgtier keeps in PostgreSQL (schema `pgtier`), made once per
//! database and moved forward from older layouts:
//!
//! | object | what |
//! |---|---|
//! | `nodes (node, incarnation, claimed_at, previous, epoch)` | which data directory owns each node name (`node.rs`), and since version 4 the lease epoch its write-through sessions must carry |
//! | `leases (node, holder, epoch, expires_at, standby_ok, ...)` | the lease of an active/standby pair sharing a node name (`lease.rs`): which member may write, until when by PostgreSQL's clock |
//! | `awt_progress (node, incarnation, grp, stream, next_lsn, ...)` | per AWT group and apply lane, the stream position before which everything is applied |
//! | `awt_errors` | AWT transactions PostgreSQL refused for good, with their statements |
//! | `swt_log (node, incarnation, slot, txn_id, changes)` | SWT's log of committed transactions per apply slot |
//! | `node_partitions (grp, node, col, addr, lo, hi)` | node partitions: which pgtier node owns which range `[lo, hi)` of a group's root key column `col` (NULL: unbounded), and where clients reach it (`shard.rs`) |
//! | `expect_one(n, what)` | raises P0002 unless an UPDATE/DELETE changed exactly one row |
//! | `check_node(node, incarnation)` | raises `PGT01` unless the directory still owns the name and the session's `pgtier.epoch` setting (0 when unset) is the name's current lease epoch (shared advisory lock: a takeover or a lease changing hands waits for running transactions) |
//! | `lease_acquire(node, holder, ms)` / `lease_renew(node, holder, epoch, ms)` / `lease_release(node, holder, epoch)` / `lease_set_standby_ok(node, holder, epoch, ok)` | the pair's lease (`lease.rs`); another member takes it only when expired and `standby_ok` |
//! | `awt_advance(...)` | `check_node`, then moves progress rows |
//! | `definition_token(oid)` | a digest of a table's columns, constraints, defaults and indexes as the catalog holds them now (PL/pgSQL: its plan is kept per session) |
//! | `check_definitions(oids, tokens)` | locks the tables (ROW EXCLUSIVE: no ALTER can commit until this transaction ends), then raises `PGT02` when a digest differs |
//!
//! Rows from before incarnation ids carry `incarnation = ''` and `grp =
//! ''` (one position per lane for every group); a directory that adopts
//! them takes them over (`node::claim`).

use postgres::Client;

use crate::error::{CacheError, connection_error};

/// Raised by `pgtier.check_node`: the node name is another directory's now.
pub(crate) const NODE_NOT_OWNED: &str = "PGT01";
/// Raised by `pgtier.check_definitions`: a cached table changed in PostgreSQL.
pub(crate) const DEFINITION_CHANGED: &str = "PGT02";

/// The layout this version writes; older ones are moved forward. 3:
/// `definition_token` in PL/pgSQL, whose statement plans a session keeps,
/// where the SQL function was parsed and planned at every call (four per
/// write-through batch of a four-table group: a tenth of PostgreSQL's CPU
/// under write-through). 4: `node_partitions`. 5: `leases` and
/// `nodes.epoch` (fencing of an active/standby pair: the member that lost
/// the lease cannot commit write-through). 6: `leases.standby_ok` (an
/// active that stopped waiting for its standby bars it from the lease).
const VERSION: i32 = 6;

/// Makes schema `pgtier` current (cheap when it is: one query).
pub(crate) fn ensure(client: &mut Client) -> Result<(), CacheError> {
    let current = client
        .query_opt("SELECT version FROM pgtier.schema_version", &[])
        .ok()
        .flatten()
        .map(|row| row.get::<_, i32>(0));
    if current.is_some_and(|v| v >= VERSION) {
        return Ok(());
    }
    client.batch_execute(&script()).map_err(|e| connection_error(&e))
}

fn script() -> String {
    format!(
        "BEGIN;
         -- Sessions of both write-through modes start at once, and concurrent
         -- CREATE ... IF NOT EXISTS or CREATE OR REPLACE can still collide.
         SELECT pg_advisory_xact_lock(hashtext('pgtier write-through schema'));
         CREATE SCHEMA IF NOT EXISTS pgtier;
         CREATE TABLE IF NOT EXISTS pgtier.schema_version (version int NOT NULL);
         CREATE TABLE IF NOT EXISTS pgtier.nodes (
             node text PRIMARY KEY, incarnation text NOT NULL, claimed_at timestamptz NOT NULL DEFAULT now(), previous text);
         CREATE TABLE IF NOT EXISTS pgtier.awt_progress (
             node text NOT NULL, incarnation text NOT NULL, grp text NOT NULL, stream int NOT NULL, next_lsn bigint NOT NULL,
             commit_time_us bigint, applied_at timestamptz NOT NULL, PRIMARY KEY (node, incarnation, grp, stream));
         CREATE TABLE IF NOT EXISTS pgtier.awt_errors (
             id bigserial PRIMARY KEY, node text NOT NULL, incarnation text, lsn bigint NOT NULL, commit_time_us bigint NOT NULL,
             sqlstate text NOT NULL, message text NOT NULL, statements text NOT NULL, recorded_at timestamptz NOT NULL DEFAULT now());
         CREATE TABLE IF NOT EXISTS pgtier.swt_log (
             node text NOT NULL, incarnation text NOT NULL, slot int NOT NULL, txn_id bigint NOT NULL, changes text NOT NULL,
             committed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (node, incarnation, slot, txn_id));
         CREATE TABLE IF NOT EXISTS pgtier.node_partitions (
             grp text NOT NULL, node text NOT NULL, col text NOT NULL, addr text NOT NULL, lo bigint, hi bigint,
             PRIMARY KEY (grp, node), CHECK (lo IS NULL OR hi IS NULL OR lo < hi));
         -- The layout before incarnation ids (version 1): keyed by node alone.
         DO $m$
         BEGIN
             IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'pgtier.awt_progress'::regclass AND attname = 'incarnation') THEN
                 ALTER TABLE pgtier.awt_progress ADD COLUMN incarnation text NOT NULL DEFAULT '', ADD COLUMN grp text NOT NULL DEFAULT '';
                 ALTER TABLE pgtier.awt_progress DROP CONSTRAINT awt_progress_pkey, ADD PRIMARY KEY (node, incarnation, grp, stream);
             END IF;
             IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'pgtier.swt_log'::regclass AND attname = 'incarnation') THEN
                 ALTER TABLE pgtier.swt_log ADD COLUMN incarnation text NOT NULL DEFAULT '';
                 ALTER TABLE pgtier.swt_log DROP CONSTRAINT swt_log_pkey, ADD PRIMARY KEY (node, incarnation, slot, txn_id);
             END IF;
             IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'pgtier.awt_errors'::regclass AND attname = 'incarnation') THEN
                 ALTER TABLE pgtier.awt_errors ADD COLUMN incarnation text;
                 UPDATE pgtier.awt_errors SET incarnation = '';
             END IF;
         END $m$;
         CREATE OR REPLACE FUNCTION pgtier.expect_one(changed bigint, what text) RETURNS void LANGUAGE plpgsql AS $f$
         BEGIN
             IF changed <> 1 THEN
                 RAISE EXCEPTION '% changed % rows in PostgreSQL instead of one', what, changed
                     USING ERRCODE = 'P0002', HINT = 'The row is missing in PostgreSQL or its key differs there: it was changed behind the cache. REFRESH CACHE GROUP reloads it.';
             END IF;
         END $f$;
         ALTER TABLE pgtier.nodes ADD COLUMN IF NOT EXISTS epoch bigint NOT NULL DEFAULT 0;
         CREATE TABLE IF NOT EXISTS pgtier.leases (
             node text PRIMARY KEY, holder text NOT NULL, epoch bigint NOT NULL, expires_at timestamptz NOT NULL,
             acquired_at timestamptz NOT NULL DEFAULT now(), renewed_at timestamptz NOT NULL DEFAULT now());
         -- False while the holder goes on without its standby (dropped after
         -- [replication] standby_timeout_ms): that standby may lack commits
         -- the holder acknowledged or sent PostgreSQL, so it may not take
         -- the lease until it caught up again and the holder said so.
         ALTER TABLE pgtier.leases ADD COLUMN IF NOT EXISTS standby_ok boolean NOT NULL DEFAULT true;
         CREATE OR REPLACE FUNCTION pgtier.check_node(p_node text, p_incarnation text) RETURNS void LANGUAGE plpgsql AS $f$
         DECLARE
             v_incarnation text;
             v_epoch bigint;
             v_mine bigint := coalesce(nullif(current_setting('pgtier.epoch', true), '')::bigint, 0);
         BEGIN
             PERFORM pg_advisory_xact_lock_shared(hashtext('pgtier node ' || p_node));
             SELECT incarnation, epoch INTO v_incarnation, v_epoch FROM pgtier.nodes WHERE node = p_node;
             IF v_incarnation IS DISTINCT FROM p_incarnation THEN
                 RAISE EXCEPTION 'pgtier node \"%\" is owned by another data directory', p_node USING ERRCODE = '{NODE_NOT_OWNED}';
             END IF;
             IF v_epoch <> v_mine THEN
                 RAISE EXCEPTION 'pgtier node \"%\" is held by another member of its pair (lease epoch %, this session''s %)', p_node, v_epoch, v_mine
                     USING ERRCODE = '{NODE_NOT_OWNED}';
             END IF;
         END $f$;
         -- The pair's lease. Taking it from another holder needs it expired by
         -- PostgreSQL's clock, bumps the epoch, ends the sessions still holding
         -- the node's advisory lock (a write-through transaction of the member
         -- that lost it, perhaps cut off mid-transaction), then waits for the
         -- lock exclusively: once this commits, no write-through transaction
         -- of the old epoch can commit (check_node refuses it).
         CREATE OR REPLACE FUNCTION pgtier.lease_acquire(p_node text, p_holder text, p_ms int) RETURNS bigint LANGUAGE plpgsql AS $f$
         DECLARE
             v_key bigint := hashtext('pgtier node ' || p_node);
             v_holder text;
             v_expired boolean;
             v_standby_ok boolean;
             v_epoch bigint;
         BEGIN
             SELECT holder, expires_at < clock_timestamp(), standby_ok INTO v_holder, v_expired, v_standby_ok FROM pgtier.leases WHERE node = p_node FOR UPDATE;
             IF FOUND AND v_holder <> p_holder AND (NOT v_expired OR NOT v_standby_ok) THEN
                 RETURN NULL;
             END IF;
             IF FOUND AND v_holder <> p_holder THEN
                 PERFORM pg_terminate_backend(pid) FROM pg_locks
                     WHERE locktype = 'advisory' AND objsubid = 1 AND pid <> pg_backend_pid()
                       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                       AND ((classid::bigint << 32) | objid::bigint) = v_key;
             END IF;
             PERFORM pg_advisory_xact_lock(v_key);
             INSERT INTO pgtier.leases AS l (node, holder, epoch, expires_at) VALUES (p_node, p_holder, 1, clock_timestamp() + p_ms * interval '1 millisecond')
                 ON CONFLICT (node) DO UPDATE SET holder = EXCLUDED.holder,
                     epoch = CASE WHEN l.holder = EXCLUDED.holder THEN l.epoch ELSE l.epoch + 1 END,
                     expires_at = EXCLUDED.expires_at, acquired_at = now(), renewed_at = now(),
                     standby_ok = CASE WHEN l.holder = EXCLUDED.holder THEN l.standby_ok ELSE true END
                 WHERE l.holder = EXCLUDED.holder OR (l.expires_at < clock_timestamp() AND l.standby_ok)
                 RETURNING epoch INTO v_epoch;
             IF v_epoch IS NULL THEN
                 RETURN NULL;  -- another holder took it first
             END IF;
             UPDATE pgtier.nodes SET epoch = v_epoch WHERE node = p_node;
             RETURN v_epoch;
         END $f$;
         CREATE OR REPLACE FUNCTION pgtier.lease_renew(p_node text, p_holder text, p_epoch bigint, p_ms int) RETURNS boolean LANGUAGE sql AS $f$
             UPDATE pgtier.leases SET expires_at = clock_timestamp() + p_ms * interval '1 millisecond', renewed_at = now()
                 WHERE node = p_node AND holder = p_holder AND epoch = p_epoch RETURNING true;
         $f$;
         CREATE OR REPLACE FUNCTION pgtier.lease_set_standby_ok(p_node text, p_holder text, p_epoch bigint, p_ok boolean) RETURNS boolean LANGUAGE sql AS $f$
             UPDATE pgtier.leases SET standby_ok = p_ok WHERE node = p_node AND holder = p_holder AND epoch = p_epoch RETURNING true;
         $f$;
         CREATE OR REPLACE FUNCTION pgtier.lease_release(p_node text, p_holder text, p_epoch bigint) RETURNS boolean LANGUAGE sql AS $f$
             UPDATE pgtier.leases SET expires_at = clock_timestamp() - interval '1 millisecond' WHERE node = p_node AND holder = p_holder AND epoch = p_epoch RETURNING true;
         $f$;
         CREATE OR REPLACE FUNCTION pgtier.awt_advance(p_node text, p_incarnation text, p_groups text[], p_streams int[], p_next bigint[], p_commit_us bigint)
             RETURNS void LANGUAGE plpgsql AS $f$
         BEGIN
             PERFORM pgtier.check_node(p_node, p_incarnation);
             INSERT INTO pgtier.awt_progress AS p (node, incarnation, grp, stream, next_lsn, commit_time_us, applied_at)
                 SELECT p_node, p_incarnation, g, s, n, p_commit_us, now() FROM unnest(p_groups, p_streams, p_next) AS u(g, s, n)
                 ON CONFLICT (node, incarnation, grp, stream) DO UPDATE
                     SET next_lsn = greatest(p.next_lsn, EXCLUDED.next_lsn), commit_time_us = EXCLUDED.commit_time_us, applied_at = now();
         END $f$;
         CREATE OR REPLACE FUNCTION pgtier.definition_token(p_rel oid) RETURNS text LANGUAGE plpgsql STABLE AS $f$
         BEGIN
             RETURN (SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_class WHERE oid = p_rel) THEN md5(concat_ws('|',
                 (SELECT string_agg(concat_ws(':', attnum, attname, atttypid, atttypmod, attnotnull, attisdropped, attidentity, attgenerated, atthasdef), ',' ORDER BY attnum)
                    FROM pg_attribute WHERE attrelid = p_rel AND attnum > 0),
                 (SELECT string_agg(oid::text, ',' ORDER BY oid) FROM pg_constraint WHERE conrelid = p_rel),
                 (SELECT string_agg(oid::text, ',' ORDER BY oid) FROM pg_attrdef WHERE adrelid = p_rel),
                 (SELECT string_agg(indexrelid::text, ',' ORDER BY indexrelid) FROM pg_index WHERE indrelid = p_rel))) END);
         END $f$;
         CREATE OR REPLACE FUNCTION pgtier.check_definitions(p_rels oid[], p_tokens text[]) RETURNS void LANGUAGE plpgsql AS $f$
         DECLARE
             i int;
         BEGIN
             FOR i IN 1 .. coalesce(array_length(p_rels, 1), 0) LOOP
                 IF NOT EXISTS (SELECT 1 FROM pg_class WHERE oid = p_rels[i]) THEN
                     RAISE EXCEPTION 'a cached table (oid %) was dropped in PostgreSQL', p_rels[i] USING ERRCODE = '{DEFINITION_CHANGED}', DETAIL = p_rels[i]::text;
                 END IF;
                 -- After this lock no ALTER of the table can commit before this
                 -- transaction ends, so the statements after it apply to the
                 -- definition checked here.
                 EXECUTE format('LOCK TABLE %s IN ROW EXCLUSIVE MODE', p_rels[i]::regclass);
                 IF pgtier.definition_token(p_rels[i]) IS DISTINCT FROM p_tokens[i] THEN
                     RAISE EXCEPTION 'the definition of %  changed in PostgreSQL', p_rels[i]::regclass USING ERRCODE = '{DEFINITION_CHANGED}', DETAIL = p_rels[i]::text;
                 END IF;
             END LOOP;
         END $f$;
         DELETE FROM pgtier.schema_version;
         INSERT INTO pgtier.schema_version VALUES ({VERSION});
         COMMIT;"
    )
}

/// The current digests of `oids` (`pgtier.definition_token`), in order;
/// None for a table that no longer exists.
pub(crate) fn definition_tokens<C: postgres::GenericClient>(
    client: &mut C,
    oids: &[u32],
) -> Result<Vec<Option<String>>, CacheError> {
    let rows = client
        .query(
            "SELECT pgtier.definition_token(o) FROM unnest($1::oid[]) WITH ORDINALITY AS u(o, n) ORDER BY n",
            &[&oids],
        )
        .map_err(|e| connection_error(&e))?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}
