//! statement_timeout and the cancel flag in direct mode, as PostgreSQL has
//! them: 57014 with PostgreSQL's two messages, from every long loop (scans,
//! joins, table functions, sorts) and from a row-lock wait; the statement's
//! transaction ends as any error ends it. SET / SET LOCAL / set_config /
//! SHOW of the setting. The statements capped here run for minutes to
//! hours uncapped; the asserts leave seconds of margin for a loaded machine.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pgtier_engine::{Database, EngineConfig};
use pgtier_sql::{Connection, SqlError};

const TIMEOUT_MSG: &str = "canceling statement due to statement timeout";
const CANCEL_MSG: &str = "canceling statement due to user request";
/// What a capped statement may take on a loaded 2-core machine.
const MARGIN: Duration = Duration::from_secs(10);

fn open() -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    (dir, db)
}

/// A connection with table `t` of `n` rows (ids 1..=n).
fn with_rows(db: &Database, n: u32) -> Connection {
    let mut c = Connection::new(db.clone());
    c.execute_sql("CREATE TABLE t (id int PRIMARY KEY, v int)").unwrap();
    c.execute_sql(&format!("INSERT INTO t SELECT g, g FROM generate_series(1, {n}) g")).unwrap();
    c
}

fn count(c: &mut Connection, sql: &str) -> i64 {
    let rows = c.execute_sql(sql).unwrap().rows.unwrap();
    rows.get(0).unwrap().text(0).unwrap().parse().unwrap()
}

fn show(c: &mut Connection, name: &str) -> String {
    c.execute_sql(&format!("SHOW {name}")).unwrap().rows.unwrap().get(0).unwrap().text(0).unwrap()
}

