//! One table's columnar copy: immutable Arrow chunks as of a commit ts
//! (`base_ts`), and the delta of row changes committed after it, each
//! tagged with its commit ts. A reader at snapshot S (S >= base_ts) sees
//! the chunks with every row the delta replaced up to S masked out, plus
//! the delta's latest image at or before S of each row: exactly the row
//! store's rows at S once the delta holds every commit up to S (engine.rs
//! makes readers wait for that).
//!
//! Row identity is the primary key (the hidden row id of a table declared
//! without one), as the row store's: the key values' self-describing
//! encoding (`encode_values`). Chunks keep each row's key hash sorted, so a
//! delta key finds its chunk row by binary search and a check of the
//! values; at most one live row per key exists across the chunks.
//!
//! The chunks an enable builds hold the rows in primary key order (the
//! scan gives them in none), and say so to DataFusion while no change has
//! added a row: a GROUP BY or join on the key's leading columns then
//! streams (TPC-H Q18's per-order sums). Rows a merge adds go to the end.
//!
//! A merge folds the delta up to a ts M into new chunks copy-on-write:
//! untouched chunks are shared, a chunk that lost rows gets a new live
//! mask (rebuilt when less than half of it lives), new rows go to a small
//! tail chunk or a new one. Readers holding the old chunk list are
//! unaffected; the new list and base_ts = M replace the old ones under the
//! copy's mutex, together with dropping the merged delta entries.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::builder::{StringBuilder, UInt16Builder};
use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Int16Type, Int32Type, Int64Type, UInt16Type};
use arrow_array::{Array, ArrayRef, BooleanArray, DictionaryArray, RecordBatch};
use arrow_buffer::BooleanBuffer;
use arrow_schema::{DataType as ArrowType, Field, Schema, SchemaRef};
use parking_lot::Mutex;
use pgtier_engine::{CommitTs, RowChange, RowOp, RowRef, TableSchema, Value, ValueRef, encode_values};

use crate::delta::{Delta, DeltaAt, DeltaEntry, DeltaSegment, Lookup, NOT_IN_CHUNKS, UNLOCATED};
use crate::error::{OlapError, Result};
use crate::types::{ColumnBuilder, arrow_type, is_text, plain_bytes, unrepresentable, value_at, value_ref_at};

/// Rows per chunk at most: dictionary keys are u16, so a chunk's distinct
/// strings always fit.
pub const CHUNK_ROWS: usize = 65_536;

/// The Arrow shape of a table's copy, fixed for its life.
pub(crate) struct Layout {
    pub(crate) table: Arc<TableSchema>,
    /// Every column, the hidden row id included (it is the row identity).
    pub(crate) arrow: SchemaRef,
    pub(crate) key_cols: Vec<usize>,
    /// Columns queries see: all but the hidden row id.
    pub(crate) visible: Vec<usize>,
    /// Rows per chunk, at most CHUNK_ROWS (smaller in tests, to make many).
    pub(crate) chunk_rows: usize,
}

impl Layout {
    /// `dictionary[c]`: encode text column c as Dictionary(UInt16, Utf8).
    pub(crate) fn new(table: Arc<TableSchema>, dictionary: &[bool], chunk_rows: usize) -> Result<Layout> {
        assert!((1..=CHUNK_ROWS).contains(&chunk_rows), "chunk_rows {chunk_rows} outside 1..={CHUNK_ROWS}");
        let mut fields = Vec::with_capacity(table.columns.len());
        for (c, col) in table.columns.iter().enumerate() {
            let plain = arrow_type(&table, col)?;
            let ty = if dictionary.get(c).copied().unwrap_or(false) && is_text(col.ty) {
                ArrowType::Dictionary(Box::new(ArrowType::UInt16), Box::new(plain))
            } else {
                plain
            };
            fields.push(Field::new(&col.name, ty, col.nullable));
        }
        let visible = (0..table.columns.len()).filter(|&c| !table.columns[c].is_hidden()).collect();
        let key_cols = table.primary_key.clone();
        Ok(Layout { arrow: Arc::new(Schema::new(fields)), key_cols, visible, table, chunk_rows })
    }

    pub(crate) fn name(&self) -> &str {
        &self.table.name
    }

    /// The identity key of a stored row, and its hash.
    pub(crate) fn key_of_row(&self, row: RowRef<'_>, out: &mut Vec<u8>) -> u64 {
        out.clear();
        let key: Vec<Value> = self.key_cols.iter().map(|&c| row.get(c).to_owned_value()).collect();
        encode_values(&key, out);
        key_hash(out)
    }

    /// The schema of what queries see.
    #[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
    pub(crate) fn visible_schema(&self) -> SchemaRef {
        Arc::new(self.arrow.project(&self.visible).unwrap_or_else(|_| Schema::empty()))
    }

    /// A tail chunk smaller than this takes the next merge's new rows
    /// (rebuilt with them) instead of a new chunk being started: chunks
    /// stay large, and a merge rebuilds at most this many old rows.
    fn tail_rows(&self) -> usize {
        (self.chunk_rows / 8).max(1)
    }
}

pub(crate) fn key_hash(key: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x6f6c_6170).hash_one(key)
}

