//! The name PostgreSQL gives an output column that has no alias: parse_target.c's
//! FigureColnameInternal over the statement's syntax. Clients read rows by these
//! names, so a different name is a different answer.
//!
//! Each rule returns a strength: 2 for a name the expression owns (a column, a
//! function, `array`, `exists`), 1 for a fallback (a cast's type name, `case`),
//! 0 for none. A cast or CASE takes the name of its argument (its ELSE) only
//! when that one is strong: `q1::int4` is `q1`, `'1'::int2::int8` is `int8`,
//! `CASE ... ELSE f1 END` is `f1`.

use pgtier_engine::DataType;
use sqlparser::ast;

use super::coerce::map_type;
use super::ident;

/// FigureColname: the name, `?column?` when no rule gives one.
pub(super) fn figure_colname(e: &ast::Expr) -> String {
    figure(e).0.unwrap_or_else(|| "?column?".to_owned())
}

fn strong(name: &str) -> (Option<String>, u8) {
    (Some(name.to_owned()), 2)
}

fn figure(e: &ast::Expr) -> (Option<String>, u8) {
    use ast::Expr as E;
    match e {
        E::Identifier(i) => (Some(ident(i)), 2),
        E::CompoundIdentifier(parts) => (parts.last().map(ident), 2),
        E::Function(f) => (f.name.0.last().and_then(|p| p.as_ident()).map(ident), 2),
        E::Cast { expr, data_type, .. } => weak_fallback(figure(expr), type_label(data_type)),
        E::TypedString(t) => (type_label(&t.data_type), 1),
        E::Interval(_) => (Some("interval".to_owned()), 1),
        E::Nested(inner) | E::Collate { expr: inner, .. } => figure(inner),
        E::Case { else_result, .. } => {
            let inner = else_result.as_deref().map_or((None, 0), figure);
            weak_fallback(inner, Some("case".to_owned()))
        }
        E::Exists { .. } => strong("exists"),
        E::Array(_) => strong("array"),
        // gram.y spells these as calls of the functions they name.
        E::Substring { shorthand: true, .. } => strong("substr"),
        E::Substring { .. } => strong("substring"),
        E::Trim { trim_where: Some(ast::TrimWhereField::Leading), .. } => strong("ltrim"),
        E::Trim { trim_where: Some(ast::TrimWhereField::Trailing), .. } => strong("rtrim"),
        E::Trim { .. } => strong("btrim"),
        E::Ceil { .. } => strong("ceil"),
        E::Floor { .. } => strong("floor"),
        E::Extract { .. } => strong("extract"),
        E::Position { .. } => strong("position"),
        E::Overlay { .. } => strong("overlay"),
        E::AtTimeZone { .. } => strong("timezone"),
        E::Subquery(q) => first_target(q).map_or((None, 0), |n| (Some(n), 2)),
        // A_Indirection: a field selection names the column, a subscript keeps the base's name.
        E::CompoundFieldAccess { root, access_chain } => match access_chain.last() {
            Some(ast::AccessExpr::Dot(ast::Expr::Identifier(i))) => (Some(ident(i)), 2),
            _ => figure(root),
        },
        _ => (None, 0),
    }
}

/// A cast (or CASE) keeps its argument's name only when that name is strong.
fn weak_fallback(inner: (Option<String>, u8), fallback: Option<String>) -> (Option<String>, u8) {
    if inner.1 <= 1 && fallback.is_some() { (fallback, 1) } else { inner }
}

/// The name of a scalar subquery's single column (the resname of its first target).
fn first_target(q: &ast::Query) -> Option<String> {
    let mut body = q.body.as_ref();
    loop {
        match body {
            ast::SetExpr::Select(s) => {
                return match s.projection.first()? {
                    ast::SelectItem::UnnamedExpr(e) => Some(figure_colname(e)),
                    ast::SelectItem::ExprWithAlias { alias, .. } => Some(ident(alias)),
                    // `(SELECT * FROM t)` names t's column: known only after binding.
                    _ => None,
                };
            }
            ast::SetExpr::SetOperation { left, .. } => body = left,
            ast::SetExpr::Query(inner) => body = inner.body.as_ref(),
            _ => return None,
        }
    }
}

/// `strVal(llast(typeName->names))`: the type's last name as the grammar
/// leaves it, which for SQL's spelled-out types is pg_type's name
/// (`integer` → `int4`, `character varying` → `varchar`, `char(3)` → `bpchar`);
/// an array type keeps its element's name.
fn type_label(t: &ast::DataType) -> Option<String> {
    use ast::DataType as D;
    match t {
        D::Array(ast::ArrayElemTypeDef::SquareBracket(inner, _) | ast::ArrayElemTypeDef::AngleBracket(inner)) => {
            type_label(inner)
        }
        D::Custom(name, _) => {
            let last = name.0.last()?.as_ident()?;
            Some(if last.quote_style.is_some() { last.value.clone() } else { last.value.to_lowercase() })
        }
        D::Varchar(_) | D::CharacterVarying(_) => Some("varchar".to_owned()),
        D::Char(_) | D::Character(_) => Some("bpchar".to_owned()),
        D::Regclass => Some("regclass".to_owned()),
        other => map_type(other).ok().map(|ty| engine_type_name(ty).to_owned()),
    }
}

fn engine_type_name(ty: DataType) -> &'static str {
    match ty {
        DataType::Bool => "bool",
        DataType::Int2 => "int2",
        DataType::Int4 => "int4",
        DataType::Int8 => "int8",
        DataType::Numeric { .. } => "numeric",
        DataType::Float4 => "float4",
        DataType::Float8 => "float8",
        DataType::Text => "text",
        DataType::Varchar(_) => "varchar",
        DataType::Char(_) => "bpchar",
        DataType::Bytea => "bytea",
        DataType::Date => "date",
        DataType::Timestamp(_) => "timestamp",
        DataType::TimestampTz(_) => "timestamptz",
        DataType::Time(_) => "time",
        DataType::TimeTz(_) => "timetz",
        DataType::Uuid => "uuid",
        DataType::Json => "json",
        DataType::Jsonb => "jsonb",
        DataType::Interval => "interval",
        DataType::Array(e) => engine_type_name(e.get()),
    }
}
