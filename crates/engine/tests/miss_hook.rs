//! The miss hook (dynamic load): an application read that finds nothing
//! asks the table's hook, which loads rows in a `Load` transaction; the
//! statement then sees them. Non-application transactions never call it
//! and never wait for row locks.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{create_parent_child, int, open, text};
use pgtier_engine::{
    CommitMode, Database, EngineError, Miss, MissAnswer, MissCover, MissHold, MissHook, MissIntent, MissResolution,
    Origin, Result, RowBuf, RowRef, TableId, Value,
};

/// Stands in for PostgreSQL: whole instances (parent id -> child ns).
struct Loader {
    parent: TableId,
    child: TableId,
    backend: Mutex<BTreeMap<i32, Vec<i16>>>,
    calls: AtomicUsize,
    misses: Mutex<Vec<String>>,
    fail: AtomicBool,
    /// Reads are answered with the instance's rows (as the cache does from
    /// flash) instead of loading it; writes still load.
    answer_reads: AtomicBool,
    /// Answer writes too (a broken hook: the engine must refuse).
    answer_writes: AtomicBool,
    /// Answer the children as row images (`MissAnswer::images`, as the
    /// cache's clean flash records do); 2: with one image damaged.
    answer_images: AtomicU8,
    /// Holds handed out and not dropped yet (the cache's pins).
    holds: Arc<AtomicUsize>,
    /// Calls of `hold_present` (a child row going in under a present parent).
    present_holds: AtomicUsize,
    /// The next `hold_present` first evicts the instance (as aging would
    /// just before the pin), so the engine must find its parent gone.
    evict_before_hold: AtomicBool,
}

/// What the loader hands a transaction to keep: counted while alive.
struct Hold(Arc<AtomicUsize>);

impl Drop for Hold {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Loader {
    fn new(parent: TableId, child: TableId, instances: &[(i32, &[i16])]) -> Arc<Loader> {
        Arc::new(Loader {
            parent,
            child,
            backend: Mutex::new(instances.iter().map(|(p, c)| (*p, c.to_vec())).collect()),
            calls: AtomicUsize::new(0),
            misses: Mutex::new(Vec::new()),
            fail: AtomicBool::new(false),
            answer_reads: AtomicBool::new(false),
            answer_writes: AtomicBool::new(false),
            answer_images: AtomicU8::new(0),
            holds: Arc::new(AtomicUsize::new(0)),
            present_holds: AtomicUsize::new(0),
            evict_before_hold: AtomicBool::new(false),
        })
    }

    fn holds(&self) -> usize {
        self.holds.load(Ordering::SeqCst)
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn load(&self, db: &Database, pid: i32) -> Result<bool> {
        let Some(children) = self.backend.lock().unwrap().get(&pid).cloned() else { return Ok(false) };
        let mut t = db.begin_with_origin(CommitMode::Sync, Origin::Load)?;
        // The hook's own reads miss too, and do not come back here (the
        // tests count calls); an instance already here is not loaded again.
        let mut row = RowBuf::new();
        if t.get(self.parent, &[int(pid)], &mut row)? {
            return Ok(false);
        }
        t.insert(self.parent, &[int(pid), text("loaded"), Value::Int8(pid.into())])?;
        for n in children {
            t.insert(self.child, &[int(pid), Value::Int2(n), text("c")])?;
        }
        t.commit()?;
        Ok(true)
    }
}

impl Loader {
    /// The instance of `pid` as an answer (parent note "answered"), when
    /// the backend has it.
    fn answer(&self, db: &Database, pid: i32) -> Option<MissAnswer> {
        let children = self.backend.lock().unwrap().get(&pid).cloned()?;
        let mut rows = vec![(self.parent, vec![int(pid), text("answered"), Value::Int8(pid.into())])];
        // Reversed: the engine orders what a scan visits, not the hook.
        for n in children.iter().rev() {
            rows.push((self.child, vec![int(pid), Value::Int2(*n), text("a")]));
        }
        let covers = [self.parent, self.child]
            .into_iter()
            .map(|table| MissCover { table, columns: vec![0], values: vec![int(pid)] })
            .collect();
        let mut images = Vec::new();
        let mode = self.answer_images.load(Ordering::SeqCst);
        if mode > 0 {
            let child = db.catalog().table(self.child).unwrap().clone();
            for (_, values) in rows.drain(1..) {
                let mut image = Vec::new();
                RowRef::encode(&child, &values, &mut image).unwrap();
                if mode == 2 {
                    image.pop();
                }
                images.push((self.child, image));
            }
        }
        Some(MissAnswer { rows, images, covers })
    }
}

impl MissHook for Loader {
    fn on_miss(&self, db: &Database, miss: Miss<'_>, intent: MissIntent) -> Result<MissResolution> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.misses.lock().unwrap().push(format!("{intent:?} {miss:?}"));
        if self.fail.load(Ordering::SeqCst) {
            return Err(EngineError::FeatureNotSupported("loading from the backend".into()));
        }
        let pid = match miss {
            Miss::Key { table, key } if table == self.parent => key[0].clone(),
            Miss::Key { table, key } if table == self.child => key[0].clone(),
            Miss::Prefix { table, prefix, .. } if table == self.child => prefix[0].clone(),
            other => panic!("unexpected miss {other:?}"),
        };
        let Value::Int4(pid) = pid else { panic!("key {pid:?}") };
        let answering = match intent {
            MissIntent::Read => self.answer_reads.load(Ordering::SeqCst),
            MissIntent::Write => self.answer_writes.load(Ordering::SeqCst),
        };
        if answering {
            return Ok(self.answer(db, pid).map_or(MissResolution::NotFound, MissResolution::Answer));
        }
        if !self.load(db, pid)? {
            return Ok(MissResolution::NotFound);
        }
        Ok(MissResolution::Retry { hold: Some(self.hold()) })
    }

