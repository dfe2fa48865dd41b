//! Reads at the statement snapshot: point reads by primary key, index
//! range scans (a unique index's whole-key equality through its probe),
//! whole-table scans. Readers never wait.

use std::ops::Bound;
use std::sync::atomic::Ordering;

use super::{Transaction, encode_pk, undefined};
use crate::error::{EngineError, Result};
use crate::ids::TxnId;
use crate::key::hash_key;
use crate::ordered::{ENTRY_BYTES_MAX, batch_entries, prefix_successor_in_place};
use crate::primary::TABLE_SHARDS;
use crate::row_ref::{RowBuf, RowRef};
use crate::schema::{IndexId, TableId};
use crate::seams::{Miss, MissIntent};
use crate::table::{IndexStore, TableStore};
use crate::types::Value;

/// Entries copied per ordered-index lock acquisition during scans.
const SCAN_BATCH_ENTRIES: usize = 128;

/// A table without a primary key up to this many rows is scanned in row id
/// (insertion) order: its rows are copied out whole and sorted first, so
/// the bound caps what one scan holds (about 10 MB of rows of 100 bytes).
/// Larger ones come in shard order, as tables with a key do.
pub const ROWID_ORDER_ROWS_MAX: i64 = 100_000;

/// Rows in one piece of [`Transaction::scan_piece_shards`], about: a
/// piece's rows copied out as values cost a few MB, where a whole table of
/// millions cost GBs.
pub const SCAN_PIECE_ROWS: i64 = 16_384;

impl Transaction {
    /// Reads the row with primary key `key` visible to this statement.
    /// An application transaction that finds nothing asks the table's miss
    /// hook, if it has one (transaction/miss.rs), and then looks again.
    pub fn get(&mut self, table: TableId, key: &[Value], out: &mut RowBuf) -> Result<bool> {
        self.prologue()?;
        self.retrying_key_miss(table, key, MissIntent::Read, |t| t.get_inner(table, key, out))
    }

    pub(super) fn get_inner(&mut self, table: TableId, key: &[Value], out: &mut RowBuf) -> Result<bool> {
        let Some(store) = self.cat.store(table) else { return Err(undefined(table)) };
        let Some(hash) = encode_pk(store, key, &mut self.s.key)? else { return Ok(false) };
        let tick = self.touch_tick(store);
        let mut found =
            store.read_visible(hash, &self.s.key, self.id, self.snapshot, tick, &mut self.s.scratch, &mut out.data)?;
        if !found
            && !self.miss_rows.is_empty()
            && let Some(row) = self.answered_row(store, &self.s.key)
        {
            out.data.clear();
            out.data.extend_from_slice(row);
            found = true;
        }
        if found {
            out.set_schema(&store.schema);
        }
        Ok(found)
    }

