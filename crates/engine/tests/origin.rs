//! Transaction origins and commit times: what the commit stream shows for
//! each origin, across multi-record transactions, reopen and kill -9; the
//! origin fixed at the first write; foreign keys left alone when the cache
//! moves whole instances (origin.rs in the engine).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{config, create_parent_child, int, open, text};
use pgtier_engine::{
    Change, ColumnDef, CommitMode, CommittedTxn, DataType, Database, EngineConfig, FkAction, ForeignKeyDef, Origin,
    RowBuf, RowOp, StreamStart, TableDef, TableId, Value, WalConfig,
};
use rand::{Rng, SeedableRng};

const ORIGINS: [Origin; 5] = [Origin::Application, Origin::Load, Origin::Refresh, Origin::Evict, Origin::Autorefresh];

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

/// Every transaction the stream holds now.
fn drain(db: &Database, consumer: &str) -> Vec<CommittedTxn> {
    let mut s = db.stream(consumer).unwrap();
    let mut out = Vec::new();
    while let Some(txn) = s.next(Duration::from_millis(50)).unwrap() {
        out.push(txn);
    }
    out
}

fn row_ops(txn: &CommittedTxn) -> Vec<(RowOp, String, Vec<Value>)> {
    txn.changes
        .iter()
        .filter_map(|c| match c {
            Change::Row(rc) => Some((rc.op, rc.table.name.clone(), rc.key_values())),
            _ => None,
        })
        .collect()
}

fn parent_row(id: i32) -> [Value; 3] {
    [int(id), text("p"), Value::Int8(0)]
}

fn child_row(pid: i32, n: i16) -> [Value; 3] {
    [int(pid), Value::Int2(n), text("c")]
}

fn exists(db: &Database, table: TableId, key: &[Value]) -> bool {
    let mut t = db.begin().unwrap();
    let mut row = RowBuf::new();
    let found = t.get(table, key, &mut row).unwrap();
    t.commit().unwrap();
    found
}

#[test]
fn the_stream_shows_each_origin_and_its_commit_time() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, _) = create_parent_child(&db);
    db.register_consumer("all", StreamStart::Now).unwrap();
    let before_us = now_us();
    let mut acked = Vec::new();
    for (i, origin) in ORIGINS.into_iter().enumerate() {
        // Both ways of choosing it: at begin, and before the first write.
        let mut t = if i % 2 == 0 {
            db.begin_with_origin(CommitMode::Sync, origin).unwrap()
        } else {
            let mut t = db.begin().unwrap();
            assert!(!t.get(parent, &[int(i as i32)], &mut RowBuf::new()).unwrap());
            t.set_origin(origin).unwrap();
            t
        };
        assert_eq!(t.origin(), origin);
        t.insert(parent, &parent_row(i as i32)).unwrap();
        acked.push(t.commit().unwrap().commit_ts.unwrap());
    }
    let after_us = now_us();
    let txns = drain(&db, "all");
    assert_eq!(txns.iter().map(|t| t.origin).collect::<Vec<_>>(), ORIGINS);
    assert_eq!(txns.iter().map(|t| t.commit_ts).collect::<Vec<_>>(), acked);
    for t in &txns {
        assert!(
            (before_us..=after_us).contains(&t.commit_time_us),
            "commit time {} outside [{before_us}, {after_us}]",
            t.commit_time_us
        );
        assert!(t.age() < Duration::from_secs(60));
    }
    assert!(txns.windows(2).all(|w| w[0].commit_time_us <= w[1].commit_time_us));
    // A consumer such as write-through keeps the application's work only.
    let propagated: Vec<_> = txns.iter().filter(|t| t.origin == Origin::Application).collect();
    assert_eq!(propagated.len(), 1);
    assert_eq!(row_ops(propagated[0]), [(RowOp::Insert, "parent".to_owned(), vec![int(0)])]);
}

