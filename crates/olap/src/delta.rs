//! A table copy's delta: the row changes committed since the chunks' base
//! ts, in commit order, indexed as they arrive so that what a snapshot
//! sees of them is one pass over a prefix, and kept in blocks whose Arrow
//! columns are converted once for every view until the next merge.
//!
//! Each entry knows, from the moment a later change of its key arrives,
//! the ts that superseded it (`superseded`), and whether it is its key's
//! first in the delta (`first`). At snapshot S, over the entries with
//! ts <= S:
//! - an entry is the key's row at S when it is not a delete and nothing
//!   superseded it at or before S;
//! - an entry first of its key and not an INSERT replaced the key's row in
//!   the chunks (an INSERT's key had no live row just before, so none at
//!   the chunks' base ts either: a key is inserted only where none is
//!   live, and the engine logs a key's change as its delete and an insert).
//!
//! Before, every view and merge built a hash map over the whole delta (a
//! CH-benCHmark query beside TPC-C spent 6 ms per table scan on it and on
//! converting delta rows, against under 1 ms alone); now `apply` does one
//! map operation per change, and conversions are per block, not per view.
//!
//! Positions shift when a merge drops the entries it folded: `drop_upto`
//! re-indexes what is left (the map, `first`, the blocks, their caches).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_buffer::BooleanBuffer;
use parking_lot::Mutex;
use pgtier_engine::{CommitTs, RowChange, ValueRef};

use crate::copy::Layout;
use crate::error::{OlapError, Result};
use crate::types::ColumnBuilder;

/// Entries per block: its columns are converted to Arrow once, by the
/// first view that reads them, and kept until the next merge.
pub(crate) const SEGMENT_ROWS: usize = 1024;

/// [`DeltaEntry::located`] not known yet.
pub(crate) const UNLOCATED: u64 = u64::MAX;
/// [`DeltaEntry::located`]: no live row of the key in the chunks.
pub(crate) const NOT_IN_CHUNKS: u64 = u64::MAX - 1;
/// [`DeltaEntry::superseded`]: no later change of the key.
const CURRENT: u64 = u64::MAX;

/// A committed row change not yet merged.
pub(crate) struct DeltaEntry {
    ts: CommitTs,
    hash: u64,
    key: Arc<[u8]>,
    /// The row after the change, as the commit stream gave it (its image
    /// bytes: one allocation, decoded when a view or merge needs the
    /// values); None: deleted.
    row: Option<Arc<RowChange>>,
    /// An INSERT: the key had no live row just before.
    inserted: bool,
    /// The ts of the key's next change in the delta ([`CURRENT`]: none).
    superseded: u64,
    /// The key's first entry in the delta.
    first: bool,
    /// Where the key's live row is in the current chunks, once a view or
    /// merge has looked ([`UNLOCATED`] before, [`NOT_IN_CHUNKS`]): the
    /// chunks change only at a merge, which forgets every entry's, so each
    /// changed key is looked up once per merge, not once per view.
    /// Meaningful on `first` entries only.
    located: u64,
}

impl DeltaEntry {
    pub(crate) fn new(ts: CommitTs, hash: u64, key: Arc<[u8]>, row: Option<Arc<RowChange>>, inserted: bool) -> Self {
        DeltaEntry { ts, hash, key, row, inserted, superseded: CURRENT, first: true, located: UNLOCATED }
    }

    fn visible_at(&self, snapshot: u64) -> bool {
        self.row.is_some() && self.superseded > snapshot
    }
}

/// A key in the map of latest entries: hashed by the hash it carries.
struct DeltaKey {
    hash: u64,
    key: Arc<[u8]>,
}

impl Hash for DeltaKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl PartialEq for DeltaKey {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.key == other.key
    }
}

impl Eq for DeltaKey {}

/// Passes a [`DeltaKey`]'s hash through (it is foldhash's already).
#[derive(Default)]
struct PassHasher(u64);

impl Hasher for PassHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// [`SEGMENT_ROWS`] consecutive entries' row images (a delete's: None)
/// and key hashes, and their columns in Arrow form as views asked for
/// them (a delete is a null there, and never visible).
pub(crate) struct DeltaSegment {
    rows: Box<[(u64, Option<Arc<RowChange>>)]>,
    columns: Mutex<Vec<Option<ArrayRef>>>,
}

impl DeltaSegment {
    fn new(entries: &[DeltaEntry], columns: usize) -> DeltaSegment {
        DeltaSegment {
            rows: entries.iter().map(|e| (e.hash, e.row.clone())).collect(),
            columns: Mutex::new(vec![None; columns]),
        }
    }

