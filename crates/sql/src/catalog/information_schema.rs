//! The rows of the information_schema views.

use std::sync::Arc;

use pgtier_engine::{Catalog, Column, DataType, ForeignKey, SequenceDefault, TableSchema, Value};

use super::pg_type::{TypeMatch, column_type_info};
use super::rows::{TableIndex, all_indexes, text, user_columns, user_tables, user_views};
use super::views::is_view;
use super::{BUILTIN_TYPES, RELATIONS, Schema, SysCtx, column_default_text, table_oid, type_by_oid};
use super::{is_auto_updatable, view_definition};
use crate::catalog::search_path::namespace_oid;
use crate::names::{short, split};

/// Appends the rows of information_schema view `name`.
pub(super) fn rows(name: &str, ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    match name {
        "schemata" => {
            for (name, owner) in [
                ("information_schema", ctx.user()),
                ("pg_catalog", ctx.user()),
                ("pg_toast", ctx.user()),
                ("public", "pg_database_owner".to_owned()),
            ] {
                out.extend([
                    Value::Text(ctx.database()),
                    text(name),
                    Value::Text(owner),
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                ]);
            }
            for s in super::schemas::user_schemas(ctx.catalog) {
                out.extend([
                    Value::Text(ctx.database()),
                    Value::Text(s.name),
                    Value::Text(s.owner),
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                ]);
            }
        }
        "tables" => {
            let db = ctx.database();
            for t in user_tables(ctx.catalog) {
                out.extend([
                    Value::Text(db.clone()),
                    text(split(&t.name).0),
                    text(short(&t.name)),
                    text(if crate::names::is_temp_schema(split(&t.name).0) { "LOCAL TEMPORARY" } else { "BASE TABLE" }),
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    text("YES"),
                    text("NO"),
                    Value::Null,
                ]);
            }
            for v in user_views(ctx.catalog) {
                let insertable = if is_auto_updatable(ctx.catalog, v) { "YES" } else { "NO" };
                out.extend([
                    Value::Text(db.clone()),
                    text(split(&v.name).0),
                    text(short(&v.name)),
                    text("VIEW"),
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    text(insertable),
                    text("NO"),
                    Value::Null,
                ]);
            }
            for r in RELATIONS {
                let schema = if r.schema == Schema::PgCatalog { "pg_catalog" } else { "information_schema" };
                let ty = if r.kind == "v" { "VIEW" } else { "BASE TABLE" };
                out.extend([
                    Value::Text(db.clone()),
                    text(schema),
                    text(r.name),
                    text(ty),
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    text(if r.kind == "v" { "NO" } else { "YES" }),
                    text("NO"),
                    Value::Null,
                ]);
            }
        }
        "views" => {
            for v in user_views(ctx.catalog) {
                let def = view_definition(ctx.catalog, v, false).map_or(Value::Null, Value::Text);
                let updatable = if is_auto_updatable(ctx.catalog, v) { "YES" } else { "NO" };
                out.extend([
                    Value::Text(ctx.database()),
                    text(split(&v.name).0),
                    text(short(&v.name)),
                    def,
                    text("NONE"),
                    text(updatable),
                    text(updatable),
                    text("NO"),
                    text("NO"),
                    text("NO"),
                ]);
            }
        }
        "columns" => info_columns(ctx, out),
        "table_constraints" => info_table_constraints(ctx, out),
        "key_column_usage" => info_key_columns(ctx, out),
        _ => {}
    }
}