#[test]
fn commit_times_never_decrease_under_concurrent_committers() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, _) = create_parent_child(&db);
    db.register_consumer("all", StreamStart::Now).unwrap();
    let handles: Vec<_> = (0..4)
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..100 {
                    let mut t = db.begin_with_origin(CommitMode::Async, ORIGINS[(i % 5) as usize]).unwrap();
                    t.insert(parent, &parent_row(w * 1000 + i)).unwrap();
                    t.commit().unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let txns = drain(&db, "all");
    assert_eq!(txns.len(), 400);
    assert!(txns.windows(2).all(|w| w[0].commit_ts < w[1].commit_ts && w[0].commit_time_us <= w[1].commit_time_us));
    for t in &txns {
        let Change::Row(rc) = &t.changes[0] else { panic!() };
        let Value::Int4(id) = rc.key_values()[0] else { panic!() };
        assert_eq!(t.origin, ORIGINS[(id % 1000 % 5) as usize]);
    }
}

#[test]
fn a_transaction_of_many_records_keeps_its_origin() {
    let dir = tempfile::tempdir().unwrap();
    let small_records = EngineConfig { wal: WalConfig { record_bytes_max: 4096, ..config().wal }, ..config() };
    let db = Database::open(dir.path(), small_records.clone()).unwrap();
    let (parent, child) = create_parent_child(&db);
    db.register_consumer("all", StreamStart::Now).unwrap();
    let mut t = db.begin_with_origin(CommitMode::Sync, Origin::Load).unwrap();
    for id in 0..200 {
        t.insert(parent, &[int(id), text(&"x".repeat(100)), Value::Int8(0)]).unwrap();
        t.insert(child, &child_row(id, 1)).unwrap();
    }
    let info = t.commit().unwrap();
    let mut t = db.begin_with_origin(CommitMode::Sync, Origin::Evict).unwrap();
    for id in 0..100 {
        t.delete(child, &[int(id), Value::Int2(1)]).unwrap();
        t.delete(parent, &[int(id)]).unwrap();
    }
    t.commit().unwrap();
    db.close().unwrap();

    // Read back after a restart: whole runs, each with its origin.
    let db = Database::open(dir.path(), small_records).unwrap();
    let txns = drain(&db, "all");
    assert_eq!(txns.len(), 2);
    let (load, evict) = (&txns[0], &txns[1]);
    assert!(load.lsn < info.lsn.unwrap(), "the load took several records");
    assert_eq!((load.origin, load.changes.len()), (Origin::Load, 400));
    assert_eq!((evict.origin, evict.changes.len()), (Origin::Evict, 200));
    assert!(row_ops(evict).iter().all(|(op, _, _)| *op == RowOp::Delete));
    assert!(load.commit_time_us > 0 && load.commit_time_us <= evict.commit_time_us);
    assert!(!exists(&db, parent, &[int(99)]) && exists(&db, parent, &[int(100)]));
    db.verify().unwrap();
}

#[test]
fn set_origin_after_a_write_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, _) = create_parent_child(&db);
    db.register_consumer("all", StreamStart::Now).unwrap();

    let mut t = db.begin().unwrap();
    t.insert(parent, &parent_row(1)).unwrap();
    let e = t.set_origin(Origin::Evict).unwrap_err();
    assert_eq!(e.sqlstate(), "25001");
    assert_eq!(e.to_string(), "transaction origin evict must be set before the transaction's first write");
    // Like any error, it aborted the transaction.
    assert_eq!(t.insert(parent, &parent_row(2)).unwrap_err().sqlstate(), "25P02");
    assert!(t.commit().unwrap().rolled_back);

    // A row lock is a write too; DDL as well.
    let mut t = db.begin().unwrap();
    t.insert(parent, &parent_row(3)).unwrap();
    t.commit().unwrap();
    let mut t = db.begin_with_origin(CommitMode::Sync, Origin::Load).unwrap();
    assert!(t.get_for_update(parent, &[int(3)], &mut RowBuf::new()).unwrap());
    assert_eq!(t.set_origin(Origin::Application).unwrap_err().sqlstate(), "25001");
    t.rollback();
    let mut t = db.begin().unwrap();
    t.create_table(&TableDef::new("other", vec![ColumnDef::new("id", DataType::Int4)], &["id"])).unwrap();
    assert_eq!(t.set_origin(Origin::Load).unwrap_err().sqlstate(), "25001");
    t.rollback();

    // A restarted transaction is an application one again.
    let mut t = db.begin_with_origin(CommitMode::Sync, Origin::Refresh).unwrap();
    t.commit_in_place().unwrap();
    t.restart(CommitMode::Sync).unwrap();
    assert_eq!(t.origin(), Origin::Application);
    t.insert(parent, &parent_row(4)).unwrap();
    t.commit_in_place().unwrap();
    let txns = drain(&db, "all");
    assert_eq!(txns.iter().map(|t| t.origin).collect::<Vec<_>>(), [Origin::Application, Origin::Application]);
}

