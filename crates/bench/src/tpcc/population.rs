//! Population per TPC-C 4.3.3.1, streamed into each target's bulk loader:
//! 100,000 items; per warehouse 100,000 stock rows and 10 districts, each
//! with 3,000 customers (one history row each) and 3,000 orders (customer
//! ids a random permutation; 5 to 15 order lines each; the first 2,100
//! delivered, the last 900 also in new_order). A test-only [`Scale`] keeps
//! those proportions with fewer items and customers.
//!
//! Every row comes from a generator seeded by the run's seed and its place
//! (table, warehouse), so the jobs can run in any order and in parallel,
//! and a rerun with the same seed loads the same rows. An order's line
//! count is a hash of its key, so orders and order_line agree without
//! either being held in memory.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::random::{self, C_LAST_LOAD, a_string, data_with_original, decimal, n_string, nurand, uniform, zip};
use super::schema::{self, INDEXES, TABLES};
use crate::target::{DbError, RowSource, Target, Value};

/// Districts per warehouse (fixed by the spec).
pub const DISTRICTS: i64 = 10;

/// How much data: the spec's sizes per warehouse, or a smaller test scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scale {
    pub warehouses: u32,
    /// Items, and stock rows per warehouse (spec: 100,000).
    pub items: u32,
    /// Customers per district, and orders per district (spec: 3,000).
    pub customers: u32,
}

impl Scale {
    /// The spec's sizes at `warehouses`.
    pub fn spec(warehouses: u32) -> Scale {
        Scale { warehouses, items: 100_000, customers: 3_000 }
    }

    /// A test-only scale: 1,000 items, 300 customers and orders per
    /// district (90 of them new), the spec's proportions otherwise.
    pub fn small(warehouses: u32) -> Scale {
        Scale { warehouses, items: 1_000, customers: 300 }
    }

    pub fn is_spec(&self) -> bool {
        self.items == 100_000 && self.customers == 3_000
    }

    /// Orders per district still in new_order (spec: the last 900 of 3,000).
    pub fn new_orders(&self) -> i64 {
        i64::from(self.customers) * 900 / 3_000
    }

    /// The first undelivered order id (spec: 2,101).
    pub fn first_new_order(&self) -> i64 {
        i64::from(self.customers) - self.new_orders() + 1
    }

    /// Distinct last names: customers 1..=1000 get names 0..=999 in order
    /// (4.3.3.1), so with fewer customers fewer names exist and the run
    /// draws only those.
    pub fn last_names(&self) -> i64 {
        i64::from(self.customers).min(1000)
    }

    /// D_YTD at population: one 10.00 payment per customer (30,000.00 in
    /// the spec), so W_YTD = sum(D_YTD) = sum(H_AMOUNT) from the start.
    pub fn district_ytd_cents(&self) -> i64 {
        i64::from(self.customers) * 1_000
    }

    /// Rows of each table, in [`TABLES`] order (order_line: the mean of 10
    /// lines per order), for progress.
    pub fn expected_rows(&self) -> u64 {
        let w = u64::from(self.warehouses);
        let c = u64::from(self.customers) * DISTRICTS as u64 * w;
        w + w * DISTRICTS as u64 + c * 2 + c * 900 / 3000 + c + c * 10 + u64::from(self.items) * (1 + w)
    }
}

/// SplitMix64: the seed of each generator, and an order's line count.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn rng_for(seed: u64, table: usize, w: i64, d: i64) -> SmallRng {
    SmallRng::seed_from_u64(mix(seed ^ mix((table as u64) << 48 ^ (w as u64) << 8 ^ d as u64)))
}

/// O_OL_CNT of order (w, d, o): uniform 5..=15 from a hash of its key.
pub fn order_lines(seed: u64, w: i64, d: i64, o: i64) -> i64 {
    5 + (mix(seed ^ mix((w as u64) << 40 ^ (d as u64) << 32 ^ o as u64)) % 11) as i64
}

/// A row source from a closure that fills the next row or says it is done,
/// counting the rows it gave in `loaded` (for progress).
pub struct Rows<'a, F> {
    pub next: F,
    pub loaded: &'a AtomicU64,
}

