//! Memory of the cached rows, each side measured two ways so like is
//! compared with like: as allocated (pgtier: the slab chunks the engine
//! reserved for the tables' row versions, their primary hash slots and
//! ordered-index pages, free space included; PostgreSQL: the relations' and
//! indexes' pages, pro-rated to the cached rows) and as the rows themselves
//! (pgtier: the engine's count of versions and index entries in use;
//! PostgreSQL: tuple data).

use pgtier_cache::Cache;

use super::{GROUP, MemoryFigures};
use crate::target::DbError;
use crate::targets::postgres::db_error;

/// The group's rows in the cache and PostgreSQL's size for the same rows.
pub(super) fn figures(cache: &Cache, backend_url: &str, cached_subscribers: u64) -> Result<MemoryFigures, DbError> {
    let stats = cache.stats().into_iter().find(|s| s.group == GROUP).unwrap_or_default();
    let tables = crate::tatp::schema::TABLES;
    let allocated = cache
        .database()
        .stats()
        .tables
        .iter()
        .filter(|t| tables.contains(&t.name.as_str()))
        .map(|t| t.row_bytes + t.index_bytes)
        .sum();
    let mut client =
        pgtier_backend::connect::connect(backend_url).map_err(|e| DbError::new(Some(e.sqlstate()), e.to_string()))?;
    let mut figures = MemoryFigures {
        instances: stats.instances,
        cache_rows: stats.rows,
        cache_bytes: stats.memory_bytes,
        cache_allocated_bytes: allocated,
        ..MemoryFigures::default()
    };
    for table in tables {
        let sql = format!(
            "SELECT pg_total_relation_size('{table}')::int8, (SELECT count(*) FROM {table})::int8, \
             count(*)::int8, coalesce(sum(pg_column_size(t.*)), 0)::int8 FROM {table} t WHERE s_id <= {cached_subscribers}"
        );
        let row = client.query_one(&sql, &[]).map_err(|e| db_error(&e))?;
        let (size, all, cached, tuple): (i64, i64, i64, i64) = (row.get(0), row.get(1), row.get(2), row.get(3));
        figures.postgres_bytes_total += size.max(0) as u64;
        if all > 0 {
            figures.postgres_bytes_prorated += (size as f64 * cached as f64 / all as f64).round() as u64;
        }
        figures.postgres_tuple_bytes += tuple.max(0) as u64;
    }
    Ok(figures)
}
