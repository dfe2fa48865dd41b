//! INSERT ... ON CONFLICT racing a concurrent insert of the same key, as
//! PostgreSQL's speculative insertion has it in READ COMMITTED: the insert
//! waits for the other writer; if that one commits, DO NOTHING skips the
//! row and DO UPDATE updates the committed version; if it rolls back, the
//! row goes in. Never 23505 on an arbiter (CI met one under pgbench's
//! TATP scripts with two clients: both sessions missed the other's row in
//! their snapshots and the second insert failed).
#![allow(clippy::unwrap_used)]

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use pgtier_engine::{Database, EngineConfig, Value};
use pgtier_sql::{Connection, SqlError};

/// Long enough for the racing statement to reach its wait: if it has not
/// finished by then, it is blocked on the first session's row.
const BLOCKED: Duration = Duration::from_millis(300);

fn setup() -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    let mut c = Connection::new(db.clone());
    c.execute_sql("CREATE TABLE t (id int PRIMARY KEY, u int UNIQUE, v int)").unwrap();
    (dir, db)
}

fn rows(db: &Database) -> Vec<(i64, i64, i64)> {
    let mut c = Connection::new(db.clone());
    let stmt = c.prepare("SELECT id, u, v FROM t ORDER BY id").unwrap();
    let mut out = Vec::new();
    let int = |v: &Value| match v {
        Value::Int4(n) => i64::from(*n),
        Value::Null => -1,
        other => panic!("{other:?}"),
    };
    c.query_with(&stmt, &[], |vals, width| {
        for r in vals.chunks(width) {
            out.push((int(&r[0]), int(&r[1]), int(&r[2])));
        }
    })
    .unwrap();
    out
}

/// Session A inserts `first` in an open block; session B runs `before`,
/// then `racing`, which must block on A's row; then A ends with `end_a`
/// and B runs `after` (in its block, when `before` opened one). Returns
/// `racing`'s outcome.
fn race(
    db: &Database,
    first: &str,
    before: &[&str],
    racing: &str,
    end_a: &str,
    after: &[&str],
) -> Result<u64, SqlError> {
    let mut a = Connection::new(db.clone());
    a.execute_sql("BEGIN").unwrap();
    a.execute_sql(first).unwrap();
    let (tx, rx) = mpsc::channel();
    let db_b = db.clone();
    let before: Vec<String> = before.iter().map(|s| (*s).to_owned()).collect();
    let statement = racing.to_owned();
    let b = thread::spawn(move || {
        let mut b = Connection::new(db_b);
        for s in &before {
            b.execute_sql(s).unwrap();
        }
        let r = b.execute_sql(&statement).map(|r| r.rows_affected);
        tx.send(r.clone()).unwrap();
        (b, r)
    });
    assert!(rx.recv_timeout(BLOCKED).is_err(), "{racing} did not wait for the uncommitted insert of the same key");
    a.execute_sql(end_a).unwrap();
    let (mut b, r) = b.join().unwrap();
    for s in after {
        b.execute_sql(s).unwrap();
    }
    r
}

#[test]
fn do_nothing_skips_a_row_committed_during_the_wait() {
    let (_dir, db) = setup();
    let r = race(
        &db,
        "INSERT INTO t VALUES (1, 10, 1)",
        &[],
        "INSERT INTO t VALUES (1, 11, 2) ON CONFLICT DO NOTHING",
        "COMMIT",
        &[],
    );
    assert_eq!(r.unwrap(), 0);
    assert_eq!(rows(&db), vec![(1, 10, 1)]);
}

#[test]
fn do_nothing_inserts_when_the_other_writer_rolls_back() {
    let (_dir, db) = setup();
    let r = race(
        &db,
        "INSERT INTO t VALUES (1, 10, 1)",
        &[],
        "INSERT INTO t VALUES (1, 11, 2) ON CONFLICT DO NOTHING",
        "ROLLBACK",
        &[],
    );
    assert_eq!(r.unwrap(), 1);
    assert_eq!(rows(&db), vec![(1, 11, 2)]);
}

#[test]
fn do_nothing_on_a_unique_arbiter_skips_too() {
    let (_dir, db) = setup();
    let r = race(
        &db,
        "INSERT INTO t VALUES (1, 10, 1)",
        &[],
        "INSERT INTO t VALUES (2, 10, 2) ON CONFLICT (u) DO NOTHING",
        "COMMIT",
        &[],
    );
    assert_eq!(r.unwrap(), 0);
    assert_eq!(rows(&db), vec![(1, 10, 1)]);
}