/// parent <- child (NO ACTION) and parent <- tag (ON DELETE CASCADE).
fn create_instance_tables(db: &Database) -> (TableId, TableId, TableId) {
    let (parent, child) = create_parent_child(db);
    let mut t = db.begin().unwrap();
    let mut tag = TableDef::new(
        "tag",
        vec![ColumnDef::new("pid", DataType::Int4), ColumnDef::new("k", DataType::Int4)],
        &["pid", "k"],
    );
    tag.foreign_keys.push(ForeignKeyDef {
        name: None,
        columns: vec!["pid".into()],
        parent_table: "parent".into(),
        parent_columns: vec![],
        on_delete: FkAction::Cascade,
        timing: Default::default(),
    });
    let tag = t.create_table(&tag).unwrap();
    t.commit().unwrap();
    (parent, child, tag)
}

#[test]
fn instances_load_and_evict_without_foreign_key_checks_or_actions() {
    let dir = tempfile::tempdir().unwrap();
    let (parent, child, tag) = {
        let db = open(dir.path());
        let (parent, child, tag) = create_instance_tables(&db);
        db.register_consumer("awt", StreamStart::Now).unwrap();

        // Load: children before their parent, in one transaction.
        let mut t = db.begin_with_origin(CommitMode::Sync, Origin::Load).unwrap();
        for id in 1..=3 {
            t.insert(child, &child_row(id, 1)).unwrap();
            t.insert(child, &child_row(id, 2)).unwrap();
            t.insert(tag, &[int(id), int(7)]).unwrap();
            t.insert(parent, &parent_row(id)).unwrap();
        }
        t.commit().unwrap();

        // The application still gets PostgreSQL's answers.
        let mut t = db.begin().unwrap();
        assert_eq!(t.delete(parent, &[int(1)]).unwrap_err().sqlstate(), "23503");
        t.rollback();
        let mut t = db.begin().unwrap();
        assert_eq!(t.insert(child, &child_row(9, 1)).unwrap_err().sqlstate(), "23503");
        t.rollback();

        // Evict instance 1 parent first: no 23503 for its children, no
        // cascade to its tag row; the children go in the same transaction.
        let mut t = db.begin_with_origin(CommitMode::Sync, Origin::Evict).unwrap();
        assert!(t.delete(parent, &[int(1)]).unwrap());
        assert!(t.delete(child, &[int(1), Value::Int2(1)]).unwrap());
        assert!(t.delete(child, &[int(1), Value::Int2(2)]).unwrap());
        t.commit().unwrap();
        assert!(exists(&db, tag, &[int(1), int(7)]), "an evicted parent cascades to nothing");
        // Evict instance 2 children first, including the tag row.
        let mut t = db.begin_with_origin(CommitMode::Sync, Origin::Evict).unwrap();
        assert!(t.delete(tag, &[int(2), int(7)]).unwrap());
        assert!(t.delete(child, &[int(2), Value::Int2(1)]).unwrap());
        assert!(t.delete(child, &[int(2), Value::Int2(2)]).unwrap());
        assert!(t.delete(parent, &[int(2)]).unwrap());
        t.commit().unwrap();
        let mut t = db.begin_with_origin(CommitMode::Sync, Origin::Evict).unwrap();
        assert!(t.delete(tag, &[int(1), int(7)]).unwrap());
        t.commit().unwrap();

        // An application delete still cascades.
        let mut t = db.begin().unwrap();
        t.delete(child, &[int(3), Value::Int2(1)]).unwrap();
        t.delete(child, &[int(3), Value::Int2(2)]).unwrap();
        t.delete(parent, &[int(3)]).unwrap();
        t.commit().unwrap();
        assert!(!exists(&db, tag, &[int(3), int(7)]));

        let txns = drain(&db, "awt");
        let origins: Vec<_> = txns.iter().map(|t| t.origin).collect();
        assert_eq!(origins, [Origin::Load, Origin::Evict, Origin::Evict, Origin::Evict, Origin::Application]);
        // Evict transactions hold exactly the deletes asked for: no cascaded extras.
        assert_eq!(txns[1].changes.len(), 3);
        assert_eq!(txns[2].changes.len(), 4);
        assert_eq!(row_ops(&txns[4]).len(), 4, "the application delete cascaded to its tag row");
        let for_postgres: usize =
            txns.iter().filter(|t| t.origin == Origin::Application).map(|t| t.changes.len()).sum();
        assert_eq!(for_postgres, 4);
        db.verify().unwrap();
        db.close().unwrap();
        (parent, child, tag)
    };
    // Recovery replays every origin alike: evicted rows stay gone.
    let db = open(dir.path());
    for id in 1..=3 {
        assert!(!exists(&db, parent, &[int(id)]));
        assert!(!exists(&db, child, &[int(id), Value::Int2(1)]));
        assert!(!exists(&db, tag, &[int(id), int(7)]));
    }
    db.verify().unwrap();
    let origins: Vec<_> = drain(&db, "awt").iter().map(|t| t.origin).collect();
    assert_eq!(origins, [Origin::Load, Origin::Evict, Origin::Evict, Origin::Evict, Origin::Application]);
}