    /// Like [`Transaction::get`] without copying: `f` sees the row in place.
    /// `f` runs under an internal read lock and must not call the engine.
    pub fn get_with<R>(&mut self, table: TableId, key: &[Value], f: impl FnOnce(RowRef<'_>) -> R) -> Result<Option<R>> {
        self.prologue()?;
        let mut f = Some(f);
        // The hit path is spelled out here (not through `get_with_inner`),
        // so it compiles as before the miss hook: no result moved around.
        let Some(store) = self.cat.store(table) else {
            let e = Err(undefined(table));
            return self.check(e);
        };
        let hash = match encode_pk(store, key, &mut self.s.key) {
            Ok(Some(hash)) => hash,
            Ok(None) => return Ok(None),
            Err(e) => return self.check(Err(e)),
        };
        let schema = &store.schema;
        let tick = self.touch_tick(store);
        let found = store.with_visible(hash, &self.s.key, self.id, self.snapshot, tick, &mut self.s.scratch, |row| {
            f.take().map(|f| f(RowRef::new(schema, row)))
        });
        match found {
            Ok(Some(Some(v))) => return Ok(Some(v)),
            Ok(_) => {}
            Err(e) => return self.check(Err(e)),
        }
        self.get_with_missed(table, key, f)
    }

    #[cold]
    fn get_with_missed<R, F: FnOnce(RowRef<'_>) -> R>(
        &mut self,
        table: TableId,
        key: &[Value],
        mut f: Option<F>,
    ) -> Result<Option<R>> {
        match self.retry_key(&mut false, table, key, MissIntent::Read) {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(e) => return self.check(Err(e)),
        }
        let r = self.get_with_inner(table, key, &mut f);
        if r.is_err() {
            return self.check(r);
        }
        r
    }

    /// `f` is taken when it runs.
    fn get_with_inner<R, F: FnOnce(RowRef<'_>) -> R>(
        &mut self,
        table: TableId,
        key: &[Value],
        f: &mut Option<F>,
    ) -> Result<Option<R>> {
        let Some(store) = self.cat.store(table) else { return Err(undefined(table)) };
        let Some(hash) = encode_pk(store, key, &mut self.s.key)? else { return Ok(None) };
        let schema = &store.schema;
        let tick = self.touch_tick(store);
        let found =
            store.with_visible(hash, &self.s.key, self.id, self.snapshot, tick, &mut self.s.scratch, |row| {
                f.take().map(|f| f(RowRef::new(schema, row)))
            })?;
        if let Some(Some(v)) = found {
            return Ok(Some(v));
        }
        if !self.miss_rows.is_empty()
            && let Some(row) = self.answered_row(store, &self.s.key)
        {
            return Ok(f.take().map(|f| f(RowRef::new(schema, row))));
        }
        Ok(None)
    }

    /// Scans index `index` over `[lower, upper]` (bounds on leading key
    /// columns; `Bound::Included(&[a])` on a composite key is a prefix
    /// bound). Calls `f` with each visible row in key order until it
    /// returns false; returns the number of rows visited.
    ///
    /// An equality scan (both bounds `Included` of the same prefix) that
    /// visits nothing in an application transaction asks the table's miss
    /// hook, if it has one, and then scans again.
    pub fn scan(
        &mut self,
        index: IndexId,
        lower: Bound<&[Value]>,
        upper: Bound<&[Value]>,
        mut f: impl FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Result<u64> {
        self.prologue()?;
        let mut asked = false;
        loop {
            match self.scan_inner(index, lower, upper, &mut f) {
                Ok(0) if !self.miss_rows.is_empty() => match self.scan_answered(index, lower, upper, &mut f) {
                    Ok(Some(n)) => return Ok(n),
                    Ok(None) => match self.retry_scan(&mut asked, index, lower, upper) {
                        Ok(true) => continue,
                        Ok(false) => return Ok(0),
                        Err(e) => return self.check(Err(e)),
                    },
                    Err(e) => return self.check(Err(e)),
                },
                Ok(0) => match self.retry_scan(&mut asked, index, lower, upper) {
                    Ok(true) => continue,
                    Ok(false) => return Ok(0),
                    Err(e) => return self.check(Err(e)),
                },
                Ok(n) => return Ok(n),
                Err(e) => return self.check(Err(e)),
            }
        }
    }

    /// After a scan visited nothing: true to scan once more (an equality
    /// scan, the first time, and the table's hook loaded rows).
    #[cold]
    fn retry_scan(
        &mut self,
        asked: &mut bool,
        index: IndexId,
        lower: Bound<&[Value]>,
        upper: Bound<&[Value]>,
    ) -> Result<bool> {
        if std::mem::replace(asked, true) {
            return Ok(false);
        }
        let Some(table) = self.cat.catalog.index(index).map(|i| i.table) else { return Ok(false) };
        let Some(store) = self.cat.store(table) else { return Ok(false) };
        let Some(hook) = self.miss_hook(store) else { return Ok(false) };
        let prefix = match (lower, upper) {
            (Bound::Included(l), Bound::Included(u)) if std::ptr::eq(l, u) || l == u => l,
            _ => return Ok(false),
        };
        self.resolve_miss(&*hook, Miss::Prefix { table, index, prefix }, MissIntent::Read)
    }

    /// A scan the table had nothing for, inside rows a hook answered with
    /// (miss_rows.rs): visits those in the range, in key order. None: no
    /// answer covers it.
    #[cold]
    fn scan_answered(
        &mut self,
        index: IndexId,
        lower: Bound<&[Value]>,
        upper: Bound<&[Value]>,
        f: &mut impl FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Result<Option<u64>> {
        let Some(rows) = self.answered_scan(index, lower, upper)? else { return Ok(None) };
        let Some(table) = self.cat.catalog.index(index).map(|i| i.table) else { return Ok(None) };
        let store = self.store(table)?;
        let mut visited = 0;
        for row in &rows {
            visited += 1;
            if !f(RowRef::new(&store.schema, row))? {
                break;
            }
        }
        Ok(Some(visited))
    }

    /// All rows whose leading key columns equal `prefix`.
    pub fn scan_prefix(
        &mut self,
        index: IndexId,
        prefix: &[Value],
        f: impl FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Result<u64> {
        self.scan(index, Bound::Included(prefix), Bound::Included(prefix), f)
    }

    fn scan_inner(
        &mut self,
        index: IndexId,
        lower: Bound<&[Value]>,
        upper: Bound<&[Value]>,
        mut f: impl FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Result<u64> {
        let ischema = self
            .cat
            .catalog
            .index(index)
            .cloned()
            .ok_or_else(|| EngineError::UndefinedObject { what: "index", name: format!("id {}", index.0) })?;
        let store = self.store(ischema.table)?;
        let meta = store.meta();
        let Some(istore) = meta.index(index).cloned() else {
            return Err(EngineError::FeatureNotSupported(format!(
                "range scan on hash-only index \"{}\"",
                ischema.name
            )));
        };
        let (mut lo, mut hi) = (std::mem::take(&mut self.s.lo), std::mem::take(&mut self.s.hi));
        let (mut from, to) = encode_bounds(&istore, lower, upper, &mut lo, &mut hi)?;
        if let Some(probe) = &istore.probe
            && whole_key_equality(&istore, lower, upper)
        {
            // At most one visible row has this key: the probe finds it
            // without walking the tree (see `probe`).
            if let Some(r) = self.probe_equal(&store, &istore, probe, &lo, &mut f) {
                (self.s.lo, self.s.hi) = (lo, hi);
                return r;
            }
        }
        let mut visited = 0u64;
        let tick = self.touch_tick(&store);
        loop {
            self.s.batch.clear();
            let n = istore.tree.scan(from.of(&lo), to.of(&hi), SCAN_BATCH_ENTRIES, &mut self.s.batch);
            let batch = std::mem::take(&mut self.s.batch);
            let mut last: &[u8] = &[];
            let mut stop = false;
            for entry in batch_entries(&batch) {
                last = entry;
                let (index_key, pk) = istore.split(entry);
                let hash = hash_key(pk);
                let found =
                    store.read_visible(hash, pk, self.id, self.snapshot, tick, &mut self.s.scratch, &mut self.s.row)?;
                if !found {
                    continue;
                }
                if !istore.schema.primary {
                    // The entry may belong to another version of the row.
                    self.s.tmp.clear();
                    istore.spec.encode_row(store.layout(), &self.s.row, &mut self.s.tmp);
                    if self.s.tmp.as_slice() != index_key {
                        continue;
                    }
                }
                visited += 1;
                match f(RowRef::new(&store.schema, &self.s.row)) {
                    Ok(true) => {}
                    Ok(false) => {
                        stop = true;
                        break;
                    }
                    // The batch buffer is dropped on this error path.
                    Err(e) => return Err(e),
                }
            }
            if stop || n < SCAN_BATCH_ENTRIES {
                self.s.batch = batch;
                (self.s.lo, self.s.hi) = (lo, hi);
                return Ok(visited);
            }
            // Resume after the last entry of this batch.
            lo.clear();
            lo.extend_from_slice(last);
            from = BoundKind::Excluded;
            self.s.batch = batch;
        }
    }

    /// Visits the row of a unique secondary index whose whole key is `key`
    /// (encoded), found through the index's probe. None: too many rows once
    /// carried the key for the probe's bounded candidate list; scan the tree.
    fn probe_equal(
        &mut self,
        store: &TableStore,
        istore: &IndexStore,
        probe: &parking_lot::RwLock<crate::probe::ProbeTable>,
        key: &[u8],
        f: &mut impl FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Option<Result<u64>> {
        let mut candidates = [0u64; 8];
        let mut n = 0;
        let mut overflow = false;
        probe.read().candidates(hash_key(key), |pk_hash| {
            if candidates[..n].contains(&pk_hash) {
                return;
            }
            if n == candidates.len() {
                overflow = true;
                return;
            }
            candidates[n] = pk_hash;
            n += 1;
        });
        // Only a long history of one key moving between rows (within what
        // old snapshots still see) gets here.
        if overflow {
            return None;
        }
        let layout = store.layout();
        let mut tmp = std::mem::take(&mut self.s.tmp);
        let mut row = std::mem::take(&mut self.s.row);
        let mut visited = 0;
        let mut result = Ok(());
        let tick = self.touch_tick(store);
        for &pk_hash in &candidates[..n] {
            let found = store.read_visible_where(pk_hash, self.id, self.snapshot, tick, &mut row, |r| {
                tmp.clear();
                istore.spec.encode_row(layout, r, &mut tmp);
                tmp.as_slice() == key
            });
            match found {
                Ok(true) => {
                    visited += 1;
                    result = f(RowRef::new(&store.schema, &row)).map(|_| ());
                    break;
                }
                Ok(false) => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        (self.s.tmp, self.s.row) = (tmp, row);
        Some(result.map(|()| visited))
    }

    /// Visits every visible row of `table`. Rows are copied out shard by
    /// shard, so `f` may call the engine. A table with a primary key comes
    /// in no order. One without (a hidden row id) of at most
    /// [`ROWID_ORDER_ROWS_MAX`] rows comes in row id order, the order its
    /// rows were inserted: the order PostgreSQL's heap returns a table
    /// nobody updated, which applications and tests that omit ORDER BY
    /// often expect though SQL promises none. (An UPDATE keeps a row's id,
    /// where PostgreSQL's new row version moves to the heap's end.)
    pub fn scan_table(&mut self, table: TableId, mut f: impl FnMut(RowRef<'_>) -> Result<bool>) -> Result<u64> {
        let store = match self.store(table) {
            Ok(s) => s,
            Err(e) => return self.check(Err(e)),
        };
        let small = store.live_rows.load(Ordering::Relaxed) <= ROWID_ORDER_ROWS_MAX;
        if !store.schema.has_rowid() || !small {
            return self.scan_table_shards(table, 0..TABLE_SHARDS, f);
        }
        let rowid = store.schema.columns.len() - 1;
        let mut rows: Vec<(i64, Vec<u8>)> = Vec::new();
        self.scan_table_shards(table, 0..TABLE_SHARDS, |r| {
            let id = r.get_i64(rowid).expect("a stored row's hidden row id is never null");
            rows.push((id, r.bytes().to_vec()));
            Ok(true)
        })?;
        rows.sort_unstable_by_key(|(id, _)| *id);
        let mut visited = 0;
        let mut result = Ok(());
        for (_, bytes) in &rows {
            visited += 1;
            match f(RowRef::new(&store.schema, bytes)) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        let result = result.map(|()| visited);
        self.check(result)
    }

    /// How to walk `table` a piece at a time, holding a bounded number of
    /// its rows at once (a caller that copies rows out before acting on
    /// them, as a join does): the shards per piece for
    /// [`Transaction::scan_table_shards`], which over consecutive pieces
    /// visits the rows [`Transaction::scan_table`] would, in its order; a
    /// piece holds about [`SCAN_PIECE_ROWS`] rows (one piece: the whole
    /// table, when small). None: `scan_table` orders the rows otherwise
    /// (a small table without a primary key, in row id order); walk it
    /// whole.
    pub fn scan_piece_shards(&self, table: TableId) -> Result<Option<usize>> {
        let store = self.store(table)?;
        let rows = store.live_rows.load(Ordering::Relaxed).max(1);
        if store.schema.has_rowid() && rows <= ROWID_ORDER_ROWS_MAX {
            return Ok(None);
        }
        let per = (TABLE_SHARDS as i64).saturating_mul(SCAN_PIECE_ROWS) / rows;
        Ok(Some(per.clamp(1, TABLE_SHARDS as i64) as usize))
    }

    /// Visits the visible rows of `table` stored in `shards` (a range of
    /// `0..TABLE_SHARDS`; a row's shard follows from its primary key's hash,
    /// so the shards part the rows into fixed, evenly sized sets that do not
    /// move as the table grows). For a caller that walks a table a part at a
    /// time, as a clock hand (aging). Like [`Transaction::scan_table`]
    /// otherwise.
    pub fn scan_table_shards(
        &mut self,
        table: TableId,
        shards: std::ops::Range<usize>,
        f: impl FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Result<u64> {
        self.scan_shards_as(self.id, table, shards, f)
    }

    /// [`Transaction::scan_table_shards`] seeing only what committed before
    /// the snapshot, none of this transaction's own writes. For a
    /// transaction that had written nothing when the statement began, the
    /// rows the statement's snapshot holds, whatever the statement writes
    /// meanwhile (a function called per row): a scan walked in pieces over
    /// [`Transaction::scan_piece_shards`] then never meets rows its own
    /// statement wrote, as PostgreSQL's scan does not.
    pub fn scan_committed_shards(
        &mut self,
        table: TableId,
        shards: std::ops::Range<usize>,
        f: impl FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Result<u64> {
        self.scan_shards_as(TxnId::NOBODY, table, shards, f)
    }

    /// Visits the rows of `table` in `shards` visible to `me` at the snapshot.
    fn scan_shards_as(
        &mut self,
        me: TxnId,
        table: TableId,
        shards: std::ops::Range<usize>,
        mut f: impl FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Result<u64> {
        assert!(shards.end <= TABLE_SHARDS, "shard range {shards:?} past {TABLE_SHARDS}");
        self.prologue()?;
        let store = match self.store(table) {
            Ok(s) => s,
            Err(e) => return self.check(Err(e)),
        };
        let mut visited = 0;
        let mut buf = std::mem::take(&mut self.s.batch);
        let mut result = Ok(visited);
        let tick = self.touch_tick(&store);
        'outer: for shard in shards {
            buf.clear();
            if let Err(e) = store.scan_shard(shard, me, self.snapshot, tick, &mut buf) {
                result = Err(e);
                break;
            }
            let mut at = 0;
            while at + 4 <= buf.len() {
                let len = u32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize;
                let row = &buf[at + 4..at + 4 + len];
                at += 4 + len;
                visited += 1;
                match f(RowRef::new(&store.schema, row)) {
                    Ok(true) => {}
                    Ok(false) => break 'outer,
                    Err(e) => {
                        result = Err(e);
                        break 'outer;
                    }
                }
            }
        }
        self.s.batch = buf;
        let result = result.map(|_| visited);
        self.check(result)
    }
}

/// The kind of an encoded scan bound kept in a reused buffer.
#[derive(Clone, Copy)]
pub(super) enum BoundKind {
    Included,
    Excluded,
    Unbounded,
}

impl BoundKind {
    pub(super) fn of(self, key: &[u8]) -> Bound<&[u8]> {
        match self {
            BoundKind::Included => Bound::Included(key),
            BoundKind::Excluded => Bound::Excluded(key),
            BoundKind::Unbounded => Bound::Unbounded,
        }
    }
}

/// True when `[lower, upper]` asks for one whole key of `index`, none of
/// whose values is NULL (NULL keys may repeat in a unique index).
fn whole_key_equality(index: &IndexStore, lower: Bound<&[Value]>, upper: Bound<&[Value]>) -> bool {
    match (lower, upper) {
        (Bound::Included(l), Bound::Included(u)) => {
            l.len() == index.spec.columns.len() && (std::ptr::eq(l, u) || l == u) && !l.iter().any(Value::is_null)
        }
        _ => false,
    }
}

/// Encodes a scan's bounds into `lo`/`hi` (reused across scans, so a
/// point or prefix scan allocates nothing).
pub(super) fn encode_bounds(
    index: &IndexStore,
    lower: Bound<&[Value]>,
    upper: Bound<&[Value]>,
    lo: &mut Vec<u8>,
    hi: &mut Vec<u8>,
) -> Result<(BoundKind, BoundKind)> {
    let enc = |vals: &[Value], out: &mut Vec<u8>| -> Result<()> {
        if vals.len() > index.spec.columns.len() {
            return Err(EngineError::definition(
                "42601",
                format!("index \"{}\" has {} columns", index.schema.name, index.spec.columns.len()),
            ));
        }
        out.clear();
        if !index.spec.encode_values(vals, out) {
            return Err(EngineError::OutOfRange {
                message: format!("scan bound out of range for index \"{}\"", index.schema.name),
            });
        }
        Ok(())
    };
    let from = match lower {
        Bound::Included(v) => {
            enc(v, lo)?;
            BoundKind::Included
        }
        Bound::Excluded(v) => {
            enc(v, lo)?;
            if !prefix_successor_in_place(lo) {
                // Nothing sorts after an all-0xFF prefix: an empty range.
                lo.clear();
                lo.resize(ENTRY_BYTES_MAX + 1, 0xFF);
                return Ok((BoundKind::Excluded, BoundKind::Unbounded));
            }
            BoundKind::Included
        }
        Bound::Unbounded => BoundKind::Unbounded,
    };
    let to = match upper {
        // An equality prefix (both bounds the same slice): encoded once.
        Bound::Included(v) if matches!(lower, Bound::Included(l) if std::ptr::eq(l, v)) => {
            hi.clear();
            hi.extend_from_slice(lo);
            if prefix_successor_in_place(hi) { BoundKind::Excluded } else { BoundKind::Unbounded }
        }
        Bound::Included(v) => {
            enc(v, hi)?;
            if prefix_successor_in_place(hi) { BoundKind::Excluded } else { BoundKind::Unbounded }
        }
        Bound::Excluded(v) => {
            enc(v, hi)?;
            BoundKind::Excluded
        }
        Bound::Unbounded => BoundKind::Unbounded,
    };
    Ok((from, to))
}
