#![allow(clippy::unwrap_used)]

mod common;

use std::ops::Bound;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::{create_parent_child, int, open, text};
use pgtier_engine::{
    Change, CommitMode, EngineError, IndexDef, IndexKeyOptions, IndexOptions, RowBuf, RowOp, StreamStart, Value,
};

#[test]
fn insert_get_update_delete() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, _) = create_parent_child(&db);
    let mut t = db.begin().unwrap();
    t.insert(parent, &[int(1), text("one"), Value::Int8(10)]).unwrap();
    t.insert(parent, &[int(2), Value::Null, Value::Int8(20)]).unwrap();
    let mut row = RowBuf::new();
    assert!(t.get(parent, &[int(1)], &mut row).unwrap());
    assert_eq!(row.get_str(1), Some("one"));
    t.commit().unwrap();

    let mut t = db.begin().unwrap();
    assert!(t.update(parent, &[int(1)], &[(2, Value::Int8(11))]).unwrap());
    assert!(t.update(parent, &[int(1)], &[(1, text("uno"))]).unwrap());
    assert!(!t.update(parent, &[int(9)], &[(2, Value::Int8(1))]).unwrap());
    assert!(t.delete(parent, &[int(2)]).unwrap());
    assert!(!t.delete(parent, &[int(2)]).unwrap());
    t.commit().unwrap();

    let mut t = db.begin().unwrap();
    assert!(t.get(parent, &[Value::Int8(1)], &mut row).unwrap(), "int8 probe on int4 key");
    assert_eq!(row.values(), vec![int(1), text("uno"), Value::Int8(11)]);
    assert!(!t.get(parent, &[int(2)], &mut row).unwrap());
    t.commit().unwrap();
    let stats = db.stats();
    assert_eq!(stats.tables.iter().find(|s| s.name == "parent").unwrap().rows, 1);
}

#[test]
fn constraint_errors_speak_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, child) = create_parent_child(&db);
    let mut t = db.begin().unwrap();
    t.insert(parent, &[int(1), text("a"), Value::Int8(0)]).unwrap();
    t.commit().unwrap();

    let mut t = db.begin().unwrap();
    let e = t.insert(parent, &[int(1), text("b"), Value::Int8(0)]).unwrap_err();
    assert_eq!(e.sqlstate(), "23505");
    assert_eq!(e.to_string(), "duplicate key value violates unique constraint \"parent_pkey\"");
    assert_eq!(e.detail(), Some("Key (id)=(1) already exists."));
    // The transaction is aborted now.
    assert_eq!(t.insert(parent, &[int(5), text("b"), Value::Int8(0)]).unwrap_err().sqlstate(), "25P02");
    assert!(t.commit().unwrap().rolled_back);

    let mut t = db.begin().unwrap();
    let e = t.insert(child, &[int(7), Value::Int2(1), Value::Null]).unwrap_err();
    assert_eq!(e.sqlstate(), "23503");
    assert_eq!(e.detail(), Some("Key (pid)=(7) is not present in table \"parent\"."));
    t.rollback();

    let mut t = db.begin().unwrap();
    t.insert(child, &[int(1), Value::Int2(1), text("ok")]).unwrap();
    t.commit().unwrap();
    let mut t = db.begin().unwrap();
    let e = t.delete(parent, &[int(1)]).unwrap_err();
    assert_eq!(e.sqlstate(), "23503");
    assert_eq!(
        e.to_string(),
        "update or delete on table \"parent\" violates foreign key constraint \"child_pid_fkey\" on table \"child\""
    );
    t.rollback();

    let mut t = db.begin().unwrap();
    let e = t.insert(parent, &[int(3), text("x"), Value::Null]).unwrap_err();
    assert_eq!(e.sqlstate(), "23502");
    let mut t = db.begin().unwrap();
    let e = t.insert(child, &[int(1), Value::Int2(2), text("01234567890")]).unwrap_err();
    assert_eq!(e.sqlstate(), "22001");
    let mut t = db.begin().unwrap();
    let e = t.insert(child, &[int(1), Value::Int8(70_000), text("x")]).unwrap_err();
    assert_eq!(e.sqlstate(), "22003");
    drop(t);
    // Children deleted first, then the parent goes.
    let mut t = db.begin().unwrap();
    assert!(t.delete(child, &[int(1), Value::Int2(1)]).unwrap());
    assert!(t.delete(parent, &[int(1)]).unwrap());
    t.commit().unwrap();
}