/// Runs `sql`, which must fail; returns the error and how long it took.
/// A watchdog cancels it after MARGIN, so a limit that does not work fails
/// the test (wrong message, too slow) instead of hanging it for hours.
fn fails(c: &mut Connection, sql: &str) -> (SqlError, Duration) {
    let flag = Arc::new(AtomicBool::new(false));
    c.set_cancel_flag(flag.clone());
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let done = done.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            while !done.load(Ordering::Acquire) {
                if started.elapsed() > MARGIN {
                    flag.store(true, Ordering::Release);
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let started = Instant::now();
    let r = c.execute_sql(sql);
    let took = started.elapsed();
    done.store(true, Ordering::Release);
    watchdog.join().unwrap();
    (r.expect_err(sql), took)
}

fn assert_timed_out(c: &mut Connection, sql: &str) {
    let (e, took) = fails(c, sql);
    assert_eq!((e.sqlstate, e.message.as_str()), ("57014", TIMEOUT_MSG), "{sql}");
    assert!(took < MARGIN, "{sql}: stopped after {took:?}");
}

#[test]
fn statement_timeout_stops_every_long_loop() {
    let (_dir, db) = open();
    let mut c = with_rows(&db, 3000);
    c.execute_sql("SET statement_timeout = '200ms'").unwrap();
    // 2.7e10 joined rows (full scans and the nested loop).
    assert_timed_out(&mut c, "SELECT count(*) FROM t a, t b, t c");
    // An index nested-loop join driven by a cross join.
    assert_timed_out(&mut c, "SELECT count(*) FROM t a, t b, t c WHERE c.id = a.v");
    // A table function re-evaluated per outer row: 1e10 rows.
    assert_timed_out(&mut c, "SELECT count(*) FROM generate_series(1, 100000) a, generate_series(1, 100000) b");
    // Aggregation over groups, and a sort: both fed by a long join.
    assert_timed_out(&mut c, "SELECT a.id, count(*) FROM t a, t b, t c GROUP BY a.id");
    assert_timed_out(&mut c, "SELECT a.id FROM t a, t b, t c ORDER BY a.v + b.v DESC LIMIT 1");
    assert_timed_out(&mut c, "SELECT row_number() OVER (ORDER BY a.v - b.v) FROM t a, t b, t c LIMIT 1");
    // The session goes on; a short statement is not affected.
    assert_eq!(count(&mut c, "SELECT count(*) FROM t"), 3000);
    c.execute_sql("SET statement_timeout = 0").unwrap();
    assert_eq!(count(&mut c, "SELECT count(*) FROM t a, t b WHERE a.id < 30 AND b.id < 30"), 29 * 29);
}

#[test]
fn timed_out_statement_leaves_nothing_and_aborts_the_block() {
    let (_dir, db) = open();
    let mut c = with_rows(&db, 3000);
    c.execute_sql("CREATE TABLE u (id bigint PRIMARY KEY)").unwrap();
    c.execute_sql("SET statement_timeout = 200").unwrap();
    // Autocommit: the rows it inserted before the timeout are gone.
    assert_timed_out(&mut c, "INSERT INTO u SELECT a.id * 100000000 + b.id * 10000 + c.id FROM t a, t b, t c");
    assert!(!c.in_transaction());
    assert_eq!(count(&mut c, "SELECT count(*) FROM u"), 0);
    // In a block: the block fails (25P02) until ROLLBACK.
    c.execute_sql("BEGIN").unwrap();
    c.execute_sql("INSERT INTO u VALUES (1)").unwrap();
    assert_timed_out(&mut c, "SELECT count(*) FROM t a, t b, t c");
    let e = c.execute_sql("SELECT 1").expect_err("aborted block");
    assert_eq!(e.sqlstate, "25P02");
    assert_eq!(c.execute_sql("COMMIT").unwrap().tag, "ROLLBACK");
    assert_eq!(count(&mut c, "SELECT count(*) FROM u"), 0);
}

#[test]
fn statement_timeout_ends_a_row_lock_wait() {
    let (_dir, db) = open();
    let mut holder = with_rows(&db, 10);
    holder.execute_sql("BEGIN").unwrap();
    holder.execute_sql("UPDATE t SET v = 0 WHERE id = 1").unwrap();
    let mut waiter = Connection::new(db.clone());
    waiter.execute_sql("SET statement_timeout = '200ms'").unwrap();
    // The engine's lock timeout is 30 s: only statement_timeout ends it sooner.
    assert_timed_out(&mut waiter, "UPDATE t SET v = 2 WHERE id = 1");
    assert_timed_out(&mut waiter, "SELECT * FROM t WHERE id = 1 FOR UPDATE");
    holder.execute_sql("COMMIT").unwrap();
    waiter.execute_sql("UPDATE t SET v = 2 WHERE id = 1").unwrap();
    assert_eq!(count(&mut waiter, "SELECT v FROM t WHERE id = 1"), 2);
}

/// Raises `flag` until `done`: a cancel that comes before the statement
/// starts would be spent on nothing, so keep asking, as a user would.
fn keep_canceling(flag: Arc<AtomicBool>, done: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !done.load(Ordering::Acquire) {
            flag.store(true, Ordering::Release);
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

#[test]
fn the_cancel_flag_stops_a_join_a_table_function_and_a_lock_wait() {
    let (_dir, db) = open();
    let mut c = with_rows(&db, 3000);
    let flag = Arc::new(AtomicBool::new(false));
    c.set_cancel_flag(flag.clone());
    for sql in [
        "SELECT count(*) FROM t a, t b, t c",
        "SELECT count(*) FROM generate_series(1, 100000) a, generate_series(1, 100000) b",
    ] {
        let done = Arc::new(AtomicBool::new(false));
        let canceler = keep_canceling(flag.clone(), done.clone());
        let started = Instant::now();
        let e = c.execute_sql(sql).expect_err(sql);
        let took = started.elapsed();
        done.store(true, Ordering::Release);
        canceler.join().unwrap();
        assert_eq!((e.sqlstate, e.message.as_str()), ("57014", CANCEL_MSG), "{sql}");
        assert!(took < MARGIN, "{sql}: stopped after {took:?}");
    }

    // A row-lock wait: cancel once the engine counts the wait.
    let mut holder = Connection::new(db.clone());
    holder.execute_sql("BEGIN").unwrap();
    holder.execute_sql("UPDATE t SET v = 0 WHERE id = 1").unwrap();
    flag.store(false, Ordering::Release);
    let waits_before = db.stats().lock_waits;
    let db2 = db.clone();
    let flag2 = flag.clone();
    let canceler = std::thread::spawn(move || {
        while db2.stats().lock_waits == waits_before {
            std::thread::yield_now();
        }
        flag2.store(true, Ordering::Release);
    });
    let started = Instant::now();
    let e = c.execute_sql("UPDATE t SET v = 2 WHERE id = 1").expect_err("canceled");
    let took = started.elapsed();
    canceler.join().unwrap();
    assert_eq!((e.sqlstate, e.message.as_str()), ("57014", CANCEL_MSG));
    assert!(took < MARGIN, "lock wait stopped after {took:?}");
    holder.execute_sql("ROLLBACK").unwrap();
    // One cancel, one statement: the next one runs.
    assert_eq!(count(&mut c, "SELECT v FROM t WHERE id = 1"), 1);
}

#[test]
fn statement_timeout_set_show_local_and_set_config() {
    let (_dir, db) = open();
    let mut c = Connection::new(db);
    for (set, shown) in [
        ("5000", "5s"),
        ("'1min'", "1min"),
        ("'1.5s'", "1500ms"),
        ("100", "100ms"),
        ("'1000us'", "1ms"),
        ("0", "0"),
        ("86400000", "1d"),
    ] {
        c.execute_sql(&format!("SET statement_timeout = {set}")).unwrap();
        assert_eq!(show(&mut c, "statement_timeout"), shown, "{set}");
    }
    let e = c.execute_sql("SET statement_timeout = 'abc'").unwrap_err();
    assert_eq!(
        (e.sqlstate, e.message.as_str()),
        ("22023", "invalid value for parameter \"statement_timeout\": \"abc\"")
    );
    let e = c.execute_sql("SET statement_timeout = -1").unwrap_err();
    assert_eq!(e.message, "-1 ms is outside the valid range for parameter \"statement_timeout\" (0 .. 2147483647)");

    // SET LOCAL outside a block: a WARNING, nothing changes.
    c.execute_sql("SET statement_timeout = '1d'").unwrap();
    c.execute_sql("SET LOCAL statement_timeout = 5").unwrap();
    let warnings = c.take_warnings();
    assert_eq!(
        warnings.iter().map(|w| (w.sqlstate, w.message.as_str())).collect::<Vec<_>>(),
        [("25P01", "SET LOCAL can only be used in transaction blocks")]
    );
    assert_eq!(show(&mut c, "statement_timeout"), "1d");
    // Inside one: until the block ends, and it is enforced.
    c.execute_sql("CREATE TABLE t (id int PRIMARY KEY)").unwrap();
    c.execute_sql("INSERT INTO t SELECT g FROM generate_series(1, 3000) g").unwrap();
    c.execute_sql("BEGIN").unwrap();
    c.execute_sql("SET LOCAL statement_timeout = '200ms'").unwrap();
    assert_eq!(show(&mut c, "statement_timeout"), "200ms");
    assert_timed_out(&mut c, "SELECT count(*) FROM t a, t b, t c");
    c.execute_sql("ROLLBACK").unwrap();
    assert_eq!(show(&mut c, "statement_timeout"), "1d");
    // A session-level SET in a rolled-back block is undone; committed, kept.
    c.execute_sql("BEGIN").unwrap();
    c.execute_sql("SET statement_timeout = '3s'").unwrap();
    c.execute_sql("ROLLBACK").unwrap();
    assert_eq!(show(&mut c, "statement_timeout"), "1d");
    // set_config writes the same setting the executor enforces.
    assert_eq!(
        c.execute_sql("SELECT set_config('statement_timeout', '200', false)")
            .unwrap()
            .rows
            .unwrap()
            .get(0)
            .unwrap()
            .text(0)
            .unwrap(),
        "200ms"
    );
    assert_timed_out(&mut c, "SELECT count(*) FROM t a, t b, t c");
    c.execute_sql("SET statement_timeout TO DEFAULT").unwrap();
    assert_eq!(show(&mut c, "statement_timeout"), "0");
    assert_eq!(count(&mut c, "SELECT count(*) FROM t"), 3000);
}

#[test]
fn a_default_from_the_configuration_applies_and_set_default_returns_to_it() {
    let (_dir, db) = open();
    let mut c = with_rows(&db, 3000);
    c.set_setting_default("statement_timeout", "200ms").unwrap();
    assert_timed_out(&mut c, "SELECT count(*) FROM t a, t b, t c");
    c.execute_sql("SET statement_timeout = '1h'").unwrap();
    c.execute_sql("SET statement_timeout TO DEFAULT").unwrap();
    assert_eq!(show(&mut c, "statement_timeout"), "200ms");
    assert_eq!(c.set_setting_default("statement_timeout", "soon").unwrap_err().sqlstate, "22023");
    assert_eq!(c.set_setting_default("no_such_setting", "1").unwrap_err().sqlstate, "42704");
}

/// A statement over pgtier.statement_mem fails with 53200 naming what held
/// the memory; the session and another one go on.
#[test]
fn statement_mem_bounds_sorts_hash_aggregates_and_results() {
    let (_dir, db) = open();
    let mut c = with_rows(&db, 100_000);
    assert_eq!(show(&mut c, "pgtier.statement_mem"), "1GB");
    // Well within the default bound.
    assert_eq!(count(&mut c, "SELECT count(*) FROM (SELECT id FROM t ORDER BY v DESC) s"), 100_000);
    c.execute_sql("SET pgtier.statement_mem = '1MB'").unwrap();
    assert_eq!(show(&mut c, "pgtier.statement_mem"), "1MB");
    let cases = [
        ("SELECT id, v FROM t ORDER BY v DESC", "sort"),
        ("SELECT v, count(*) FROM t GROUP BY v", "hash aggregate"),
        ("SELECT id, v FROM t", "result"),
        ("SELECT a.id FROM t a, t b WHERE a.id < 100", "result"),
        ("SELECT DISTINCT v FROM t", "DISTINCT"),
        ("SELECT count(*) FROM generate_series(1, 10000000)", "generate_series"),
        // A recursion that never stops ends at the bound, not in a crash.
        (
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
            "WITH RECURSIVE query",
        ),
        (
            "WITH RECURSIVE r(n, s) AS (SELECT 1, 'x' UNION SELECT n + 1, s FROM r) SELECT count(*) FROM r",
            "WITH RECURSIVE query",
        ),
    ];
    for (sql, what) in cases {
        let (e, _) = fails(&mut c, sql);
        assert_eq!((e.sqlstate, e.message.as_str()), ("53200", "out of memory"), "{sql}");
        assert_eq!(
            e.detail.as_deref(),
            Some(format!("The {what} of this statement needed more than pgtier.statement_mem (1MB).").as_str()),
            "{sql}"
        );
    }
    // Small statements still run, and a correlated subquery's rows are
    // released after each run rather than added up.
    assert_eq!(count(&mut c, "SELECT count(*) FROM t WHERE id <= 10"), 10);
    assert_eq!(
        count(
            &mut c,
            "SELECT count(*) FROM t a WHERE a.id <= 5000 AND a.v = (SELECT max(b.v) FROM t b WHERE b.id = a.id)"
        ),
        5000
    );
    let mut other = Connection::new(db.clone());
    assert_eq!(count(&mut other, "SELECT count(*) FROM (SELECT id FROM t ORDER BY v DESC) s"), 100_000);
    c.execute_sql("SET pgtier.statement_mem = 0").unwrap();
    assert_eq!(count(&mut c, "SELECT count(*) FROM (SELECT v FROM t GROUP BY v) s"), 100_000);
    let e = c.execute_sql("SET pgtier.statement_mem = 'lots'").unwrap_err();
    assert_eq!(e.sqlstate, "22023");
}