/// A chunk's (key hash, row) pairs, sorted, with a directory of where
/// each run of equal top hash bits starts: a lookup reads one directory
/// slot and a few pairs, not the 16 scattered probes of a binary search
/// over 65,536 (each view and merge looks up every changed key in every
/// chunk: `locate`). The directory costs 4 bytes per 4 rows.
struct KeyIndex {
    keys: Box<[(u64, u32)]>,
    /// `dir[b]..dir[b + 1]`: the pairs whose hash's top `bits` bits are b.
    dir: Box<[u32]>,
    bits: u32,
}

impl KeyIndex {
    fn new(mut keys: Vec<(u64, u32)>) -> KeyIndex {
        keys.sort_unstable();
        // About four pairs per slot.
        let bits = (usize::BITS - keys.len().leading_zeros()).saturating_sub(2).min(16);
        let slots = 1usize << bits;
        let mut dir = Vec::with_capacity(slots + 1);
        let mut at = 0usize;
        for b in 0..slots as u64 {
            while at < keys.len() && top_bits(keys[at].0, bits) < b {
                at += 1;
            }
            dir.push(at as u32);
        }
        dir.push(keys.len() as u32);
        KeyIndex { keys: keys.into(), dir: dir.into(), bits }
    }

    /// The rows whose key hashes to `hash`.
    fn rows_of(&self, hash: u64) -> impl Iterator<Item = usize> + '_ {
        let b = top_bits(hash, self.bits) as usize;
        let slot = &self.keys[self.dir[b] as usize..self.dir[b + 1] as usize];
        let start = slot.partition_point(|&(h, _)| h < hash);
        slot[start..].iter().take_while(move |&&(h, _)| h == hash).map(|&(_, row)| row as usize)
    }
}

fn top_bits(hash: u64, bits: u32) -> u64 {
    if bits == 0 { 0 } else { hash >> (64 - bits) }
}

/// An immutable piece of a table's copy.
pub(crate) struct Chunk {
    pub(crate) batch: RecordBatch,
    /// Every row's key hash.
    keys: Arc<KeyIndex>,
    /// Rows still live (merged deletes clear them); None: all are.
    live: Option<BooleanBuffer>,
    pub(crate) live_rows: usize,
    /// Per column, the plain size of the values stored (compression figures).
    pub(crate) plain_bytes: Arc<[u64]>,
}

impl Chunk {
    /// A chunk of `columns` (every layout column), all live; `keys` holds
    /// each row's (key hash, row).
    fn new(layout: &Layout, columns: Vec<ArrayRef>, keys: Vec<(u64, u32)>) -> Result<Chunk> {
        let plain_bytes = columns.iter().map(|a| plain_bytes(a.as_ref())).collect();
        let batch =
            RecordBatch::try_new(Arc::clone(&layout.arrow), columns).map_err(|e| OlapError::Arrow(e.to_string()))?;
        assert_eq!(keys.len(), batch.num_rows(), "a chunk's key hashes are not one per row");
        let live_rows = batch.num_rows();
        Ok(Chunk { batch, keys: Arc::new(KeyIndex::new(keys)), live: None, live_rows, plain_bytes })
    }

    pub(crate) fn rows(&self) -> usize {
        self.batch.num_rows()
    }

    fn is_live(&self, row: usize) -> bool {
        self.live.as_ref().is_none_or(|l| l.value(row))
    }

    /// The live row whose key is `key`.
    fn find(&self, layout: &Layout, hash: u64, key: &[u8], scratch: &mut Vec<u8>) -> Option<usize> {
        for row in self.keys.rows_of(hash) {
            if !self.is_live(row) {
                continue;
            }
            scratch.clear();
            let vals: Vec<Value> = layout
                .key_cols
                .iter()
                .map(|&c| value_at(self.batch.column(c).as_ref(), row, layout.table.columns[c].ty))
                .collect();
            encode_values(&vals, scratch);
            if scratch.as_slice() == key {
                return Some(row);
            }
        }
        None
    }

    /// Each row's key hash, by row.
    fn row_hashes(&self) -> Vec<u64> {
        let mut hashes = vec![0u64; self.rows()];
        for &(hash, row) in &self.keys.keys {
            hashes[row as usize] = hash;
        }
        hashes
    }

    /// The live rows, in order, as a merge copies them into new chunks.
    fn live_sources(&self) -> Vec<(u64, Source<'_>)> {
        let hashes = self.row_hashes();
        (0..self.rows()).filter(|&r| self.is_live(r)).map(|r| (hashes[r], Source::Chunk(self, r))).collect()
    }

    /// This chunk with `dead` rows no longer live (sharing its columns).
    fn without(&self, dead: &[usize]) -> Chunk {
        let mut bits: Vec<bool> = (0..self.rows()).map(|r| self.is_live(r)).collect();
        for &r in dead {
            assert!(bits[r], "a merge deletes row {r} of a chunk twice");
            bits[r] = false;
        }
        let live_rows = bits.iter().filter(|&&b| b).count();
        Chunk {
            batch: self.batch.clone(),
            keys: Arc::clone(&self.keys),
            live: Some(BooleanBuffer::collect_bool(bits.len(), |i| bits[i])),
            live_rows,
            plain_bytes: Arc::clone(&self.plain_bytes),
        }
    }