#[test]
fn statement_snapshots_and_readers_never_wait() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, _) = create_parent_child(&db);
    let mut t = db.begin().unwrap();
    t.insert(parent, &[int(1), text("a"), Value::Int8(1)]).unwrap();
    t.commit().unwrap();

    let mut writer = db.begin().unwrap();
    assert!(writer.update(parent, &[int(1)], &[(2, Value::Int8(2))]).unwrap());
    let mut reader = db.begin().unwrap();
    let mut row = RowBuf::new();
    assert!(reader.get(parent, &[int(1)], &mut row).unwrap());
    assert_eq!(row.get_i64(2), Some(1), "reader sees the committed image while the writer holds the lock");
    reader.begin_statement().unwrap();
    writer.commit().unwrap();
    assert!(reader.get(parent, &[int(1)], &mut row).unwrap());
    assert_eq!(row.get_i64(2), Some(1), "same statement, same snapshot");
    reader.end_statement();
    assert!(reader.get(parent, &[int(1)], &mut row).unwrap());
    assert_eq!(row.get_i64(2), Some(2), "next statement sees the commit");
    reader.commit().unwrap();
}

#[test]
fn writer_waits_then_rechecks_latest_version() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, _) = create_parent_child(&db);
    let mut t = db.begin().unwrap();
    t.insert(parent, &[int(1), text("a"), Value::Int8(0)]).unwrap();
    t.commit().unwrap();
    let threads = 4;
    let per_thread = 200;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let db = db.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                for _ in 0..per_thread {
                    let mut t = db.begin_with(CommitMode::Async).unwrap();
                    t.update_with(parent, &[int(1)], |row| {
                        Ok(Some(vec![(2, Value::Int8(row.get_i64(2).unwrap() + 1))]))
                    })
                    .unwrap();
                    t.commit().unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut t = db.begin().unwrap();
    let mut row = RowBuf::new();
    t.get(parent, &[int(1)], &mut row).unwrap();
    assert_eq!(row.get_i64(2), Some((threads * per_thread) as i64), "no lost update");
}

#[test]
fn deadlock_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, _) = create_parent_child(&db);
    let mut t = db.begin().unwrap();
    t.insert(parent, &[int(1), text("a"), Value::Int8(0)]).unwrap();
    t.insert(parent, &[int(2), text("b"), Value::Int8(0)]).unwrap();
    t.commit().unwrap();
    let mut a = db.begin().unwrap();
    let mut b = db.begin().unwrap();
    a.update(parent, &[int(1)], &[(2, Value::Int8(1))]).unwrap();
    b.update(parent, &[int(2)], &[(2, Value::Int8(1))]).unwrap();
    let db2 = db.clone();
    let h = std::thread::spawn(move || {
        let r = a.update(parent, &[int(2)], &[(2, Value::Int8(2))]);
        let _ = db2;
        (r.map_err(|e| e.sqlstate()), a.commit())
    });
    std::thread::sleep(Duration::from_millis(50));
    let rb = b.update(parent, &[int(1)], &[(2, Value::Int8(2))]);
    // b is younger: it is the victim, and its abort frees a.
    assert_eq!(rb.unwrap_err().sqlstate(), "40P01");
    b.rollback();
    let (ra, commit) = h.join().unwrap();
    assert_eq!(ra, Ok(true));
    commit.unwrap();
    assert_eq!(db.stats().deadlocks, 1);
}