impl<F: FnMut(&mut Vec<Value>) -> bool + Send> RowSource for Rows<'_, F> {
    fn next_row(&mut self, row: &mut Vec<Value>) -> bool {
        let more = (self.next)(row);
        if more {
            self.loaded.fetch_add(1, Ordering::Relaxed);
        }
        more
    }
}

pub fn text(s: impl Into<String>) -> Value {
    Value::Text(s.into())
}

/// An address's street 1, street 2, city, state and zip.
fn address(rng: &mut SmallRng, row: &mut Vec<Value>) {
    row.push(text(a_string(rng, 10, 20)));
    row.push(text(a_string(rng, 10, 20)));
    row.push(text(a_string(rng, 10, 20)));
    row.push(text(a_string(rng, 2, 2)));
    row.push(text(zip(rng)));
}

/// One bulk load: a table, for one warehouse (item: for all).
#[derive(Clone, Copy, Debug)]
struct Job {
    table: &'static str,
    w: i64,
}

fn load_job(
    target: &dyn Target,
    scale: Scale,
    seed: u64,
    now: &str,
    job: Job,
    loaded: &AtomicU64,
) -> Result<u64, DbError> {
    let cols = schema::columns(job.table);
    let table_no = TABLES.iter().position(|t| t.name == job.table).unwrap_or(0);
    let w = job.w;
    let items = i64::from(scale.items);
    let customers = i64::from(scale.customers);
    let mut rng = rng_for(seed, table_no, w, 0);
    macro_rules! load {
        ($next:expr) => {
            target.bulk_load(job.table, &cols, &mut Rows { next: $next, loaded })
        };
    }
    match job.table {
        "item" => {
            let mut i = 0;
            load!(|row: &mut Vec<Value>| {
                i += 1;
                if i > items {
                    return false;
                }
                row.push(Value::Int(i));
                row.push(Value::Int(uniform(&mut rng, 1, 10_000)));
                row.push(text(a_string(&mut rng, 14, 24)));
                row.push(text(decimal(uniform(&mut rng, 100, 10_000), 2)));
                row.push(text(data_with_original(&mut rng)));
                true
            })
        }
        "warehouse" => {
            let mut done = false;
            load!(|row: &mut Vec<Value>| {
                if std::mem::replace(&mut done, true) {
                    return false;
                }
                row.push(Value::Int(w));
                row.push(text(a_string(&mut rng, 6, 10)));
                address(&mut rng, row);
                row.push(text(decimal(uniform(&mut rng, 0, 2_000), 4)));
                row.push(text(decimal(scale.district_ytd_cents() * DISTRICTS, 2)));
                true
            })
        }
        "district" => {
            let mut d = 0;
            load!(|row: &mut Vec<Value>| {
                d += 1;
                if d > DISTRICTS {
                    return false;
                }
                row.push(Value::Int(d));
                row.push(Value::Int(w));
                row.push(text(a_string(&mut rng, 6, 10)));
                address(&mut rng, row);
                row.push(text(decimal(uniform(&mut rng, 0, 2_000), 4)));
                row.push(text(decimal(scale.district_ytd_cents(), 2)));
                row.push(Value::Int(customers + 1));
                true
            })
        }
        "stock" => {
            let mut i = 0;
            load!(|row: &mut Vec<Value>| {
                i += 1;
                if i > items {
                    return false;
                }
                row.push(Value::Int(i));
                row.push(Value::Int(w));
                row.push(Value::Int(uniform(&mut rng, 10, 100)));
                for _ in 0..10 {
                    row.push(text(a_string(&mut rng, 24, 24)));
                }
                row.push(Value::Int(0));
                row.push(Value::Int(0));
                row.push(Value::Int(0));
                row.push(text(data_with_original(&mut rng)));
                true
            })
        }
        "customer" => {
            let (mut d, mut c) = (1, 0);
            load!(|row: &mut Vec<Value>| {
                c += 1;
                if c > customers {
                    (d, c) = (d + 1, 1);
                }
                if d > DISTRICTS {
                    return false;
                }
                let last = if c <= 1000 { c - 1 } else { nurand(&mut rng, 255, 0, 999, C_LAST_LOAD) };
                row.push(Value::Int(c));
                row.push(Value::Int(d));
                row.push(Value::Int(w));
                row.push(text(a_string(&mut rng, 8, 16)));
                row.push(text("OE"));
                row.push(text(random::last_name(last)));
                address(&mut rng, row);
                row.push(text(n_string(&mut rng, 16, 16)));
                row.push(text(now));
                row.push(text(if rng.random_range(0..10) == 0 { "BC" } else { "GC" }));
                row.push(text("50000.00"));
                row.push(text(decimal(uniform(&mut rng, 0, 5_000), 4)));
                row.push(text("-10.00"));
                row.push(text("10.00"));
                row.push(Value::Int(1));
                row.push(Value::Int(0));
                row.push(text(a_string(&mut rng, 300, 500)));
                true
            })
        }
        "history" => {
            let (mut d, mut c) = (1, 0);
            load!(|row: &mut Vec<Value>| {
                c += 1;
                if c > customers {
                    (d, c) = (d + 1, 1);
                }
                if d > DISTRICTS {
                    return false;
                }
                row.extend([Value::Int(c), Value::Int(d), Value::Int(w), Value::Int(d), Value::Int(w)]);
                row.push(text(now));
                row.push(text("10.00"));
                row.push(text(a_string(&mut rng, 12, 24)));
                true
            })
        }
        "orders" => {
            let (mut d, mut o) = (1, 0);
            let mut ids = permutation(customers, &mut rng);
            load!(|row: &mut Vec<Value>| {
                o += 1;
                if o > customers {
                    (d, o) = (d + 1, 1);
                    ids = permutation(customers, &mut rng);
                }
                if d > DISTRICTS {
                    return false;
                }
                let delivered = o < scale.first_new_order();
                row.extend([Value::Int(o), Value::Int(d), Value::Int(w), Value::Int(ids[(o - 1) as usize])]);
                row.push(text(now));
                row.push(if delivered { Value::Int(uniform(&mut rng, 1, 10)) } else { Value::Null });
                row.push(Value::Int(order_lines(seed, w, d, o)));
                row.push(Value::Int(1));
                true
            })
        }
        "order_line" => {
            let (mut d, mut o, mut n) = (1, 1, 0);
            load!(|row: &mut Vec<Value>| {
                n += 1;
                if n > order_lines(seed, w, d, o) {
                    (o, n) = (o + 1, 1);
                }
                if o > customers {
                    (d, o) = (d + 1, 1);
                }
                if d > DISTRICTS {
                    return false;
                }
                let delivered = o < scale.first_new_order();
                row.extend([Value::Int(o), Value::Int(d), Value::Int(w), Value::Int(n)]);
                row.push(Value::Int(uniform(&mut rng, 1, items)));
                row.push(Value::Int(w));
                row.push(if delivered { text(now) } else { Value::Null });
                row.push(Value::Int(5));
                row.push(text(if delivered { "0.00".to_owned() } else { decimal(uniform(&mut rng, 1, 999_999), 2) }));
                row.push(text(a_string(&mut rng, 24, 24)));
                true
            })
        }
        "new_order" => {
            let (mut d, mut o) = (1, scale.first_new_order() - 1);
            load!(|row: &mut Vec<Value>| {
                o += 1;
                if o > customers {
                    (d, o) = (d + 1, scale.first_new_order());
                }
                if d > DISTRICTS {
                    return false;
                }
                row.extend([Value::Int(o), Value::Int(d), Value::Int(w)]);
                true
            })
        }
        other => Err(DbError::new(None, format!("no generator for table {other}"))),
    }
}

