//! The micro suite's two tables and their population.
//!
//! `micro_t` is what the scan, the reads, the updates and the index build
//! work on: `id` (the key, 1..=rows), `k` (a number the updates add to),
//! `grp` (the non-key column the index is built on, random so the build
//! must sort) and `pad` (text that brings a row to about 120 bytes, a
//! typical OLTP row). `micro_ins` has the same shape and starts empty: the
//! inserts go there, so the other tests always see `rows` rows.

use std::sync::atomic::{AtomicU64, Ordering};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::target::{DbError, RowSource, Target, Value};

pub const TABLE: &str = "micro_t";
pub const INSERT_TABLE: &str = "micro_ins";
pub const INDEX: &str = "micro_t_grp";
pub const COLUMNS: [&str; 4] = ["id", "k", "grp", "pad"];
/// Distinct `grp` values: many rows per value, as an index on a category.
pub const GROUPS: i64 = 1000;
/// Length of `pad`.
pub const PAD_BYTES: usize = 100;
/// Bytes of one row's values as the application sees them (8 + 8 + 4 +
/// pad), the unit of the scan's MB/s: the same for every target, unlike
/// each one's storage format.
pub const ROW_BYTES: u64 = 8 + 8 + 4 + PAD_BYTES as u64;
/// `k` starts below this.
const K_MAX: i64 = 1_000_000;
/// Rows per bulk-load call: parallel streams share the work evenly.
pub const CHUNK_ROWS: u64 = 100_000;

const PAD_ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// `CREATE TABLE` for both tables; with the primary key when the target
/// needs it at creation ([`Target::keys_with_tables`]).
pub fn create_sql(keys_with_tables: bool) -> String {
    let key = if keys_with_tables { " PRIMARY KEY" } else { "" };
    let mut sql = format!("DROP TABLE IF EXISTS {TABLE}; DROP TABLE IF EXISTS {INSERT_TABLE}; ");
    for table in [TABLE, INSERT_TABLE] {
        sql.push_str(&format!(
            "CREATE TABLE {table} (id bigint NOT NULL{key}, k bigint NOT NULL, grp integer NOT NULL, pad text NOT NULL); "
        ));
    }
    sql
}

/// The keys PostgreSQL builds after the load (bulk load into a bare table,
/// then one sort: many times faster there).
pub fn keys_after_load_sql() -> String {
    format!(
        "ALTER TABLE {TABLE} ADD PRIMARY KEY (id); ALTER TABLE {INSERT_TABLE} ADD PRIMARY KEY (id); \
         ANALYZE {TABLE}; ANALYZE {INSERT_TABLE}"
    )
}

/// A row's values, the same for a given (seed, id) wherever it is made.
pub fn row(rng: &mut SmallRng, id: i64, pad: &mut String, out: &mut Vec<Value>) {
    pad.clear();
    for _ in 0..PAD_BYTES {
        pad.push(char::from(PAD_ALPHABET[rng.random_range(0..PAD_ALPHABET.len())]));
    }
    out.push(Value::Int(id));
    out.push(Value::Int(rng.random_range(0..K_MAX)));
    out.push(Value::Int(rng.random_range(0..GROUPS)));
    out.push(Value::Text(pad.clone()));
}

/// Rows `first..=last` of `micro_t`.
struct Rows<'a> {
    next: i64,
    last: i64,
    rng: SmallRng,
    pad: String,
    loaded: &'a AtomicU64,
}

impl RowSource for Rows<'_> {
    fn next_row(&mut self, out: &mut Vec<Value>) -> bool {
        if self.next > self.last {
            return false;
        }
        row(&mut self.rng, self.next, &mut self.pad, out);
        self.next += 1;
        if self.next % 1024 == 0 {
            self.loaded.fetch_add(1024, Ordering::Relaxed);
        }
        true
    }
}

/// The generator of load chunk `chunk`: any stream can make any chunk.
fn chunk_rng(seed: u64, chunk: u64) -> SmallRng {
    SmallRng::seed_from_u64(seed ^ chunk.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// `sum(k)` of a freshly loaded table, made again from the generator: lets
/// a test check what the updates did without trusting the run's own count.
pub fn initial_sum_k(rows: u64, seed: u64) -> i64 {
    let (mut sum, mut pad, mut values) = (0i64, String::new(), Vec::with_capacity(COLUMNS.len()));
    for chunk in 0..rows.div_ceil(CHUNK_ROWS) {
        let mut rng = chunk_rng(seed, chunk);
        for id in chunk * CHUNK_ROWS + 1..=((chunk + 1) * CHUNK_ROWS).min(rows) {
            values.clear();
            row(&mut rng, id as i64, &mut pad, &mut values);
            if let Some(Value::Int(k)) = values.get(1) {
                sum += k;
            }
        }
    }
    sum
}

/// Loads rows `1..=rows` with `streams` parallel [`Target::bulk_load`]
/// calls; `loaded` follows the progress (in steps of 1024). Returns the
/// rows the target says it loaded.
pub fn load(target: &dyn Target, rows: u64, streams: usize, seed: u64, loaded: &AtomicU64) -> Result<u64, DbError> {
    let chunks = rows.div_ceil(CHUNK_ROWS);
    let next_chunk = AtomicU64::new(0);
    let total = AtomicU64::new(0);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..streams.max(1))
            .map(|_| {
                scope.spawn(|| -> Result<(), DbError> {
                    loop {
                        let chunk = next_chunk.fetch_add(1, Ordering::Relaxed);
                        if chunk >= chunks {
                            return Ok(());
                        }
                        let first = chunk * CHUNK_ROWS + 1;
                        let last = ((chunk + 1) * CHUNK_ROWS).min(rows);
                        let mut source = Rows {
                            next: first as i64,
                            last: last as i64,
                            rng: chunk_rng(seed, chunk),
                            pad: String::with_capacity(PAD_BYTES),
                            loaded,
                        };
                        let n = target.bulk_load(TABLE, &COLUMNS, &mut source)?;
                        total.fetch_add(n, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| h.join().map_err(|_| DbError::new(None, "a load stream panicked"))?)
    })?;
    Ok(total.load(Ordering::Relaxed))
}
