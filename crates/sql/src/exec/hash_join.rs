//! Hash lookups for a level that is scanned again and again: the inner side
//! of a join without a usable index, or the table of a correlated subquery;
//! and for the values of an uncorrelated `x IN (subquery)` ([`InSet`]).
//!
//! A level with hash keys (`Level::hash_keys`, chosen by the planner) is
//! scanned as usual the first time a statement reaches it. The second time,
//! its rows are read once more into a [`LevelHash`] (the statement's
//! snapshot: the same rows every scan would see) and every later probe
//! evaluates the key expressions and takes the rows of one bucket. The
//! candidates still go through all of the level's filters, the keys' own
//! equalities included, so the table only has to find a superset of the
//! matching rows: equal values must encode equally ([`push_key`]), and a
//! probe value converts to the column's type as a primary-key lookup's
//! does (`exact_key`: a value no stored one can equal finds nothing).
//!
//! Only reads use it (`Exec::hash_joins`): SELECT, and the join of UPDATE
//! ... FROM / DELETE ... USING / MERGE, which runs to completion before
//! their first write; a statement that writes between probes could change
//! the level's table. The table is
//! charged to pgtier.statement_mem; one that does not fit is dropped and
//! the level keeps its nested loop (slower, never an error the nested loop
//! would not raise). An IN set is charged the same way but has no cheaper
//! plan to fall back to: past the bound it is 53200, as for any other
//! result the statement buffers.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use pgtier_engine::Value;

use super::scan::exact_key;
use super::spill::{SortedSpill, SpillBuilder};
use super::{Exec, read_row, row_bytes};
use crate::error::Result;
use crate::expr::{Env, in_rows};
use crate::plan::{ColumnMask, Level};

/// Scans of a level before its rows are hashed: one scan is cheaper than
/// building a table from it, so a level read once (the outer side of a
/// join) never pays for one.
const SCANS_BEFORE_HASHING: u32 = 1;

/// Per execution: what it knows about each level with hash keys, by the
/// level's address (plans outlive the execution, so it is stable), and the
/// value sets of uncorrelated IN subqueries, by subquery id. Vectors
/// searched linearly: a statement has a handful of either, and a statement
/// with none (every point lookup) pays nothing to create them.
#[derive(Default)]
pub struct LevelHashes {
    levels: Vec<(usize, LevelHashState)>,
    in_sets: Vec<(usize, Arc<InSet>)>,
}

impl Exec<'_> {
    /// `x [NOT] IN (sub)` for an uncorrelated `sub`: its values are read
    /// once per execution into an [`InSet`].
    pub(super) fn in_uncorrelated(&mut self, sub: &crate::expr::Subquery, env: &Env<'_>, x: &Value) -> Result<Option<bool>> {
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
    /// Scanned this many times without a table.
    Scanned(u32),
    Hashed(Arc<LevelHash>),
    /// Too large for pgtier.statement_mem: sorted by key in a temporary
    /// file (spill.rs).
    Spilled(Arc<SortedSpill>),
    /// Not even the spill's index fits: nested loop from here on.
    NestedLoop,
}