#[test]
fn refresh_updates_parent_keys_without_foreign_key_checks() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, child) = create_parent_child(&db);
    let mut t = db.begin().unwrap();
    t.insert(parent, &parent_row(1)).unwrap();
    t.insert(child, &child_row(1, 1)).unwrap();
    t.commit().unwrap();
    let mut t = db.begin().unwrap();
    assert_eq!(t.update(child, &[int(1), Value::Int2(1)], &[(0, int(2))]).unwrap_err().sqlstate(), "23503");
    t.rollback();
    // A refreshed child may point at a parent the same refresh brings next.
    let mut t = db.begin_with_origin(CommitMode::Sync, Origin::Refresh).unwrap();
    assert!(t.update(child, &[int(1), Value::Int2(1)], &[(0, int(2))]).unwrap());
    t.insert(parent, &parent_row(2)).unwrap();
    t.commit().unwrap();
    assert!(exists(&db, child, &[int(2), Value::Int2(1)]));
    db.verify().unwrap();
}

/// The hot commit path's record: TATP's UPDATE_LOCATION (one subscriber
/// row, 34 columns). Origin and commit time add 8 bytes to it.
#[test]
fn record_size_of_a_tatp_update() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut cols = vec![
        ColumnDef::new("s_id", DataType::Int4).not_null(),
        ColumnDef::new("sub_nbr", DataType::Varchar(15)).not_null(),
    ];
    for prefix in ["bit", "hex", "byte2"] {
        for i in 1..=10 {
            cols.push(ColumnDef::new(format!("{prefix}_{i}"), DataType::Int2));
        }
    }
    cols.push(ColumnDef::new("msc_location", DataType::Int8));
    cols.push(ColumnDef::new("vlr_location", DataType::Int8));
    let mut t = db.begin().unwrap();
    let sub = t.create_table(&TableDef::new("subscriber", cols, &["s_id"])).unwrap();
    let mut row = vec![int(1), text("000000000000001")];
    row.extend((0..30).map(Value::Int2));
    row.extend([Value::Int8(1), Value::Int8(2)]);
    t.insert(sub, &row).unwrap();
    t.commit().unwrap();
    let before = db.stats().wal;
    let mut t = db.begin().unwrap();
    assert!(t.update(sub, &[int(1)], &[(33, Value::Int8(123_456_789))]).unwrap());
    t.commit().unwrap();
    let after = db.stats().wal;
    assert_eq!(after.records_appended - before.records_appended, 1);
    let framed = after.bytes_appended - before.bytes_appended;
    // 16 bytes of WAL framing, then the payload padded to 8 bytes.
    eprintln!("TATP UPDATE_LOCATION: {framed} bytes in the log ({} before origin and commit time)", framed - 8);
    assert!(framed <= 160, "{framed}");
}

