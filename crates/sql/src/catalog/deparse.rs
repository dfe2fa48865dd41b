//! Catalog objects as PostgreSQL prints them: identifiers, type names
//! (`format_type`), index and constraint definitions (`pg_get_indexdef`,
//! `pg_get_constraintdef`) and column defaults (`pg_get_expr`).

use pgtier_engine::{Catalog, Column, DataType, IndexSchema, SequenceDefault, TableSchema, Value};

use super::ConstraintRef;
use super::pg_type::{TypeMatch, type_by_oid};
use crate::value;

/// A name as an SQL identifier, quoted when PostgreSQL would.
pub fn quote_ident(s: &str) -> String {
    let plain = s.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !is_reserved(s);
    if plain { s.to_owned() } else { format!("\"{}\"", s.replace('"', "\"\"")) }
}

/// The keywords PostgreSQL 15's quote_identifier quotes: every keyword
/// but the unreserved ones (reserved, column-name and type-or-function-name
/// keywords; src/include/parser/kwlist.h), sorted.
const QUOTED_KEYWORDS: &[&str] = &[
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "authorization",
    "between",
    "bigint",
    "binary",
    "bit",
    "boolean",
    "both",
    "case",
    "cast",
    "char",
    "character",
    "check",
    "coalesce",
    "collate",
    "collation",
    "column",
    "concurrently",
    "constraint",
    "create",
    "cross",
    "current_catalog",
    "current_date",
    "current_role",
    "current_schema",
    "current_time",
    "current_timestamp",
    "current_user",
    "dec",
    "decimal",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "exists",
    "extract",
    "false",
    "fetch",
    "float",
    "for",
    "foreign",
    "freeze",
    "from",
    "full",
    "grant",
    "greatest",
    "group",
    "grouping",
    "having",
    "ilike",
    "in",
    "initially",
    "inner",
    "inout",
    "int",
    "integer",
    "intersect",
    "interval",
    "into",
    "is",
    "isnull",
    "join",
    "lateral",
    "leading",
    "least",
    "left",
    "like",
    "limit",
    "localtime",
    "localtimestamp",
    "national",
    "natural",
    "nchar",
    "none",
    "normalize",
    "not",
    "notnull",
    "null",
    "nullif",
    "numeric",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "out",
    "outer",
    "overlaps",
    "overlay",
    "placing",
    "position",
    "precision",
    "primary",
    "real",
    "references",
    "returning",
    "right",
    "row",
    "select",
    "session_user",
    "setof",
    "similar",
    "smallint",
    "some",
    "substring",
    "symmetric",
    "table",
    "tablesample",
    "then",
    "time",
    "timestamp",
    "to",
    "trailing",
    "treat",
    "trim",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "values",
    "varchar",
    "variadic",
    "verbose",
    "when",
    "where",
    "window",
    "with",
    "xmlattributes",
    "xmlconcat",
    "xmlelement",
    "xmlexists",
    "xmlforest",
    "xmlnamespaces",
    "xmlparse",
    "xmlpi",
    "xmlroot",
    "xmlserialize",
    "xmltable",
];

fn is_reserved(s: &str) -> bool {
    QUOTED_KEYWORDS.binary_search(&s).is_ok()
}

/// `format_type(oid, typmod)`; `typmod` None is SQL NULL.
pub fn format_type(oid: i64, typmod: Option<i64>) -> String {
    let Some(TypeMatch { base: row, is_array }) = type_by_oid(oid) else { return "???".into() };
    let base_oid = row.oid;
    let tm = typmod.filter(|m| *m >= 0);
    let base = match base_oid {
        16 => "boolean".to_owned(),
        18 => "\"char\"".to_owned(),
        20 => "bigint".to_owned(),
        21 => "smallint".to_owned(),
        23 => "integer".to_owned(),
        700 => "real".to_owned(),
        701 => "double precision".to_owned(),
        1042 => match tm {
            Some(m) => format!("character({})", m - 4),
            None if typmod.is_none() || is_array => "character".to_owned(),
            None => "bpchar".to_owned(),
        },
        1043 => match tm {
            Some(m) => format!("character varying({})", m - 4),
            None => "character varying".to_owned(),
        },
        1700 => match tm {
            Some(m) => format!("numeric({},{})", ((m - 4) >> 16) & 0xffff, (m - 4) & 0xffff),
            None => "numeric".to_owned(),
        },
        1114 => match tm {
            Some(p) => format!("timestamp({p}) without time zone"),
            None => "timestamp without time zone".to_owned(),
        },
        1184 => match tm {
            Some(p) => format!("timestamp({p}) with time zone"),
            None => "timestamp with time zone".to_owned(),
        },
        1083 => match tm {
            Some(p) => format!("time({p}) without time zone"),
            None => "time without time zone".to_owned(),
        },
        1266 => match tm {
            Some(p) => format!("time({p}) with time zone"),
            None => "time with time zone".to_owned(),
        },
        _ => row.name.to_owned(),
    };
    if is_array { format!("{base}[]") } else { base }
}

fn column_list(t: &TableSchema, cols: &[usize]) -> String {
    cols.iter().map(|&c| quote_ident(&t.columns[c].name)).collect::<Vec<_>>().join(", ")
}