#[test]
fn a_conflict_on_an_index_that_is_not_an_arbiter_is_still_23505() {
    let (_dir, db) = setup();
    let r = race(
        &db,
        "INSERT INTO t VALUES (1, 10, 1)",
        &[],
        "INSERT INTO t VALUES (2, 10, 2) ON CONFLICT (id) DO NOTHING",
        "COMMIT",
        &[],
    );
    let e = r.unwrap_err();
    assert_eq!(e.sqlstate, "23505", "{e:?}");
    assert_eq!(rows(&db), vec![(1, 10, 1)]);
}

#[test]
fn do_update_updates_the_version_committed_during_the_wait() {
    let (_dir, db) = setup();
    let r = race(
        &db,
        "INSERT INTO t VALUES (1, 10, 1)",
        &[],
        "INSERT INTO t VALUES (1, 11, 5) ON CONFLICT (id) DO UPDATE SET v = t.v + excluded.v",
        "COMMIT",
        &[],
    );
    assert_eq!(r.unwrap(), 1);
    // The committed row's v (1), not a snapshot's absence, plus 5.
    assert_eq!(rows(&db), vec![(1, 10, 6)]);
}

#[test]
fn do_update_on_a_unique_arbiter_asks_for_a_retry() {
    let (_dir, db) = setup();
    let r = race(
        &db,
        "INSERT INTO t VALUES (1, 10, 1)",
        &[],
        "INSERT INTO t VALUES (2, 10, 5) ON CONFLICT (u) DO UPDATE SET v = t.v + excluded.v",
        "COMMIT",
        &[],
    );
    let e = r.unwrap_err();
    assert_eq!(e.sqlstate, "40001", "{e:?}");
    assert_eq!(rows(&db), vec![(1, 10, 1)]);
}

/// The race inside B's block keeps what B wrote before it, and a user's
/// savepoint taken before it still undoes everything after it.
#[test]
fn the_race_inside_a_block_keeps_earlier_writes_and_user_savepoints() {
    let (_dir, db) = setup();
    let r = race(
        &db,
        "INSERT INTO t VALUES (1, 10, 1)",
        &["BEGIN", "INSERT INTO t VALUES (5, 50, 5)"],
        "INSERT INTO t VALUES (1, 11, 2) ON CONFLICT DO NOTHING",
        "COMMIT",
        &["COMMIT"],
    );
    assert_eq!(r.unwrap(), 0);
    assert_eq!(rows(&db), vec![(1, 10, 1), (5, 50, 5)]);

    let mut c = Connection::new(db.clone());
    c.execute_sql("DELETE FROM t").unwrap();
    let r = race(
        &db,
        "INSERT INTO t VALUES (1, 10, 1)",
        &["BEGIN", "INSERT INTO t VALUES (5, 50, 5)", "SAVEPOINT s", "INSERT INTO t VALUES (6, 60, 6)"],
        "INSERT INTO t VALUES (1, 11, 2) ON CONFLICT DO NOTHING",
        "COMMIT",
        &["INSERT INTO t VALUES (7, 70, 7)", "ROLLBACK TO s", "COMMIT"],
    );
    assert_eq!(r.unwrap(), 0);
    assert_eq!(rows(&db), vec![(1, 10, 1), (5, 50, 5)]);
}

/// Many sessions inserting the same keys with DO NOTHING: every key ends
/// up inserted once and no statement fails (the pgbench TATP shape).
#[test]
fn concurrent_do_nothing_never_fails() {
    let (_dir, db) = setup();
    const SESSIONS: usize = 4;
    const KEYS: i32 = 500;
    let workers: Vec<_> = (0..SESSIONS)
        .map(|s| {
            let db = db.clone();
            thread::spawn(move || {
                let mut c = Connection::new(db);
                let ins = c.prepare("INSERT INTO t VALUES ($1, $1, $2) ON CONFLICT DO NOTHING").unwrap();
                let mut inserted = 0;
                for k in 0..KEYS {
                    inserted += c.execute(&ins, &[Value::Int4(k), Value::Int4(s as i32)]).unwrap();
                }
                inserted
            })
        })
        .collect();
    let inserted: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_eq!(inserted, KEYS as u64);
    let got = rows(&db);
    assert_eq!(got.len(), KEYS as usize);
    assert!(got.iter().enumerate().all(|(i, r)| r.0 == i as i64 && r.1 == i as i64));
}
