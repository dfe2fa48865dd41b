//! Model-based property tests: the row store and its indexes against a
//! `BTreeMap`, sequentially (every operation compared) and concurrently
//! (committed transactions replayed serially in commit order must give the
//! final state; index entries must equal rows after vacuum). Rows move to
//! a cold store (cold.rs) and back as they go: demotions, GC, checkpoints
//! and a restart interleave with the operations, and the model, which
//! knows nothing of them, must not notice.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;
use std::sync::{Arc, Barrier, Mutex};

use pgtier_engine::{ColumnDef, CommitMode, DataType, Database, IndexDef, RowBuf, TableDef, TableId, Value};
use proptest::prelude::*;

/// t(k int PK, tag varchar(8) UNIQUE NULL, grp smallint (indexed), v bigint)
fn create(db: &Database) -> (TableId, pgtier_engine::IndexId, pgtier_engine::IndexId) {
    let mut t = db.begin().unwrap();
    let mut def = TableDef::new(
        "t",
        vec![
            ColumnDef::new("k", DataType::Int4),
            ColumnDef::new("tag", DataType::Varchar(8)),
            ColumnDef::new("grp", DataType::Int2),
            ColumnDef::new("v", DataType::Int8).not_null(),
        ],
        &["k"],
    );
    def.unique.push((Some("t_tag_key".into()), vec!["tag".into()]));
    let id = t.create_table(&def).unwrap();
    let grp = t
        .create_index(&IndexDef {
            name: "t_grp".into(),
            table: "t".into(),
            columns: vec!["grp".into()],
            unique: false,
            include: Vec::new(),
            options: Default::default(),
        })
        .unwrap();
    t.commit().unwrap();
    let tag = db.catalog().index_by_name("t_tag_key").unwrap().id;
    (id, tag, grp)
}

#[derive(Clone, Debug, PartialEq)]
struct Row {
    tag: Option<String>,
    grp: i16,
    v: i64,
}

fn values(k: i32, r: &Row) -> Vec<Value> {
    vec![Value::Int4(k), r.tag.clone().map_or(Value::Null, Value::Text), Value::Int2(r.grp), Value::Int8(r.v)]
}

#[derive(Clone, Debug)]
enum Op {
    Insert(i32, Option<u8>, i16, i64),
    Update(i32, Option<u8>, i64),
    Delete(i32),
    Get(i32),
    ScanGrp(i16, i16),
    ScanTag,
    /// Equality on the whole unique key (the index's hash probe).
    FindTag(Option<u8>),
    Commit,
    Rollback,
    /// Keys lo..hi to the cold store (from outside the open transaction).
    Demote(i32, i32),
    Vacuum,
    Checkpoint,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..40i32, proptest::option::of(0..12u8), 0..5i16, any::<i64>()).prop_map(|(k, t, g, v)| Op::Insert(k, t, g, v)),
        3 => (0..40i32, proptest::option::of(0..12u8), any::<i64>()).prop_map(|(k, t, v)| Op::Update(k, t, v)),
        2 => (0..40i32).prop_map(Op::Delete),
        2 => (0..40i32).prop_map(Op::Get),
        1 => (0..5i16, 0..5i16).prop_map(|(a, b)| Op::ScanGrp(a.min(b), a.max(b))),
        1 => Just(Op::ScanTag),
        2 => proptest::option::of(0..12u8).prop_map(Op::FindTag),
        1 => Just(Op::Commit),
        1 => Just(Op::Rollback),
        2 => (0..40i32, 1..12i32).prop_map(|(lo, n)| Op::Demote(lo, lo + n)),
        1 => Just(Op::Vacuum),
        1 => Just(Op::Checkpoint),
    ]
}

fn tag_name(t: Option<u8>) -> Option<String> {
    t.map(|t| format!("tag{t}"))
}

