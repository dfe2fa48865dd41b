//! Removing cached instances (UNLOAD, aging, REFRESH's "gone from
//! PostgreSQL") as `Origin::Evict`: the rows leave the cache, PostgreSQL
//! never hears of it, and an instance with changes PostgreSQL does not
//! have yet stays (the marks, `marks`).

use pgtier_engine::{Database, Origin, Value};

use super::GroupEntry;
use crate::error::{CacheError, is_conflict};
use crate::instance::{Instance, InstanceLayout};

/// Instances removed per engine transaction.
const REMOVE_BATCH: usize = 256;

/// Whether a group's dirty marks cover every transaction committed so far
/// (`Cache::dirty_current`: AWT groups once write-through has read up to
/// now; other groups always).
pub(crate) type MarksCurrent<'a> = &'a dyn Fn(&GroupEntry) -> Result<bool, CacheError>;

/// Whether a load's snapshot vouches for the removal of instance `key`
/// (`Fence::admits`).
pub(crate) type Admits<'a> = &'a dyn Fn(&[Value]) -> bool;

/// Where an instance aging evicts goes instead of away (the flash tier).
pub(crate) trait Demotion {
    /// Called once the removal's delete holds the instance's rows (no writer
    /// can change them now) and before it commits; true when stored.
    fn demote(&self, key: &[Value], instance: &Instance) -> bool;
    /// The removal that demoted `key` did not commit: the instance stays
    /// in memory, so its stored copy must go.
    fn undo(&self, key: &[Value]);
    /// Whether instances with changes PostgreSQL does not have yet may go
    /// too (write-back): they leave in batches of their own.
    fn takes_dirty(&self) -> bool;
    /// Stores such an instance, to be durable at the next `sync_dirty`
    /// (true: stored).
    fn demote_dirty(&self, key: &[Value], instance: &Instance) -> bool;
    /// Makes what `demote_dirty` stored durable (false: an I/O error).
    fn sync_dirty(&self) -> bool;
    /// Its eviction did not commit: the durable copy goes (durably).
    fn undo_dirty(&self, key: &[Value]) -> Result<(), CacheError>;
}

/// What UNLOAD (or an eviction round) removed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UnloadReport {
    pub instances: u64,
    pub rows: u64,
    /// Instances left in place because they hold changes not yet propagated to PostgreSQL.
    pub skipped_dirty: u64,
    /// Instances left in place because an application transaction held one of their rows.
    pub skipped_locked: u64,
}

impl UnloadReport {
    fn add(&mut self, other: &UnloadReport) {
        self.instances += other.instances;
        self.rows += other.rows;
        self.skipped_dirty += other.skipped_dirty;
        self.skipped_locked += other.skipped_locked;
    }
}