/// TPC-B's shape: every transaction locks an account, then one of a few
/// tellers, then the one branch, always in that order, so no wait-for cycle
/// can form. The detector once reported one anyway: it read a slot's
/// `waiting_for` after the transaction it had checked was gone and the
/// slot's next transaction (same thread) was waiting for the checker.
#[test]
fn ordered_locking_never_reports_a_deadlock() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, _) = create_parent_child(&db);
    const ACCOUNTS: i32 = 50;
    const TELLERS: i32 = 3;
    const BRANCH: i32 = 1_000;
    let mut t = db.begin().unwrap();
    for id in (1..=ACCOUNTS).chain(500..500 + TELLERS).chain([BRANCH]) {
        t.insert(parent, &[int(id), text("r"), Value::Int8(0)]).unwrap();
    }
    t.commit().unwrap();
    let threads = 6;
    // One run of 3,000 per thread showed the false positive one time in 8.
    let per_thread = 30_000;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|n| {
            let db = db.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let mut x = n as u64 * 7919 + 1;
                for _ in 0..per_thread {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let account = 1 + (x >> 33) as i32 % ACCOUNTS;
                    let teller = 500 + (x >> 17) as i32 % TELLERS;
                    let mut t = db.begin_with(CommitMode::Async).unwrap();
                    for id in [account, teller, BRANCH] {
                        t.update_with(parent, &[int(id)], |row| {
                            Ok(Some(vec![(2, Value::Int8(row.get_i64(2).unwrap() + 1))]))
                        })
                        .unwrap_or_else(|e| panic!("ordered locking failed on row {id}: {e}"));
                    }
                    t.commit().unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(db.stats().deadlocks, 0);
    let mut t = db.begin().unwrap();
    let mut row = RowBuf::new();
    t.get(parent, &[int(BRANCH)], &mut row).unwrap();
    assert_eq!(row.get_i64(2), Some((threads * per_thread) as i64), "every transaction updated the branch once");
}

#[test]
fn unique_secondary_index_and_scans() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, child) = create_parent_child(&db);
    let mut t = db.begin().unwrap();
    for i in 0..100 {
        t.insert(parent, &[int(i), text(&format!("n{i:03}")), Value::Int8(i64::from(i) * 10)]).unwrap();
    }
    for i in 0..10 {
        for n in 0..5 {
            t.insert(child, &[int(i), Value::Int2(n), text("x")]).unwrap();
        }
    }
    let idx = t
        .create_index(&IndexDef {
            name: "parent_name".into(),
            table: "parent".into(),
            columns: vec!["name".into()],
            unique: true,
            include: Vec::new(),
            options: Default::default(),
        })
        .unwrap();
    t.commit().unwrap();

    let mut t = db.begin().unwrap();
    let e = t.insert(parent, &[int(1000), text("n005"), Value::Int8(0)]).unwrap_err();
    assert_eq!(e.sqlstate(), "23505");
    assert_eq!(e.constraint(), Some("parent_name"));
    drop(t);

    let mut t = db.begin().unwrap();
    // Renaming a key away frees it for another row in the same transaction.
    t.update(parent, &[int(5)], &[(1, text("renamed"))]).unwrap();
    t.insert(parent, &[int(1000), text("n005"), Value::Int8(0)]).unwrap();
    let mut names = Vec::new();
    t.scan(idx, Bound::Included(&[text("n004")][..]), Bound::Included(&[text("n006")][..]), |r| {
        names.push((r.get_i64(0).unwrap(), r.get_str(1).unwrap().to_owned()));
        Ok(true)
    })
    .unwrap();
    assert_eq!(names, vec![(4, "n004".into()), (1000, "n005".into()), (6, "n006".into())]);
    let pk_index = t.catalog().table_by_name("child").unwrap().primary_index;
    let mut ns = Vec::new();
    t.scan_prefix(pk_index, &[int(3)], |r| {
        ns.push(r.get_i64(1).unwrap());
        Ok(true)
    })
    .unwrap();
    assert_eq!(ns, vec![0, 1, 2, 3, 4]);
    let mut count = 0;
    t.scan_table(parent, |_| {
        count += 1;
        Ok(true)
    })
    .unwrap();
    assert_eq!(count, 101);
    t.commit().unwrap();
}