/// 1..=n in random order (O_C_ID of a district's orders).
fn permutation(n: i64, rng: &mut SmallRng) -> Vec<i64> {
    let mut ids: Vec<i64> = (1..=n).collect();
    ids.shuffle(rng);
    ids
}

/// What populating one target took.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// Rows per table, in [`TABLES`] order.
    pub rows: Vec<(String, u64)>,
    pub load_s: f64,
    /// Keys (PostgreSQL), indexes, ANALYZE and CHECKPOINT after the load.
    pub build_s: f64,
    /// What the target refused after the load (ANALYZE, CHECKPOINT), with
    /// its SQLSTATE; empty when it accepted everything.
    pub refused: Vec<String>,
}

/// Drops and creates the tables on `target`, loads them at `scale` with
/// `streams` parallel bulk loads, then builds keys (where not declared
/// with the tables) and HammerDB's indexes, and runs ANALYZE and
/// CHECKPOINT where the target accepts them. `tick` gets rows loaded and
/// rows expected about every 200 ms.
pub fn populate(
    target: &dyn Target,
    scale: Scale,
    seed: u64,
    streams: usize,
    tick: &mut dyn FnMut(u64, u64),
) -> Result<LoadReport, DbError> {
    populate_at(target, scale, seed, &random::timestamp_now(), streams, tick)
}

