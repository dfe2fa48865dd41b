//! Hash lookups for a level that is scanned again and again: the inner side
//! of a join without a usable index, or the table of a correlated subquery;
//! and for the values of an uncorrelated `x IN (subquery)` ([`InSet`]).
//!
//! A level with hash keys (`Level::hash_keys`, chosen by the planner) is
//! scanned as usual the first time a statement reaches it; a full scan's
//! rows are kept. The second time, those rows (or, when the first read
//! was not a full scan, the level read once more: the statement's
//! snapshot, the same rows every scan would see) become a [`LevelHash`],
//! and every later probe evaluates the key expressions and walks the
//! rows of one chain. The candidates still go through all of the level's
//! filters, the keys' own equalities included, so the table only has to
//! find a superset of the matching rows: equal values must encode
//! equally ([`push_key`]), and a probe value converts to the column's
//! type as a primary-key lookup's does (`exact_key`: a value no stored
//! one can equal finds nothing). That is also why rows are chained by a
//! 64-bit hash of their key and no key is stored: rows whose keys only
//! share the hash come along and fail the filters.
//!
//! Only reads use it (`Exec::hash_joins`): SELECT, and the join of UPDATE
//! ... FROM / DELETE ... USING / MERGE, which runs to completion before
//! their first write; a statement that writes between probes could change
//! the level's table. The table is
//! charged to pgtier.statement_mem; one that does not fit is sorted into
//! a temporary file (spill.rs), and one whose sorted index does not fit
//! either keeps the nested loop (slower, never an error the nested loop
//! would not raise). An IN set is charged the same way but has no cheaper
//! plan to fall back to: past the bound it is 53200, as for any other
//! result the statement buffers.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::Arc;

use foldhash::fast::RandomState;

use pgtier_engine::Value;

use super::scan::exact_key;
use super::spill::{SortedSpill, SpillBuilder};
use super::{Exec, read_row, row_bytes};
use crate::error::{Result, SqlError};
use crate::expr::{Env, in_rows};
use crate::plan::{Access, ColumnMask, Level};

/// Per execution: what it knows about each level with hash keys, by the
/// level's address (plans outlive the execution, so it is stable), and the
/// value sets of uncorrelated IN subqueries, by subquery id. Vectors
/// searched linearly: a statement has a handful of either, and a statement
/// with none (every point lookup) pays nothing to create them.
#[derive(Default)]
pub struct LevelHashes {
    levels: Vec<(usize, LevelHashState)>,
    in_sets: Vec<(usize, Arc<InSet>)>,
    /// A probe's encoded key, reused from probe to probe.
    key: Vec<u8>,
    /// The right sides of FULL JOINs, each read whole once, by level address.
    full_sides: Vec<(usize, Arc<LevelHash>)>,
    /// The rows of subqueries in FROM that read no outer row
    /// (`VirtualSource::Query`), by level address: None after the first
    /// read (a level read once keeps nothing), then kept.
    fixed: Vec<(usize, Option<Arc<Vec<Value>>>)>,
    /// Per FULL JOIN in progress (innermost last): which rows of its right
    /// side some row of its left side matched.
    pub(super) full_marks: Vec<Vec<bool>>,
}

impl Exec<'_> {
    /// `x [NOT] IN (sub)` for an uncorrelated `sub`: its values are read
    /// once per execution into an [`InSet`].
    pub(super) fn in_uncorrelated(
        &mut self,
        sub: &crate::expr::Subquery,
        env: &Env<'_>,
        x: &Value,
    ) -> Result<Option<bool>> {
        let set = match self.level_hashes.in_sets.iter().find(|(id, _)| *id == sub.id) {
            Some((_, set)) => Arc::clone(set),
            None => {
                let mut values = self.subquery_values(sub, env, &[])?;
                if sub.trims_rows() {
                    for v in &mut values {
                        if let Value::Text(padded) = v {
                            let trimmed = crate::value::bpchar_trim(padded).len();
                            padded.truncate(trimmed);
                        }
                    }
                }
                let bytes: usize = values.iter().map(super::value_bytes).sum();
                self.interrupt.charge(bytes, "IN subquery")?;
                let set = Arc::new(InSet::new(values));
                self.level_hashes.in_sets.push((sub.id, Arc::clone(&set)));
                set
            }
        };
        Ok(set.contains(x, sub.negated))
    }
}

