//! Views as the engine stores them. A view is an engine table that never
//! holds a row (as a PostgreSQL view is a pg_class entry without storage):
//! its columns are the view's output columns and its annotation holds the
//! defining query and the relations it reads. So a view is created,
//! replaced and dropped transactionally, logged, checkpointed and recovered
//! exactly as a table is, and a plan that used it is re-planned when it
//! changes (a new annotation is a new `TableSchema`), with no engine code
//! of its own. The cache's annotations start with `{"pgtier_cache_group"`;
//! a view's with [`VIEW_MAGIC`], so neither mistakes the other's.

use pgtier_engine::{Catalog, DataType, TableSchema};

/// The first line of a view's annotation (the number is the format).
pub const VIEW_MAGIC: &str = "pgtier_view 1\n";

/// A view's definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewDef {
    /// The defining query as SQL text (sqlparser's rendering of the AST).
    pub query: String,
    /// Relations (tables and views) the query names, for DROP's
    /// dependency check; sorted, without repeats.
    pub deps: Vec<String>,
    /// Positions of the columns of unconstrained `numeric`, a type the
    /// engine cannot declare a column of: the engine table has `text`
    /// there (it never holds a row), the catalogs show `numeric`.
    pub numeric_any: Vec<usize>,
}

impl ViewDef {
    /// The annotation text that stores it.
    pub fn encode(&self) -> String {
        let mut s = String::from(VIEW_MAGIC);
        // Relation names cannot hold a NUL byte (PostgreSQL refuses it in identifiers too).
        s.push_str(&self.deps.join("\0"));
        s.push('\n');
        s.push_str(&self.numeric_any.iter().map(usize::to_string).collect::<Vec<_>>().join(","));
        s.push('\n');
        s.push_str(&self.query);
        s
    }

    pub fn decode(annotation: &str) -> Option<ViewDef> {
        let rest = annotation.strip_prefix(VIEW_MAGIC)?;
        let (deps, rest) = rest.split_once('\n')?;
        let (numeric_any, query) = rest.split_once('\n')?;
        let deps = if deps.is_empty() { Vec::new() } else { deps.split('\0').map(str::to_owned).collect() };
        let numeric_any = if numeric_any.is_empty() {
            Vec::new()
        } else {
            numeric_any.split(',').map(str::parse).collect::<Result<_, _>>().ok()?
        };
        Some(ViewDef { query: query.to_owned(), deps, numeric_any })
    }
}

/// The type a view's column stands for in its engine table when the
/// engine cannot declare the real one (see [`ViewDef::numeric_any`]).
pub const NUMERIC_ANY_STAND_IN: DataType = DataType::Text;

/// A relation's visible columns with the types the catalogs show: a
/// view's unconstrained numeric columns are numeric, not their stand-in.
pub fn column_types(t: &TableSchema) -> Vec<(String, DataType)> {
    let any = view_def(t).map(|d| d.numeric_any).unwrap_or_default();
    t.columns
        .iter()
        .filter(|c| !c.is_hidden())
        .enumerate()
        .map(|(k, c)| (c.name.clone(), if any.contains(&k) { crate::value::NUMERIC_ANY } else { c.ty }))
        .collect()
}

/// True for a view's engine table.
#[inline]
pub fn is_view(t: &TableSchema) -> bool {
    t.annotation.as_deref().is_some_and(|a| a.starts_with(VIEW_MAGIC))
}

/// The definition of view `t`, None for anything else.
pub fn view_def(t: &TableSchema) -> Option<ViewDef> {
    ViewDef::decode(t.annotation.as_deref()?)
}

/// The views of the catalog, in id order.
pub fn views(catalog: &Catalog) -> impl Iterator<Item = &std::sync::Arc<TableSchema>> {
    catalog.tables().filter(|t| is_view(t))
}

/// Views that name relation `name` in their query, in id order.
pub fn dependent_views(catalog: &Catalog, name: &str) -> Vec<std::sync::Arc<TableSchema>> {
    views(catalog)
        .filter(|v| v.name != name && view_def(v).is_some_and(|d| d.deps.iter().any(|n| n == name)))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for deps in [vec![], vec!["t".to_owned()], vec!["a b".to_owned(), "c".to_owned()]] {
            let d = ViewDef { query: "SELECT a\nFROM t".into(), deps, numeric_any: vec![0, 3] };
            assert_eq!(ViewDef::decode(&d.encode()), Some(d.clone()));
        }
        assert_eq!(ViewDef::decode("{\"pgtier_cache_group\":1}"), None);
    }
}