fn info_columns(ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let db = ctx.database();
    for t in user_tables(ctx.catalog).into_iter().chain(user_views(ctx.catalog)) {
        let updatable = !is_view(t) || is_auto_updatable(ctx.catalog, t);
        let numeric_any = super::views::view_def(t).map(|d| d.numeric_any).unwrap_or_default();
        for (c, col) in user_columns(t) {
            let fixed;
            let col = if numeric_any.contains(&c) {
                fixed = Column { ty: crate::value::NUMERIC_ANY, ..col.clone() };
                &fixed
            } else {
                col
            };
            let typ = column_type_info(col.ty).type_oid;
            let TypeMatch { base: row, is_array } =
                type_by_oid(typ).unwrap_or(TypeMatch { base: &BUILTIN_TYPES[0], is_array: false });
            let udt_name = if is_array { format!("_{}", row.name) } else { row.name.to_owned() };
            let data_type = match col.ty {
                DataType::Array(_) => "ARRAY".to_owned(),
                DataType::Numeric { .. } => "numeric".to_owned(),
                DataType::Varchar(_) => "character varying".to_owned(),
                DataType::Char(_) => "character".to_owned(),
                // The name without the precision (datetime_precision has it).
                DataType::Timestamp(_) | DataType::TimestampTz(_) | DataType::Time(_) | DataType::TimeTz(_) => {
                    crate::value::type_name(col.ty).to_owned()
                }
                other => other.pg_name(),
            };
            let int = |v: Option<i64>| v.map_or(Value::Null, |x| Value::Int4(i32::try_from(x).unwrap_or(i32::MAX)));
            let (char_len, octet_len) = match col.ty {
                DataType::Varchar(n) | DataType::Char(n) => (Some(i64::from(n)), Some(i64::from(n) * 4)),
                DataType::Text => (None, Some(1_073_741_824)),
                _ => (None, None),
            };
            let (prec, radix, scale) = match col.ty {
                DataType::Int2 => (Some(16), Some(2), Some(0)),
                DataType::Int4 => (Some(32), Some(2), Some(0)),
                DataType::Int8 => (Some(64), Some(2), Some(0)),
                DataType::Float4 => (Some(24), Some(2), None),
                DataType::Float8 => (Some(53), Some(2), None),
                DataType::Numeric { precision: 0, .. } => (None, Some(10), None),
                DataType::Numeric { precision, scale } => {
                    (Some(i64::from(precision)), Some(10), Some(i64::from(scale)))
                }
                _ => (None, None, None),
            };
            let dt_prec = match col.ty {
                DataType::Date => Some(0),
                DataType::Timestamp(p) | DataType::TimestampTz(p) | DataType::Time(p) | DataType::TimeTz(p) => {
                    Some(p.map_or(6, i64::from))
                }
                _ => None,
            };
            let position = i64::from(t.attnum(c));
            out.extend([
                Value::Text(db.clone()),
                text(split(&t.name).0),
                text(short(&t.name)),
                text(&col.name),
                int(Some(position)),
                column_default_text(ctx.catalog, col).map_or(Value::Null, Value::Text),
                text(if col.nullable { "YES" } else { "NO" }),
                Value::Text(data_type),
                int(char_len),
                int(octet_len),
                int(prec),
                int(radix),
                int(scale),
                int(dt_prec),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Text(db.clone()),
                text("pg_catalog"),
                Value::Text(udt_name),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Text(position.to_string()),
                text("NO"),
            ]);
            out.extend(identity_info(ctx.catalog, col));
            out.extend([text("NEVER"), Value::Null, text(if updatable { "YES" } else { "NO" })]);
        }
    }
}

/// information_schema.columns' is_identity .. identity_cycle.
fn identity_info(catalog: &Catalog, col: &Column) -> [Value; 7] {
    let options = col
        .sequence
        .filter(|(_, how)| matches!(how, SequenceDefault::IdentityAlways | SequenceDefault::IdentityByDefault));
    let Some((how, o)) =
        options.and_then(|(seq, how)| catalog.table(seq).and_then(|s| s.sequence.clone()).map(|o| (how, o)))
    else {
        // A cached identity column: its sequence's options are PostgreSQL's, unknown here.
        return match super::identity_kind(col) {
            Some(how) => {
                let generation = if how == SequenceDefault::IdentityAlways { "ALWAYS" } else { "BY DEFAULT" };
                [text("YES"), text(generation), Value::Null, Value::Null, Value::Null, Value::Null, Value::Null]
            }
            None => [text("NO"), Value::Null, Value::Null, Value::Null, Value::Null, Value::Null, text("NO")],
        };
    };
    let generation = if how == SequenceDefault::IdentityAlways { "ALWAYS" } else { "BY DEFAULT" };
    [
        text("YES"),
        text(generation),
        Value::Text(o.start.to_string()),
        Value::Text(o.increment.to_string()),
        Value::Text(o.max.to_string()),
        Value::Text(o.min.to_string()),
        text(if o.cycle { "YES" } else { "NO" }),
    ]
}