#[test]
fn ddl_is_transactional_and_recovered() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open(dir.path());
        let (parent, _) = create_parent_child(&db);
        let mut t = db.begin().unwrap();
        t.insert(parent, &[int(1), text("a"), Value::Int8(0)]).unwrap();
        t.create_index(&IndexDef {
            name: "pn".into(),
            table: "parent".into(),
            columns: vec!["name".into()],
            unique: false,
            include: Vec::new(),
            options: Default::default(),
        })
        .unwrap();
        t.rollback();
        assert!(db.catalog().index_by_name("pn").is_none());
        let mut t = db.begin().unwrap();
        // The next transaction on this thread must not see the rolled-back
        // DDL either (finished transactions pass buffers to the next one).
        assert!(t.catalog().index_by_name("pn").is_none(), "rolled-back index visible to the next transaction");
        let e = t.drop_table("parent").unwrap_err();
        assert_eq!(e.sqlstate(), "2BP01");
        drop(t);
        let mut t = db.begin().unwrap();
        t.drop_table("child").unwrap();
        t.insert(parent, &[int(2), text("b"), Value::Int8(0)]).unwrap();
        t.create_index(&IndexDef {
            name: "pn".into(),
            table: "parent".into(),
            columns: vec!["name".into()],
            unique: true,
            include: Vec::new(),
            options: Default::default(),
        })
        .unwrap();
        t.commit().unwrap();
        db.checkpoint().unwrap();
        let mut t = db.begin().unwrap();
        t.insert(parent, &[int(3), text("c"), Value::Int8(0)]).unwrap();
        t.commit().unwrap();
        db.close().unwrap();
    }
    let db = open(dir.path());
    let cat = db.catalog();
    assert!(cat.table_by_name("child").is_none());
    let pn = cat.index_by_name("pn").unwrap().id;
    let mut t = db.begin().unwrap();
    let mut seen = Vec::new();
    t.scan(pn, Bound::Unbounded, Bound::Unbounded, |r| {
        seen.push(r.get_str(1).unwrap().to_owned());
        Ok(true)
    })
    .unwrap();
    assert_eq!(seen, vec!["b", "c"]);
    let parent = cat.table_by_name("parent").unwrap().id;
    assert_eq!(t.insert(parent, &[int(9), text("c"), Value::Int8(0)]).unwrap_err().sqlstate(), "23505");
}

/// INCLUDE columns, key options and a predicate come back from the WAL (an
/// index created after the checkpoint) and from a checkpoint alike.
#[test]
fn index_options_are_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let options = IndexOptions {
        keys: vec![IndexKeyOptions { descending: true, nulls_first: false, opclass: Some("text_pattern_ops".into()) }],
        predicate: Some("(id > 0)".into()),
    };
    let def = |name: &str| IndexDef {
        name: name.into(),
        table: "parent".into(),
        columns: vec!["name".into()],
        unique: false,
        include: vec!["id".into()],
        options: options.clone(),
    };
    {
        let db = open(dir.path());
        create_parent_child(&db);
        let mut t = db.begin().unwrap();
        t.create_index(&def("in_checkpoint")).unwrap();
        t.commit().unwrap();
        db.checkpoint().unwrap();
        let mut t = db.begin().unwrap();
        t.create_index(&def("in_wal")).unwrap();
        t.commit().unwrap();
        db.close().unwrap();
    }
    let db = open(dir.path());
    let cat = db.catalog();
    for name in ["in_checkpoint", "in_wal"] {
        let index = cat.index_by_name(name).unwrap();
        assert_eq!((index.include.as_slice(), &index.options), (&[0][..], &options), "{name}");
    }
}

#[test]
fn restarts_do_not_pile_up_checkpoint_files() {
    let dir = tempfile::tempdir().unwrap();
    let checkpoint_files = || {
        std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".ckpt"))
            .count()
    };
    for round in 0..5 {
        let db = open(dir.path());
        if round == 0 {
            create_parent_child(&db);
        }
        let parent = db.catalog().table_by_name("parent").unwrap().id;
        for id in [round * 2, round * 2 + 1] {
            let mut t = db.begin().unwrap();
            t.insert(parent, &[int(id), text("r"), Value::Int8(0)]).unwrap();
            t.commit().unwrap();
            db.checkpoint().unwrap();
        }
        assert_eq!(checkpoint_files(), 2, "round {round}: the newest two are kept");
        // A checkpoint with nothing new rewrites the newest file; the older
        // one must stay as the fallback.
        db.checkpoint().unwrap();
        db.close().unwrap();
        assert_eq!(checkpoint_files(), 2, "round {round}: after a checkpoint with nothing new");
    }
    let db = open(dir.path());
    let parent = db.catalog().table_by_name("parent").unwrap().id;
    let mut t = db.begin().unwrap();
    let mut row = RowBuf::new();
    for id in 0..10 {
        assert!(t.get(parent, &[int(id)], &mut row).unwrap(), "row {id} lost");
    }
}

