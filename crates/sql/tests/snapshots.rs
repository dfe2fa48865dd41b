//! READ COMMITTED as PostgreSQL has it: each statement sees what was
//! committed before it started, whether it runs alone (autocommit, which
//! reads at the snapshot its transaction began with) or inside an explicit
//! block opened earlier.
#![allow(clippy::unwrap_used)]

use pgtier_engine::{Database, EngineConfig, Value};
use pgtier_sql::Connection;

fn count(conn: &mut Connection) -> i64 {
    let stmt = conn.prepare("SELECT count(*) FROM t").unwrap();
    conn.query_with(&stmt, &[], |values, _| match values.first() {
        Some(Value::Int8(n)) => *n,
        other => panic!("count(*) gave {other:?}"),
    })
    .unwrap()
}

#[test]
fn each_statement_sees_commits_made_before_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    let mut reader = Connection::new(db.clone());
    let mut writer = Connection::new(db);
    writer.execute_sql("CREATE TABLE t (id int PRIMARY KEY)").unwrap();
    let insert = writer.prepare("INSERT INTO t VALUES ($1)").unwrap();

    // Autocommit: every statement starts a transaction and reads at its snapshot.
    assert_eq!(count(&mut reader), 0);
    writer.execute(&insert, &[Value::Int4(1)]).unwrap();
    assert_eq!(count(&mut reader), 1);

    // A block opened before the commit: its first statement still sees it.
    reader.execute_sql("BEGIN").unwrap();
    writer.execute(&insert, &[Value::Int4(2)]).unwrap();
    assert_eq!(count(&mut reader), 2, "the first statement after BEGIN sees a commit made after BEGIN");
    writer.execute(&insert, &[Value::Int4(3)]).unwrap();
    assert_eq!(count(&mut reader), 3, "and so does the next one");
    reader.execute_sql("COMMIT").unwrap();

    // Uncommitted rows stay invisible to the other session.
    writer.execute_sql("BEGIN").unwrap();
    writer.execute(&insert, &[Value::Int4(4)]).unwrap();
    assert_eq!(count(&mut reader), 3);
    writer.execute_sql("COMMIT").unwrap();
    assert_eq!(count(&mut reader), 4);
}

/// A session reuses its transaction object from one transaction to the
/// next: nothing of a finished one may leak into the next, neither its
/// rolled-back DDL nor its rolled-back rows, and DDL committed by another
/// session is seen at once.
#[test]
fn the_next_transaction_starts_clean() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    let mut a = Connection::new(db.clone());
    let mut b = Connection::new(db);
    a.execute_sql("CREATE TABLE t (id int PRIMARY KEY)").unwrap();
    let by_id = a.prepare("SELECT id FROM t WHERE id >= $1").unwrap();

    a.execute_sql("BEGIN").unwrap();
    a.execute_sql("CREATE TABLE gone (id int PRIMARY KEY)").unwrap();
    a.execute_sql("CREATE INDEX t_id ON t (id)").unwrap();
    a.execute_sql("INSERT INTO t VALUES (1)").unwrap();
    a.execute_sql("ROLLBACK").unwrap();
    let e = a.execute_sql("SELECT * FROM gone").unwrap_err();
    assert_eq!(e.sqlstate, "42P01", "rolled-back CREATE TABLE still visible: {e:?}");
    assert_eq!(count(&mut a), 0);
    // A statement prepared before the rolled-back DDL still runs.
    a.query_with(&by_id, &[Value::Int4(0)], |_, _| ()).unwrap();

    // A failed statement in autocommit rolls back and the next one works.
    a.execute_sql("INSERT INTO t VALUES (2)").unwrap();
    assert_eq!(a.execute_sql("INSERT INTO t VALUES (2)").unwrap_err().sqlstate, "23505");
    assert_eq!(count(&mut a), 1);

    // DDL committed elsewhere is seen by the next statement.
    b.execute_sql("CREATE TABLE later (id int PRIMARY KEY)").unwrap();
    a.execute_sql("INSERT INTO later VALUES (1)").unwrap();
    b.execute_sql("DROP TABLE later").unwrap();
    assert_eq!(a.execute_sql("SELECT * FROM later").unwrap_err().sqlstate, "42P01");
}