/// Would `row` for key `k` collide with another row's tag in `state`?
fn tag_taken(state: &BTreeMap<i32, Row>, k: i32, tag: &Option<String>) -> bool {
    tag.is_some() && state.iter().any(|(ok, r)| *ok != k && r.tag == *tag)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn sequential_against_btreemap(ops in proptest::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let db = common::open(dir.path());
        let (table, tag_idx, grp_idx) = create(&db);
        let cold = Arc::new(common::MemCold::default());
        db.set_cold_rows(table, Some(cold.clone()));
        let mut committed: BTreeMap<i32, Row> = BTreeMap::new();
        let mut work = committed.clone();
        let mut txn = db.begin().unwrap();
        let mut buf = RowBuf::new();
        for op in ops {
            match op {
                Op::Insert(k, t, g, v) => {
                    let row = Row { tag: tag_name(t), grp: g, v };
                    let r = txn.insert(table, &values(k, &row));
                    if work.contains_key(&k) || tag_taken(&work, k, &row.tag) {
                        prop_assert_eq!(r.unwrap_err().sqlstate(), "23505");
                        txn.rollback();
                        work = committed.clone();
                        txn = db.begin().unwrap();
                    } else {
                        r.unwrap();
                        work.insert(k, row);
                    }
                }
                Op::Update(k, t, v) => {
                    let tag = tag_name(t);
                    let changes = vec![(1, tag.clone().map_or(Value::Null, Value::Text)), (3, Value::Int8(v))];
                    let r = txn.update(table, &[Value::Int4(k)], &changes);
                    match work.get(&k) {
                        None => prop_assert!(!r.unwrap()),
                        Some(_) if tag_taken(&work, k, &tag) => {
                            prop_assert_eq!(r.unwrap_err().sqlstate(), "23505");
                            txn.rollback();
                            work = committed.clone();
                            txn = db.begin().unwrap();
                        }
                        Some(old) => {
                            prop_assert!(r.unwrap());
                            let grp = old.grp;
                            work.insert(k, Row { tag, grp, v });
                        }
                    }
                }
                Op::Delete(k) => {
                    prop_assert_eq!(txn.delete(table, &[Value::Int4(k)]).unwrap(), work.remove(&k).is_some());
                }
                Op::Get(k) => {
                    let found = txn.get(table, &[Value::Int4(k)], &mut buf).unwrap();
                    match work.get(&k) {
                        None => prop_assert!(!found),
                        Some(r) => {
                            prop_assert!(found);
                            prop_assert_eq!(buf.values(), values(k, r));
                        }
                    }
                }
                Op::ScanGrp(lo, hi) => {
                    let mut got = Vec::new();
                    txn.scan(grp_idx, Bound::Included(&[Value::Int2(lo)][..]), Bound::Included(&[Value::Int2(hi)][..]), |r| {
                        got.push((r.get_i64(2).unwrap() as i16, r.get_i64(0).unwrap() as i32));
                        Ok(true)
                    }).unwrap();
                    let mut expect: Vec<(i16, i32)> = work.iter().filter(|(_, r)| r.grp >= lo && r.grp <= hi).map(|(k, r)| (r.grp, *k)).collect();
                    expect.sort();
                    prop_assert_eq!(got, expect);
                }
                Op::ScanTag => {
                    let mut got = Vec::new();
                    txn.scan(tag_idx, Bound::Unbounded, Bound::Unbounded, |r| {
                        got.push((r.get_str(1).map(str::to_owned), r.get_i64(0).unwrap() as i32));
                        Ok(true)
                    }).unwrap();
                    // NULLS LAST, then by primary key.
                    let mut expect: Vec<(Option<String>, i32)> = work.iter().map(|(k, r)| (r.tag.clone(), *k)).collect();
                    expect.sort_by(|a, b| (a.0.is_none(), &a.0, a.1).cmp(&(b.0.is_none(), &b.0, b.1)));
                    prop_assert_eq!(got, expect);
                }
                Op::FindTag(t) => {
                    let tag = tag_name(t);
                    let key = [tag.clone().map_or(Value::Null, Value::Text)];
                    let mut got = Vec::new();
                    txn.scan_prefix(tag_idx, &key, |r| {
                        got.push(r.get_i64(0).unwrap() as i32);
                        Ok(true)
                    }).unwrap();
                    let expect: Vec<i32> = work.iter().filter(|(_, r)| r.tag == tag).map(|(k, _)| *k).collect();
                    prop_assert_eq!(got, expect);
                }
                Op::Commit => {
                    txn.commit().unwrap();
                    committed = work.clone();
                    txn = db.begin().unwrap();
                }
                Op::Rollback => {
                    txn.rollback();
                    work = committed.clone();
                    txn = db.begin().unwrap();
                }
                Op::Demote(lo, hi) => {
                    let keys: Vec<Vec<Value>> = (lo..hi).map(|k| vec![Value::Int4(k)]).collect();
                    db.demote_rows(table, &keys).unwrap();
                }
                Op::Vacuum => db.vacuum(),
                Op::Checkpoint => {
                    db.checkpoint().unwrap();
                }
            }
        }
        txn.commit().unwrap();
        committed = work;
        check_final(&db, table, &committed)?;
        prop_assert_eq!(common::MemCold::count(&cold.bad_releases), 0);
        db.close().unwrap();
        // Recovery (the last checkpoint's stubs, then the WAL over them)
        // must give the same contents and indexes.
        let db = common::open(dir.path());
        db.set_cold_rows(table, Some(cold.clone()));
        check_final(&db, table, &committed)?;
    }
}

