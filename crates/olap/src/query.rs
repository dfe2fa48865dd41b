//! DataFusion over the columnar copies (feature `datafusion`): each enabled
//! table is a [`TableProvider`] reading the table's view at the query's
//! snapshot (chunks with their masks, plus the delta rows visible at it),
//! split into `threads` partitions that DataFusion's vectorized operators
//! run on that many threads (`target_partitions`).
//!
//! The caller (routing in `sql`) passes its statement's snapshot; the
//! query waits once for the applier to reach it (engine.rs), then every
//! scan of every table reads at that one snapshot, so a join sees one
//! consistent state, the row store's at that snapshot.

use std::fmt;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::memory::MemorySourceConfig;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::TableReference;
use datafusion::datasource::MemTable;
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::DataFusionError;
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use pgtier_engine::Snapshot;

use crate::copy::TableCopy;
use crate::engine::{OlapEngine, ScanCounters};
use crate::error::{OlapError, Result};
use crate::rows::SideTable;
use crate::types::{ColumnBuilder, arrow_type_of};

/// One table's copy read at one snapshot.
struct SnapshotTable {
    copy: Arc<TableCopy>,
    counters: Arc<ScanCounters>,
    snapshot: Snapshot,
    schema: SchemaRef,
    partitions: usize,
}

impl fmt::Debug for SnapshotTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SnapshotTable({} at {})", self.copy.layout.name(), self.snapshot)
    }
}

#[async_trait]
impl TableProvider for SnapshotTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        let external = |e: OlapError| DataFusionError::External(Box::new(e));
        let started = std::time::Instant::now();
        let view = self.copy.view(self.snapshot.get()).map_err(external)?;
        // Only the columns the plan reads are copied out of masked chunks
        // and converted from the delta's rows.
        let wanted: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let columns: Vec<usize> = wanted.iter().map(|&i| view.visible_columns()[i]).collect();
        let schema = Arc::new(self.schema.project(&wanted)?);
        let batches = view.batches_of(&columns).map_err(external)?;
        self.counters.record(started.elapsed());
        let mut parts: Vec<Vec<RecordBatch>> = vec![Vec::new(); self.partitions.min(batches.len()).max(1)];
        let n = parts.len();
        for (i, b) in batches.into_iter().enumerate() {
            parts[i % n].push(b);
        }
        // Rows in primary key order (TPC-H's lineitem by l_orderkey): said,
        // so that a GROUP BY or join on the key streams (each partition
        // holds every n-th batch, in order).
        let order: Vec<PhysicalSortExpr> = view
            .key_order(&columns)
            .into_iter()
            .map(|i| PhysicalSortExpr::new_default(Arc::new(Column::new(schema.field(i).name(), i))))
            .collect();
        let mut source = MemorySourceConfig::try_new(&parts, schema, None)?;
        if let Some(ordering) = LexOrdering::new(order) {
            source = source.try_with_sort_information(vec![ordering])?;
        }
        Ok(DataSourceExec::from_data_source(source))
    }
}

impl OlapEngine {
    /// Runs `sql` (DataFusion's SQL, PostgreSQL dialect) over the enabled
    /// tables, registered under their names, at `snapshot` (the caller's
    /// statement snapshot, taken before the call): waits for the copy to
    /// reach it, then plans and executes on [`crate::OlapConfig::threads`]
    /// threads. Call from a thread that is not running a tokio runtime.
    pub fn query(&self, sql: &str, snapshot: Snapshot) -> Result<Vec<RecordBatch>> {
        self.query_with(sql, snapshot, &[])
    }

