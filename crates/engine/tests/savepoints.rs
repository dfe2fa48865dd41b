//! Savepoints: version and index undo by ROLLBACK TO, RELEASE, the aborted
//! state, locks, refusals, and what commit logs (checked after a reopen).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{create_parent_child, int, open, text};
use pgtier_engine::{CommitMode, Database, IndexDef, Origin, RowBuf, TableId, Transaction, Value};

/// A table's rows visible to `t`, by their first (int) column.
fn rows(t: &mut Transaction, table: TableId) -> Vec<Vec<Value>> {
    let mut out = Vec::new();
    t.scan_table(table, |r| {
        out.push(r.values());
        Ok(true)
    })
    .unwrap();
    out.sort_by_key(|r| (if let Some(Value::Int4(i)) = r.first() { *i } else { 0 }, format!("{r:?}")));
    out
}

fn p(id: i32, name: &str, v: i64) -> Vec<Value> {
    vec![int(id), text(name), Value::Int8(v)]
}

/// A database with parent and child (common.rs), `parent.name` UNIQUE
/// when `unique_name`, and `rows` committed into parent.
fn setup(unique_name: bool, rows: &[Vec<Value>]) -> (tempfile::TempDir, Database, TableId, TableId) {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, child) = create_parent_child(&db);
    let mut t = db.begin().unwrap();
    if unique_name {
        t.create_index(&IndexDef {
            name: "parent_name".into(),
            table: "parent".into(),
            columns: vec!["name".into()],
            unique: true,
            include: Vec::new(),
            options: Default::default(),
        })
        .unwrap();
    }
    for r in rows {
        t.insert(parent, r).unwrap();
    }
    t.commit().unwrap();
    (dir, db, parent, child)
}

#[test]
fn rollback_to_undoes_changes_before_and_after_the_mark() {
    let (dir, db, parent, _) = setup(true, &[p(1, "a", 1), p(2, "b", 2)]);

    let mut t = db.begin().unwrap();
    // Changed before the mark (committed row 1, new row 3), then after it.
    t.update(parent, &[int(1)], &[(2, Value::Int8(10))]).unwrap();
    t.insert(parent, &p(3, "c", 3)).unwrap();
    let sp = t.savepoint().unwrap();
    assert_eq!(sp, 0);
    for v in 11..14 {
        t.update(parent, &[int(1)], &[(2, Value::Int8(v))]).unwrap();
    }
    t.update(parent, &[int(3)], &[(1, text("c-longer-name"))]).unwrap();
    t.delete(parent, &[int(2)]).unwrap();
    t.insert(parent, &p(4, "d", 4)).unwrap();
    t.delete(parent, &[int(3)]).unwrap();
    t.insert(parent, &p(3, "c3", 33)).unwrap();
    assert_eq!(rows(&mut t, parent), vec![p(1, "a", 13), p(3, "c3", 33), p(4, "d", 4)]);
    t.rollback_to_savepoint(sp).unwrap();
    let before = vec![p(1, "a", 10), p(2, "b", 2), p(3, "c", 3)];
    assert_eq!(rows(&mut t, parent), before);
    // The savepoint stays: change again, roll back again.
    t.update(parent, &[int(3)], &[(2, Value::Int8(30))]).unwrap();
    t.insert(parent, &p(5, "e", 5)).unwrap();
    t.rollback_to_savepoint(sp).unwrap();
    assert_eq!(rows(&mut t, parent), before);
    // Unique keys of the undone versions are free, those of the restored ones taken.
    t.insert(parent, &p(6, "d", 6)).unwrap();
    assert_eq!(t.savepoint().unwrap(), 1);
    let e = t.insert(parent, &p(7, "c", 7)).unwrap_err();
    assert_eq!(e.sqlstate(), "23505");
    t.rollback_to_savepoint(1).unwrap();
    t.update(parent, &[int(1)], &[(2, Value::Int8(100))]).unwrap();
    t.commit().unwrap();
    let expected = vec![p(1, "a", 100), p(2, "b", 2), p(3, "c", 3), p(6, "d", 6)];
    let mut t = db.begin().unwrap();
    assert_eq!(rows(&mut t, parent), expected);
    t.commit().unwrap();
    db.vacuum();
    db.verify().unwrap();
    drop(db);

    // Commit logged only what survived.
    let db = open(dir.path());
    db.verify().unwrap();
    let mut t = db.begin().unwrap();
    assert_eq!(rows(&mut t, parent), expected);
    let mut row = RowBuf::new();
    assert!(!t.get(parent, &[int(4)], &mut row).unwrap());
    t.commit().unwrap();
}