    /// The live rows of `columns` (layout positions). Projected before it
    /// is filtered: a chunk with dead rows is copied, and a query reads a
    /// few of a table's columns (TPC-C's stock has 17, ten of them
    /// 24-character strings), so the copy is of those few.
    pub(crate) fn live_columns(&self, columns: &[usize], also_dead: Option<&BooleanBuffer>) -> Result<RecordBatch> {
        let arrow = |e: arrow_schema::ArrowError| OlapError::Arrow(e.to_string());
        let projected = self.batch.project(columns).map_err(arrow)?;
        let mask = match (&self.live, also_dead) {
            (None, None) => return Ok(projected),
            (Some(l), None) => l.clone(),
            (None, Some(m)) => m.clone(),
            (Some(l), Some(m)) => l & m,
        };
        arrow_select::filter::filter_record_batch(&projected, &BooleanArray::new(mask, None)).map_err(arrow)
    }

    /// Bytes of Arrow memory per column.
    pub(crate) fn arrow_bytes(&self) -> Vec<u64> {
        self.batch.columns().iter().map(|a| a.get_array_memory_size() as u64).collect()
    }
}

/// Builds a chunk row by row.
pub(crate) struct ChunkBuilder {
    cols: Vec<ColumnBuilder>,
    /// Each row's (key hash, row), one per row appended.
    keys: Vec<(u64, u32)>,
}

