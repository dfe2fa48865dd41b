//! A prepared statement executed many times must not grow memory: counts
//! bytes allocated and freed by each execution with a counting allocator.
//! A scan of a whole large table holds a piece of it at a time, not all of
//! its rows as values: the allocator's peak of live bytes says so.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use pgtier_engine::{CommitMode, Database, EngineConfig, Value};
use pgtier_sql::Connection;

struct Counting;

static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);
static FREED_BYTES: AtomicU64 = AtomicU64::new(0);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
/// Bytes allocated and not yet freed, and their highest value since reset.
static LIVE_BYTES: AtomicU64 = AtomicU64::new(0);
static PEAK_LIVE_BYTES: AtomicU64 = AtomicU64::new(0);

fn grew(by: usize) {
    let live = LIVE_BYTES.fetch_add(by as u64, Ordering::Relaxed) + by as u64;
    PEAK_LIVE_BYTES.fetch_max(live, Ordering::Relaxed);
}

fn shrank(by: usize) {
    LIVE_BYTES.fetch_sub(by as u64, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        grew(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        FREED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        shrank(layout.size());
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED_BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        FREED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        grew(new_size);
        shrank(layout.size());
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const EXECUTIONS: u64 = 1_000_000;

/// The counters are process-wide: tests measuring them run one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn prepared_point_select_does_not_grow_memory() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { commit_mode: CommitMode::Async, background: false, ..EngineConfig::default() };
    let db = Database::open(dir.path(), config).unwrap();
    let mut conn = Connection::new(db);
    conn.execute_sql("CREATE TABLE subscriber (s_id integer PRIMARY KEY, sub_nbr varchar(15) NOT NULL, bit_1 smallint, vlr_location bigint)").unwrap();
    let ins = conn.prepare("INSERT INTO subscriber VALUES ($1, $2, $3, $4)").unwrap();
    conn.begin().unwrap();
    for i in 0..1000 {
        conn.execute(
            &ins,
            &[Value::Int4(i), Value::Text(format!("{i:015}")), Value::Int2(1), Value::Int8(i64::from(i) * 7)],
        )
        .unwrap();
    }
    conn.commit().unwrap();
    let sel = conn.prepare("SELECT s_id, sub_nbr, bit_1, vlr_location FROM subscriber WHERE s_id = $1").unwrap();
    let upd = conn.prepare("UPDATE subscriber SET bit_1 = $1 WHERE s_id = $2").unwrap();
    let mut params = [Value::Int4(0)];
    let mut run = |n: u64, conn: &mut Connection| {
        let mut found = 0u64;
        for i in 0..n {
            params[0] = Value::Int4((i % 1000) as i32);
            found += conn.query_with(&sel, &params, |_, _| 1).unwrap();
        }
        found
    };
    run(10_000, &mut conn); // warm-up: buffers reach their steady size
    let (a0, f0, n0) = (
        ALLOCATED_BYTES.load(Ordering::Relaxed),
        FREED_BYTES.load(Ordering::Relaxed),
        ALLOCATIONS.load(Ordering::Relaxed),
    );
    assert_eq!(run(EXECUTIONS, &mut conn), EXECUTIONS);
    let (a1, f1, n1) = (
        ALLOCATED_BYTES.load(Ordering::Relaxed),
        FREED_BYTES.load(Ordering::Relaxed),
        ALLOCATIONS.load(Ordering::Relaxed),
    );
    let allocated = a1 - a0;
    let live_growth = (a1 - f1) as i64 - (a0 - f0) as i64;
    println!(
        "point SELECT x{EXECUTIONS}: {:.1} bytes allocated/execution ({:.2} allocations), live-heap growth {live_growth} bytes",
        allocated as f64 / EXECUTIONS as f64,
        (n1 - n0) as f64 / EXECUTIONS as f64
    );
    // No growth: whatever an execution allocates it frees (bounded slack for
    // the engine's lazily grown structures).
    assert!(live_growth < 64 * 1024, "live heap grew by {live_growth} bytes over {EXECUTIONS} executions");

    let (a0, f0) = (ALLOCATED_BYTES.load(Ordering::Relaxed), FREED_BYTES.load(Ordering::Relaxed));
    for i in 0..100_000u64 {
        conn.execute(&upd, &[Value::Int2((i % 2) as i16), Value::Int4((i % 1000) as i32)]).unwrap();
    }
    let (a1, f1) = (ALLOCATED_BYTES.load(Ordering::Relaxed), FREED_BYTES.load(Ordering::Relaxed));
    println!(
        "point UPDATE x100000: {:.1} bytes allocated/execution, live-heap growth {} bytes",
        (a1 - a0) as f64 / 100_000.0,
        (a1 - f1) as i64 - (a0 - f0) as i64
    );
}

/// Two statements run in turn, of different widths with text in different
/// places, each keep their own result buffer: no allocation per execution
/// (sharing one buffer reallocated a string at every switch).
#[test]
fn alternating_statements_keep_their_own_result_buffers() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { commit_mode: CommitMode::Async, background: false, ..EngineConfig::default() };
    let db = Database::open(dir.path(), config).unwrap();
    let mut conn = Connection::new(db);
    conn.execute_sql("CREATE TABLE s (id integer PRIMARY KEY, nbr varchar(15) NOT NULL, bit smallint, loc bigint)")
        .unwrap();
    conn.execute_sql("INSERT INTO s VALUES (1, '000000000000001', 1, 7), (2, '000000000000002', 0, 14)").unwrap();
    let wide = conn.prepare("SELECT id, nbr, bit, loc FROM s WHERE id = $1").unwrap();
    let narrow = conn.prepare("SELECT nbr FROM s WHERE id = $1").unwrap();
    let run = |n: u64, conn: &mut Connection| {
        for i in 0..n {
            let params = [Value::Int4(1 + (i % 2) as i32)];
            assert_eq!(conn.query_with(&wide, &params, |_, _| 1).unwrap(), 1);
            assert_eq!(conn.query_with(&narrow, &params, |_, _| 1).unwrap(), 1);
        }
    };
    run(1000, &mut conn);
    let n0 = ALLOCATIONS.load(Ordering::Relaxed);
    run(100_000, &mut conn);
    let per_execution = (ALLOCATIONS.load(Ordering::Relaxed) - n0) as f64 / 200_000.0;
    println!("alternating point SELECTs: {per_execution:.3} allocations/execution");
    assert!(per_execution < 0.01, "{per_execution:.3} allocations per execution");
}

/// The peak of live bytes while `f` runs, above the live bytes before it.
fn peak_during<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = LIVE_BYTES.load(Ordering::Relaxed);
    PEAK_LIVE_BYTES.store(before, Ordering::Relaxed);
    let r = f();
    (r, PEAK_LIVE_BYTES.load(Ordering::Relaxed).saturating_sub(before))
}