/// A constraint as information_schema lists it.
struct InfoConstraint {
    name: String,
    table: Arc<TableSchema>,
    /// `constraint_type`: PRIMARY KEY, UNIQUE or FOREIGN KEY.
    kind: &'static str,
    columns: Vec<usize>,
    foreign_key: Option<Arc<ForeignKey>>,
}

fn info_constraints(catalog: &Catalog) -> Vec<InfoConstraint> {
    let mut out = Vec::new();
    for TableIndex { table: t, index: i } in all_indexes(catalog) {
        if i.unique {
            let kind = if i.primary { "PRIMARY KEY" } else { "UNIQUE" };
            out.push(InfoConstraint {
                name: i.name.clone(),
                table: t.clone(),
                kind,
                columns: i.columns.clone(),
                foreign_key: None,
            });
        }
    }
    for t in user_tables(catalog) {
        for f in catalog.foreign_keys_of(t.id) {
            out.push(InfoConstraint {
                name: f.name.clone(),
                table: t.clone(),
                kind: "FOREIGN KEY",
                columns: f.child_columns.clone(),
                foreign_key: Some(f.clone()),
            });
        }
    }
    out
}

fn info_table_constraints(ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let db = ctx.database();
    for InfoConstraint { name, table: t, kind: ty, foreign_key, .. } in info_constraints(ctx.catalog) {
        let timing = foreign_key.map(|f| f.timing).unwrap_or_default();
        let yes_no = |b: bool| text(if b { "YES" } else { "NO" });
        out.extend([
            Value::Text(db.clone()),
            text(split(&t.name).0),
            Value::Text(short(&name).to_owned()),
            Value::Text(db.clone()),
            text(split(&t.name).0),
            text(short(&t.name)),
            text(ty),
            yes_no(timing.deferrable()),
            yes_no(timing.initially_deferred()),
            text("YES"),
            if ty == "FOREIGN KEY" { Value::Null } else { text("YES") },
        ]);
    }
    for t in user_tables(ctx.catalog) {
        for c in &t.checks {
            out.extend([
                Value::Text(db.clone()),
                text(split(&t.name).0),
                text(short(&c.name)),
                Value::Text(db.clone()),
                text(split(&t.name).0),
                text(short(&t.name)),
                text("CHECK"),
                text("NO"),
                text("NO"),
                text("YES"),
                Value::Null,
            ]);
        }
    }
    // PostgreSQL lists NOT NULL columns as CHECK constraints named
    // <namespace oid>_<table oid>_<attnum>_not_null.
    for t in user_tables(ctx.catalog) {
        for (c, col) in user_columns(t) {
            if !col.nullable {
                out.extend([
                    Value::Text(db.clone()),
                    text(split(&t.name).0),
                    Value::Text(format!(
                        "{}_{}_{}_not_null",
                        namespace_oid(ctx.catalog, &t.name),
                        table_oid(t),
                        t.attnum(c)
                    )),
                    Value::Text(db.clone()),
                    text(split(&t.name).0),
                    text(short(&t.name)),
                    text("CHECK"),
                    text("NO"),
                    text("NO"),
                    text("YES"),
                    Value::Null,
                ]);
            }
        }
    }
}

fn info_key_columns(ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let db = ctx.database();
    for InfoConstraint { name, table: t, columns: cols, foreign_key: fk, .. } in info_constraints(ctx.catalog) {
        for (k, &c) in cols.iter().enumerate() {
            // For a foreign key: the position of the referenced column in the
            // parent's unique constraint.
            let in_unique = fk.as_ref().and_then(|f| {
                let parent_index = ctx.catalog.index(f.parent_index)?;
                let pc = f.parent_columns.get(k)?;
                parent_index
                    .columns
                    .iter()
                    .position(|x| x == pc)
                    .map(|p| Value::Int4(i32::try_from(p + 1).unwrap_or(i32::MAX)))
            });
            out.extend([
                Value::Text(db.clone()),
                text(split(&t.name).0),
                Value::Text(short(&name).to_owned()),
                Value::Text(db.clone()),
                text(split(&t.name).0),
                text(short(&t.name)),
                text(&t.columns[c].name),
                Value::Int4(i32::try_from(k + 1).unwrap_or(i32::MAX)),
                in_unique.unwrap_or(Value::Null),
            ]);
        }
    }
}