#[test]
fn commit_stream_delivers_in_order_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let next;
    {
        let db = open(dir.path());
        db.register_consumer("awt", StreamStart::Now).unwrap();
        let (parent, _) = create_parent_child(&db);
        for i in 0..5 {
            let mut t = db.begin().unwrap();
            t.insert(parent, &[int(i), text("x"), Value::Int8(0)]).unwrap();
            if i > 0 {
                t.update(parent, &[int(i - 1)], &[(2, Value::Int8(7))]).unwrap();
            }
            t.commit().unwrap();
        }
        let mut t = db.begin().unwrap();
        t.delete(parent, &[int(0)]).unwrap();
        t.commit().unwrap();
        let mut s = db.stream("awt").unwrap();
        let ddl = s.next(Duration::from_secs(1)).unwrap().unwrap();
        assert!(matches!(ddl.changes[0], Change::CreateTable { .. }));
        let first = s.next(Duration::from_secs(1)).unwrap().unwrap();
        assert_eq!(first.changes.len(), 1);
        let Change::Row(rc) = &first.changes[0] else { panic!() };
        assert_eq!((rc.op, rc.key_values()), (RowOp::Insert, vec![int(0)]));
        s.ack(first.next_lsn).unwrap();
        next = first.commit_ts;
        db.close().unwrap();
    }
    let db = open(dir.path());
    let mut s = db.stream("awt").unwrap();
    let mut ts = vec![];
    let mut ops = vec![];
    while let Some(txn) = s.next(Duration::from_millis(50)).unwrap() {
        ts.push(txn.commit_ts);
        for c in txn.changes {
            if let Change::Row(rc) = c {
                ops.push((rc.op, rc.key_values()[0].clone()));
            }
        }
    }
    assert_eq!(ts.len(), 5);
    assert!(ts.windows(2).all(|w| w[0] < w[1]) && ts[0] > next);
    assert_eq!(ops.last(), Some(&(RowOp::Delete, int(0))));
    assert_eq!(ops[..2], [(RowOp::Insert, int(1)), (RowOp::Update, int(0))]);
    // New commits after reopening arrive while waiting.
    let cat = db.catalog();
    let parent = cat.table_by_name("parent").unwrap().id;
    let db2 = db.clone();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        let mut t = db2.begin().unwrap();
        t.insert(parent, &[int(100), text("late"), Value::Int8(0)]).unwrap();
        t.commit().unwrap();
    });
    let late = s.next(Duration::from_secs(5)).unwrap().unwrap();
    h.join().unwrap();
    assert_eq!(late.changes.len(), 1);
}

#[test]
fn errors_have_sqlstates() {
    let e = EngineError::TransactionAborted;
    assert_eq!(e.sqlstate(), "25P02");
}