    /// [`OlapEngine::query`] with `sides` registered beside the copies
    /// (a name taken by a copy is an error: the caller's row path answers).
    pub fn query_with(&self, sql: &str, snapshot: Snapshot, sides: &[SideTable]) -> Result<Vec<RecordBatch>> {
        self.catch_up(snapshot)?;
        let threads = self.executor.threads;
        let mut config = SessionConfig::new().with_target_partitions(threads);
        config.options_mut().sql_parser.dialect = datafusion::config::Dialect::PostgreSQL;
        // As PostgreSQL: `0.05` is a numeric, not a double (exact comparisons with numeric columns).
        config.options_mut().sql_parser.parse_float_as_decimal = true;
        let ctx = SessionContext::new_with_config_rt(config, Arc::clone(&self.runtime_env));
        for table in self.tables() {
            let copy = self.copy(table)?;
            let schema = copy.layout.visible_schema();
            let name = table_reference(&ctx, copy.layout.name())?;
            let counters = self.scan_counters();
            let provider = SnapshotTable { copy, counters, snapshot, schema, partitions: threads };
            ctx.register_table(name, Arc::new(provider)).map_err(query_error)?;
        }
        for side in sides {
            let (schema, batch) = side_batch(side)?;
            let table = MemTable::try_new(schema, vec![vec![batch]]).map_err(query_error)?;
            if ctx
                .register_table(TableReference::bare(side.name.clone()), Arc::new(table))
                .map_err(query_error)?
                .is_some()
            {
                return Err(OlapError::Query(format!("side table \"{}\" has the name of a copy", side.name)));
            }
        }
        let runtime = self.runtime()?;
        // Planned and run as a task on the executor's threads (niced,
        // placed, `threads` of them), not in `block_on`'s future on the
        // caller's thread: with one partition DataFusion spawns nothing, so
        // the whole query, the scans' delta batches included, would run on
        // the calling session's thread beside OLTP at its priority.
        let sql = sql.to_owned();
        let task = runtime.spawn(async move { ctx.sql(&sql).await?.collect().await });
        runtime
            .block_on(task)
            .map_err(|e| OlapError::Query(format!("the analytic query's task ended: {e}")))?
            .map_err(|e| self.out_of_memory(&e).unwrap_or_else(|| query_error(e)))
    }

    fn runtime(&self) -> Result<Arc<tokio::runtime::Runtime>> {
        let mut slot = self.runtime.lock();
        if let Some(rt) = &*slot {
            return Ok(Arc::clone(rt));
        }
        let rt = crate::executor::build_runtime(&self.executor)
            .map_err(|e| OlapError::Query(format!("cannot start the executor's threads: {e}")))?;
        let rt = Arc::new(rt);
        *slot = Some(Arc::clone(&rt));
        Ok(rt)
    }
}

/// A side table's rows as one batch, each column of its engine type's Arrow form.
fn side_batch(side: &SideTable) -> Result<(SchemaRef, RecordBatch)> {
    let mut fields = Vec::with_capacity(side.columns.len());
    let mut arrays = Vec::with_capacity(side.columns.len());
    for (c, (name, ty)) in side.columns.iter().enumerate() {
        let arrow = arrow_type_of(*ty)
            .ok_or_else(|| OlapError::Query(format!("side table column \"{name}\" of type {}", ty.pg_name())))?;
        let mut builder = ColumnBuilder::new(&arrow, side.rows.len());
        for row in &side.rows {
            let v = row.get(c).ok_or_else(|| OlapError::Query(format!("side table row without column {c}")))?;
            builder.append(v.as_ref()).map_err(OlapError::Query)?;
        }
        fields.push(Field::new(name, arrow, true));
        arrays.push(builder.finish());
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(Arc::clone(&schema), arrays).map_err(|e| OlapError::Query(e.to_string()))?;
    Ok((schema, batch))
}

/// The engine keeps a relation of schema `public` under its own name and
/// one of schema `s` as `s.t` (crates/sql/src/names.rs): the same names in
/// DataFusion's default catalog, whose default schema is `public` too.
fn table_reference(ctx: &SessionContext, stored: &str) -> Result<TableReference> {
    let Some((schema, table)) = stored.split_once('.') else {
        return Ok(TableReference::bare(stored.to_owned()));
    };
    let catalog_name = ctx.copied_config().options().catalog.default_catalog.clone();
    let catalog =
        ctx.catalog(&catalog_name).ok_or_else(|| OlapError::Query(format!("no catalog \"{catalog_name}\"")))?;
    if catalog.schema(schema).is_none() {
        catalog
            .register_schema(schema, Arc::new(datafusion::catalog::MemorySchemaProvider::new()))
            .map_err(query_error)?;
    }
    Ok(TableReference::partial(schema.to_owned(), table.to_owned()))
}

/// A DataFusion error; one of ours raised inside a scan comes back as itself.
fn query_error(e: DataFusionError) -> OlapError {
    match e {
        DataFusionError::External(inner) => match inner.downcast::<OlapError>() {
            Ok(ours) => *ours,
            Err(other) => OlapError::Query(other.to_string()),
        },
        e => OlapError::Query(e.to_string()),
    }
}