/// What a statement knows about one level with hash keys.
enum LevelHashState {
    /// Read once, as a nested loop would: a table costs more than one
    /// scan, so a level read once (the outer side of a join) never pays
    /// for one. Holds that scan's rows when it was a full scan (the rows a
    /// table is built from) and [`Exec::keep_first_scan`] got them.
    ScannedOnce(Option<Vec<Value>>),
    Hashed(Arc<LevelHash>),
    /// Too large for pgtier.statement_mem: sorted by key in a temporary
    /// file (spill.rs).
    Spilled(Arc<SortedSpill>),
    /// Not even the spill's index fits: nested loop from here on.
    NestedLoop,
}

/// The end of a [`LevelHash`] chain.
pub(super) const CHAIN_END: u32 = u32::MAX;

/// A level's rows (flat, `width` values each, columns outside the level's
/// mask NULL), chained by the hash of their encoded key. A row with a NULL
/// key is in no chain: it equals nothing.
pub(super) struct LevelHash {
    width: usize,
    rows: Vec<Value>,
    hasher: RandomState,
    /// By key hash: the first and the last row of its chain. Chains keep
    /// scan order, so candidates come in the order a scan gives them.
    chains: HashMap<u64, (u32, u32), RandomState>,
    /// Per row: the next row of its chain, or [`CHAIN_END`].
    next: Vec<u32>,
}

impl LevelHash {
    /// Chains `rows`; None when they are too many to number with u32.
    fn new(rows: Vec<Value>, width: usize, level: &Level) -> Option<LevelHash> {
        let count = rows.len() / width.max(1);
        let hasher = RandomState::default();
        let mut chains: HashMap<u64, (u32, u32), RandomState> =
            HashMap::with_capacity_and_hasher(count, RandomState::default());
        let mut next = vec![CHAIN_END; count];
        let mut key = Vec::new();
        'rows: for i in 0..count {
            key.clear();
            let r = &rows[i * width..(i + 1) * width];
            for (column, _) in &level.hash_keys {
                if push_key(&r[*column], &mut key).is_none() {
                    continue 'rows;
                }
            }
            let index = u32::try_from(i).ok().filter(|&i| i != CHAIN_END)?;
            chains
                .entry(hasher.hash_one(key.as_slice()))
                .and_modify(|(_, last)| {
                    next[*last as usize] = index;
                    *last = index;
                })
                .or_insert((index, index));
        }
        Some(LevelHash { width, rows, hasher, chains, next })
    }

    /// The first row of the chain of `key` (an encoding by [`push_key`]).
    fn first(&self, key: &[u8]) -> u32 {
        self.chains.get(&self.hasher.hash_one(key)).map_or(CHAIN_END, |&(first, _)| first)
    }

    /// How many rows it holds (chained or not).
    pub(super) fn len(&self) -> usize {
        self.next.len()
    }

    /// Row `at` of a chain and the chain's next row.
    pub(super) fn row(&self, at: u32) -> (&[Value], u32) {
        let start = at as usize * self.width;
        (&self.rows[start..start + self.width], self.next[at as usize])
    }
}

/// Where a probe's candidates are.
pub(super) enum Probe {
    /// Nowhere yet: the level is to be read as a nested loop does.
    Scan,
    /// In the caller's buffer (from a spill, or none at all).
    Buffered,
    /// The chain of the table starting at this row ([`LevelHash::row`]).
    Chain(Arc<LevelHash>, u32),
}

/// Values `value::compare` finds equal exactly when their encodings by
/// [`push_key`] are equal, provided both are of one class.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyClass {
    Integer,
    Numeric,
    Text,
    Bool,
    /// date and timestamp: local times.
    DateTime,
    /// timestamptz: an instant, equal to a local time only through the
    /// session's zone, so never in one class with them.
    Instant,
    Bytea,
    Uuid,
    Time,
    TimeTz,
    Interval,
    Jsonb,
}