/// UPDATE, DELETE and SELECT FOR UPDATE recheck their WHERE on a row's
/// latest version after waiting for a concurrent writer (PostgreSQL's
/// READ COMMITTED recheck): when the writer moved the row out of the WHERE
/// (another unique key, another value), the statement leaves it alone. A
/// unique index's key is exact only at the snapshot, so it is rechecked
/// too. The same for UPDATE ... FROM, DELETE ... USING and MERGE: a
/// target row moved out of the join is left alone, one still in it is
/// written from its latest version (PostgreSQL's EvalPlanQual).
#[test]
fn a_row_that_left_the_where_while_waiting_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    let mut mover = Connection::new(db.clone());
    mover.execute_sql("CREATE TABLE k (id int PRIMARY KEY, u text UNIQUE, v int)").unwrap();
    mover.execute_sql("INSERT INTO k VALUES (1, 'a', 0), (2, 'c', 0), (3, 'e', 0), (4, 'g', 0)").unwrap();
    mover.execute_sql("CREATE TABLE src (u text, w int)").unwrap();
    mover.execute_sql("INSERT INTO src VALUES ('b', 1), ('d', 2), ('f', 3), ('g', 5)").unwrap();
    for (mover_sql, waiter_sql, expected) in [
        ("UPDATE k SET u = 'b' WHERE id = 1", "UPDATE k SET v = v + 1 WHERE u = 'a'", "UPDATE 0"),
        ("UPDATE k SET u = 'd' WHERE id = 2", "SELECT id FROM k WHERE u = 'c' FOR UPDATE", "SELECT 0"),
        ("UPDATE k SET u = 'f' WHERE id = 3", "DELETE FROM k WHERE u = 'e'", "DELETE 0"),
        ("UPDATE k SET v = 9 WHERE id = 4", "DELETE FROM k WHERE v = 0 AND id > 3", "DELETE 0"),
        (
            "UPDATE k SET u = 'b2' WHERE id = 1",
            "UPDATE k SET v = s.w FROM src s WHERE s.u = k.u AND k.id = 1",
            "UPDATE 0",
        ),
        ("UPDATE k SET u = 'd2' WHERE id = 2", "DELETE FROM k USING src s WHERE s.u = k.u AND k.id = 2", "DELETE 0"),
        (
            "UPDATE k SET u = 'f2' WHERE id = 3",
            "MERGE INTO k USING src s ON s.u = k.u AND k.id = 3 WHEN MATCHED THEN UPDATE SET v = 7",
            "MERGE 0",
        ),
        // PostgreSQL 15: a MATCHED row that no longer satisfies ON makes its source row NOT MATCHED.
        (
            "UPDATE k SET u = 'z' WHERE id = 2",
            "MERGE INTO k USING (SELECT 'd2' AS u) s ON k.u = s.u WHEN MATCHED THEN UPDATE SET v = 1 WHEN NOT MATCHED THEN INSERT VALUES (5, 'new', 0)",
            "MERGE 1",
        ),
        // Still joined: the new value is computed from the latest v (12), not the snapshot's (9).
        (
            "UPDATE k SET v = 12 WHERE id = 4",
            "UPDATE k SET v = k.v - s.w FROM src s WHERE s.u = k.u AND k.id = 4",
            "UPDATE 1",
        ),
    ] {
        mover.execute_sql("BEGIN").unwrap();
        mover.execute_sql(mover_sql).unwrap();
        let waits_before = db.stats().lock_waits;
        let db2 = db.clone();
        let sql = waiter_sql.to_owned();
        let waiter = std::thread::spawn(move || {
            let mut c = Connection::new(db2);
            let r = c.execute_sql(&sql).unwrap();
            format!("{} {}", r.tag.split(' ').next().unwrap_or(""), r.rows_affected)
        });
        // The waiter found the row at its snapshot and waits for its lock
        // (however long a busy machine takes to get it there).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while db.stats().lock_waits == waits_before {
            assert!(std::time::Instant::now() < deadline, "the waiter never waited for the row lock: {waiter_sql}");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        mover.execute_sql("COMMIT").unwrap();
        assert_eq!(waiter.join().unwrap(), expected, "{waiter_sql}");
    }
    let r = mover.execute_sql("SELECT count(*), sum(v) FROM k").unwrap();
    let rows = r.rows.unwrap();
    assert_eq!(
        (rows.get(0).unwrap().text(0), rows.get(0).unwrap().text(1)),
        (Some("5".into()), Some("7".into())),
        "nothing deleted or bumped; 12 - 5 from the latest version; MERGE's insert"
    );
}

/// A statement does not see what it writes itself: a function called per
/// row that inserts into the table being scanned adds rows the scan never
/// meets, as in PostgreSQL (a later command's rows). The table is large
/// enough to be walked in pieces (exec/scan.rs), each read after the
/// previous piece's rows were acted on, so later pieces already hold the
/// function's rows in the engine.
#[test]
fn a_scan_does_not_meet_rows_its_own_statement_inserts() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    let mut conn = Connection::new(db);
    conn.execute_sql("CREATE TABLE t (id int PRIMARY KEY)").unwrap();
    conn.execute_sql("INSERT INTO t SELECT i FROM generate_series(1, 100000) AS s(i)").unwrap();
    conn.execute_sql(
        "CREATE FUNCTION copy_row(i int) RETURNS int AS $$ BEGIN \
         IF i <= 100000 THEN INSERT INTO t VALUES (i + 100000); END IF; RETURN i; END $$ LANGUAGE plpgsql",
    )
    .unwrap();
    for block in [false, true] {
        if block {
            conn.execute_sql("DELETE FROM t WHERE id > 100000").unwrap();
            conn.execute_sql("BEGIN").unwrap();
        }
        let r = conn.execute_sql("SELECT count(*) FROM t WHERE copy_row(id) > 0").unwrap();
        let rows = r.rows.unwrap();
        assert_eq!(rows.get(0).unwrap().get(0), Some(&Value::Int8(100_000)), "in a block: {block}");
        assert_eq!(count(&mut conn), 200_000, "in a block: {block}");
        if block {
            conn.execute_sql("COMMIT").unwrap();
        }
    }
}