#[test]
fn unique_key_moves_within_a_savepoint() {
    let (_dir, db, parent, _) = setup(true, &[]);
    let mut t = db.begin().unwrap();
    t.insert(parent, &p(1, "a", 1)).unwrap();
    t.savepoint().unwrap();
    // Row 1 gives up "a", row 2 takes it, both after the mark.
    t.update(parent, &[int(1)], &[(1, text("z"))]).unwrap();
    t.insert(parent, &p(2, "a", 2)).unwrap();

    // Another transaction's probe sees the stacked-over version of row 1 ("a")
    // and row 2: a load (which never waits) fails with 55P03 on either key.
    let mut other = db.begin_with_origin(CommitMode::Sync, Origin::Load).unwrap();
    assert_eq!(other.insert(parent, &p(9, "a", 9)).unwrap_err().sqlstate(), "55P03");
    other.rollback();

    t.rollback_to_savepoint(0).unwrap();
    assert_eq!(rows(&mut t, parent), vec![p(1, "a", 1)]);
    assert_eq!(t.insert(parent, &p(3, "a", 3)).unwrap_err().sqlstate(), "23505");
    t.rollback_to_savepoint(0).unwrap();
    t.insert(parent, &p(3, "z", 3)).unwrap();
    t.commit().unwrap();
    db.verify().unwrap();
    let mut t = db.begin().unwrap();
    assert_eq!(rows(&mut t, parent), vec![p(1, "a", 1), p(3, "z", 3)]);
    t.commit().unwrap();
}

#[test]
fn nested_release_and_rollback() {
    let (_dir, db, parent, _) = setup(false, &[]);
    let mut t = db.begin().unwrap();
    t.insert(parent, &p(1, "a", 0)).unwrap();
    let s0 = t.savepoint().unwrap();
    t.update(parent, &[int(1)], &[(2, Value::Int8(1))]).unwrap();
    let s1 = t.savepoint().unwrap();
    t.update(parent, &[int(1)], &[(2, Value::Int8(2))]).unwrap();
    t.insert(parent, &p(2, "b", 0)).unwrap();
    let s2 = t.savepoint().unwrap();
    t.update(parent, &[int(1)], &[(2, Value::Int8(3))]).unwrap();
    assert_eq!(t.savepoint_depth(), 3);
    // RELEASE s1 forgets s2 too; the changes stay.
    t.release_savepoint(s1).unwrap();
    assert_eq!(t.savepoint_depth(), 1);
    assert_eq!(t.rollback_to_savepoint(s2).unwrap_err().sqlstate(), "3B001");
    t.update(parent, &[int(1)], &[(2, Value::Int8(4))]).unwrap();
    assert_eq!(rows(&mut t, parent), vec![p(1, "a", 4), p(2, "b", 0)]);
    t.rollback_to_savepoint(s0).unwrap();
    assert_eq!(rows(&mut t, parent), vec![p(1, "a", 0)]);
    // Release everything, write, then a new savepoint still stacks.
    t.update(parent, &[int(1)], &[(2, Value::Int8(5))]).unwrap();
    t.release_savepoint(s0).unwrap();
    t.update(parent, &[int(1)], &[(2, Value::Int8(6))]).unwrap();
    let s = t.savepoint().unwrap();
    t.delete(parent, &[int(1)]).unwrap();
    t.rollback_to_savepoint(s).unwrap();
    assert_eq!(rows(&mut t, parent), vec![p(1, "a", 6)]);
    t.commit().unwrap();
    db.vacuum();
    db.verify().unwrap();
}