impl ChunkBuilder {
    pub(crate) fn new(layout: &Layout, capacity: usize) -> ChunkBuilder {
        let cols = layout.arrow.fields().iter().map(|f| ColumnBuilder::new(f.data_type(), capacity)).collect();
        ChunkBuilder { cols, keys: Vec::with_capacity(capacity) }
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Appends a row (column c's value is `get(c)`) whose key hashes to `hash`.
    pub(crate) fn push<'a>(&mut self, layout: &Layout, hash: u64, get: impl Fn(usize) -> ValueRef<'a>) -> Result<()> {
        assert!(self.len() < layout.chunk_rows, "chunk over {} rows", layout.chunk_rows);
        for (c, b) in self.cols.iter_mut().enumerate() {
            b.append(get(c)).map_err(|reason| OlapError::ValueNotRepresentable {
                table: layout.table.name.clone(),
                column: layout.table.columns[c].name.clone(),
                reason,
            })?;
        }
        self.keys.push((hash, self.len() as u32));
        Ok(())
    }

    pub(crate) fn finish(mut self, layout: &Layout) -> Result<Chunk> {
        let columns: Vec<ArrayRef> = self.cols.iter_mut().map(ColumnBuilder::finish).collect();
        Chunk::new(layout, columns, self.keys)
    }
}

/// A row a merge writes into a new chunk: a live row of an old chunk, or
/// a delta change's image. Copied column by column from where it is, with
/// the key hash it already has: no engine value made, no key encoded.
enum Source<'a> {
    Chunk(&'a Chunk, usize),
    Change(&'a RowChange),
}

/// Chunks of `rows` (key hash, source), `chunk_rows` each, in order.
fn chunks_of(layout: &Layout, rows: &[(u64, Source<'_>)]) -> Result<Vec<Arc<Chunk>>> {
    let mut out = Vec::new();
    for part in rows.chunks(layout.chunk_rows) {
        let mut b = ChunkBuilder::new(layout, part.len());
        for (hash, source) in part {
            match *source {
                Source::Chunk(chunk, row) => b.push(layout, *hash, |c| {
                    value_ref_at(chunk.batch.column(c).as_ref(), row, layout.table.columns[c].ty)
                })?,
                Source::Change(change) => {
                    let image = change.row();
                    b.push(layout, *hash, |c| image.get(c))?;
                }
            }
        }
        out.push(Arc::new(b.finish(layout)?));
    }
    Ok(out)
}

/// `chunks` (fresh from a scan, every row live) with their rows in primary
/// key order, Arrow's (the order DataFusion's plans assume: a GROUP BY or
/// a join on the key's leading columns can then stream instead of
/// hashing every row). None when the key has no such order here: a
/// hidden row id (queries never see it), or a dictionary-encoded column
/// (the chunks' dictionaries could not be joined into one).
pub(crate) fn sorted_by_key(layout: &Layout, chunks: &[Arc<Chunk>]) -> Result<Option<Vec<Arc<Chunk>>>> {
    let arrow = |e: arrow_schema::ArrowError| OlapError::Arrow(e.to_string());
    let ordered = layout.key_cols.iter().all(|&k| {
        !layout.table.columns[k].is_hidden() && !matches!(layout.arrow.field(k).data_type(), ArrowType::Dictionary(..))
    });
    if layout.key_cols.is_empty() || !ordered {
        return Ok(None);
    }
    assert!(chunks.iter().all(|c| c.live.is_none()), "sorting a copy that has dead rows");
    if chunks.iter().map(|c| c.rows()).sum::<usize>() <= 1 {
        return Ok(Some(chunks.to_vec()));
    }
    let order = key_order(layout, chunks)?;
    if order.iter().enumerate().all(|(i, &g)| i == g as usize) {
        return Ok(Some(chunks.to_vec()));
    }
    // A gather straight from the global order reads each row at random
    // over the whole column (48 MB of l_orderkey at SF 1): a cache miss
    // per value, 7 of 10 s of a 6M-row sort. In two steps every access
    // stays within one chunk's worth of rows: each old chunk's rows are
    // put in destination order (`take` within the chunk), so the rows a
    // new chunk needs from it lie together; a new chunk then gathers from
    // those runs, one per old chunk.
    let mut starts = Vec::with_capacity(chunks.len());
    let mut at = 0usize;
    for c in chunks {
        starts.push(at);
        at += c.rows();
    }
    let mut permutations: Vec<Vec<u32>> = chunks.iter().map(|c| Vec::with_capacity(c.rows())).collect();
    let locations: Vec<(usize, usize)> = order
        .iter()
        .map(|&g| {
            let g = g as usize;
            let c = starts.partition_point(|&s| s <= g) - 1;
            let taken = &mut permutations[c];
            taken.push((g - starts[c]) as u32);
            (c, taken.len() - 1)
        })
        .collect();
    drop(order);
    let permutations: Vec<arrow_array::UInt32Array> = permutations.into_iter().map(Into::into).collect();
    let parts: Vec<&[(usize, usize)]> = locations.chunks(layout.chunk_rows).collect();
    let mut columns: Vec<Vec<ArrayRef>> =
        parts.iter().map(|_| Vec::with_capacity(layout.arrow.fields().len())).collect();
    for (c, field) in layout.arrow.fields().iter().enumerate() {
        let permuted = chunks
            .iter()
            .zip(&permutations)
            .map(|(ch, p)| arrow_select::take::take(ch.batch.column(c).as_ref(), p, None))
            .collect::<std::result::Result<Vec<ArrayRef>, _>>()
            .map_err(arrow)?;
        let arrays: Vec<&dyn Array> = permuted.iter().map(AsRef::as_ref).collect();
        if matches!(field.data_type(), ArrowType::Dictionary(..)) {
            let mut gather = DictionaryGather::new(&arrays);
            for (p, part) in parts.iter().enumerate() {
                columns[p].push(gather.gather(part)?);
            }
        } else {
            for (p, part) in parts.iter().enumerate() {
                columns[p].push(arrow_select::interleave::interleave(&arrays, part).map_err(arrow)?);
            }
        }
    }
    let hashes: Vec<Vec<u64>> = chunks
        .iter()
        .zip(&permutations)
        .map(|(ch, p)| {
            let by_row = ch.row_hashes();
            p.values().iter().map(|&r| by_row[r as usize]).collect()
        })
        .collect();
    let mut out = Vec::with_capacity(parts.len());
    for (part, cols) in parts.iter().zip(columns) {
        let keys = part.iter().enumerate().map(|(i, &(c, at))| (hashes[c][at], i as u32)).collect();
        out.push(Arc::new(Chunk::new(layout, cols, keys)?));
    }
    Ok(Some(out))
}

/// The chunks' rows (numbered chunk after chunk) in primary key order.
/// Keys of integer and date columns of 128 bits in all are packed into
/// one order-preserving u128 and sorted as such (Arrow's lexsort calls a
/// comparator per column per comparison: 2.2 s for 6M lineitem keys);
/// any other key by Arrow.
fn key_order(layout: &Layout, chunks: &[Arc<Chunk>]) -> Result<Vec<u32>> {
    let arrow = |e: arrow_schema::ArrowError| OlapError::Arrow(e.to_string());
    let rows: usize = chunks.iter().map(|c| c.rows()).sum();
    assert!(u32::try_from(rows).is_ok(), "sorting {rows} rows by u32 row numbers");
    let width = |ty: &ArrowType| match ty {
        ArrowType::Int16 => Some(16),
        ArrowType::Int32 | ArrowType::Date32 => Some(32),
        ArrowType::Int64 => Some(64),
        _ => None,
    };
    let widths: Option<Vec<u32>> = layout.key_cols.iter().map(|&k| width(layout.arrow.field(k).data_type())).collect();
    let no_nulls = chunks.iter().all(|c| layout.key_cols.iter().all(|&k| c.batch.column(k).null_count() == 0));
    if let Some(widths) = widths.filter(|w| w.iter().sum::<u32>() <= 128 && no_nulls) {
        let mut packed: Vec<(u128, u32)> = Vec::with_capacity(rows);
        for chunk in chunks {
            let mut keys = vec![0u128; chunk.rows()];
            for (&k, &bits) in layout.key_cols.iter().zip(&widths) {
                let column = chunk.batch.column(k).as_ref();
                match column.data_type() {
                    ArrowType::Int16 => shift_in::<Int16Type>(&mut keys, bits, column),
                    ArrowType::Int32 => shift_in::<Int32Type>(&mut keys, bits, column),
                    ArrowType::Date32 => shift_in::<Date32Type>(&mut keys, bits, column),
                    _ => shift_in::<Int64Type>(&mut keys, bits, column),
                }
            }
            let first = packed.len() as u32;
            packed.extend(keys.into_iter().zip(first..));
        }
        packed.sort_unstable();
        return Ok(packed.into_iter().map(|(_, g)| g).collect());
    }
    let mut keys = Vec::with_capacity(layout.key_cols.len());
    for &k in &layout.key_cols {
        let parts: Vec<&dyn Array> = chunks.iter().map(|c| c.batch.column(k).as_ref()).collect();
        let values = arrow_select::concat::concat(&parts).map_err(arrow)?;
        keys.push(arrow_ord::sort::SortColumn { values, options: None });
    }
    let order = arrow_ord::sort::lexsort_to_indices(&keys, None).map_err(arrow)?;
    Ok(order.values().to_vec())
}

/// Appends each of `column`'s values (`bits` wide) to its row's packed key,
/// offset by 2^(bits-1): two's complement in unsigned order.
fn shift_in<T: arrow_array::ArrowPrimitiveType>(keys: &mut [u128], bits: u32, column: &dyn Array)
where
    T::Native: Into<i64>,
{
    let offset = 1i128 << (bits - 1);
    for (key, &v) in keys.iter_mut().zip(column.as_primitive::<T>().values().iter()) {
        *key = (*key << bits) | (i128::from(v.into()) + offset) as u128;
    }
}

/// Gathers rows of a dictionary column, spread over many chunks, into new
/// chunks' dictionary arrays. Each chunk has its own dictionary, so a row's
/// key means nothing in the new chunk: a source (chunk, key) is looked up
/// by its string once per new chunk, and its new key remembered, rather
/// than a string hashed for every row.
struct DictionaryGather<'a> {
    sources: Vec<&'a DictionaryArray<UInt16Type>>,
    /// Per source chunk and key: (the gather's number + 1 that interned
    /// it, its key there); 0 for none yet.
    remap: Vec<Vec<(u32, u16)>>,
    gathers: u32,
}

impl<'a> DictionaryGather<'a> {
    fn new(arrays: &[&'a dyn Array]) -> DictionaryGather<'a> {
        let sources: Vec<_> = arrays.iter().map(|a| a.as_dictionary::<UInt16Type>()).collect();
        let remap = sources.iter().map(|d| vec![(0, 0); d.values().len()]).collect();
        DictionaryGather { sources, remap, gathers: 0 }
    }

    /// The rows at `locations` (chunk, row), at most CHUNK_ROWS, as one
    /// dictionary array.
    fn gather(&mut self, locations: &[(usize, usize)]) -> Result<ArrayRef> {
        assert!(locations.len() <= CHUNK_ROWS, "a chunk of {} rows", locations.len());
        self.gathers += 1;
        let stamp = self.gathers;
        // Sized for the worst case up front: a high-cardinality column
        // (TPC-H's l_comment can be one) interns a string for most rows.
        let mut interned: HashMap<&'a str, u16, foldhash::fast::FixedState> =
            HashMap::with_capacity_and_hasher(locations.len(), foldhash::fast::FixedState::default());
        let mut values = StringBuilder::new();
        let mut keys = UInt16Builder::with_capacity(locations.len());
        for &(c, row) in locations {
            let source = self.sources[c];
            if source.is_null(row) {
                keys.append_null();
                continue;
            }
            let key = usize::from(source.keys().value(row));
            let slot = &mut self.remap[c][key];
            if slot.0 != stamp {
                let s: &'a str = source.values().as_string::<i32>().value(key);
                // At most CHUNK_ROWS distinct values in a new chunk: u16 keys suffice.
                let next = interned.len() as u16;
                let new_key = *interned.entry(s).or_insert_with(|| {
                    values.append_value(s);
                    next
                });
                *slot = (stamp, new_key);
            }
            keys.append_value(slot.1);
        }
        let mut values = values.finish();
        values.shrink_to_fit();
        let dict = DictionaryArray::<UInt16Type>::try_new(keys.finish(), Arc::new(values))
            .map_err(|e| OlapError::Arrow(e.to_string()))?;
        Ok(Arc::new(dict))
    }
}

pub(crate) enum Phase {
    /// Enabling: the applier records changes, the chunks are not there yet.
    Building,
    Ready,
    /// A committed value had no exact Arrow form: no read is served.
    Failed {
        column: String,
        reason: String,
    },
}

struct CopyState {
    phase: Phase,
    /// The commit ts the chunks are the table's state at.
    base_ts: u64,
    chunks: Arc<Vec<Arc<Chunk>>>,
    /// The chunks' rows are in primary key order (`sorted_by_key`): set
    /// when built so, kept by merges that only delete (a chunk masked or
    /// compacted keeps its rows' order), lost by one that adds rows (they
    /// go to the end).
    sorted: bool,
    delta: Delta,
    merges: u64,
    last_merge: Instant,
}

/// One enabled table.
pub(crate) struct TableCopy {
    pub(crate) layout: Arc<Layout>,
    state: Mutex<CopyState>,
    /// Bound on unmerged delta entries (merges held back by an old snapshot).
    delta_rows_max: usize,
}

/// What a reader gets: the chunks with their masks, and the delta rows
/// (in Arrow form only for the columns a query asks for).
pub struct TableView {
    pub(crate) layout: Arc<Layout>,
    parts: Vec<(Arc<Chunk>, Option<BooleanBuffer>)>,
    /// The delta's blocks with the masks of their rows at the snapshot.
    segments: Vec<(Arc<DeltaSegment>, BooleanBuffer)>,
    /// The delta's rows at the snapshot past its full blocks.
    rest: Vec<Arc<RowChange>>,
    /// [`TableView::batches_of`] gives the rows in primary key order.
    sorted: bool,
}

impl TableView {
    /// The rows as Arrow batches (every column, the hidden row id included).
    pub fn batches(&self) -> Result<Vec<RecordBatch>> {
        let all: Vec<usize> = (0..self.layout.table.columns.len()).collect();
        self.batches_of(&all)
    }

    /// The rows' `columns` (layout positions, in that order) as Arrow
    /// batches: chunks projected, then filtered; the delta rows converted.
    pub fn batches_of(&self, columns: &[usize]) -> Result<Vec<RecordBatch>> {
        let mut out = Vec::with_capacity(self.parts.len() + 1);
        for (chunk, mask) in &self.parts {
            let b = chunk.live_columns(columns, mask.as_ref())?;
            if b.num_rows() > 0 {
                out.push(b);
            }
        }
        if self.segments.is_empty() && self.rest.is_empty() {
            return Ok(out);
        }
        let arrow = |e: arrow_schema::ArrowError| OlapError::Arrow(e.to_string());
        let schema = Arc::new(self.layout.arrow.project(columns).map_err(arrow)?);
        let batch = |arrays: Vec<ArrayRef>, rows: usize| {
            let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows));
            RecordBatch::try_new_with_options(Arc::clone(&schema), arrays, &options).map_err(arrow)
        };
        // A block's columns are converted once; each view filters them.
        for (segment, mask) in &self.segments {
            let rows = mask.count_set_bits();
            let keep = BooleanArray::new(mask.clone(), None);
            let mut arrays = Vec::with_capacity(columns.len());
            for &c in columns {
                let all = segment.column(&self.layout, c)?;
                arrays.push(if rows == mask.len() {
                    all
                } else {
                    arrow_select::filter::filter(&all, &keep).map_err(arrow)?
                });
            }
            out.push(batch(arrays, rows)?);
        }
        if !self.rest.is_empty() {
            let mut arrays = Vec::with_capacity(columns.len());
            for &c in columns {
                arrays.push(crate::delta::convert(&self.layout, c, self.rest.iter().map(|r| Some(r.as_ref())))?);
            }
            out.push(batch(arrays, self.rest.len())?);
        }
        Ok(out)
    }

    /// The rows as engine values, every column (as `RowRef::values` gives
    /// them): what the differential tests compare with the row store.
    pub fn rows(&self) -> Result<Vec<Vec<Value>>> {
        let cols = &self.layout.table.columns;
        let mut out = Vec::new();
        for b in self.batches()? {
            for r in 0..b.num_rows() {
                out.push((0..cols.len()).map(|c| value_at(b.column(c).as_ref(), r, cols[c].ty)).collect());
            }
        }
        Ok(out)
    }

    pub fn row_count(&self) -> usize {
        let chunk_rows: usize = self
            .parts
            .iter()
            .map(|(c, m)| match m {
                Some(m) => (0..c.rows()).filter(|&r| m.value(r) && c.is_live(r)).count(),
                None => c.live_rows,
            })
            .sum();
        chunk_rows + self.segments.iter().map(|(_, m)| m.count_set_bits()).sum::<usize>() + self.rest.len()
    }

    /// The Arrow schema of [`TableView::batches`].
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.layout.arrow)
    }

    /// Positions of the columns queries see (all but a hidden row id).
    pub fn visible_columns(&self) -> &[usize] {
        &self.layout.visible
    }

    /// The order of [`TableView::batches_of`]`(columns)`: positions in
    /// `columns` of the primary key's leading columns that `columns` has,
    /// ascending; empty when the rows are in no known order (the delta
    /// holds rows, or a merge added some to the chunks).
    pub fn key_order(&self, columns: &[usize]) -> Vec<usize> {
        if !self.sorted {
            return Vec::new();
        }
        self.layout.key_cols.iter().map_while(|k| columns.iter().position(|c| c == k)).collect()
    }
}

impl TableCopy {
    pub(crate) fn new(layout: Layout, delta_rows_max: usize) -> TableCopy {
        let columns = layout.table.columns.len();
        TableCopy {
            layout: Arc::new(layout),
            state: Mutex::new(CopyState {
                phase: Phase::Building,
                base_ts: 0,
                chunks: Arc::new(Vec::new()),
                sorted: false,
                delta: Delta::new(columns),
                merges: 0,
                last_merge: Instant::now(),
            }),
            delta_rows_max,
        }
    }