// ---- kill -9 -------------------------------------------------------------

const ENV_DIR: &str = "PGTIER_ORIGIN_CRASH_CHILD";

/// Step `i` of the child's workload: instance `i / 3` is loaded (step 0),
/// updated by the application (1), evicted (2).
fn step_origin(i: i64) -> Origin {
    [Origin::Load, Origin::Application, Origin::Evict][(i % 3) as usize]
}

/// Child: runs the steps in sync mode until killed, printing `ACK step commit_ts`.
fn crash_child(dir: &Path) {
    let db = Database::open(
        dir,
        EngineConfig {
            checkpoint_interval: Some(Duration::from_millis(100)),
            checkpoint_wal_bytes: 64 << 10,
            ..config()
        },
    )
    .unwrap();
    if db.catalog().table_by_name("parent").is_none() {
        db.register_consumer("origins", StreamStart::Oldest).unwrap();
        create_parent_child(&db);
    }
    let cat = db.catalog();
    let (parent, child) = (cat.table_by_name("parent").unwrap().id, cat.table_by_name("child").unwrap().id);
    let mut step: i64 = std::env::var("PGTIER_ORIGIN_STEP").unwrap().parse().unwrap();
    let mut out = std::io::stdout();
    loop {
        let id = (step / 3) as i32;
        let mut t = db.begin_with_origin(CommitMode::Sync, step_origin(step)).unwrap();
        match step % 3 {
            0 => {
                t.insert(child, &child_row(id, 1)).unwrap();
                t.insert(parent, &parent_row(id)).unwrap();
            }
            1 => assert!(t.update(parent, &[int(id)], &[(2, Value::Int8(step))]).unwrap()),
            _ => {
                assert!(t.delete(parent, &[int(id)]).unwrap());
                assert!(t.delete(child, &[int(id), Value::Int2(1)]).unwrap());
            }
        }
        let ts = t.commit().unwrap().commit_ts.unwrap();
        writeln!(out, "ACK {step} {ts}").unwrap();
        out.flush().unwrap();
        step += 1;
    }
}

#[test]
#[ignore = "the child process of a test in this file (run by it with --ignored)"]
fn origin_crash_child_entry() {
    let Ok(dir) = std::env::var(ENV_DIR) else { return };
    crash_child(Path::new(&dir));
}

/// Runs the child from `step` until it has acknowledged a commit and
/// `run_ms` more, SIGKILLs it, returns its ACKs as (step, commit ts).
fn run_crash_child(dir: &Path, step: i64, run_ms: u64) -> Vec<(i64, u64)> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "origin_crash_child_entry", "--ignored", "--nocapture", "--test-threads=1"])
        .env(ENV_DIR, dir)
        .env("PGTIER_ORIGIN_STEP", step.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let acks: Arc<Mutex<Vec<(i64, u64)>>> = Arc::default();
    let reader = {
        let acks = Arc::clone(&acks);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let f: Vec<&str> = line.split(' ').collect();
                if let ["ACK", step, ts] = f.as_slice()
                    && let (Ok(step), Ok(ts)) = (step.parse(), ts.parse())
                {
                    acks.lock().unwrap().push((step, ts));
                }
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while acks.lock().unwrap().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!acks.lock().unwrap().is_empty(), "child never acknowledged a commit");
    std::thread::sleep(Duration::from_millis(run_ms));
    if let Some(status) = child.try_wait().unwrap() {
        panic!("the child process ended before it was killed ({status}): it failed (see its output above)");
    }
    // SAFETY: plain kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    reader.join().unwrap();
    std::mem::take(&mut *acks.lock().unwrap())
}