fn check_final(db: &Database, table: TableId, model: &BTreeMap<i32, Row>) -> Result<(), TestCaseError> {
    db.vacuum();
    let report = db.verify().unwrap();
    let check = report.iter().find(|r| r.table == "t").unwrap();
    prop_assert_eq!(check.rows as usize, model.len());
    for e in &check.index_entries {
        prop_assert_eq!(*e, model.len(), "index entries == rows after vacuum");
    }
    let mut t = db.begin().unwrap();
    let mut all = BTreeMap::new();
    t.scan_table(table, |r| {
        let tag = r.get_str(1).map(str::to_owned);
        all.insert(
            r.get_i64(0).unwrap() as i32,
            Row { tag, grp: r.get_i64(2).unwrap() as i16, v: r.get_i64(3).unwrap() },
        );
        Ok(true)
    })
    .unwrap();
    prop_assert_eq!(&all, model);
    Ok(())
}

/// What a committed transaction did, for the serial replay.
#[derive(Clone, Debug)]
enum Done {
    Insert(i32, Option<String>, i64),
    Add(i32, i64),
    Retag(i32, Option<String>),
    Delete(i32),
}

/// (commit ts, what the transaction did)
type CommitLog = (u64, Vec<Done>);

#[derive(Clone, Debug)]
enum COp {
    Insert(i32, Option<u8>),
    Add(i32, i64),
    Retag(i32, Option<u8>),
    Delete(i32),
}