/// Removes the cached instances of `keys` (absent ones are ignored) as
/// `Origin::Evict`: the rows leave the cache, PostgreSQL never hears of
/// it. Never an instance with changes PostgreSQL does not have yet (nor
/// any while that cannot be told: write-through not reading); with
/// `gone` (REFRESH: PostgreSQL did not send them), only instances whose
/// every commit that load's snapshot holds (`gone` admits: `Fence::admits`).
/// With `demotion`, each removed instance is offered to it (aging's
/// evictions for memory).
pub(crate) fn remove_instances(
    db: &Database,
    marks_current: MarksCurrent<'_>,
    entry: &GroupEntry,
    layout: &InstanceLayout,
    keys: &[Vec<Value>],
    gone: Option<Admits<'_>>,
    demotion: Option<&dyn Demotion>,
) -> Result<UnloadReport, CacheError> {
    let mut report = UnloadReport::default();
    let dirty_to_flash = demotion.filter(|d| d.takes_dirty() && gone.is_none());
    let mut dirty = Vec::new();
    let mut remove = |keys: &[Vec<Value>]| {
        let mut demoted = Vec::new();
        let collect = dirty_to_flash.is_some().then_some(&mut dirty);
        let removed = remove_batch(db, marks_current, entry, layout, keys, gone, demotion, &mut demoted, collect);
        if removed.is_err()
            && let Some(demotion) = demotion
        {
            for key in &demoted {
                demotion.undo(key);
            }
        }
        removed
    };
    for chunk in keys.chunks(REMOVE_BATCH) {
        match remove(chunk) {
            Ok(done) => report.add(&done),
            // A row an application transaction holds or changed since the
            // batch's snapshot: evictions never wait (the engine's no-wait
            // rule). Again one instance per transaction, leaving those.
            Err(error) if is_conflict(&error) => {
                for key in chunk {
                    match remove(std::slice::from_ref(key)) {
                        Ok(done) => report.add(&done),
                        Err(error) if is_conflict(&error) => report.skipped_locked += 1,
                        Err(error) => return Err(error),
                    }
                }
            }
            Err(error) => return Err(error),
        }
    }
    if let Some(demotion) = dirty_to_flash {
        // A batch redone key by key collected its keys twice.
        let mut seen = std::collections::HashSet::new();
        dirty.retain(|key| seen.insert(crate::instance::key_text(key)));
        for chunk in dirty.chunks(REMOVE_BATCH) {
            match remove_dirty(db, entry, layout, chunk, demotion) {
                Ok((instances, rows)) => {
                    report.instances += instances;
                    report.rows += rows;
                    report.skipped_dirty = report.skipped_dirty.saturating_sub(instances);
                }
                Err(error) if is_conflict(&error) => {}
                Err(error) => return Err(error),
            }
        }
    }
    Ok(report)
}

/// Evicts instances with changes PostgreSQL does not have yet to the
/// flash tier (write-back), in one transaction: their durable records
/// first, one sync for all of them, then the eviction's commit; an eviction
/// that fails takes the records back. Returns (instances, rows) evicted.
fn remove_dirty(
    db: &Database,
    entry: &GroupEntry,
    layout: &InstanceLayout,
    keys: &[Vec<Value>],
    demotion: &dyn Demotion,
) -> Result<(u64, u64), CacheError> {
    let mut txn = db.begin_with_origin(db.default_commit_mode(), Origin::Evict)?;
    // Pinned: a commit on an instance after this read makes its delete
    // fail, so a record never holds an older image than the one deleted.
    txn.pin_snapshot()?;
    let mut deleting = Deleting { entry, keys: Vec::new() };
    let mut stored: Vec<(&Vec<Value>, u64)> = Vec::new();
    let undo = |stored: &[(&Vec<Value>, u64)]| {
        for (key, _) in stored {
            // The tier failed already if this does too; the instance stays
            // in memory, and at the next open memory wins (`reconcile`).
            let _ = demotion.undo_dirty(key);
        }
    };
    let mut delete_and_store = || -> Result<(), CacheError> {
        for key in keys {
            // A transaction that missed on it holds it (`InstancePin`): it stays.
            if !entry.evicting.begin(key) {
                continue;
            }
            deleting.keys.push(key.clone());
            // Each instance under a savepoint: one an application holds, or
            // that flash does not take, stays; the others go.
            let savepoint = txn.savepoint()?;
            let read = match layout.read(&mut txn, key) {
                Ok(Some(instance)) => layout.delete(&mut txn, &instance).map(|()| Some(instance)),
                other => other,
            };
            let kept = match read {
                Ok(Some(instance)) if demotion.demote_dirty(key, &instance) => {
                    stored.push((key, instance.row_count()));
                    false
                }
                Ok(_) => true,
                Err(error) if is_conflict(&error) => true,
                Err(error) => return Err(error),
            };
            if kept {
                txn.rollback_to_savepoint(savepoint)?;
            }
            txn.release_savepoint(savepoint)?;
        }
        Ok(())
    };
    if let Err(error) = delete_and_store() {
        undo(&stored);
        return Err(error);
    }
    if stored.is_empty() {
        return Ok((0, 0));
    }
    if !demotion.sync_dirty() {
        undo(&stored);
        return Ok((0, 0));
    }
    if let Err(error) = txn.commit() {
        undo(&stored);
        return Err(error.into());
    }
    drop(deleting);
    Ok((stored.len() as u64, stored.iter().map(|(_, rows)| rows).sum()))
}

