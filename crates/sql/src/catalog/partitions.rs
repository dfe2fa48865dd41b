//! Declarative partitioning as the engine stores it. A partitioned table
//! (PostgreSQL's relkind 'p') is an engine table that never holds a row,
//! as a view is (catalog/views.rs): its columns and constraints are the
//! table's, and its annotation holds the partition key and the list of
//! its partitions with their bounds. A partition is an ordinary engine
//! table with the parent's columns; it knows nothing of its parent (the
//! parent's list is the one place), so creating or dropping a partition
//! rewrites the parent's annotation: a new `TableSchema`, so every plan
//! that read, routed to or checked against the parent is re-planned.
//! Everything is logged, checkpointed, recovered and rolled back as any
//! DDL is, with no engine code of its own.

use std::cmp::Ordering;
use std::sync::Arc;

use pgtier_engine::{Catalog, DataType, TableSchema, Value};

use crate::error::{Result, SqlError};

/// The first line of a partitioned table's annotation (the number is the format).
pub const PARTITIONED_MAGIC: &str = "pgtier_partitioned 1\n";

/// The annotation of the schema a partitioned table is read through in
/// FROM (the union of its partitions), followed by the table's stored
/// name: its rows have a `tableoid`, as a stored table's have.
pub const PARTITIONED_READ: &str = "pgtier_partitioned_read\n";

/// The name of a partition constraint among the checks a statement
/// evaluates: its violation is "violates partition constraint".
pub const PARTITION_CHECK: &str = "\0partition";
/// The same, when the statement reached the partition through its
/// partitioned table: a row that leaves its partition would move.
pub const PARTITION_MOVE: &str = "\0partition move";

/// PARTITION BY's strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    Range,
    List,
}

impl Strategy {
    pub fn keyword(self) -> &'static str {
        match self {
            Strategy::Range => "RANGE",
            Strategy::List => "LIST",
        }
    }
}

/// One value of a range bound.
#[derive(Clone, Debug, PartialEq)]
pub enum RangeDatum {
    MinValue,
    Value(Value),
    MaxValue,
}

/// FOR VALUES ...: the values are of the key columns' types.
#[derive(Clone, Debug, PartialEq)]
pub enum Bound {
    /// FROM (lower) TO (upper), one datum per key column.
    Range(Vec<RangeDatum>, Vec<RangeDatum>),
    /// IN (values): NULL among them accepts the rows whose key is NULL.
    List(Vec<Value>),
    Default,
}

/// A partition: its stored name and bound.
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    pub name: String,
    pub bound: Bound,
}

/// How a key that is an expression starts in `PartitionSpec::key`: the
/// byte, a letter for the expression's type, then its text. No column
/// name starts with it (PARTITION BY refuses one that would).
pub const KEY_EXPR: char = '\x01';

/// The types a key expression may have, by the letter that stores them.
const KEY_EXPR_TYPES: [(char, DataType); 9] = [
    ('h', DataType::Int2),
    ('i', DataType::Int4),
    ('l', DataType::Int8),
    ('n', DataType::Numeric { precision: 0, scale: 0 }),
    ('t', DataType::Text),
    ('d', DataType::Date),
    ('b', DataType::Bool),
    ('s', DataType::Timestamp(None)),
    ('z', DataType::TimestampTz(None)),
];

/// The stored form of key expression `sql` of type `ty`; None for a type
/// a key expression may not have.
pub fn key_expr_entry(sql: &str, ty: DataType) -> Option<String> {
    let (code, _) = KEY_EXPR_TYPES.iter().find(|(_, t)| *t == ty)?;
    Some(format!("{KEY_EXPR}{code}{sql}"))
}

/// A key entry that is an expression: its type and text.
pub fn key_expr(entry: &str) -> Option<(DataType, &str)> {
    let rest = entry.strip_prefix(KEY_EXPR)?;
    let code = rest.chars().next()?;
    let (_, ty) = KEY_EXPR_TYPES.iter().find(|(c, _)| *c == code)?;
    Some((*ty, &rest[code.len_utf8()..]))
}