    /// Records a committed change (the applier, in commit order). The
    /// checks and the key are computed before the copy's mutex is taken:
    /// readers take it for every view.
    pub(crate) fn apply(&self, ts: CommitTs, change: RowChange) {
        let layout = &self.layout;
        let row = change.row();
        let mut unrepresentable_column = None;
        if !matches!(change.op, RowOp::Delete) {
            for (c, col) in layout.table.columns.iter().enumerate() {
                if let Some(reason) = unrepresentable(col.ty, row.get(c)) {
                    unrepresentable_column = Some((col.name.clone(), reason));
                    break;
                }
            }
        }
        let mut key = Vec::new();
        let hash = layout.key_of_row(row, &mut key);
        let inserted = matches!(change.op, RowOp::Insert);
        let image = match change.op {
            RowOp::Delete => None,
            RowOp::Insert | RowOp::Update => Some(Arc::new(change)),
        };
        let mut st = self.state.lock();
        if matches!(st.phase, Phase::Failed { .. }) {
            return;
        }
        // The scan of an enable read at a snapshot that may include commits
        // the applier has not reached yet (an asynchronous commit is visible
        // before it is durable, and only durable ones are streamed): the
        // chunks hold those already. (A merge never passes the applied ts,
        // so after one nothing arrives at or below its base.)
        if matches!(st.phase, Phase::Ready) && ts.get() <= st.base_ts {
            return;
        }
        if let Some((column, reason)) = unrepresentable_column {
            fail(&mut st, column, reason);
            return;
        }
        if st.delta.len() >= self.delta_rows_max {
            let reason =
                format!("more than {} unmerged changes (an old snapshot holds merges back)", self.delta_rows_max);
            fail(&mut st, String::new(), reason);
            return;
        }
        st.delta.push(DeltaEntry::new(ts, hash, key.into(), image, inserted));
    }