fn cop() -> impl Strategy<Value = COp> {
    prop_oneof![
        2 => (0..24i32, proptest::option::of(0..10u8)).prop_map(|(k, t)| COp::Insert(k, t)),
        5 => (0..24i32, -5..5i64).prop_map(|(k, d)| COp::Add(k, d)),
        1 => (0..24i32, proptest::option::of(0..10u8)).prop_map(|(k, t)| COp::Retag(k, t)),
        1 => (0..24i32).prop_map(COp::Delete),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn concurrent_commit_order_replay(scripts in proptest::collection::vec(
        proptest::collection::vec((proptest::collection::vec(cop(), 1..5), any::<bool>()), 20..60), 4)) {
        let dir = tempfile::tempdir().unwrap();
        let db = common::open(dir.path());
        let (table, _, _) = create(&db);
        let cold = Arc::new(common::MemCold::default());
        db.set_cold_rows(table, Some(cold.clone()));
        let log: Arc<Mutex<Vec<CommitLog>>> = Arc::new(Mutex::new(Vec::new()));
        let barrier = Arc::new(Barrier::new(scripts.len()));
        // Beside the writers, rows keep moving to the cold store.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let demoter = {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut shard = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let (_, next) = db.demote_idle(table, u32::MAX, 16, shard).unwrap();
                    shard = next;
                    std::thread::yield_now();
                }
            })
        };
        let handles: Vec<_> = scripts.into_iter().enumerate().map(|(n, script)| {
            let (db, log, barrier) = (db.clone(), log.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                for (ops, commit) in script {
                    let mode = if n % 2 == 0 { CommitMode::Async } else { CommitMode::Sync };
                    let mut t = db.begin_with(mode).unwrap();
                    let mut done = Vec::new();
                    let mut ok = true;
                    for op in ops {
                        let r = match op {
                            COp::Insert(k, tag) => {
                                let tag = tag_name(tag);
                                let row = Row { tag: tag.clone(), grp: (k % 5) as i16, v: 0 };
                                t.insert(table, &values(k, &row)).map(|()| done.push(Done::Insert(k, tag, 0)))
                            }
                            COp::Add(k, d) => t
                                .update_with(table, &[Value::Int4(k)], |r| Ok(Some(vec![(3, Value::Int8(r.get_i64(3).unwrap() + d))])))
                                .map(|hit| if hit { done.push(Done::Add(k, d)) }),
                            COp::Retag(k, tag) => {
                                let tag = tag_name(tag);
                                t.update(table, &[Value::Int4(k)], &[(1, tag.clone().map_or(Value::Null, Value::Text))])
                                    .map(|hit| if hit { done.push(Done::Retag(k, tag)) })
                            }
                            COp::Delete(k) => t.delete(table, &[Value::Int4(k)]).map(|hit| if hit { done.push(Done::Delete(k)) }),
                        };
                        if let Err(e) = r {
                            assert!(matches!(e.sqlstate(), "23505" | "40P01"), "{e}");
                            ok = false;
                            break;
                        }
                    }
                    if ok && commit {
                        let info = t.commit().unwrap();
                        if let Some(ts) = info.commit_ts {
                            log.lock().unwrap().push((ts.get(), done));
                        }
                    } else {
                        t.rollback();
                    }
                }
            })
        }).collect();
        for h in handles {
            h.join().unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        demoter.join().unwrap();
        let mut log = std::mem::take(&mut *log.lock().unwrap());
        log.sort_by_key(|(ts, _)| *ts);
        // Serial replay in commit order: each op must be legal at its point
        // (insert of an absent key, update/delete of a present one, unique
        // tags), and the end state must equal the database.
        let mut model: BTreeMap<i32, Row> = BTreeMap::new();
        for (ts, done) in &log {
            for d in done {
                match d {
                    Done::Insert(k, tag, v) => {
                        prop_assert!(!model.contains_key(k), "ts {}: insert of present key {}", ts, k);
                        prop_assert!(!tag_taken(&model, *k, tag), "ts {}: duplicate tag", ts);
                        model.insert(*k, Row { tag: tag.clone(), grp: (*k % 5) as i16, v: *v });
                    }
                    Done::Add(k, dv) => {
                        let Some(r) = model.get_mut(k) else { return Err(TestCaseError::fail(format!("ts {ts}: update of absent key {k}"))) };
                        r.v += dv;
                    }
                    Done::Retag(k, tag) => {
                        prop_assert!(!tag_taken(&model, *k, tag), "ts {}: duplicate tag on retag", ts);
                        let Some(r) = model.get_mut(k) else { return Err(TestCaseError::fail(format!("ts {ts}: retag of absent key {k}"))) };
                        r.tag = tag.clone();
                    }
                    Done::Delete(k) => {
                        prop_assert!(model.remove(k).is_some(), "ts {}: delete of absent key {}", ts, k);
                    }
                }
            }
        }
        let tags: HashSet<&String> = model.values().filter_map(|r| r.tag.as_ref()).collect();
        prop_assert_eq!(tags.len(), model.values().filter(|r| r.tag.is_some()).count());
        check_final(&db, table, &model)?;
        prop_assert_eq!(common::MemCold::count(&cold.bad_releases), 0);
    }
}