#[test]
fn error_aborts_until_rollback_to() {
    let (_dir, db, parent, child) = setup(false, &[]);
    let mut t = db.begin().unwrap();
    t.insert(parent, &p(1, "a", 0)).unwrap();
    t.savepoint().unwrap();
    t.insert(child, &[int(1), Value::Int2(1), text("x")]).unwrap();
    assert_eq!(t.insert(parent, &p(1, "dup", 0)).unwrap_err().sqlstate(), "23505");
    assert_eq!(t.insert(parent, &p(2, "b", 0)).unwrap_err().sqlstate(), "25P02");
    assert_eq!(t.release_savepoint(0).unwrap_err().sqlstate(), "25P02");
    t.rollback_to_savepoint(0).unwrap();
    // The child went with the savepoint: the parent may go now.
    t.delete(parent, &[int(1)]).unwrap();
    t.insert(parent, &p(1, "again", 0)).unwrap();
    t.commit().unwrap();
    let mut t = db.begin().unwrap();
    assert_eq!(rows(&mut t, parent), vec![p(1, "again", 0)]);
    assert!(rows(&mut t, child).is_empty());
    t.commit().unwrap();

    // An error without a savepoint still undoes everything at once, and
    // an aborted transaction with savepoints commits as a rollback.
    let mut t = db.begin().unwrap();
    t.update(parent, &[int(1)], &[(2, Value::Int8(7))]).unwrap();
    t.savepoint().unwrap();
    t.statement_failed();
    assert_eq!(t.update(parent, &[int(1)], &[(2, Value::Int8(8))]).unwrap_err().sqlstate(), "25P02");
    assert!(t.commit().unwrap().rolled_back);
    db.verify().unwrap();
    let mut t = db.begin().unwrap();
    assert_eq!(rows(&mut t, parent), vec![p(1, "again", 0)]);
    t.commit().unwrap();
}

#[test]
fn rollback_to_releases_row_locks_taken_after_the_mark() {
    let (_dir, db, parent, _) = setup(false, &[p(1, "n1", 0), p(2, "n2", 0), p(3, "n3", 0)]);

    let mut t = db.begin().unwrap();
    t.update(parent, &[int(1)], &[(2, Value::Int8(1))]).unwrap();
    t.savepoint().unwrap();
    t.update(parent, &[int(1)], &[(2, Value::Int8(2))]).unwrap();
    t.update(parent, &[int(2)], &[(2, Value::Int8(2))]).unwrap();
    let mut row = RowBuf::new();
    assert!(t.get_for_update(parent, &[int(3)], &mut row).unwrap());
    t.rollback_to_savepoint(0).unwrap();

    // Rows 2 and 3 are free again, row 1 (locked before the mark) is not:
    // the cache's transactions never wait, so 55P03 tells which is which.
    let mut other = db.begin_with_origin(CommitMode::Sync, Origin::Load).unwrap();
    let start = Instant::now();
    assert!(other.update(parent, &[int(2)], &[(2, Value::Int8(20))]).unwrap());
    assert!(other.delete(parent, &[int(3)]).unwrap());
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(other.update(parent, &[int(1)], &[(2, Value::Int8(10))]).unwrap_err().sqlstate(), "55P03");
    other.rollback();
    let mut other = db.begin_with_origin(CommitMode::Sync, Origin::Load).unwrap();
    assert!(other.update(parent, &[int(2)], &[(2, Value::Int8(20))]).unwrap());
    assert!(other.delete(parent, &[int(3)]).unwrap());
    other.commit().unwrap();
    t.commit().unwrap();
    let mut t = db.begin().unwrap();
    assert_eq!(rows(&mut t, parent), vec![p(1, "n1", 1), p(2, "n2", 20)]);
    t.commit().unwrap();
    db.verify().unwrap();
}