    /// Installs the chunks built from a scan at `snapshot` (`sorted`: in
    /// primary key order); the changes recorded meanwhile at or before it
    /// are in the chunks already.
    pub(crate) fn finish_build(&self, snapshot: u64, chunks: Vec<Arc<Chunk>>, sorted: bool) -> Result<()> {
        let mut st = self.state.lock();
        if let Phase::Failed { column, reason } = &st.phase {
            return Err(self.failed_error(column, reason));
        }
        assert!(matches!(st.phase, Phase::Building), "a copy is built once");
        st.delta.drop_upto(snapshot);
        st.chunks = Arc::new(chunks);
        st.sorted = sorted;
        st.base_ts = snapshot;
        st.phase = Phase::Ready;
        st.last_merge = Instant::now();
        Ok(())
    }

    fn failed_error(&self, column: &str, reason: &str) -> OlapError {
        if column.is_empty() {
            OlapError::Limit(format!("columnar copy of \"{}\" stopped: {reason}", self.layout.name()))
        } else {
            OlapError::ValueNotRepresentable {
                table: self.layout.name().to_owned(),
                column: column.to_owned(),
                reason: reason.to_owned(),
            }
        }
    }

    /// The rows at `snapshot`; the caller made sure every commit up to it
    /// has been applied.
    pub(crate) fn view(&self, snapshot: u64) -> Result<TableView> {
        let (chunks, at, sorted) = {
            let st = self.state.lock();
            match &st.phase {
                Phase::Ready => {}
                Phase::Building => return Err(OlapError::Building { table: self.layout.name().to_owned() }),
                Phase::Failed { column, reason } => return Err(self.failed_error(column, reason)),
            }
            if snapshot < st.base_ts {
                return Err(OlapError::SnapshotTooOld {
                    table: self.layout.name().to_owned(),
                    snapshot,
                    base: st.base_ts,
                });
            }
            (Arc::clone(&st.chunks), st.delta.at(snapshot), st.sorted)
        };
        let layout = &self.layout;
        let (dead, found) = locate(layout, &chunks, &at);
        self.remember(&chunks, &found);
        let parts = chunks
            .iter()
            .zip(dead)
            .map(|(c, rows)| {
                let mask = (!rows.is_empty()).then(|| {
                    let mut bits = vec![true; c.rows()];
                    for r in rows {
                        bits[r] = false;
                    }
                    BooleanBuffer::collect_bool(bits.len(), |i| bits[i])
                });
                (Arc::clone(c), mask)
            })
            .collect();
        let sorted = sorted && at.rows() == 0;
        let rest = at.rest.into_iter().map(|(_, r)| r).collect();
        Ok(TableView { layout: Arc::clone(layout), parts, segments: at.segments, rest, sorted })
    }