#[test]
fn origins_survive_kill_9() {
    if std::env::var(ENV_DIR).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(now_us());
    let mut acked: HashMap<u64, i64> = HashMap::new();
    let mut next_step = 0i64;
    for round in 0..4 {
        let acks = run_crash_child(dir.path(), next_step, rng.random_range(150..500));
        acked.extend(acks.iter().map(|&(step, ts)| (ts, step)));
        let db = Database::open(dir.path(), config()).unwrap();
        db.verify().unwrap();
        // Every committed step, acknowledged or in flight at the kill, is
        // in the stream with its origin, whole, in order.
        let txns = drain(&db, "origins");
        let steps: Vec<&CommittedTxn> =
            txns.iter().filter(|t| t.changes.iter().all(|c| matches!(c, Change::Row(_)))).collect();
        for (i, t) in steps.iter().enumerate() {
            let step = i as i64;
            assert_eq!(t.origin, step_origin(step), "round {round}: step {step}");
            if let Some(&s) = acked.get(&t.commit_ts.get()) {
                assert_eq!(s, step, "acknowledged step at its commit ts");
            }
            let ops: Vec<RowOp> = row_ops(t).iter().map(|(op, _, _)| *op).collect();
            let expect: &[RowOp] = match step % 3 {
                0 => &[RowOp::Insert, RowOp::Insert],
                1 => &[RowOp::Update],
                _ => &[RowOp::Delete, RowOp::Delete],
            };
            assert_eq!(ops, expect, "round {round}: step {step} whole");
        }
        assert!(txns.windows(2).all(|w| w[0].commit_time_us <= w[1].commit_time_us && w[0].commit_ts < w[1].commit_ts));
        assert!(acked.values().all(|&s| s < steps.len() as i64), "round {round}: an acknowledged step is missing");
        next_step = steps.len() as i64;
        // Recovery applied every origin: evicted instances gone, the loaded one present.
        let (parent, child) =
            (db.catalog().table_by_name("parent").unwrap().id, db.catalog().table_by_name("child").unwrap().id);
        for id in 0..((next_step + 2) / 3) as i32 {
            let evicted = i64::from(id) * 3 + 2 < next_step;
            assert_eq!(exists(&db, parent, &[int(id)]), !evicted, "round {round}: instance {id}");
            assert_eq!(exists(&db, child, &[int(id), Value::Int2(1)]), !evicted);
        }
        eprintln!("origin crash round {round}: {} acks, {next_step} steps committed", acks.len());
        drop(db);
    }
    assert!(next_step > 3, "the child committed something");
}

/// A pinned cache transaction (`pin_snapshot`) acts only on what its
/// snapshot saw: a delete or update of a row changed after the pin, and an
/// insert over a row deleted after it, fail with 40001 (READ COMMITTED
/// would take the newer version and undo the commit it never saw).
#[test]
fn pinned_snapshot_refuses_rows_committed_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, _) = create_parent_child(&db);
    for id in 1..=3 {
        let mut t = db.begin().unwrap();
        t.insert(parent, &parent_row(id)).unwrap();
        t.commit().unwrap();
    }
    let pinned = |db: &Database| {
        let mut t = db.begin_with_origin(CommitMode::Sync, Origin::Refresh).unwrap();
        t.pin_snapshot().unwrap();
        t
    };
    // Updated after the pin: the delete is refused, the transaction aborts.
    let mut load = pinned(&db);
    let mut app = db.begin().unwrap();
    app.update(parent, &[int(1)], &[(1, text("changed"))]).unwrap();
    app.commit().unwrap();
    let mut row = RowBuf::new();
    assert!(load.get(parent, &[int(1)], &mut row).unwrap(), "the pinned snapshot still sees the old row");
    assert_eq!(row.get(1).to_owned_value(), text("p"));
    assert_eq!(load.delete(parent, &[int(1)]).unwrap_err().sqlstate(), "40001");
    drop(load);
    // Deleted after the pin: an insert of that key is refused too.
    let mut load = pinned(&db);
    let mut app = db.begin().unwrap();
    assert!(app.delete(parent, &[int(2)]).unwrap());
    app.commit().unwrap();
    assert_eq!(load.insert(parent, &parent_row(2)).unwrap_err().sqlstate(), "40001");
    drop(load);
    // Rows the pin saw as they are: written as usual, the pin lasts across calls.
    let mut load = pinned(&db);
    assert!(load.delete(parent, &[int(3)]).unwrap());
    load.insert(parent, &parent_row(3)).unwrap();
    load.insert(parent, &parent_row(2)).unwrap(); // deleted before the pin
    load.rollback();
    let mut load = pinned(&db);
    load.end_statement();
    load.insert(parent, &parent_row(9)).unwrap();
    load.commit().unwrap();
    assert!(exists(&db, parent, &[int(9)]));
    // Unpinned cache transactions keep READ COMMITTED's recheck.
    let mut evict = db.begin_with_origin(CommitMode::Sync, Origin::Evict).unwrap();
    assert!(evict.delete(parent, &[int(1)]).unwrap());
    evict.commit().unwrap();
    assert_eq!(db.begin().unwrap().pin_snapshot().unwrap_err().sqlstate(), "0A000");
}