/// One engine transaction of `remove_instances`; `demoted` collects the
/// keys `demotion` stored, for the caller to undo if this fails, and
/// `dirty` (write-back) the instances with pending changes left for
/// `remove_dirty`.
#[allow(clippy::too_many_arguments)]
fn remove_batch(
    db: &Database,
    marks_current: MarksCurrent<'_>,
    entry: &GroupEntry,
    layout: &InstanceLayout,
    keys: &[Vec<Value>],
    gone: Option<Admits<'_>>,
    demotion: Option<&dyn Demotion>,
    demoted: &mut Vec<Vec<Value>>,
    mut dirty: Option<&mut Vec<Vec<Value>>>,
) -> Result<UnloadReport, CacheError> {
    let mut report = UnloadReport::default();
    let mut txn = db.begin_with_origin(db.default_commit_mode(), Origin::Evict)?;
    txn.pin_snapshot()?;
    let mut deleting = Deleting { entry, keys: Vec::new() };
    // The marks must cover every commit the pinned snapshot sees. In
    // write-back mode nothing waits for them: every instance leaves through
    // `remove_dirty`, durably, clean or not.
    if let Some(dirty) = dirty {
        report.skipped_dirty = keys.len() as u64;
        dirty.extend(keys.iter().filter_map(|key| layout.normalize_root_key(key)));
        return Ok(report);
    }
    if !marks_current(entry)? {
        report.skipped_dirty = keys.len() as u64;
        return Ok(report);
    }
    for key in keys {
        let Some(key) = layout.normalize_root_key(key) else { continue };
        if entry.is_dirty(&key) || gone.is_some_and(|admits| !admits(&key)) {
            report.skipped_dirty += 1;
            if let Some(dirty) = dirty.as_mut()
                && entry.is_dirty(&key)
            {
                dirty.push(key);
            }
            continue;
        }
        // One a transaction that missed on it holds (`InstancePin`) is
        // left, as one whose rows an application has locked.
        if !entry.evicting.begin(&key) {
            report.skipped_locked += 1;
            continue;
        }
        deleting.keys.push(key.clone());
        // Each instance under a savepoint: one an application holds (or
        // changed since the pinned snapshot) is left, not the whole batch
        // (on a busy cache a batch of hundreds nearly always meets one).
        let savepoint = txn.savepoint()?;
        let read = match layout.read(&mut txn, &key) {
            Ok(Some(instance)) => layout.delete(&mut txn, &instance).map(|()| Some(instance)),
            other => other,
        };
        let instance = match read {
            Ok(instance) => {
                txn.release_savepoint(savepoint)?;
                instance
            }
            Err(error) if is_conflict(&error) => {
                txn.rollback_to_savepoint(savepoint)?;
                txn.release_savepoint(savepoint)?;
                report.skipped_locked += 1;
                continue;
            }
            Err(error) => return Err(error),
        };
        if let Some(instance) = instance {
            if let Some(demotion) = demotion
                && demotion.demote(&key, &instance)
            {
                demoted.push(key);
            }
            report.instances += 1;
            report.rows += instance.row_count();
        }
    }
    txn.commit()?;
    drop(deleting);
    Ok(report)
}

/// Ends the evictions of its keys when dropped: after the commit, or on
/// any way out before it (the transaction then rolls back).
struct Deleting<'a> {
    entry: &'a GroupEntry,
    keys: Vec<Vec<Value>>,
}

impl Drop for Deleting<'_> {
    fn drop(&mut self) {
        self.entry.evicting.end(&self.keys);
    }
}