    /// Folds the delta up to commit ts `upto` into new chunks (see the
    /// module doc). Only one merge runs at a time (the merger thread).
    /// Returns the number of delta entries folded.
    pub(crate) fn merge(&self, upto: u64) -> Result<usize> {
        let (chunks, at, base) = {
            let st = self.state.lock();
            if !matches!(st.phase, Phase::Ready) || upto <= st.base_ts {
                return Ok(0);
            }
            if st.delta.first_ts().is_none_or(|ts| ts > upto) {
                return Ok(0);
            }
            (Arc::clone(&st.chunks), st.delta.at(upto), st.base_ts)
        };
        let layout = &self.layout;
        let (dead, _) = locate(layout, &chunks, &at);
        let mut next: Vec<Arc<Chunk>> = Vec::with_capacity(chunks.len() + 1);
        for (c, rows) in chunks.iter().zip(dead) {
            if rows.is_empty() {
                next.push(Arc::clone(c));
                continue;
            }
            let smaller = c.without(&rows);
            if smaller.live_rows == 0 {
                continue;
            }
            if smaller.live_rows * 2 < smaller.rows() {
                next.extend(chunks_of(layout, &smaller.live_sources())?);
            } else {
                next.push(Arc::new(smaller));
            }
        }
        let new_rows: Vec<(u64, Source<'_>)> = at.each_row().map(|(hash, r)| (hash, Source::Change(r))).collect();
        let adds_rows = !new_rows.is_empty();
        if adds_rows {
            let tail = next.pop_if(|tail| {
                tail.rows() < layout.tail_rows() && tail.live_rows + new_rows.len() <= layout.chunk_rows
            });
            match &tail {
                Some(tail) => {
                    let mut rows = tail.live_sources();
                    rows.extend(new_rows);
                    next.extend(chunks_of(layout, &rows)?);
                }
                None => next.extend(chunks_of(layout, &new_rows)?),
            }
        }
        let mut st = self.state.lock();
        if st.base_ts != base || !Arc::ptr_eq(&st.chunks, &chunks) || !matches!(st.phase, Phase::Ready) {
            return Ok(0);
        }
        let before = st.delta.len();
        st.delta.drop_upto(upto);
        st.chunks = Arc::new(next);
        st.sorted &= !adds_rows;
        st.base_ts = upto;
        st.merges += 1;
        st.last_merge = Instant::now();
        Ok(before - st.delta.len())
    }

    /// Records where `locate` found keys in `chunks`, if those are still
    /// the copy's chunks: then no merge ran since, and the delta positions
    /// are the same (changes are only appended between merges).
    fn remember(&self, chunks: &Arc<Vec<Arc<Chunk>>>, found: &[Lookup]) {
        if found.is_empty() {
            return;
        }
        let mut st = self.state.lock();
        if !matches!(st.phase, Phase::Ready) || !Arc::ptr_eq(&st.chunks, chunks) {
            return;
        }
        st.delta.remember(found);
    }

    /// (unmerged delta entries, ts of the oldest, time since the last merge)
    pub(crate) fn delta_state(&self) -> (usize, Option<u64>, std::time::Duration) {
        let st = self.state.lock();
        (st.delta.len(), st.delta.first_ts(), st.last_merge.elapsed())
    }

    pub(crate) fn chunks(&self) -> Arc<Vec<Arc<Chunk>>> {
        Arc::clone(&self.state.lock().chunks)
    }

    pub(crate) fn stats(&self) -> CopyStats {
        let st = self.state.lock();
        CopyStats {
            base_ts: st.base_ts,
            chunks: st.chunks.len(),
            rows: st.chunks.iter().map(|c| c.live_rows as u64).sum(),
            delta_rows: st.delta.len(),
            merges: st.merges,
            ready: matches!(st.phase, Phase::Ready),
            failed: match &st.phase {
                Phase::Failed { column, reason } => Some(self.failed_error(column, reason).to_string()),
                _ => None,
            },
        }
    }
}

/// A table copy's figures.
#[derive(Clone, Debug)]
pub struct CopyStats {
    /// The commit ts the chunks hold the table's state at.
    pub base_ts: u64,
    pub chunks: usize,
    /// Live rows in the chunks (the delta aside).
    pub rows: u64,
    pub delta_rows: usize,
    pub merges: u64,
    pub ready: bool,
    /// Why the copy stopped serving (a committed value without an exact
    /// Arrow form, a bound reached): the error every read of it gets.
    pub failed: Option<String>,
}

fn fail(st: &mut CopyState, column: String, reason: String) {
    st.phase = Phase::Failed { column, reason };
    st.delta.clear();
    st.chunks = Arc::new(Vec::new());
}

/// A key's row in the chunks, as [`Lookup::located`] keeps it.
fn location(chunk: usize, row: usize) -> u64 {
    ((chunk as u64) << 32) | row as u64
}

/// Per chunk, the live rows of the `replaced` keys; and the keys looked
/// up here for [`TableCopy::remember`] (those not located before).
fn locate(layout: &Layout, chunks: &[Arc<Chunk>], at: &DeltaAt) -> (Vec<Vec<usize>>, Vec<Lookup>) {
    let mut dead = vec![Vec::new(); chunks.len()];
    let mut found = Vec::new();
    let mut scratch = Vec::new();
    let mut search = |l: &Lookup| {
        let mut at = NOT_IN_CHUNKS;
        for (i, c) in chunks.iter().enumerate() {
            if let Some(r) = c.find(layout, l.hash, &l.key, &mut scratch) {
                debug_assert!(at == NOT_IN_CHUNKS, "two live rows of one key in a columnar copy");
                at = location(i, r);
                if !cfg!(debug_assertions) {
                    break;
                }
            }
        }
        at
    };
    for l in &at.inserted {
        debug_assert!(search(l) == NOT_IN_CHUNKS, "a key inserted after the chunks' base ts is in a chunk");
    }
    for l in &at.replaced {
        let at = if l.located == UNLOCATED {
            let at = search(l);
            found.push(Lookup { position: l.position, hash: l.hash, key: Arc::clone(&l.key), located: at });
            at
        } else {
            debug_assert_eq!(search(l), l.located, "a remembered location is not the key's row");
            l.located
        };
        if at != NOT_IN_CHUNKS {
            dead[(at >> 32) as usize].push((at & u64::from(u32::MAX)) as usize);
        }
    }
    (dead, found)
}

#[cfg(test)]
mod tests {
    use super::KeyIndex;

    /// Every row is found under its hash and under no other, whatever the
    /// size (directories of 0 to 16 bits) and with equal hashes side by side.
    #[test]
    fn a_key_index_finds_every_row_under_its_hash_only() {
        for n in [0usize, 1, 3, 4, 5, 17, 1000, 65_536] {
            let hash = |i: usize| {
                let h = (i as u64 / 2).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                if i.is_multiple_of(7) { h | (1 << 63) } else { h } // both halves of the top bit
            };
            let index = KeyIndex::new((0..n).map(|i| (hash(i), i as u32)).collect());
            for i in 0..n {
                let rows: Vec<usize> = index.rows_of(hash(i)).collect();
                assert!(rows.contains(&i), "n {n}: row {i} not found");
                assert!(rows.iter().all(|&r| hash(r) == hash(i)), "n {n}: rows {rows:?} under another's hash");
            }
            assert_eq!(index.rows_of(0x1234_5678_9abc_def1).count(), 0, "n {n}: a hash no row has");
        }
    }
}