/// Appends `v`'s key encoding and says its class; None for NULL (equal to
/// nothing) and floats (-0 = 0 with other bits: never keys). Integers
/// widen to 8 bytes; a numeric drops trailing zeros of its fraction (1.50
/// = 1.5); dates, timestamps and timestamptz are microseconds (they
/// compare so, and a date is its midnight; timestamptz in a class of its
/// own); text and bytea are
/// length-prefixed, so keys of several columns do not run together.
fn push_key(v: &Value, out: &mut Vec<u8>) -> Option<KeyClass> {
    Some(match v {
        // Arrays are never hash keys (the planner leaves their columns out); json has no equality.
        Value::Null
        | Value::Float4(_)
        | Value::Float8(_)
        | Value::Json(_)
        | Value::Array(_)
        | Value::BoundedArray(_) => {
            return None;
        }
        Value::Int2(_) | Value::Int4(_) | Value::Int8(_) => {
            out.extend_from_slice(&v.as_i64()?.to_le_bytes());
            KeyClass::Integer
        }
        Value::Numeric(n) => {
            let (mut mantissa, mut scale) = (n.mantissa, n.scale);
            while scale > 0 && mantissa % 10 == 0 {
                mantissa /= 10;
                scale -= 1;
            }
            out.extend_from_slice(&mantissa.to_le_bytes());
            out.push(scale);
            KeyClass::Numeric
        }
        // Wide values: a mantissa and scale no i128-form value has, then
        // the canonical bytes, length first.
        Value::NumericBig(_) => match crate::value::numeric_wide_normalized(v) {
            small @ Value::Numeric(_) => return push_key(&small, out),
            Value::NumericBig(b) => {
                out.extend_from_slice(&i128::MIN.to_le_bytes());
                out.push(u8::MAX);
                let bytes = b.as_ref().as_bytes();
                out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
                out.extend_from_slice(bytes);
                KeyClass::Numeric
            }
            _ => return None,
        },
        Value::Text(s) => {
            out.extend_from_slice(&(s.len() as u64).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
            KeyClass::Text
        }
        Value::Bool(b) => {
            out.push(u8::from(*b));
            KeyClass::Bool
        }
        // An infinite date is the infinite timestamp it equals.
        Value::Date(d) => {
            let micros = crate::value::date_micros(*d).map_or(i128::from(*d) * 86_400_000_000, i128::from);
            out.extend_from_slice(&micros.to_le_bytes());
            KeyClass::DateTime
        }
        Value::Timestamp(t) => {
            out.extend_from_slice(&i128::from(*t).to_le_bytes());
            KeyClass::DateTime
        }
        Value::TimestampTz(t) => {
            out.extend_from_slice(&i128::from(*t).to_le_bytes());
            KeyClass::Instant
        }
        Value::Bytea(b) => {
            out.extend_from_slice(&(b.len() as u64).to_le_bytes());
            out.extend_from_slice(b);
            KeyClass::Bytea
        }
        Value::Uuid(u) => {
            out.extend_from_slice(u);
            KeyClass::Uuid
        }
        Value::Time(t) => {
            out.extend_from_slice(&t.to_le_bytes());
            KeyClass::Time
        }
        // timetz_eq: equal clocks in equal zones.
        Value::TimeTz(t, z) => {
            out.extend_from_slice(&t.to_le_bytes());
            out.extend_from_slice(&z.to_le_bytes());
            KeyClass::TimeTz
        }
        // '1 day' = '24 hours': equal intervals share their span.
        Value::Interval(v) => {
            out.extend_from_slice(&v.span().to_le_bytes());
            KeyClass::Interval
        }
        Value::Jsonb(s) => {
            let key = pgtier_engine::json::sort_key(s);
            out.extend_from_slice(&(key.len() as u64).to_le_bytes());
            out.extend_from_slice(&key);
            KeyClass::Jsonb
        }
    })
}

impl Exec<'_> {
    /// Where the candidates of `level` for the joined `row` are: in its
    /// hash table, in `out` (a spill's), or not yet read (too few scans
    /// yet, or its table did not fit).
    pub(super) fn hashed_candidates(
        &mut self,
        level: &Level,
        env: &Env<'_>,
        row: &[Value],
        mask: Option<&ColumnMask>,
        out: &mut Vec<Value>,
    ) -> Result<Probe> {
        let id = std::ptr::from_ref(level) as usize;
        let table = match self.level_hashes.levels.iter_mut().find(|(at, _)| *at == id).map(|(_, state)| state) {
            None => {
                self.level_hashes.levels.push((id, LevelHashState::ScannedOnce(None)));
                return Ok(Probe::Scan);
            }
            Some(LevelHashState::NestedLoop) => return Ok(Probe::Scan),
            Some(LevelHashState::Hashed(table)) => Lookup::Hash(Arc::clone(table)),
            Some(LevelHashState::Spilled(spill)) => Lookup::Spill(Arc::clone(spill)),
            Some(LevelHashState::ScannedOnce(first)) => {
                let first = first.take();
                let state = self.build_level_hash(level, env, mask, first)?;
                let lookup = match &state {
                    LevelHashState::Hashed(table) => Some(Lookup::Hash(Arc::clone(table))),
                    LevelHashState::Spilled(spill) => Some(Lookup::Spill(Arc::clone(spill))),
                    _ => None,
                };
                if let Some(slot) = self.level_hashes.levels.iter_mut().find(|(at, _)| *at == id) {
                    slot.1 = state;
                }
                match lookup {
                    Some(lookup) => lookup,
                    None => return Ok(Probe::Scan),
                }
            }
        };
        let mut key = std::mem::take(&mut self.level_hashes.key);
        key.clear();
        let found = self.probe_key(level, env, row, &mut key);
        let probe = match (found, table) {
            (Err(e), _) => Err(e),
            (Ok(false), _) => Ok(Probe::Buffered),
            (Ok(true), Lookup::Hash(table)) => {
                let first = table.first(&key);
                Ok(if first == CHAIN_END { Probe::Buffered } else { Probe::Chain(table, first) })
            }
            (Ok(true), Lookup::Spill(spill)) => spill.candidates(&key, out).map(|()| Probe::Buffered),
        };
        self.level_hashes.key = key;
        probe
    }

    /// The rows of a `VirtualSource::Query` level: the same for the whole
    /// statement, so from its second read on they are kept and not run
    /// again (charged to pgtier.statement_mem; when they do not fit they
    /// are run again at each read, unkept, as a level's candidates are).
    /// Only for reads (`Exec::hash_joins`): a statement that writes
    /// between reads could change them.
    pub(super) fn fixed_rows(&mut self, level: &Level, env: &Env<'_>) -> Result<Arc<Vec<Value>>> {
        let id = std::ptr::from_ref(level) as usize;
        let slot = self.level_hashes.fixed.iter().position(|(at, _)| *at == id);
        if let Some(Some(rows)) = slot.map(|k| &self.level_hashes.fixed[k].1) {
            return Ok(Arc::clone(rows));
        }
        let Access::Virtual(source) = &level.access else {
            return Err(SqlError::new("XX000", "fixed_rows of a stored level"));
        };
        let mut rows = Vec::new();
        self.virtual_rows(source, env, &[], &mut rows)?;
        let rows = Arc::new(rows);
        let Some(k) = slot else {
            self.level_hashes.fixed.push((id, None));
            return Ok(rows);
        };
        let bytes = flat_rows_bytes(&rows, level.width());
        if self.interrupt.charge(bytes, "subquery in FROM").is_ok() {
            self.level_hashes.fixed[k].1 = Some(Arc::clone(&rows));
        } else {
            self.interrupt.mem_used = self.interrupt.mem_used.saturating_sub(bytes);
        }
        Ok(rows)
    }

    /// The right side of a FULL JOIN: all its rows, read once per
    /// execution (it depends on no outer row: bind/from.rs), chained by
    /// its hash keys; charged to pgtier.statement_mem as they are read
    /// (past the bound: 53200, as any buffered result).
    pub(super) fn full_side(
        &mut self,
        level: &Level,
        env: &Env<'_>,
        mask: Option<&ColumnMask>,
    ) -> Result<Arc<LevelHash>> {
        let id = std::ptr::from_ref(level) as usize;
        if let Some((_, side)) = self.level_hashes.full_sides.iter().find(|(at, _)| *at == id) {
            return Ok(Arc::clone(side));
        }
        let width = level.width();
        let mut rows: Vec<Value> = Vec::new();
        match &level.access {
            Access::Virtual(source) => {
                self.virtual_rows(source, env, &[], &mut rows)?;
                let bytes = flat_rows_bytes(&rows, width);
                self.interrupt.charge(bytes, "FULL JOIN")?;
            }
            _ => self.scan_level(level, env, &[], &mut |r| {
                let start = rows.len();
                read_row(r, mask, &mut rows);
                row_bytes(&rows[start..])
            })?,
        }
        let side = Arc::new(
            LevelHash::new(rows, width, level)
                .ok_or_else(|| SqlError::new("54000", "the right side of a FULL JOIN has too many rows"))?,
        );
        self.level_hashes.full_sides.push((id, Arc::clone(&side)));
        Ok(side)
    }

    /// The rows of a FULL JOIN's right side `side` to try for the joined
    /// `row`: one chain when the level has hash keys, else all of them;
    /// None when the probe's key matches nothing.
    pub(super) fn full_candidates(
        &mut self,
        level: &Level,
        side: &LevelHash,
        env: &Env<'_>,
        row: &[Value],
    ) -> Result<Option<u32>> {
        if level.hash_keys.is_empty() {
            return Ok(if side.len() == 0 { None } else { Some(0) });
        }
        let mut key = std::mem::take(&mut self.level_hashes.key);
        key.clear();
        let found = self.probe_key(level, env, row, &mut key);
        let first = found.map(|f| if f { Some(side.first(&key)).filter(|&at| at != CHAIN_END) } else { None });
        self.level_hashes.key = key;
        first
    }

    /// Encodes the probe's key for `row` into `key`; false when no stored
    /// row can match it (a NULL, or a value no stored one equals).
    fn probe_key(&mut self, level: &Level, env: &Env<'_>, row: &[Value], key: &mut Vec<u8>) -> Result<bool> {
        for (column, e) in &level.hash_keys {
            let v = e.eval(env, self, row)?;
            let Some(v) = exact_key(v, level.table.columns[*column].ty) else { return Ok(false) };
            if push_key(&v, key).is_none() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Keeps the rows of a level's first read when it was a full scan,
    /// for its table to be built from at the second; otherwise gives the
    /// buffer back to the pool.
    pub(super) fn keep_first_scan(&mut self, level: &Level, rows: Vec<Value>) {
        let id = std::ptr::from_ref(level) as usize;
        if matches!(level.access, Access::FullScan)
            && let Some((_, LevelHashState::ScannedOnce(slot @ None))) =
                self.level_hashes.levels.iter_mut().find(|(at, _)| *at == id)
        {
            *slot = Some(rows);
            return;
        }
        self.return_row(rows);
    }

    /// Builds `level`'s table from its first scan's rows, or reads it
    /// again; once its rows outgrow what is left of pgtier.statement_mem,
    /// into a sorted spill file (spill.rs) instead. Memory never holds
    /// more than the budget either way.
    fn build_level_hash(
        &mut self,
        level: &Level,
        env: &Env<'_>,
        mask: Option<&ColumnMask>,
        first: Option<Vec<Value>>,
    ) -> Result<LevelHashState> {
        let width = level.width();
        let budget = self.interrupt.mem_limit.saturating_sub(self.interrupt.mem_used);
        let kept = first.and_then(|rows| {
            let bytes = flat_rows_bytes(&rows, width);
            (bytes <= budget / 2).then_some(rows)
        });
        let rows = match kept {
            Some(rows) => rows,
            // A subquery's rows, kept already: a copy to hash (no spill).
            None if matches!(level.access, Access::Virtual(_)) => {
                let rows = self.fixed_rows(level, env)?;
                let bytes = flat_rows_bytes(&rows, width);
                if bytes > budget / 2 {
                    return Ok(LevelHashState::NestedLoop);
                }
                rows.as_ref().clone()
            }
            None => match self.read_level(level, env, mask, budget)? {
                Ok(rows) => rows,
                Err(spilled) => return Ok(spilled),
            },
        };
        let bytes = flat_rows_bytes(&rows, width);
        if self.interrupt.charge(bytes, "hash join").is_err() {
            self.interrupt.mem_used = self.interrupt.mem_used.saturating_sub(bytes);
            return Ok(LevelHashState::NestedLoop);
        }
        Ok(match LevelHash::new(rows, width, level) {
            Some(table) => LevelHashState::Hashed(Arc::new(table)),
            None => LevelHashState::NestedLoop,
        })
    }

    /// Reads `level`'s rows for its table: Ok(rows) when they fit in half
    /// the budget, else the sorted spill (or nested loop) they went to.
    fn read_level(
        &mut self,
        level: &Level,
        env: &Env<'_>,
        mask: Option<&ColumnMask>,
        budget: usize,
    ) -> Result<std::result::Result<Vec<Value>, LevelHashState>> {
        let width = level.width();
        let mut rows: Vec<Value> = Vec::new();
        let mut bytes = 0usize;
        let mut spill: Option<SpillBuilder> = None;
        let mut failed: Option<crate::error::SqlError> = None;
        // The scan's charge per row is 0: the rows are accounted here,
        // where not fitting means a spill rather than an error.
        self.scan_level(level, env, &[], &mut |r| {
            if failed.is_some() {
                return 0;
            }
            let start = rows.len();
            read_row(r, mask, &mut rows);
            bytes += row_bytes(&rows[start..]);
            if bytes > budget / 2 || spill.is_some() {
                if let Err(e) = spill_rows(&mut spill, &mut rows, level, width, budget) {
                    failed = Some(e);
                }
                bytes = 0;
            }
            0
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        let Some(builder) = spill else { return Ok(Ok(rows)) };
        let interrupt = &mut self.interrupt;
        let sorted = builder.finish(width, &mut || interrupt.tick())?;
        if self.interrupt.charge(sorted.index_bytes(), "sort-based join").is_err() {
            self.interrupt.mem_used = self.interrupt.mem_used.saturating_sub(sorted.index_bytes());
            return Ok(Err(LevelHashState::NestedLoop));
        }
        Ok(Err(LevelHashState::Spilled(Arc::new(sorted))))
    }
}

/// What rows kept flat, `width` values each, cost the memory account.
fn flat_rows_bytes(rows: &[Value], width: usize) -> usize {
    rows.chunks(width.max(1)).map(row_bytes).sum()
}

/// Where a level's candidates come from once it is read.
enum Lookup {
    Hash(Arc<LevelHash>),
    Spill(Arc<SortedSpill>),
}

/// Moves the rows collected in `rows` into the spill (created on first
/// use with `budget`), each under its hash key; a row with a NULL key
/// matches nothing and is dropped, as from a hash table.
fn spill_rows(
    spill: &mut Option<SpillBuilder>,
    rows: &mut Vec<Value>,
    level: &Level,
    width: usize,
    budget: usize,
) -> Result<()> {
    let builder = match spill {
        Some(b) => b,
        None => spill.insert(SpillBuilder::new(budget / 2)?),
    };
    let mut key = Vec::new();
    'rows: for r in rows.chunks(width.max(1)) {
        key.clear();
        for (column, _) in &level.hash_keys {
            if push_key(&r[*column], &mut key).is_none() {
                continue 'rows;
            }
        }
        builder.push(key.clone(), r)?;
    }
    rows.clear();
    Ok(())
}

/// The values an uncorrelated `x IN (subquery)` compares with, and when
/// they all are of one [`KeyClass`], a hash set of them: one probe per row
/// instead of a pass over every value.
pub(super) struct InSet {
    values: Vec<Value>,
    has_null: bool,
    /// The class every non-NULL value belongs to, with the set of their
    /// keys; None: mixed classes or floats, compared one by one.
    hashed: Option<(KeyClass, HashSet<Vec<u8>>)>,
}

impl InSet {
    pub(super) fn new(values: Vec<Value>) -> InSet {
        let has_null = values.iter().any(Value::is_null);
        let mut class = None;
        let mut keys = HashSet::with_capacity(values.len());
        let mut key = Vec::new();
        let mut hashable = true;
        for v in values.iter().filter(|v| !v.is_null()) {
            key.clear();
            match push_key(v, &mut key) {
                Some(c) if class.is_none_or(|k| k == c) => {
                    class = Some(c);
                    keys.insert(key.clone());
                }
                _ => {
                    hashable = false;
                    break;
                }
            }
        }
        let hashed = if hashable { class.map(|c| (c, keys)) } else { None };
        InSet { values, has_null, hashed }
    }

    /// `x [NOT] IN` these values, as `expr::in_rows` answers it.
    pub(super) fn contains(&self, x: &Value, negated: bool) -> Option<bool> {
        if self.values.is_empty() {
            return Some(negated);
        }
        let mut key = Vec::new();
        match &self.hashed {
            Some((class, keys)) if push_key(x, &mut key) == Some(*class) => {
                if keys.contains(&key) {
                    Some(!negated)
                } else if self.has_null {
                    None
                } else {
                    Some(negated)
                }
            }
            _ => in_rows(x, &self.values, negated, false),
        }
    }
}