/// A key entry as PostgreSQL prints it in the detail of "no partition
/// found": a column's name, a function call as written, an operator in
/// parentheses; pg_get_partkeydef (`def`) adds parentheses around an
/// operator's (it deparses it unpretty).
pub fn key_text(entry: &str, def: bool) -> String {
    match key_expr(entry) {
        Some((_, sql)) if sql.ends_with(')') && sql.starts_with(|c: char| c.is_ascii_alphabetic()) => sql.to_owned(),
        Some((_, sql)) if def => format!("(({sql}))"),
        Some((_, sql)) => format!("({sql})"),
        None => super::quote_ident(entry),
    }
}

/// A partitioned table's key and partitions.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionSpec {
    pub strategy: Strategy,
    /// Key columns by name, or expressions ([`key_expr`]).
    pub key: Vec<String>,
    /// In creation order.
    pub partitions: Vec<Partition>,
}

fn encode_value(v: &Value) -> String {
    match v {
        Value::Null => "n".to_owned(),
        Value::Int2(_) | Value::Int4(_) | Value::Int8(_) => format!("i{}", v.as_i64().unwrap_or_default()),
        Value::Date(d) => format!("d{d}"),
        Value::Timestamp(t) => format!("t{t}"),
        Value::TimestampTz(t) => format!("z{t}"),
        other => format!("v{}", crate::value::to_text(other)),
    }
}

fn decode_value(s: &str, ty: DataType) -> Option<Value> {
    let (tag, rest) = (s.get(..1)?, s.get(1..)?);
    Some(match tag {
        "n" => Value::Null,
        "i" => crate::value::int_result(rest.parse().ok()?, ty).ok()?,
        "d" => Value::Date(rest.parse().ok()?),
        "t" => Value::Timestamp(rest.parse().ok()?),
        "z" => Value::TimestampTz(rest.parse().ok()?),
        "v" => crate::value::parse_input(rest, ty).ok()?,
        _ => return None,
    })
}

fn encode_datum(d: &RangeDatum) -> String {
    match d {
        RangeDatum::MinValue => "-".to_owned(),
        RangeDatum::MaxValue => "+".to_owned(),
        RangeDatum::Value(v) => encode_value(v),
    }
}

fn decode_datum(s: &str, ty: DataType) -> Option<RangeDatum> {
    Some(match s {
        "-" => RangeDatum::MinValue,
        "+" => RangeDatum::MaxValue,
        _ => RangeDatum::Value(decode_value(s, ty)?),
    })
}

impl PartitionSpec {
    /// The annotation text that stores it: names and values are separated
    /// by NUL and unit-separator bytes, which no identifier and no bound
    /// value's text holds (PostgreSQL refuses NUL in both; a text bound
    /// holding 0x1f is refused when the partition is made).
    pub fn encode(&self) -> String {
        let mut s = String::from(PARTITIONED_MAGIC);
        s.push_str(self.strategy.keyword());
        s.push('\n');
        s.push_str(&self.key.join("\0"));
        for p in &self.partitions {
            s.push('\n');
            s.push_str(&p.name);
            s.push('\0');
            match &p.bound {
                Bound::Default => s.push('D'),
                Bound::List(vals) => {
                    s.push('L');
                    for v in vals {
                        s.push('\x1f');
                        s.push_str(&encode_value(v));
                    }
                }
                Bound::Range(lo, hi) => {
                    s.push('R');
                    for d in lo.iter().chain(hi) {
                        s.push('\x1f');
                        s.push_str(&encode_datum(d));
                    }
                }
            }
        }
        s
    }