#[test]
fn foreign_keys_under_concurrency() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, child) = create_parent_child(&db);
    let mut t = db.begin().unwrap();
    t.insert(parent, &[int(1), text("a"), Value::Int8(0)]).unwrap();
    t.insert(parent, &[int(2), text("b"), Value::Int8(0)]).unwrap();
    t.commit().unwrap();

    // An uncommitted child blocks the parent's delete; once it commits the delete fails.
    let mut c = db.begin().unwrap();
    c.insert(child, &[int(1), Value::Int2(1), text("x")]).unwrap();
    let db2 = db.clone();
    let h = std::thread::spawn(move || {
        let mut p = db2.begin().unwrap();
        let started = std::time::Instant::now();
        let r = p.delete(parent, &[int(1)]).map_err(|e| e.sqlstate());
        (r, started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(50));
    c.commit().unwrap();
    let (r, waited) = h.join().unwrap();
    assert_eq!(r, Err("23503"));
    assert!(waited >= Duration::from_millis(40), "the delete waited for the child's transaction");

    // An uncommitted parent delete blocks a child insert; rollback lets it through.
    let mut p = db.begin().unwrap();
    assert!(p.delete(parent, &[int(2)]).unwrap());
    let db2 = db.clone();
    let h = std::thread::spawn(move || {
        let mut c = db2.begin().unwrap();
        let r = c.insert(child, &[int(2), Value::Int2(1), text("y")]).map_err(|e| e.sqlstate());
        (r, c.commit().map(|i| i.rolled_back))
    });
    std::thread::sleep(Duration::from_millis(50));
    p.rollback();
    let (r, committed) = h.join().unwrap();
    assert_eq!(r, Ok(()));
    assert!(!committed.unwrap());

    // ... and a committed delete makes it fail.
    let mut t = db.begin().unwrap();
    t.insert(parent, &[int(3), text("c"), Value::Int8(0)]).unwrap();
    t.commit().unwrap();
    let mut p = db.begin().unwrap();
    assert!(p.delete(parent, &[int(3)]).unwrap());
    let db2 = db.clone();
    let h = std::thread::spawn(move || {
        let mut c = db2.begin().unwrap();
        c.insert(child, &[int(3), Value::Int2(1), text("z")]).map_err(|e| e.sqlstate())
    });
    std::thread::sleep(Duration::from_millis(50));
    p.commit().unwrap();
    assert_eq!(h.join().unwrap(), Err("23503"));
    db.verify().unwrap();
}

#[test]
fn unique_waits_for_uncommitted_inserter() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, _) = create_parent_child(&db);
    let mut a = db.begin().unwrap();
    a.insert(parent, &[int(1), text("a"), Value::Int8(0)]).unwrap();
    let db2 = db.clone();
    let h = std::thread::spawn(move || {
        let mut b = db2.begin().unwrap();
        b.insert(parent, &[int(1), text("b"), Value::Int8(0)]).map_err(|e| e.sqlstate())
    });
    std::thread::sleep(Duration::from_millis(50));
    a.commit().unwrap();
    assert_eq!(h.join().unwrap(), Err("23505"), "waits for the inserter, then sees the duplicate");
    let mut a = db.begin().unwrap();
    a.insert(parent, &[int(2), text("a"), Value::Int8(0)]).unwrap();
    let db2 = db.clone();
    let h = std::thread::spawn(move || {
        let mut b = db2.begin().unwrap();
        b.insert(parent, &[int(2), text("b"), Value::Int8(0)]).map_err(|e| e.sqlstate())
    });
    std::thread::sleep(Duration::from_millis(50));
    a.rollback();
    assert_eq!(h.join().unwrap(), Ok(()), "the inserter rolled back: no conflict");
}

