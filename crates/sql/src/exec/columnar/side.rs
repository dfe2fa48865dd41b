//! Side tables: rows pgtier computes and hands to the analytic query,
//! registered beside the copies under their names (`pgtier_side_N`).
//! correlated.rs makes one per correlated aggregate computed per key.
//! This module makes one per subquery in FROM whose answer DataFusion
//! does not compute as pgtier does: an average, whose numeric division
//! rounds as PostgreSQL's (CH-benCHmark's Q17, `(SELECT i_id,
//! avg(ol_quantity) AS a ... GROUP BY i_id) t`). Such a subquery is run
//! first, as a statement of its own (routed to the columnar path like any
//! other, pgtier finishing its aggregates), and the enclosing query joins
//! its rows. Only an uncorrelated subquery without ORDER BY, LIMIT,
//! OFFSET, DISTINCT ON or windows is taken, as for one translated inline,
//! one that translates as a statement of its own (so it runs on the
//! columnar path and has no volatile function: a WITH query read twice is
//! computed twice), and at most [`DERIVED_ROWS_MAX`] rows of it.

use pgtier_engine::{DataType, Value};
use pgtier_olap::SideTable;

use super::translate::{Kind, Res, Translator, translate};
use crate::plan::SelectPlan;

/// Rows of a subquery in FROM held as a side table at most: beyond, the
/// statement takes the row path (the rows live in pgtier's memory and are
/// copied into the executor's).
pub(super) const DERIVED_ROWS_MAX: usize = 1 << 20;

/// A side table's columns as the enclosing query reads them: each
/// visible column's kind and whether a `c{i}s` column holds each row's
/// numeric scale (an average's varies with its value, as numeric division
/// chooses it).
pub(super) type DerivedColumns = Vec<(Kind, bool)>;

impl Translator<'_> {
    /// `plan` (a subquery in FROM) computed first into a side table: its
    /// name and columns (`c0, c1, ...`).
    pub(super) fn derived_side(&mut self, plan: &SelectPlan) -> Res<(String, DerivedColumns)> {
        if !self.outer.is_empty() {
            return Err("inside a correlated subquery".into());
        }
        // Then it runs on the columnar path too, and has no volatile
        // function (a WITH query read twice is computed twice).
        if !self.cx.translates(plan) {
            return Err("the subquery does not translate as a statement of its own".into());
        }
        let types: Vec<DataType> = plan.columns[..plan.visible]
            .iter()
            .map(|c| c.ty.ok_or_else(|| "a column of unknown type".to_owned()))
            .collect::<Res<Vec<_>>>()?;
        for ty in &types {
            if !matches!(ty, DataType::Numeric { .. }) {
                let kind = Kind::of_type(*ty).ok_or_else(|| format!("a column of type {}", ty.pg_name()))?;
                side_type(kind).filter(|t| t == ty).ok_or_else(|| format!("a column of type {}", ty.pg_name()))?;
            }
        }
        let name = self.side_name();
        let Some(rows) = self.cx.derived_rows(plan) else {
            // EXPLAIN: the subquery's own analytic query, when it has one.
            let described = match translate(plan, &mut *self.cx) {
                Ok(t) => format!("its own analytic query: {}", t.sql),
                Err(why) => format!("on the row path ({why})"),
            };
            self.side_queries.push(format!("Rows of a subquery in FROM ({name}), {described}"));
            let columns = types.iter().map(|ty| (derived_kind(*ty), matches!(ty, DataType::Numeric { .. }))).collect();
            return Ok((name, columns));
        };
        let mut rows = rows.map_err(|e| format!("the subquery in FROM failed: {}", e.message))?;
        if rows.len() > DERIVED_ROWS_MAX {
            return Err(format!("a subquery in FROM of more than {DERIVED_ROWS_MAX} rows"));
        }
        for row in &mut rows {
            row.truncate(types.len());
        }
        let mut columns = Vec::with_capacity(types.len());
        let mut scale_columns = Vec::new();
        let mut kinds = Vec::with_capacity(types.len());
        for (i, ty) in types.iter().enumerate() {
            let (kind, side, scales) = side_values(*ty, &mut rows, i)?;
            columns.push((format!("c{i}"), side));
            if scales {
                scale_columns.push((format!("c{i}s"), DataType::Int8));
            }
            kinds.push((kind, scales));
        }
        columns.extend(scale_columns);
        self.side_queries.push(format!("Rows of a subquery in FROM ({name}), computed first"));
        self.sides.push(SideTable { name: name.clone(), columns, rows });
        Ok((name, kinds))
    }
}

/// The kind EXPLAIN gives a subquery column of type `ty` (a numeric's
/// scale is known only from its values).
fn derived_kind(ty: DataType) -> Kind {
    match ty {
        DataType::Numeric { .. } => Kind::Num(0),
        ty => Kind::of_type(ty).unwrap_or(Kind::Null),
    }
}

/// The engine type a side-table column of `kind` is kept as.
pub(super) fn side_type(kind: Kind) -> Option<DataType> {
    Some(match kind {
        Kind::Bool => DataType::Bool,
        Kind::Int2 => DataType::Int2,
        Kind::Int4 => DataType::Int4,
        Kind::Int8 => DataType::Int8,
        Kind::Num(s) => DataType::Numeric { precision: 38, scale: i16::from(s) },
        Kind::Text => DataType::Text,
        Kind::Date => DataType::Date,
        Kind::Timestamp => DataType::Timestamp(None),
        Kind::Null => return None,
    })
}

/// Column `column` of a side table's rows, of engine type `ty`: its kind,
/// its side-table type, and whether its numerics' scales vary (then each
/// row gains its value's scale at its end, for the kind's varying-scale
/// column). Numerics are set to the largest scale among them, exactly (a
/// digit beyond 38 refuses).
pub(super) fn side_values(ty: DataType, rows: &mut [Vec<Value>], column: usize) -> Res<(Kind, DataType, bool)> {
    let numeric = matches!(ty, DataType::Numeric { .. });
    if !numeric {
        let kind = Kind::of_type(ty).ok_or_else(|| format!("a value of type {}", ty.pg_name()))?;
        let side = side_type(kind).ok_or("a NULL value")?;
        return Ok((kind, side, false));
    }
    let (mut largest, mut smallest) = (None::<u8>, None::<u8>);
    for row in rows.iter() {
        match row.get(column) {
            Some(Value::Numeric(n)) => {
                largest = largest.max(Some(n.scale));
                smallest = Some(smallest.map_or(n.scale, |s| s.min(n.scale)));
            }
            Some(Value::Null) => {}
            _ => return Err("a numeric value beyond 38 digits or not a numeric".into()),
        }
    }
    let largest = largest.unwrap_or(0);
    if largest > 38 {
        return Err("a numeric scale above 38".into());
    }
    let varying = smallest.is_some_and(|s| s != largest);
    for row in rows.iter_mut() {
        let scale = match row.get_mut(column) {
            Some(Value::Numeric(n)) => {
                let scale = n.scale;
                // Up to the largest scale: exact, or None past i128.
                let wide = n.rescale(largest).filter(|w| w.mantissa.unsigned_abs() < 10u128.pow(38));
                *n = wide.ok_or("a numeric beyond 38 digits")?;
                Value::Int8(i64::from(scale))
            }
            _ => Value::Null,
        };
        if varying {
            row.push(scale);
        }
    }
    Ok((Kind::Num(largest), DataType::Numeric { precision: 38, scale: i16::from(largest) }, varying))
}