    /// The spec of partitioned table `t` (whose columns give the key's types).
    pub fn decode(t: &TableSchema) -> Option<PartitionSpec> {
        let rest = t.annotation.as_deref()?.strip_prefix(PARTITIONED_MAGIC)?;
        let mut lines = rest.split('\n');
        let strategy = match lines.next()? {
            "RANGE" => Strategy::Range,
            "LIST" => Strategy::List,
            _ => return None,
        };
        let key: Vec<String> = lines.next()?.split('\0').map(str::to_owned).collect();
        let types: Vec<DataType> = key
            .iter()
            .map(|k| match key_expr(k) {
                Some((ty, _)) => Some(ty),
                None => t.columns.iter().find(|c| c.name == *k).map(|c| c.ty),
            })
            .collect::<Option<_>>()?;
        let mut partitions = Vec::new();
        for line in lines {
            let (name, bound) = line.split_once('\0')?;
            let mut parts = bound.split('\x1f');
            let bound = match parts.next()? {
                "D" => Bound::Default,
                "L" => Bound::List(parts.map(|v| decode_value(v, *types.first()?)).collect::<Option<_>>()?),
                "R" => {
                    let all: Vec<&str> = parts.collect();
                    if all.len() != 2 * types.len() {
                        return None;
                    }
                    let (lo, hi) = all.split_at(types.len());
                    let datums = |vs: &[&str]| -> Option<Vec<RangeDatum>> {
                        vs.iter().zip(&types).map(|(v, ty)| decode_datum(v, *ty)).collect()
                    };
                    Bound::Range(datums(lo)?, datums(hi)?)
                }
                _ => return None,
            };
            partitions.push(Partition { name: name.to_owned(), bound });
        }
        Some(PartitionSpec { strategy, key, partitions })
    }

    /// The partitions in PostgreSQL's order (its partition descriptor):
    /// range partitions by lower bound, list partitions by their least
    /// value (one holding only NULL after them), the default last.
    pub fn in_bound_order(&self) -> Vec<Partition> {
        let mut parts = self.partitions.clone();
        let rank = |p: &Partition| match &p.bound {
            Bound::Range(..) => 0,
            Bound::List(vs) if vs.iter().any(|v| !v.is_null()) => 0,
            Bound::List(_) => 1,
            Bound::Default => 2,
        };
        parts.sort_by(|a, b| {
            rank(a).cmp(&rank(b)).then_with(|| match (&a.bound, &b.bound) {
                (Bound::Range(x, _), Bound::Range(y, _)) => cmp_bound(x, y),
                (Bound::List(x), Bound::List(y)) => {
                    let least = |vs: &[Value]| {
                        vs.iter().filter(|v| !v.is_null()).min_by(|a, b| crate::value::sort_cmp(a, b)).cloned()
                    };
                    match (least(x), least(y)) {
                        (Some(a), Some(b)) => crate::value::sort_cmp(&a, &b),
                        _ => Ordering::Equal,
                    }
                }
                _ => Ordering::Equal,
            })
        });
        parts
    }

    /// The key's types, over the partitioned table `t`.
    pub fn key_types(&self, t: &TableSchema) -> Vec<DataType> {
        self.key
            .iter()
            .filter_map(|k| match key_expr(k) {
                Some((ty, _)) => Some(ty),
                None => t.columns.iter().find(|c| c.name == *k).map(|c| c.ty),
            })
            .collect()
    }

    /// The partition bounds of this table that `bound` (of new partition
    /// `name`) overlaps: PostgreSQL's 42P17 errors.
    pub fn check_new(&self, name: &str, bound: &Bound) -> Result<()> {
        let short = crate::names::short;
        for p in &self.partitions {
            let clash = match (&p.bound, bound) {
                (Bound::Default, Bound::Default) => {
                    return Err(SqlError::new(
                        "42P17",
                        format!(
                            "partition \"{}\" conflicts with existing default partition \"{}\"",
                            short(name),
                            short(&p.name)
                        ),
                    ));
                }
                (Bound::List(a), Bound::List(b)) => a.iter().any(|x| b.iter().any(|y| same(x, y))),
                (Bound::Range(alo, ahi), Bound::Range(blo, bhi)) => {
                    cmp_bound(blo, ahi) == Ordering::Less && cmp_bound(alo, bhi) == Ordering::Less
                }
                _ => false,
            };
            if clash {
                return Err(SqlError::new(
                    "42P17",
                    format!("partition \"{}\" would overlap partition \"{}\"", short(name), short(&p.name)),
                ));
            }
        }
        Ok(())
    }
}