/// A table declared without a primary key gets a hidden row id (the last
/// column, `ctid`): inserts leave it NULL and the engine numbers the rows;
/// after a reopen, new ids continue past every recovered one.
#[test]
fn tables_without_primary_key_get_a_hidden_row_id() {
    use pgtier_engine::{ColumnDef, DataType, TableDef};
    let dir = tempfile::tempdir().unwrap();
    let rows_of = |db: &pgtier_engine::Database, table| {
        let mut t = db.begin().unwrap();
        let mut rows: Vec<(i64, i64)> = Vec::new();
        t.scan_table(table, |r| {
            rows.push((r.get_i64(0).unwrap(), r.get_i64(1).unwrap()));
            Ok(true)
        })
        .unwrap();
        t.commit().unwrap();
        rows.sort_unstable();
        rows
    };
    let table = {
        let db = open(dir.path());
        let mut t = db.begin().unwrap();
        let def = TableDef::new("history", vec![ColumnDef::new("delta", DataType::Int8)], &[]);
        let table = t.create_table(&def).unwrap();
        t.commit().unwrap();
        let schema = db.catalog().table(table).cloned().unwrap();
        assert!(schema.has_rowid());
        assert_eq!(schema.visible_columns().len(), 1);
        assert_eq!(schema.columns.len(), 2);
        let mut t = db.begin().unwrap();
        for delta in [5, 5, 7] {
            // Duplicate user values are fine: the row id is the key.
            t.insert(table, &[Value::Int8(delta), Value::Null]).unwrap();
        }
        t.commit().unwrap();
        assert_eq!(rows_of(&db, table), vec![(5, 1), (5, 2), (7, 3)]);
        let mut t = db.begin().unwrap();
        assert!(t.delete(table, &[Value::Int8(3)]).unwrap());
        t.commit().unwrap();
        table
    };
    for round in 0..2 {
        let db = open(dir.path());
        let mut t = db.begin().unwrap();
        t.insert(table, &[Value::Int8(100 + round), Value::Null]).unwrap();
        t.commit().unwrap();
        let rows = rows_of(&db, table);
        let new_id = rows.iter().find(|r| r.0 == 100 + round).unwrap().1;
        assert!(
            rows.iter().filter(|r| r.0 != 100 + round).all(|r| r.1 < new_id),
            "new ids continue past recovered ones: {rows:?}"
        );
        let mut ids: Vec<i64> = rows.iter().map(|r| r.1).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), rows.len(), "row ids stay unique after reopen {round}: {rows:?}");
        assert_eq!(rows.len(), 3 + round as usize);
    }
    let db = open(dir.path());
    let mut t = db.begin().unwrap();
    let e = t.create_table(&TableDef::new("bad", vec![ColumnDef::new("xmin", DataType::Int8)], &[])).unwrap_err();
    assert_eq!(e.sqlstate(), "42701");
    t.rollback();
    let mut t = db.begin().unwrap();
    let mut child = TableDef::new("child_of_history", vec![ColumnDef::new("h", DataType::Int8)], &[]);
    child.foreign_keys.push(pgtier_engine::ForeignKeyDef {
        name: None,
        columns: vec!["h".into()],
        parent_table: "history".into(),
        parent_columns: vec![],
        on_delete: Default::default(),
        timing: Default::default(),
    });
    assert_eq!(t.create_table(&child).unwrap_err().sqlstate(), "42704");
}

/// A NOT NULL violation's DETAIL is PostgreSQL's: the whole new row.
#[test]
fn not_null_violation_shows_the_failing_row() {
    use pgtier_engine::{ColumnDef, DataType, TableDef};
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut t = db.begin().unwrap();
    let cols = vec![
        ColumnDef::new("id", DataType::Int4),
        ColumnDef::new("name", DataType::Text).not_null(),
        ColumnDef::new("v", DataType::Int8),
    ];
    let table = t.create_table(&TableDef::new("nn", cols, &["id"])).unwrap();
    t.insert(table, &[int(1), text("a"), Value::Null]).unwrap();
    t.commit().unwrap();
    let mut t = db.begin().unwrap();
    let e = t.insert(table, &[int(6), Value::Null, Value::Int8(7)]).unwrap_err();
    assert_eq!(e.sqlstate(), "23502");
    assert_eq!(e.detail(), Some("Failing row contains (6, null, 7)."));
    t.rollback();
    let mut t = db.begin().unwrap();
    let e = t.update(table, &[int(1)], &[(1, Value::Null)]).unwrap_err();
    assert_eq!(e.detail(), Some("Failing row contains (1, null, null)."));
    t.rollback();
}

/// A directory is open in one engine at a time: a second open (another
/// server on the same directory) is refused with F0001 and changes
/// nothing; once every handle of the first is gone, it opens again with
/// what the first committed.
#[test]
fn a_directory_open_elsewhere_is_refused_until_closed() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    create_parent_child(&db);
    let second = db.clone();
    let refused = pgtier_engine::Database::open(dir.path(), common::config()).err().expect("a second open");
    assert_eq!(refused.sqlstate(), "F0001", "{refused}");
    assert!(refused.to_string().contains("in use"), "{refused}");
    drop(db);
    // A clone still holds it.
    assert!(pgtier_engine::Database::open(dir.path(), common::config()).is_err());
    drop(second);
    let reopened = open(dir.path());
    assert!(reopened.catalog().table_by_name("parent").is_some());
}