#[test]
fn rollback_to_across_ddl_is_refused() {
    let (_dir, db, parent, _) = setup(false, &[]);
    let mut t = db.begin().unwrap();
    t.insert(parent, &p(1, "a", 0)).unwrap();
    t.savepoint().unwrap();
    t.insert(parent, &p(2, "b", 0)).unwrap();
    t.savepoint().unwrap();
    t.create_index(&IndexDef {
        name: "pv".into(),
        table: "parent".into(),
        columns: vec!["v".into()],
        unique: false,
        include: Vec::new(),
        options: Default::default(),
    })
    .unwrap();
    let e = t.rollback_to_savepoint(1).unwrap_err();
    assert_eq!(e.sqlstate(), "0A000", "{e}");
    assert_eq!(t.insert(parent, &p(3, "c", 0)).unwrap_err().sqlstate(), "25P02");
    assert_eq!(t.rollback_to_savepoint(0).unwrap_err().sqlstate(), "0A000");
    assert!(t.commit().unwrap().rolled_back);
    assert!(db.catalog().index_by_name("pv").is_none());

    // DDL released into the transaction and no rollback across it: fine.
    let mut t = db.begin().unwrap();
    t.savepoint().unwrap();
    t.create_index(&IndexDef {
        name: "pv".into(),
        table: "parent".into(),
        columns: vec!["v".into()],
        unique: false,
        include: Vec::new(),
        options: Default::default(),
    })
    .unwrap();
    t.release_savepoint(0).unwrap();
    let s = t.savepoint().unwrap();
    t.insert(parent, &p(2, "b", 0)).unwrap();
    t.rollback_to_savepoint(s).unwrap();
    t.commit().unwrap();
    assert!(db.catalog().index_by_name("pv").is_some());
    db.verify().unwrap();
    let mut t = db.begin().unwrap();
    assert!(rows(&mut t, parent).is_empty(), "the refused transaction rolled back, the second inserted nothing");
    t.commit().unwrap();
}

#[test]
fn rollback_to_wakes_a_waiting_writer() {
    let (_dir, db, parent, _) = setup(false, &[p(1, "a", 0)]);
    let mut t = db.begin().unwrap();
    t.savepoint().unwrap();
    t.update(parent, &[int(1)], &[(2, Value::Int8(1))]).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let db2 = db.clone();
    let waiter = std::thread::spawn(move || {
        let mut other = db2.begin().unwrap();
        let updated = other.update(parent, &[int(1)], &[(2, Value::Int8(2))]).unwrap();
        other.commit().unwrap();
        tx.send(updated).unwrap();
    });
    // The other writer waits for the row while we hold it.
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
    t.rollback_to_savepoint(0).unwrap();
    // ... and goes on as soon as ROLLBACK TO unlocks it, before we end.
    assert!(rx.recv_timeout(Duration::from_secs(5)).unwrap());
    waiter.join().unwrap();
    let mut row = RowBuf::new();
    assert!(t.get(parent, &[int(1)], &mut row).unwrap());
    assert_eq!(row.values(), p(1, "a", 2));
    t.commit().unwrap();
}