/// [`populate`] with every population timestamp (C_SINCE, H_DATE,
/// O_ENTRY_D, OL_DELIVERY_D) set to `now`, so several targets loaded one
/// after another hold the same rows (CH-benCHmark compares their answers).
pub fn populate_at(
    target: &dyn Target,
    scale: Scale,
    seed: u64,
    now: &str,
    streams: usize,
    tick: &mut dyn FnMut(u64, u64),
) -> Result<LoadReport, DbError> {
    schema::drop_tables(target)?;
    schema::create_tables(target)?;
    let mut jobs = vec![Job { table: "item", w: 0 }];
    for w in 1..=i64::from(scale.warehouses) {
        // Largest first, so the small tables fill the gaps at the end.
        for table in ["order_line", "stock", "customer", "orders", "history", "new_order", "district", "warehouse"] {
            jobs.push(Job { table, w });
        }
    }
    let total = scale.expected_rows();
    let loaded = AtomicU64::new(0);
    let next = AtomicUsize::new(0);
    let started = Instant::now();
    let streams = streams.clamp(1, 64).min(jobs.len());
    let outcome: Result<Vec<(&str, u64)>, DbError> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..streams)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&job) = jobs.get(i) else { return Ok(done) };
                        done.push((job.table, load_job(target, scale, seed, now, job, &loaded)?));
                    }
                })
            })
            .collect();
        while !workers.iter().all(|w| w.is_finished()) {
            tick(loaded.load(Ordering::Relaxed), total);
            std::thread::sleep(Duration::from_millis(200));
        }
        let mut all = Vec::new();
        for w in workers {
            let done: Result<Vec<(&str, u64)>, DbError> =
                w.join().map_err(|_| DbError::new(None, "a load thread panicked"))?;
            all.extend(done?);
        }
        Ok(all)
    });
    let done = outcome?;
    tick(loaded.load(Ordering::Relaxed), total);
    let load_s = started.elapsed().as_secs_f64();
    let rows = TABLES
        .iter()
        .map(|t| (t.name.to_owned(), done.iter().filter(|(d, _)| *d == t.name).map(|(_, n)| n).sum()))
        .collect();

    let started = Instant::now();
    if !target.keys_with_tables() {
        for t in &TABLES {
            if let Some(sql) = schema::add_key(t) {
                target.execute_batch(&sql)?;
            }
        }
    }
    for sql in INDEXES {
        target.execute_batch(sql)?;
    }
    let mut refused = Vec::new();
    for sql in ["ANALYZE", "CHECKPOINT"] {
        if let Err(e) = target.execute_batch(sql) {
            refused.push(format!("{sql}: {e}"));
        }
    }
    Ok(LoadReport { rows, load_s, build_s: started.elapsed().as_secs_f64(), refused })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_keep_the_spec_proportions() {
        let s = Scale::spec(1);
        assert_eq!((s.new_orders(), s.first_new_order(), s.last_names()), (900, 2101, 1000));
        assert_eq!(s.district_ytd_cents(), 3_000_000);
        let t = Scale::small(1);
        assert_eq!((t.new_orders(), t.first_new_order(), t.last_names()), (90, 211, 300));
    }

    #[test]
    fn order_line_counts_are_5_to_15_and_stable() {
        let counts: Vec<i64> = (1..=3000).map(|o| order_lines(7, 1, 1, o)).collect();
        assert!(counts.iter().all(|n| (5..=15).contains(n)));
        assert!(counts.contains(&5) && counts.contains(&15));
        assert_eq!(order_lines(7, 1, 1, 42), counts[41]);
        let mean = counts.iter().sum::<i64>() as f64 / 3000.0;
        assert!((mean - 10.0).abs() < 0.3, "{mean}");
    }
}