    fn hold_present(&self, db: &Database, lookup: Miss<'_>) -> Result<Option<MissHold>> {
        self.present_holds.fetch_add(1, Ordering::SeqCst);
        let Miss::Key { key, .. } = lookup else { panic!("the child references the parent's primary key: {lookup:?}") };
        if self.evict_before_hold.swap(false, Ordering::SeqCst) {
            let mut t = db.begin_with_origin(CommitMode::Sync, Origin::Evict)?;
            let Value::Int4(pid) = key[0] else { panic!("key {key:?}") };
            let children = self.backend.lock().unwrap().get(&pid).cloned().unwrap();
            for n in children {
                t.delete(self.child, &[key[0].clone(), Value::Int2(n)])?;
            }
            assert!(t.delete(self.parent, key)?);
            t.commit()?;
        }
        Ok(Some(self.hold()))
    }
}

impl Loader {
    fn hold(&self) -> MissHold {
        self.holds.fetch_add(1, Ordering::SeqCst);
        Box::new(Hold(self.holds.clone()))
    }
}

fn setup(instances: &[(i32, &[i16])]) -> (tempfile::TempDir, Database, Arc<Loader>) {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (parent, child) = create_parent_child(&db);
    let loader = Loader::new(parent, child, instances);
    db.set_miss_hook(parent, Some(loader.clone()));
    db.set_miss_hook(child, Some(loader.clone()));
    (dir, db, loader)
}

#[test]
fn point_reads_see_what_the_hook_loaded() {
    let (_dir, db, h) = setup(&[(1, &[1, 2]), (2, &[]), (3, &[5])]);
    let mut t = db.begin().unwrap();
    let mut row = RowBuf::new();
    assert!(t.get(h.parent, &[int(1)], &mut row).unwrap());
    assert_eq!(row.get(2).to_owned_value(), Value::Int8(1));
    assert_eq!(h.calls(), 1);
    // Loaded with its children: no further call.
    assert!(t.get(h.child, &[int(1), Value::Int2(2)], &mut row).unwrap());
    assert_eq!(h.calls(), 1);
    // get_with through a child miss.
    let note = t.get_with(h.child, &[int(3), Value::Int2(5)], |r| r.get(2).to_owned_value()).unwrap();
    assert_eq!(note, Some(text("c")));
    assert_eq!(h.calls(), 2);
    // A key the backend does not have either: asked, answered "no".
    assert!(!t.get(h.parent, &[int(99)], &mut row).unwrap());
    assert!(t.get_with(h.parent, &[int(98)], |_| ()).unwrap().is_none());
    assert_eq!(h.calls(), 4);
    // A child key absent from a loaded instance: asked, nothing new.
    assert!(!t.get(h.child, &[int(1), Value::Int2(9)], &mut row).unwrap());
    assert_eq!(h.calls(), 5);
    t.commit().unwrap();
}

#[test]
fn prefix_scans_see_what_the_hook_loaded() {
    let (_dir, db, h) = setup(&[(1, &[1, 2, 3]), (2, &[])]);
    let child_pk = db.catalog().table(h.child).unwrap().primary_index;
    let mut t = db.begin().unwrap();
    let mut ns = Vec::new();
    let n = t
        .scan_prefix(child_pk, &[int(1)], |r| {
            ns.push(r.get(1).to_owned_value());
            Ok(true)
        })
        .unwrap();
    assert_eq!(n, 3);
    assert_eq!(ns, vec![Value::Int2(1), Value::Int2(2), Value::Int2(3)]);
    assert_eq!(h.calls(), 1);
    assert!(h.misses.lock().unwrap()[0].starts_with("Read Prefix"));
    // Loaded, but empty: the hook is asked, the scan still finds nothing.
    assert_eq!(t.scan_prefix(child_pk, &[int(2)], |_| Ok(true)).unwrap(), 0);
    assert_eq!(h.calls(), 2);
    // Not an equality scan: no call.
    let lo = [int(50)];
    let hi = [int(60)];
    assert_eq!(
        t.scan(child_pk, std::ops::Bound::Included(&lo[..]), std::ops::Bound::Included(&hi[..]), |_| Ok(true)).unwrap(),
        0
    );
    assert_eq!(h.calls(), 2);
    t.commit().unwrap();
}

#[test]
fn writes_and_foreign_key_checks_see_what_the_hook_loaded() {
    let (_dir, db, h) = setup(&[(1, &[1]), (2, &[1]), (3, &[]), (4, &[]), (5, &[])]);
    let mut t = db.begin().unwrap();
    assert!(t.update(h.parent, &[int(1)], &[(1, text("changed"))]).unwrap());
    assert!(t.delete(h.child, &[int(2), Value::Int2(1)]).unwrap());
    let mut row = RowBuf::new();
    assert!(t.get_for_update(h.parent, &[int(3)], &mut row).unwrap());
    assert!(t.delete_with(h.parent, &[int(4)], |r| Ok(r.get(0).to_owned_value() == int(4))).unwrap());
    // FK: the parent of a new child is loaded by the check (the child's key
    // carries the parent's, so that load brought any row of it).
    t.insert(h.child, &[int(5), Value::Int2(7), text("new")]).unwrap();
    assert_eq!(h.calls(), 5);
    // Without a parent anywhere: still 23503, after asking.
    let e = t.insert(h.child, &[int(77), Value::Int2(1), text("x")]).unwrap_err();
    assert_eq!(e.sqlstate(), "23503");
    assert_eq!(h.calls(), 6);
    drop(t);
    let mut t = db.begin().unwrap();
    assert!(t.get(h.parent, &[int(1)], &mut row).unwrap());
    assert_eq!(
        row.get(1).to_owned_value(),
        text("loaded"),
        "the update rolled back with its transaction, the load did not"
    );
    t.commit().unwrap();
}

#[test]
fn a_hook_that_loads_nothing_leaves_no_row() {
    let (_dir, db, h) = setup(&[]);
    let mut t = db.begin().unwrap();
    let mut row = RowBuf::new();
    assert!(!t.get(h.parent, &[int(1)], &mut row).unwrap());
    assert!(!t.update(h.parent, &[int(1)], &[(1, text("x"))]).unwrap());
    assert!(!t.delete(h.parent, &[int(1)]).unwrap());
    assert!(!t.get_for_update(h.parent, &[int(1)], &mut row).unwrap());
    assert_eq!(h.calls(), 4);
    // An insert asks first (the backend may hold the key), once; a row this
    // transaction deleted is no miss, nor one it inserted and reads.
    t.insert(h.parent, &[int(10), text("p"), Value::Int8(0)]).unwrap();
    assert_eq!(h.calls(), 5);
    assert!(t.delete(h.parent, &[int(10)]).unwrap());
    assert!(!t.get(h.parent, &[int(10)], &mut row).unwrap());
    assert!(!t.delete(h.parent, &[int(10)]).unwrap());
    assert_eq!(h.calls(), 5);
    t.commit().unwrap();
    // Without a hook: nothing is asked.
    db.set_miss_hook(h.parent, None);
    let mut t = db.begin().unwrap();
    assert!(!t.get(h.parent, &[int(2)], &mut row).unwrap());
    assert_eq!(h.calls(), 5);
}

#[test]
fn the_cache_own_transactions_never_call_the_hook() {
    let (_dir, db, h) = setup(&[(1, &[1])]);
    let child_pk = db.catalog().table(h.child).unwrap().primary_index;
    for origin in [Origin::Load, Origin::Refresh, Origin::Evict, Origin::Autorefresh] {
        let mut t = db.begin_with_origin(CommitMode::Sync, origin).unwrap();
        let mut row = RowBuf::new();
        assert!(!t.get(h.parent, &[int(1)], &mut row).unwrap());
        assert!(t.get_with(h.parent, &[int(1)], |_| ()).unwrap().is_none());
        assert_eq!(t.scan_prefix(child_pk, &[int(1)], |_| Ok(true)).unwrap(), 0);
        assert!(!t.update(h.parent, &[int(1)], &[(1, text("x"))]).unwrap());
        assert!(!t.delete(h.parent, &[int(1)]).unwrap());
        t.commit().unwrap();
    }
    assert_eq!(h.calls(), 0);
}

#[test]
fn a_load_never_waits_for_the_application_transaction_that_missed() {
    let (_dir, db, h) = setup(&[(50, &[1])]);
    let mut t = db.begin().unwrap();
    // The application inserts a parent the backend also has: asked first,
    // the hook loads it, and the insert meets it as a duplicate (23505).
    let e = t.insert(h.parent, &[int(50), text("mine"), Value::Int8(0)]).unwrap_err();
    assert_eq!(e.sqlstate(), "23505", "{e}");
    assert_eq!(h.calls(), 1);
    drop(t);
    // One the backend gets only after the insert asked (another writer of
    // PostgreSQL), then a miss on its child: the hook's load would wait for
    // this very transaction.
    let mut t = db.begin().unwrap();
    t.insert(h.parent, &[int(60), text("mine"), Value::Int8(0)]).unwrap();
    assert_eq!(h.calls(), 2);
    h.backend.lock().unwrap().insert(60, vec![1]);
    let started = Instant::now();
    let mut row = RowBuf::new();
    let e = t.get(h.child, &[int(60), Value::Int2(1)], &mut row).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "waited {:?}", started.elapsed());
    assert_eq!(e.sqlstate(), "55P03");
    assert!(e.to_string().contains("could not obtain lock on row in relation \"parent\""), "{e}");
    assert_eq!(h.calls(), 3);
    // The statement failed, so the transaction is aborted (rolled back).
    assert_eq!(t.get(h.parent, &[int(60)], &mut row).unwrap_err().sqlstate(), "25P02");
    drop(t);
    // Nothing half-loaded either: the load rolled back whole; it works now.
    let mut t = db.begin().unwrap();
    assert!(t.get(h.child, &[int(60), Value::Int2(1)], &mut row).unwrap());
    t.commit().unwrap();
}

#[test]
fn non_application_transactions_fail_at_once_on_a_locked_row() {
    let (_dir, db, h) = setup(&[]);
    let mut seed = db.begin_with_origin(CommitMode::Sync, Origin::Load).unwrap();
    seed.insert(h.parent, &[int(1), text("p"), Value::Int8(0)]).unwrap();
    seed.commit().unwrap();
    let mut app = db.begin().unwrap();
    assert!(app.update(h.parent, &[int(1)], &[(1, text("app"))]).unwrap());
    for origin in [Origin::Load, Origin::Refresh, Origin::Evict, Origin::Autorefresh] {
        let mut t = db.begin_with_origin(CommitMode::Sync, origin).unwrap();
        let started = Instant::now();
        let e = t.delete(h.parent, &[int(1)]).unwrap_err();
        assert_eq!(e.sqlstate(), "55P03", "{origin}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let mut t = db.begin_with_origin(CommitMode::Sync, origin).unwrap();
        assert_eq!(t.insert(h.parent, &[int(1), text("p"), Value::Int8(0)]).unwrap_err().sqlstate(), "55P03");
    }
    app.commit().unwrap();
}

#[test]
fn hook_errors_fail_the_statement() {
    let (_dir, db, h) = setup(&[(1, &[])]);
    h.fail.store(true, Ordering::SeqCst);
    let mut t = db.begin().unwrap();
    let mut row = RowBuf::new();
    let e = t.get(h.parent, &[int(1)], &mut row).unwrap_err();
    assert_eq!(e.sqlstate(), "0A000");
    assert_eq!(t.get(h.parent, &[int(1)], &mut row).unwrap_err().sqlstate(), "25P02");
    drop(t);
    let child_pk = db.catalog().table(h.child).unwrap().primary_index;
    let mut t = db.begin().unwrap();
    assert_eq!(t.scan_prefix(child_pk, &[int(1)], |_| Ok(true)).unwrap_err().sqlstate(), "0A000");
    let mut t = db.begin().unwrap();
    assert_eq!(t.get_with(h.parent, &[int(1)], |_| ()).unwrap_err().sqlstate(), "0A000");
    let mut t = db.begin().unwrap();
    assert_eq!(t.insert(h.child, &[int(1), Value::Int2(1), text("x")]).unwrap_err().sqlstate(), "0A000");
    assert_eq!(h.calls(), 4);
}

#[test]
fn a_statement_snapshot_moves_past_the_load() {
    let (_dir, db, h) = setup(&[(1, &[1])]);
    let mut t = db.begin().unwrap();
    t.begin_statement().unwrap();
    let before = t.snapshot_ts();
    let mut row = RowBuf::new();
    assert!(t.get(h.parent, &[int(1)], &mut row).unwrap());
    assert!(t.snapshot_ts() > before);
    // The rest of the statement reads at the new snapshot: the child loaded
    // with the parent is there without another call.
    assert!(t.get(h.child, &[int(1), Value::Int2(1)], &mut row).unwrap());
    assert_eq!(h.calls(), 1);
    t.end_statement();
    t.commit().unwrap();
}

/// What a hook hands the transaction that missed is kept until that
/// transaction ends, however it ends (the cache's pin keeps aging from
/// evicting a loaded instance before the retried lookup reads it).
/// A child row going in under a parent in memory has the hook hold the
/// parent until the transaction ends; a parent evicted just before the
/// hold is loaded again before the row goes in, so a duplicate of one of
/// its rows is PostgreSQL's 23505. (Loaded after the row, the load met
/// the row's lock: the insert failed with a conflict instead.)
#[test]
fn a_child_insert_holds_its_present_parent() {
    let (_dir, db, h) = setup(&[(1, &[1, 2])]);
    let mut row = RowBuf::new();
    let mut t = db.begin().unwrap();
    assert!(t.get(h.parent, &[int(1)], &mut row).unwrap());
    t.commit().unwrap();
    assert_eq!((h.calls(), h.holds()), (1, 0));

    let mut t = db.begin().unwrap();
    t.insert(h.child, &[int(1), Value::Int2(3), text("new")]).unwrap();
    t.insert(h.child, &[int(1), Value::Int2(4), text("new")]).unwrap();
    assert_eq!(h.present_holds.load(Ordering::SeqCst), 1, "asked once for rows under one parent");
    assert_eq!(h.calls(), 1, "a child's key carries its present parent's: not asked");
    assert_eq!(h.holds(), 1, "the parent is held until the transaction ends");
    t.commit().unwrap();
    assert_eq!(h.holds(), 0);
    h.backend.lock().unwrap().get_mut(&1).unwrap().extend([3, 4]);

    h.evict_before_hold.store(true, Ordering::SeqCst);
    let mut t = db.begin().unwrap();
    let e = t.insert(h.child, &[int(1), Value::Int2(2), text("duplicate")]).unwrap_err();
    assert_eq!(e.sqlstate(), "23505", "{e}");
    assert_eq!(h.present_holds.load(Ordering::SeqCst), 2);
    assert_eq!(h.calls(), 2, "the evicted parent was loaded again, before the row went in");
    drop(t);
    assert_eq!(h.holds(), 0);
    let mut t = db.begin().unwrap();
    assert!(t.get(h.child, &[int(1), Value::Int2(3)], &mut row).unwrap());
    assert_eq!(row.get(2).to_owned_value(), text("c"), "the instance as the load brought it back");
    t.commit().unwrap();
}

#[test]
fn a_hold_lasts_until_the_transaction_ends() {
    let (_dir, db, h) = setup(&[(1, &[1]), (2, &[]), (3, &[]), (4, &[])]);
    let mut row = RowBuf::new();
    let mut t = db.begin().unwrap();
    assert!(t.get(h.parent, &[int(1)], &mut row).unwrap());
    assert!(t.get(h.parent, &[int(2)], &mut row).unwrap());
    t.end_statement();
    assert_eq!(h.holds(), 2, "held past the statement, until the transaction ends");
    t.commit().unwrap();
    assert_eq!(h.holds(), 0);

    let mut t = db.begin().unwrap();
    assert!(t.get(h.parent, &[int(3)], &mut row).unwrap());
    assert_eq!(h.holds(), 1);
    t.rollback();
    assert_eq!(h.holds(), 0);

    // A session's transaction restarted in place, and one that failed.
    let mut t = db.begin().unwrap();
    assert!(t.get(h.parent, &[int(4)], &mut row).unwrap());
    t.commit_in_place().unwrap();
    assert_eq!(h.holds(), 0);
    t.restart(CommitMode::Sync).unwrap();
    h.backend.lock().unwrap().insert(5, vec![]);
    assert!(t.get(h.parent, &[int(5)], &mut row).unwrap());
    assert_eq!(h.holds(), 1);
    assert!(t.insert(h.parent, &[int(5), text("again"), Value::Int8(5)]).is_err());
    assert_eq!(h.holds(), 0, "a failed statement ends the transaction and its holds");
    t.restart(CommitMode::Sync).unwrap();
    drop(t);
    assert_eq!(h.holds(), 0);
}

/// A read answered with rows kept elsewhere (the cache's flash tier):
/// point reads and scans inside the answer read them for the rest of the
/// statement, nothing is inserted, and the hook is not asked again.
#[test]
fn reads_inside_an_answer_read_its_rows_and_insert_nothing() {
    reads_inside_an_answer(0);
}

/// The same with the children answered as row images.
#[test]
fn reads_inside_an_answer_of_row_images_read_them_as_rows() {
    reads_inside_an_answer(1);
}

/// An image that does not fit its table's layout fails the statement: an
/// error, never a panic or a wrong row.
#[test]
fn a_damaged_row_image_in_an_answer_is_an_error() {
    let (_dir, db, h) = setup(&[(1, &[3, 1, 2])]);
    h.answer_reads.store(true, Ordering::SeqCst);
    h.answer_images.store(2, Ordering::SeqCst);
    let mut t = db.begin().unwrap();
    t.begin_statement().unwrap();
    let mut row = RowBuf::new();
    let error = t.get(h.parent, &[int(1)], &mut row).unwrap_err();
    assert!(matches!(error, EngineError::Corrupt(_)), "{error:?}");
}

fn reads_inside_an_answer(images: u8) {
    let (_dir, db, h) = setup(&[(1, &[3, 1, 2]), (2, &[])]);
    h.answer_reads.store(true, Ordering::SeqCst);
    h.answer_images.store(images, Ordering::SeqCst);
    let child_pk = db.catalog().table(h.child).unwrap().primary_index;
    let mut t = db.begin().unwrap();
    t.begin_statement().unwrap();
    let before = t.snapshot_ts();
    let mut row = RowBuf::new();
    assert!(t.get(h.parent, &[int(1)], &mut row).unwrap());
    assert_eq!(row.get(1).to_owned_value(), text("answered"));
    assert_eq!(t.snapshot_ts(), before, "an answer inserts nothing: the snapshot stays");
    assert_eq!(h.calls(), 1);
    // Children, in key order although answered in another, without asking.
    let mut ns = Vec::new();
    assert_eq!(
        t.scan_prefix(child_pk, &[int(1)], |r| {
            ns.push(r.get(1).to_owned_value());
            Ok(true)
        })
        .unwrap(),
        3
    );
    assert_eq!(ns, vec![Value::Int2(1), Value::Int2(2), Value::Int2(3)]);
    // A range inside the instance: the bounds hold.
    let (lo, hi) = ([int(1), Value::Int2(2)], [int(1), Value::Int2(9)]);
    let mut ns = Vec::new();
    t.scan(child_pk, std::ops::Bound::Excluded(&lo[..]), std::ops::Bound::Included(&hi[..]), |r| {
        ns.push(r.get(1).to_owned_value());
        Ok(true)
    })
    .unwrap();
    assert_eq!(ns, vec![Value::Int2(3)]);
    // A point read of a child, found and absent, and get_with.
    assert!(t.get(h.child, &[int(1), Value::Int2(2)], &mut row).unwrap());
    assert!(!t.get(h.child, &[int(1), Value::Int2(7)], &mut row).unwrap());
    assert_eq!(t.get_with(h.child, &[int(1), Value::Int2(1)], |r| r.get(2).to_owned_value()).unwrap(), Some(text("a")));
    assert_eq!(h.calls(), 1, "everything inside the answer is read from it");
    // Outside it: asked.
    assert_eq!(t.scan_prefix(child_pk, &[int(2)], |_| Ok(true)).unwrap(), 0);
    assert_eq!(h.calls(), 2);
    t.end_statement();
    // Nothing was inserted: an own-origin read sees no row.
    let mut cache = db.begin_with_origin(CommitMode::Sync, Origin::Load).unwrap();
    assert!(!cache.get(h.parent, &[int(1)], &mut row).unwrap());
    drop(cache);
    // The next statement asks again.
    t.begin_statement().unwrap();
    assert!(t.get(h.parent, &[int(1)], &mut row).unwrap());
    assert_eq!(h.calls(), 3);
    t.end_statement();
    t.commit().unwrap();
}

/// A write to an answered row misses as a write: the hook puts the rows
/// in memory, and the statement goes on over them, not over the answer.
#[test]
fn a_write_inside_an_answer_loads_the_rows_first() {
    let (_dir, db, h) = setup(&[(1, &[1, 2])]);
    h.answer_reads.store(true, Ordering::SeqCst);
    let child_pk = db.catalog().table(h.child).unwrap().primary_index;
    let mut t = db.begin().unwrap();
    t.begin_statement().unwrap();
    let mut row = RowBuf::new();
    assert!(t.get(h.parent, &[int(1)], &mut row).unwrap());
    assert!(t.update(h.parent, &[int(1)], &[(1, text("changed"))]).unwrap());
    assert!(t.delete(h.child, &[int(1), Value::Int2(1)]).unwrap());
    let misses = h.misses.lock().unwrap().clone();
    assert_eq!(misses.len(), 2, "{misses:?}");
    assert!(misses[1].starts_with("Write Key"), "{misses:?}");
    // Memory holds the instance now, with this transaction's changes.
    assert!(t.get(h.parent, &[int(1)], &mut row).unwrap());
    assert_eq!(row.get(1).to_owned_value(), text("changed"));
    assert_eq!(t.scan_prefix(child_pk, &[int(1)], |_| Ok(true)).unwrap(), 1, "the own delete stands");
    assert_eq!(h.calls(), 2);
    t.end_statement();
    t.commit().unwrap();
    let mut t = db.begin_with_origin(CommitMode::Sync, Origin::Load).unwrap();
    assert!(t.get(h.parent, &[int(1)], &mut row).unwrap());
    assert_eq!(row.get(1).to_owned_value(), text("changed"));
}

/// A hook that answers a write is refused: "no row" there would be a
/// wrong answer.
#[test]
fn an_answer_to_a_write_is_refused() {
    let (_dir, db, h) = setup(&[(1, &[1])]);
    h.answer_writes.store(true, Ordering::SeqCst);
    let mut t = db.begin().unwrap();
    let e = t.update(h.parent, &[int(1)], &[(1, text("x"))]).unwrap_err();
    assert_eq!(e.sqlstate(), "XX000");
}

/// A statement that reads many answered instances keeps a bounded number
/// of answers: the oldest are dropped, and reading one again asks again.
#[test]
fn a_statement_keeps_a_bounded_number_of_answers() {
    let instances: Vec<(i32, &[i16])> = (1..=40).map(|pid| (pid, &[1i16][..])).collect();
    let (_dir, db, h) = setup(&instances);
    h.answer_reads.store(true, Ordering::SeqCst);
    let mut t = db.begin().unwrap();
    t.begin_statement().unwrap();
    let mut row = RowBuf::new();
    for pid in 1..=40 {
        assert!(t.get(h.parent, &[int(pid)], &mut row).unwrap());
    }
    assert_eq!(h.calls(), 40);
    // The latest are still kept; the first was dropped and is asked for again.
    assert!(t.get(h.child, &[int(40), Value::Int2(1)], &mut row).unwrap());
    assert_eq!(h.calls(), 40);
    assert!(t.get(h.child, &[int(1), Value::Int2(1)], &mut row).unwrap());
    assert_eq!(h.calls(), 41);
    t.end_statement();
    t.commit().unwrap();
}