/// `pg_get_indexdef`: `CREATE UNIQUE INDEX t_pkey ON public.t USING btree (id)`,
/// each key with its operator class and order when declared, then
/// `INCLUDE (...)`.
pub fn index_def(t: &TableSchema, i: &IndexSchema, qualified: bool) -> String {
    let mut keys = Vec::with_capacity(i.columns.len());
    for (k, &c) in i.columns.iter().enumerate() {
        let mut key = quote_ident(&t.columns[c].name);
        let declared = i.options.keys.get(k).cloned().unwrap_or_default();
        if let Some(opclass) = &declared.opclass {
            key.push(' ');
            key.push_str(opclass);
        }
        match (declared.descending, declared.nulls_first) {
            (true, true) => key.push_str(" DESC"),
            (true, false) => key.push_str(" DESC NULLS LAST"),
            (false, true) => key.push_str(" NULLS FIRST"),
            (false, false) => {}
        }
        keys.push(key);
    }
    let include =
        if i.include.is_empty() { String::new() } else { format!(" INCLUDE ({})", column_list(t, &i.include)) };
    format!(
        "CREATE {}INDEX {} ON {}{} USING btree ({}){include}",
        if i.unique { "UNIQUE " } else { "" },
        quote_ident(crate::names::short(&i.name)),
        match crate::names::split(&t.name).0 {
            s if qualified || s != crate::names::PUBLIC => format!("{}.", quote_ident(s)),
            _ => String::new(),
        },
        quote_ident(crate::names::short(&t.name)),
        keys.join(", ")
    )
}

/// `pretty`: pg_get_constraintdef's second argument. A CHECK shows the
/// expression as it was written, one pair of parentheses more when not
/// pretty (PostgreSQL also parenthesizes each operator and shows implicit
/// casts there; for `col > 0` the two agree).
pub fn constraint_def(catalog: &Catalog, c: &ConstraintRef, pretty: bool) -> String {
    match c {
        ConstraintRef::Index(i) => {
            let Some(t) = catalog.table(i.table) else { return String::new() };
            format!("{} ({})", if i.primary { "PRIMARY KEY" } else { "UNIQUE" }, column_list(t, &i.columns))
        }
        ConstraintRef::Foreign(f) => {
            let (Some(child), Some(parent)) = (catalog.table(f.child), catalog.table(f.parent)) else {
                return String::new();
            };
            let action = match f.on_delete {
                pgtier_engine::FkAction::NoAction => "",
                pgtier_engine::FkAction::Cascade => " ON DELETE CASCADE",
                pgtier_engine::FkAction::SetNull => " ON DELETE SET NULL",
            };
            let timing = match f.timing {
                pgtier_engine::FkTiming::Immediate => "",
                pgtier_engine::FkTiming::DeferrableImmediate => " DEFERRABLE",
                pgtier_engine::FkTiming::DeferrableDeferred => " DEFERRABLE INITIALLY DEFERRED",
            };
            format!(
                "FOREIGN KEY ({}) REFERENCES {}({}){action}{timing}",
                column_list(child, &f.child_columns),
                quote_ident(&parent.name),
                column_list(parent, &f.parent_columns)
            )
        }
        ConstraintRef::Check(t, k) => {
            let sql = t.checks.get(*k).map_or("", |c| c.sql.as_str());
            if pretty { format!("CHECK ({sql})") } else { format!("CHECK (({sql}))") }
        }
    }
}

/// A column default as PostgreSQL deparses it (pg_get_expr of adbin). The
/// engine keeps the value coerced to the column type, so this shows the
/// value as if it had been written as a literal of that type: integers
/// and non-negative decimals bare, everything else quoted with a cast.
pub fn default_expr(v: &Value, ty: DataType) -> String {
    let quoted = |s: &str, t: &str| format!("'{}'::{t}", s.replace('\'', "''"));
    match v {
        Value::Null => format!("NULL::{}", ty.pg_name()),
        Value::Bool(b) => (if *b { "true" } else { "false" }).to_owned(),
        Value::Int2(_) | Value::Int4(_) | Value::Int8(_) => {
            let x = v.as_i64().unwrap_or(0);
            match (x >= 0, i32::try_from(x).is_ok()) {
                (true, true) => x.to_string(),
                (_, true) => quoted(&x.to_string(), "integer"),
                (_, false) => quoted(&x.to_string(), "bigint"),
            }
        }
        Value::Numeric(n) => {
            let n = value::numeric_normalize(*n);
            let s = n.to_string();
            if n.mantissa >= 0 && (n.scale > 0 || i32::try_from(n.mantissa).is_ok()) {
                s
            } else if n.scale == 0 && i64::try_from(n.mantissa).is_ok() {
                quoted(&s, if i32::try_from(n.mantissa).is_ok() { "integer" } else { "bigint" })
            } else {
                quoted(&s, "numeric")
            }
        }
        Value::Float4(_) | Value::Float8(_) => {
            let s = value::to_text(v);
            if s.starts_with('-') || s.contains(['e', 'N', 'I']) { quoted(&s, "double precision") } else { s }
        }
        Value::Text(s) => {
            let t = match ty {
                DataType::Varchar(_) => "character varying",
                DataType::Char(_) => "bpchar",
                _ => "text",
            };
            let s = if matches!(ty, DataType::Char(_)) { value::bpchar_trim(s) } else { s };
            quoted(s, t)
        }
        other => quoted(&value::to_text(other), ty.pg_name().split('(').next().unwrap_or("text")),
    }
}

/// A column's default as `pg_get_expr(adbin)` prints it. Identity columns
/// have none (their sequence is implied, as in PostgreSQL).
pub fn column_default_text(catalog: &Catalog, col: &Column) -> Option<String> {
    match col.sequence {
        Some((seq, SequenceDefault::Serial | SequenceDefault::Nextval)) => {
            catalog.table(seq).map(|s| format!("nextval('{}'::regclass)", quote_ident(&s.name).replace('\'', "''")))
        }
        Some(_) => None,
        // A cached identity column: its sequence is implied there too.
        None if super::identity_kind(col).is_some() => None,
        None => col.default_sql.clone().or_else(|| col.default.as_ref().map(|d| default_expr(d, col.ty))),
    }
}