/// An eviction removes an instance as its snapshot shows it; a child an
/// application inserted beside it that the snapshot does not see would be
/// left referencing a parent the cache no longer holds (half an instance,
/// which the next load of it then meets: TATP at 8 sessions saw 40001s on
/// call_forwarding). So the parent's delete fails without waiting: 55P03
/// while the insert is uncommitted, 40001 once it committed after the
/// eviction's snapshot. Children the snapshot sees stay the eviction's to
/// delete, before or after their parent.
#[test]
fn an_eviction_leaves_no_child_it_did_not_see() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, child) = create_parent_child(&db);
    let mut load = db.begin_with_origin(CommitMode::Sync, Origin::Load).unwrap();
    for id in 1..=3 {
        load.insert(parent, &parent_row(id)).unwrap();
        load.insert(child, &child_row(id, 1)).unwrap();
    }
    load.commit().unwrap();
    let evict = |db: &Database| {
        let mut t = db.begin_with_origin(CommitMode::Sync, Origin::Evict).unwrap();
        t.pin_snapshot().unwrap();
        t
    };

    // Uncommitted: the application inserted a child (its parent check
    // passed), then the eviction reaches the parent.
    let mut app = db.begin().unwrap();
    app.insert(child, &child_row(1, 2)).unwrap();
    let mut ev = evict(&db);
    assert!(ev.delete(child, &[int(1), Value::Int2(1)]).unwrap());
    let started = Instant::now();
    assert_eq!(ev.delete(parent, &[int(1)]).unwrap_err().sqlstate(), "55P03");
    assert!(started.elapsed() < Duration::from_secs(1), "an eviction never waits");
    drop(ev);
    app.commit().unwrap();

    // Committed after the eviction's snapshot, parent first this time.
    let mut ev = evict(&db);
    let mut app = db.begin().unwrap();
    app.insert(child, &child_row(2, 2)).unwrap();
    app.commit().unwrap();
    assert_eq!(ev.delete(parent, &[int(2)]).unwrap_err().sqlstate(), "40001");
    drop(ev);
    for (id, n) in [(1, 1), (1, 2), (2, 1), (2, 2)] {
        assert!(exists(&db, child, &[int(id), Value::Int2(n)]), "child ({id}, {n}) stays with its parent");
    }
    assert!(exists(&db, parent, &[int(1)]) && exists(&db, parent, &[int(2)]));

    // Everything the snapshot sees, in either order: evicted whole.
    let mut ev = evict(&db);
    assert!(ev.delete(parent, &[int(1)]).unwrap());
    assert!(ev.delete(child, &[int(1), Value::Int2(1)]).unwrap());
    assert!(ev.delete(child, &[int(1), Value::Int2(2)]).unwrap());
    assert!(ev.delete(child, &[int(2), Value::Int2(1)]).unwrap());
    assert!(ev.delete(child, &[int(2), Value::Int2(2)]).unwrap());
    assert!(ev.delete(parent, &[int(2)]).unwrap());
    ev.commit().unwrap();
    // A child deleted by the application after the snapshot is no reason
    // to keep the parent: nothing would be left behind.
    let mut ev = evict(&db);
    let mut app = db.begin().unwrap();
    assert!(app.delete(child, &[int(3), Value::Int2(1)]).unwrap());
    app.commit().unwrap();
    assert!(ev.delete(parent, &[int(3)]).unwrap());
    ev.commit().unwrap();
    for id in 1..=3 {
        assert!(!exists(&db, parent, &[int(id)]));
    }
}