    /// Column `c` of every row, converted by the first caller.
    pub(crate) fn column(&self, layout: &Layout, c: usize) -> Result<ArrayRef> {
        if let Some(a) = &self.columns.lock()[c] {
            return Ok(Arc::clone(a));
        }
        // Two views converting at once make the same array; one is kept.
        let array = convert(layout, c, self.rows.iter().map(|(_, r)| r.as_deref()))?;
        self.columns.lock()[c] = Some(Arc::clone(&array));
        Ok(array)
    }

    /// The rows `mask` keeps, with their key hashes.
    fn rows_in<'a>(&'a self, mask: &'a BooleanBuffer) -> impl Iterator<Item = (u64, &'a Arc<RowChange>)> + 'a {
        mask.set_indices().filter_map(|i| {
            let (hash, row) = &self.rows[i];
            row.as_ref().map(|r| (*hash, r))
        })
    }
}

/// Column `c` of `rows` (None: a null) in its Arrow form.
pub(crate) fn convert<'a>(
    layout: &Layout,
    c: usize,
    rows: impl ExactSizeIterator<Item = Option<&'a RowChange>>,
) -> Result<ArrayRef> {
    let mut builder = ColumnBuilder::new(layout.arrow.field(c).data_type(), rows.len());
    for row in rows {
        let v = row.map_or(ValueRef::Null, |r| r.row().get(c));
        builder.append(v).map_err(|reason| OlapError::ValueNotRepresentable {
            table: layout.table.name.clone(),
            column: layout.table.columns[c].name.clone(),
            reason,
        })?;
    }
    Ok(builder.finish())
}

/// A key whose row in the chunks the delta replaced by some snapshot: its
/// first entry's position, hash, key and [`DeltaEntry::located`].
pub(crate) struct Lookup {
    pub(crate) position: usize,
    pub(crate) hash: u64,
    pub(crate) key: Arc<[u8]>,
    pub(crate) located: u64,
}

/// What the delta holds at one snapshot.
pub(crate) struct DeltaAt {
    /// The keys whose chunk rows it replaced.
    pub(crate) replaced: Vec<Lookup>,
    /// Debug builds: the keys first inserted (never in the chunks), for
    /// `locate` to check.
    pub(crate) inserted: Vec<Lookup>,
    /// Full blocks, each with the mask of its entries that are rows at the
    /// snapshot (blocks without any left out).
    pub(crate) segments: Vec<(Arc<DeltaSegment>, BooleanBuffer)>,
    /// The rows at the snapshot past the full blocks, with their key hashes.
    pub(crate) rest: Vec<(u64, Arc<RowChange>)>,
}

impl DeltaAt {
    pub(crate) fn rows(&self) -> usize {
        self.segments.iter().map(|(_, m)| m.count_set_bits()).sum::<usize>() + self.rest.len()
    }

    /// Every row at the snapshot, with its key hash, in commit order.
    pub(crate) fn each_row(&self) -> impl Iterator<Item = (u64, &Arc<RowChange>)> + '_ {
        self.segments.iter().flat_map(|(s, m)| s.rows_in(m)).chain(self.rest.iter().map(|(h, r)| (*h, r)))
    }
}

/// The delta of one table copy (under the copy's mutex).
pub(crate) struct Delta {
    entries: Vec<DeltaEntry>,
    /// Each key's latest entry.
    latest: HashMap<DeltaKey, u32, BuildHasherDefault<PassHasher>>,
    /// `entries` by full blocks of [`SEGMENT_ROWS`], in order.
    segments: Vec<Arc<DeltaSegment>>,
    /// Columns of the table (the blocks' caches have one slot each).
    columns: usize,
}