/// A level's rows (flat, `width` values each, columns outside the level's
/// mask NULL) and, by encoded key, the rows with that key.
struct LevelHash {
    width: usize,
    rows: Vec<Value>,
    buckets: HashMap<Vec<u8>, Vec<u32>>,
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
        Value::Null | Value::Float4(_) | Value::Float8(_) | Value::Json(_) | Value::Array(_) => return None,
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
    /// The candidates of `level` for the joined `row` from its hash table,
    /// appended to `out`; false when the level is to be scanned instead
    /// (too few scans yet, or its table did not fit).
    pub(super) fn hashed_candidates(&mut self, level: &Level, env: &Env<'_>, row: &[Value], mask: Option<&ColumnMask>, out: &mut Vec<Value>) -> Result<bool> {
        let id = std::ptr::from_ref(level) as usize;
        let table = match self.level_hashes.levels.iter_mut().find(|(at, _)| *at == id).map(|(_, state)| state) {
            None => {
                self.level_hashes.levels.push((id, LevelHashState::Scanned(1)));
                return Ok(false);
            }
            Some(LevelHashState::NestedLoop) => return Ok(false),
            Some(LevelHashState::Scanned(n)) if *n < SCANS_BEFORE_HASHING => {
                *n += 1;
                return Ok(false);
            }
            Some(LevelHashState::Hashed(table)) => Lookup::Hash(Arc::clone(table)),
            Some(LevelHashState::Spilled(spill)) => Lookup::Spill(Arc::clone(spill)),
            Some(LevelHashState::Scanned(_)) => {
                let state = self.build_level_hash(level, env, mask)?;
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
                    None => return Ok(false),
                }
            }
        };
        let mut key = Vec::new();
        for (column, e) in &level.hash_keys {
            let v = e.eval(env, self, row)?;
            let Some(v) = exact_key(v, level.table.columns[*column].ty) else { return Ok(true) };
            if push_key(&v, &mut key).is_none() {
                return Ok(true);
            }
        }
        match table {
            Lookup::Hash(table) => {
                if let Some(rows) = table.buckets.get(&key) {
                    for &i in rows {
                        let start = i as usize * table.width;
                        out.extend_from_slice(&table.rows[start..start + table.width]);
                    }
                }
            }
            Lookup::Spill(spill) => spill.candidates(&key, out)?,
        }
        Ok(true)
    }

    /// Reads `level` into a hash table, or, once its rows outgrow what is
    /// left of pgtier.statement_mem, into a sorted spill file (spill.rs);
    /// memory never holds more than the budget either way.
    fn build_level_hash(&mut self, level: &Level, env: &Env<'_>, mask: Option<&ColumnMask>) -> Result<LevelHashState> {
        let width = level.width();
        let budget = self.interrupt.mem_limit.saturating_sub(self.interrupt.mem_used);
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
        if let Some(builder) = spill {
            let sorted = builder.finish(width)?;
            if self.interrupt.charge(sorted.index_bytes(), "sort-based join").is_err() {
                self.interrupt.mem_used = self.interrupt.mem_used.saturating_sub(sorted.index_bytes());
                return Ok(LevelHashState::NestedLoop);
            }
            return Ok(LevelHashState::Spilled(Arc::new(sorted)));
        }
        let count = rows.len() / width.max(1);
        let bytes: usize = rows.chunks(width.max(1)).map(row_bytes).sum();
        if self.interrupt.charge(bytes, "hash join").is_err() {
            self.interrupt.mem_used = self.interrupt.mem_used.saturating_sub(bytes);
            return Ok(LevelHashState::NestedLoop);
        }
        let mut buckets: HashMap<Vec<u8>, Vec<u32>> = HashMap::with_capacity(count);
        let mut key = Vec::new();
        'rows: for i in 0..count {
            key.clear();
            let r = &rows[i * width..(i + 1) * width];
            for (column, _) in &level.hash_keys {
                if push_key(&r[*column], &mut key).is_none() {
                    continue 'rows;
                }
            }
            let Ok(index) = u32::try_from(i) else { return Ok(LevelHashState::NestedLoop) };
            buckets.entry(key.clone()).or_default().push(index);
        }
        Ok(LevelHashState::Hashed(Arc::new(LevelHash { width, rows, buckets })))
    }
}

/// Where a level's candidates come from once it is read.
enum Lookup {
    Hash(Arc<LevelHash>),
    Spill(Arc<SortedSpill>),
}

/// Moves the rows collected in `rows` into the spill (created on first
/// use with `budget`), each under its hash key; a row with a NULL key
/// matches nothing and is dropped, as from a hash table.
fn spill_rows(spill: &mut Option<SpillBuilder>, rows: &mut Vec<Value>, level: &Level, width: usize, budget: usize) -> Result<()> {
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