/// 200,000 rows of 8 columns: held whole as values a scan would take
/// 200,000 x 8 x size_of::<Value>() bytes (about 50 MB); a piece of about
/// 16,384 rows, a twelfth of that.
#[test]
fn a_whole_table_scan_holds_a_piece_of_the_table() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { commit_mode: CommitMode::Async, background: false, ..EngineConfig::default() };
    let db = Database::open(dir.path(), config).unwrap();
    let mut conn = Connection::new(db.clone());
    conn.execute_sql(
        "CREATE TABLE wide (id int PRIMARY KEY, a int, b bigint, c int, d bigint, e int, f bigint, g int)",
    )
    .unwrap();
    const ROWS: i64 = 200_000;
    conn.execute_sql(&format!(
        "INSERT INTO wide SELECT i, i, i, i, i, i, i, i FROM generate_series(1, {ROWS}) AS s(i)"
    ))
    .unwrap();
    let whole = ROWS as u64 * 8 * std::mem::size_of::<Value>() as u64;
    for (sql, expect) in [
        ("SELECT count(*) FROM wide", ROWS),
        ("SELECT count(*) FROM wide WHERE g % 7 = 3", ROWS / 7 + i64::from(ROWS % 7 >= 3)),
        ("SELECT sum(a) FROM wide WHERE b > 0", ROWS * (ROWS + 1) / 2),
        ("SELECT max(id) FROM (SELECT id FROM wide LIMIT 1) s", -1),
    ] {
        // No warm-up: a session keeps its row buffers for the next
        // statement, so a second run would reuse the first one's capacity.
        let mut conn = Connection::new(db.clone());
        let stmt = conn.prepare(sql).unwrap();
        let (got, peak) = peak_during(|| {
            conn.query_with(&stmt, &[], |v, _| match v.first() {
                Some(Value::Int8(n)) => *n,
                Some(Value::Int4(n)) => i64::from(*n),
                other => panic!("{sql}: {other:?}"),
            })
            .unwrap()
        });
        if expect >= 0 {
            assert_eq!(got, expect, "{sql}");
        }
        assert!(peak < whole / 4, "{sql} held {peak} bytes at its peak; the whole table as values is {whole}");
    }
}