impl Delta {
    pub(crate) fn new(columns: usize) -> Delta {
        Delta { entries: Vec::new(), latest: HashMap::default(), segments: Vec::new(), columns }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn first_ts(&self) -> Option<u64> {
        self.entries.first().map(|e| e.ts.get())
    }

    /// Appends a change (commit order).
    pub(crate) fn push(&mut self, mut entry: DeltaEntry) {
        assert!(self.entries.last().is_none_or(|e| e.ts <= entry.ts), "changes applied out of commit order");
        let position = self.entries.len();
        let position32 = u32::try_from(position).expect("a delta past u32 positions (delta_rows_max bounds it)");
        match self.latest.entry(DeltaKey { hash: entry.hash, key: Arc::clone(&entry.key) }) {
            Entry::Occupied(mut latest) => {
                let before = *latest.get() as usize;
                self.entries[before].superseded = entry.ts.get();
                entry.first = false;
                *latest.get_mut() = position32;
            }
            Entry::Vacant(slot) => {
                slot.insert(position32);
            }
        }
        self.entries.push(entry);
        if self.entries.len().is_multiple_of(SEGMENT_ROWS) {
            let block = &self.entries[self.entries.len() - SEGMENT_ROWS..];
            self.segments.push(Arc::new(DeltaSegment::new(block, self.columns)));
        }
    }

    /// Drops the entries at or before `upto` (folded into the chunks, or
    /// held by a scan at that snapshot) and re-indexes the rest; the
    /// chunks changed, so no key's location is known any more.
    pub(crate) fn drop_upto(&mut self, upto: u64) {
        let keep = self.entries.split_off(self.entries.partition_point(|e| e.ts.get() <= upto));
        self.entries.clear();
        self.latest.clear();
        self.segments.clear();
        for mut e in keep {
            e.first = true;
            e.located = UNLOCATED;
            self.push(e);
        }
    }

    pub(crate) fn clear(&mut self) {
        *self = Delta::new(self.columns);
    }

    /// What the delta holds at `snapshot`: one pass over the entries at or
    /// before it.
    pub(crate) fn at(&self, snapshot: u64) -> DeltaAt {
        let end = self.entries.partition_point(|e| e.ts.get() <= snapshot);
        let seen = &self.entries[..end];
        let lookups = |inserted: bool| -> Vec<Lookup> {
            seen.iter()
                .enumerate()
                .filter(|(_, e)| e.first && e.inserted == inserted)
                .map(|(position, e)| Lookup { position, hash: e.hash, key: Arc::clone(&e.key), located: e.located })
                .collect()
        };
        let replaced = lookups(false);
        let inserted = if cfg!(debug_assertions) { lookups(true) } else { Vec::new() };
        let full = self.segments.len().min(end / SEGMENT_ROWS);
        let mut segments = Vec::with_capacity(full);
        for (s, segment) in self.segments[..full].iter().enumerate() {
            let block = &seen[s * SEGMENT_ROWS..(s + 1) * SEGMENT_ROWS];
            let mask = BooleanBuffer::collect_bool(SEGMENT_ROWS, |i| block[i].visible_at(snapshot));
            if mask.count_set_bits() > 0 {
                segments.push((Arc::clone(segment), mask));
            }
        }
        let rest = seen[full * SEGMENT_ROWS..]
            .iter()
            .filter(|e| e.visible_at(snapshot))
            .filter_map(|e| e.row.as_ref().map(|r| (e.hash, Arc::clone(r))))
            .collect();
        let at = DeltaAt { replaced, inserted, segments, rest };
        if cfg!(debug_assertions) {
            self.check_at(snapshot, &at);
        }
        at
    }

    /// The debug builds' oracle for [`Delta::at`]: each key's latest entry
    /// at or before `snapshot` by a map built afresh.
    fn check_at(&self, snapshot: u64, at: &DeltaAt) {
        let mut latest: HashMap<&[u8], usize> = HashMap::new();
        let mut first: HashMap<&[u8], usize> = HashMap::new();
        for (i, e) in self.entries.iter().enumerate().take_while(|(_, e)| e.ts.get() <= snapshot) {
            latest.insert(&e.key, i);
            first.entry(&e.key).or_insert(i);
        }
        let mut rows: Vec<usize> = latest.values().copied().collect();
        rows.sort_unstable();
        let want: Vec<*const RowChange> =
            rows.iter().filter_map(|&i| self.entries[i].row.as_ref()).map(Arc::as_ptr).collect();
        let got: Vec<*const RowChange> = at.each_row().map(|(_, r)| Arc::as_ptr(r)).collect();
        assert_eq!(got, want, "the delta's rows at snapshot {snapshot}");
        let mut replaced: Vec<usize> = first.values().copied().filter(|&i| !self.entries[i].inserted).collect();
        replaced.sort_unstable();
        let got: Vec<usize> = at.replaced.iter().map(|l| l.position).collect();
        assert_eq!(got, replaced, "the keys the delta replaced at snapshot {snapshot}");
    }

    /// Records where the keys at `found` positions are in the chunks (the
    /// caller checked the chunks are those they were looked up in).
    pub(crate) fn remember(&mut self, found: &[Lookup]) {
        for f in found {
            let e = &mut self.entries[f.position];
            assert!(e.hash == f.hash && e.first, "a delta position moved without a merge");
            e.located = f.located;
        }
    }
}