/// Two list values are the same partition key (NULL matches NULL).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        _ => crate::value::compare(a, b) == Some(Ordering::Equal),
    }
}

/// PostgreSQL's order of range bounds (partition_rbound_cmp): datum by
/// datum; MINVALUE and MAXVALUE end the comparison.
pub fn cmp_bound(a: &[RangeDatum], b: &[RangeDatum]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = match (x, y) {
            (RangeDatum::MinValue, RangeDatum::MinValue) | (RangeDatum::MaxValue, RangeDatum::MaxValue) => {
                return Ordering::Equal;
            }
            (RangeDatum::MinValue, _) | (_, RangeDatum::MaxValue) => Ordering::Less,
            (RangeDatum::MaxValue, _) | (_, RangeDatum::MinValue) => Ordering::Greater,
            (RangeDatum::Value(v), RangeDatum::Value(w)) => crate::value::sort_cmp(v, w),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// True for a partitioned table's engine table.
#[inline]
pub fn is_partitioned(t: &TableSchema) -> bool {
    t.annotation.as_deref().is_some_and(|a| a.starts_with(PARTITIONED_MAGIC))
}

/// The partitioned table that stored relation `name` is a partition of,
/// with its spec and the partition's place in it.
pub fn parent_of(catalog: &Catalog, name: &str) -> Option<(Arc<TableSchema>, PartitionSpec, usize)> {
    catalog.tables().filter(|t| is_partitioned(t)).find_map(|t| {
        let spec = PartitionSpec::decode(t)?;
        let k = spec.partitions.iter().position(|p| p.name == name)?;
        Some((Arc::clone(t), spec, k))
    })
}

/// The partitions of `t` that hold rows (partitioned ones replaced by
/// theirs), depth first in bound order, the order PostgreSQL scans them.
pub fn leaves(catalog: &Catalog, t: &TableSchema) -> Vec<Arc<TableSchema>> {
    let mut out = Vec::new();
    let Some(spec) = PartitionSpec::decode(t) else { return out };
    for p in &spec.in_bound_order() {
        if let Some(c) = catalog.table_by_name(&p.name) {
            if is_partitioned(c) {
                out.extend(leaves(catalog, c));
            } else {
                out.push(Arc::clone(c));
            }
        }
    }
    out
}

/// `pg_get_partkeydef`'s text: `RANGE (a, b)`.
pub fn partkeydef(spec: &PartitionSpec) -> String {
    let cols: Vec<String> = spec.key.iter().map(|k| key_text(k, true)).collect();
    format!("{} ({})", spec.strategy.keyword(), cols.join(", "))
}

/// A bound as `pg_get_expr(relpartbound, ...)` prints it.
pub fn bound_text(bound: &Bound) -> String {
    let lit = |v: &Value| match v {
        Value::Null => "NULL".to_owned(),
        Value::Int2(_) | Value::Int4(_) | Value::Int8(_) => crate::value::to_text(v),
        other => format!("'{}'", crate::value::to_text(other).replace('\'', "''")),
    };
    let datum = |d: &RangeDatum| match d {
        RangeDatum::MinValue => "MINVALUE".to_owned(),
        RangeDatum::MaxValue => "MAXVALUE".to_owned(),
        RangeDatum::Value(v) => lit(v),
    };
    match bound {
        Bound::Default => "DEFAULT".to_owned(),
        Bound::List(vs) => format!("FOR VALUES IN ({})", vs.iter().map(lit).collect::<Vec<_>>().join(", ")),
        Bound::Range(lo, hi) => format!(
            "FOR VALUES FROM ({}) TO ({})",
            lo.iter().map(datum).collect::<Vec<_>>().join(", "),
            hi.iter().map(datum).collect::<Vec<_>>().join(", ")
        ),
    }
}