/// Random inserts, updates (key and non-key, unique column included),
/// deletes, savepoints, ROLLBACK TO and RELEASE against a model: the
/// transaction's view after every step, the committed rows after each
/// commit and after a reopen, storage invariants (`verify`) throughout.
#[test]
fn random_savepoint_histories_match_a_model() {
    use std::collections::BTreeMap;
    type Rows = BTreeMap<i32, (String, i64)>;
    let (dir, mut db, parent, _) = setup(true, &[]);
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let as_rows = |m: &Rows| m.iter().map(|(id, (name, v))| p(*id, name, *v)).collect::<Vec<_>>();
    let mut committed = Rows::new();
    for round in 0..60 {
        let mut t = db.begin().unwrap();
        let mut cur = committed.clone();
        let mut marks: Vec<Rows> = Vec::new();
        let mut aborted = false;
        for step in 0..60 {
            let op = rnd(10);
            let id = rnd(12) as i32;
            let name = format!("n{}", rnd(14));
            let ctx = format!("round {round} step {step} op {op} id {id} name {name}");
            if aborted && op != 0 {
                let e = if op == 1 && !marks.is_empty() {
                    t.release_savepoint(0)
                } else {
                    t.delete(parent, &[int(id)]).map(|_| ())
                };
                assert_eq!(e.unwrap_err().sqlstate(), "25P02", "{ctx}");
                continue;
            }
            let result = match op {
                0 | 1 if marks.is_empty() => continue,
                0 => {
                    let depth = rnd(marks.len() as u64) as usize;
                    t.rollback_to_savepoint(depth).unwrap();
                    marks.truncate(depth + 1);
                    cur = marks[depth].clone();
                    aborted = false;
                    Ok(())
                }
                1 => {
                    let depth = rnd(marks.len() as u64) as usize;
                    t.release_savepoint(depth).unwrap();
                    marks.truncate(depth);
                    Ok(())
                }
                2 => {
                    assert_eq!(t.savepoint().unwrap(), marks.len());
                    marks.push(cur.clone());
                    Ok(())
                }
                3 | 4 => {
                    let r = t.insert(parent, &p(id, &name, step));
                    let clash = cur.contains_key(&id) || cur.values().any(|(n, _)| *n == name);
                    if r.is_ok() {
                        cur.insert(id, (name.clone(), step));
                    }
                    assert_eq!(r.is_err(), clash, "{ctx}: {r:?}");
                    r.map(|_| ())
                }
                5 | 6 => {
                    let r = t.update(parent, &[int(id)], &[(2, Value::Int8(step * 100))]);
                    assert_eq!(r.as_ref().unwrap(), &cur.contains_key(&id), "{ctx}");
                    if let Some(row) = cur.get_mut(&id) {
                        row.1 = step * 100;
                    }
                    r.map(|_| ())
                }
                7 => {
                    let r = t.update(parent, &[int(id)], &[(1, text(&name))]);
                    let clash = cur.contains_key(&id) && cur.iter().any(|(k, (n, _))| *k != id && *n == name);
                    assert_eq!(r.is_err(), clash, "{ctx}: {r:?}");
                    if r.is_ok()
                        && let Some(row) = cur.get_mut(&id)
                    {
                        row.0 = name.clone();
                    }
                    r.map(|_| ())
                }
                8 => {
                    // A primary-key update: delete + insert in the engine.
                    let to = id + 1;
                    let r = t.update(parent, &[int(id)], &[(0, int(to))]);
                    let clash = cur.contains_key(&id) && cur.contains_key(&to);
                    assert_eq!(r.is_err(), clash, "{ctx}: {r:?}");
                    if r.is_ok()
                        && let Some(row) = cur.remove(&id)
                    {
                        cur.insert(to, row);
                    }
                    r.map(|_| ())
                }
                _ => {
                    let r = t.delete(parent, &[int(id)]);
                    assert_eq!(r.as_ref().unwrap(), &cur.remove(&id).is_some(), "{ctx}");
                    r.map(|_| ())
                }
            };
            if result.is_err() {
                if marks.is_empty() {
                    break; // Rolled back at once.
                }
                aborted = true;
                continue;
            }
            assert_eq!(rows(&mut t, parent), as_rows(&cur), "{ctx}");
        }
        let rolled_back = t.commit().unwrap().rolled_back;
        if !rolled_back && !aborted {
            committed = cur;
        }
        db.verify().unwrap();
        let mut t = db.begin().unwrap();
        assert_eq!(rows(&mut t, parent), as_rows(&committed), "after round {round}");
        t.commit().unwrap();
        if round % 20 == 19 {
            db.vacuum();
            db.verify().unwrap();
            drop(db);
            db = open(dir.path());
            db.verify().unwrap();
        }
    }
    let mut t = db.begin().unwrap();
    assert_eq!(rows(&mut t, parent), as_rows(&committed));
    t.commit().unwrap();
}
