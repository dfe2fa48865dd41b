//! The analytic executor's resources: the memory bound fails a query that
//! needs more with 53200 (and the same query passes without it), a query
//! runs on the executor's threads rather than its caller's, and the report
//! says what the executor runs as.
#![cfg(feature = "datafusion")]
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::Int64Type;
use pgtier_engine::{ColumnDef, DataType, Database, TableDef, TableId, Value};
use pgtier_olap::{OlapConfig, OlapEngine, Placement};

const ROWS: i64 = 200_000;

/// t(id bigint PK, k bigint): k = id / 2, so ROWS / 2 groups of two.
fn create(db: &Database) -> TableId {
    let mut t = db.begin().unwrap();
    let id = t
        .create_table(&TableDef::new(
            "t",
            vec![ColumnDef::new("id", DataType::Int8).not_null(), ColumnDef::new("k", DataType::Int8)],
            &["id"],
        ))
        .unwrap();
    t.commit().unwrap();
    let mut t = db.begin().unwrap();
    for i in 0..ROWS {
        t.insert(id, &[Value::Int8(i), Value::Int8(i / 2)]).unwrap();
    }
    t.commit().unwrap();
    id
}

fn engine(db: &Database, table: TableId, memory_limit: Option<usize>) -> OlapEngine {
    let olap = OlapEngine::start(db, OlapConfig { memory_limit, ..olap_config() }).unwrap();
    olap.enable(table, |_, _| {}).unwrap();
    olap
}

const QUERY: &str = "SELECT k, count(*) AS n FROM t GROUP BY k";

#[test]
fn a_query_past_the_memory_limit_fails_with_53200() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = create(&db);
    let mut t = db.begin().unwrap();
    t.begin_statement().unwrap();
    let snapshot = t.snapshot_ts();

    let bounded = engine(&db, table, Some(1 << 20));
    let e = bounded.query(QUERY, snapshot).unwrap_err();
    println!("{e}");
    assert_eq!(e.sqlstate(), "53200", "{e}");
    let text = e.to_string();
    // Which operator meets the bound first depends on the threads' timing:
    // the hash aggregate, or the repartition feeding it (which then fails
    // trying to spill).
    assert!(text.contains("memory limit of 1MB (memory_limit) reached: "), "{text}");
    assert!(["HashAggregateStream", "RepartitionExec"].iter().any(|op| text.contains(op)), "{text}");

    // A query within the bound runs on the same engine (the pool was given back).
    let got = bounded.query("SELECT count(*) FROM t", snapshot).unwrap();
    assert_eq!(got[0].column(0).as_primitive::<Int64Type>().value(0), ROWS);
    drop(bounded);

    let unbounded = engine(&db, table, None);
    let got = unbounded.query(QUERY, snapshot).unwrap();
    let (mut groups, mut rows) = (0, 0);
    for b in &got {
        groups += b.num_rows() as i64;
        rows += b.column(1).as_primitive::<Int64Type>().iter().map(Option::unwrap).sum::<i64>();
    }
    assert_eq!((groups, rows), (ROWS / 2, ROWS));
    t.commit().unwrap();
}

#[test]
fn the_report_says_what_the_executor_runs_as() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let cpus = pgtier_olap::Topology::read().unwrap().cpus.len();
    for placement in [Placement::None, Placement::RoundRobin, Placement::FillFirst, Placement::Pack] {
        let config =
            OlapConfig { threads: 0, cpu_share: 1.0, placement, memory_limit: Some(64 << 20), ..olap_config() };
        let olap = OlapEngine::start(&db, config).unwrap();
        let report = olap.executor_report();
        println!("{placement}: {report}");
        assert_eq!((report.threads, report.explicit_threads, report.cpus), (cpus, false, cpus), "{report}");
        assert_eq!(report.worker_cpus.iter().all(Option::is_some), placement != Placement::None, "{report}");
        assert_eq!(report.threads_started, 0, "threads start with the first query: {report}");
        let text = report.to_string();
        assert!(text.contains(&format!("placement {placement}")) && text.contains("memory limit 64MB"), "{text}");
        // The threads start (tokio starts its workers in the background),
        // pin and nice themselves with the first query.
        let mut t = db.begin().unwrap();
        t.begin_statement().unwrap();
        olap.query("SELECT 1", t.snapshot_ts()).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while olap.executor_report().threads_started < report.threads && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let report = olap.executor_report();
        assert!(report.threads_started >= report.threads && report.thread_errors.is_empty(), "{report}");
        t.commit().unwrap();
    }
    // The default: half the CPUs, at least one; an explicit count wins.
    let olap = OlapEngine::start(&db, OlapConfig::default()).unwrap();
    assert_eq!(olap.executor_report().threads, (cpus as f64 * 0.5).round().max(1.0) as usize);
    drop(olap);
    let olap = OlapEngine::start(&db, OlapConfig { threads: 3, ..OlapConfig::default() }).unwrap();
    let report = olap.executor_report();
    assert_eq!((report.threads, report.explicit_threads, report.nice), (3, true, 5), "{report}");
}

/// CPU time of the calling thread (`thread`) or the whole process.
fn cpu_time(thread: bool) -> std::time::Duration {
    let clock = if thread { libc::CLOCK_THREAD_CPUTIME_ID } else { libc::CLOCK_PROCESS_CPUTIME_ID };
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a timespec to fill.
    assert_eq!(unsafe { libc::clock_gettime(clock, &mut ts) }, 0);
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// With one executor thread DataFusion spawns no task of its own: the
/// query must still run on that (niced, placed) thread, not on the
/// session's thread that asked, which would take its CPU at OLTP's
/// priority (CH-benCHmark's OLTP lost 42 % of its rate so).
#[test]
fn a_query_runs_on_the_executors_thread_not_its_callers() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = create(&db);
    let olap = OlapEngine::start(&db, OlapConfig { threads: 1, ..olap_config() }).unwrap();
    olap.enable(table, |_, _| {}).unwrap();
    let mut t = db.begin().unwrap();
    t.begin_statement().unwrap();
    let snapshot = t.snapshot_ts();
    olap.query("SELECT 1", snapshot).unwrap();
    let (caller, process) = (cpu_time(true), cpu_time(false));
    for _ in 0..5 {
        let got = olap.query(QUERY, snapshot).unwrap();
        assert_eq!(got.iter().map(|b| b.num_rows() as i64).sum::<i64>(), ROWS / 2);
    }
    let (caller, process) = (cpu_time(true) - caller, cpu_time(false) - process);
    println!("caller {caller:?} of the process's {process:?}");
    assert!(process > std::time::Duration::from_millis(20), "the queries did work: {process:?}");
    assert!(caller * 5 < process, "the caller's thread ran the query: {caller:?} of {process:?}");
    t.commit().unwrap();
}

/// The nice value of thread `tid` of this process (field 19 of its stat).
fn thread_nice(tid: &str) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The command may hold spaces: fields start after its closing parenthesis.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(16)?.parse().ok()
}

/// The merger only makes later reads cheaper: it runs at the executor's
/// nice, the applier (which every query waits for) at the process's.
#[test]
fn the_merger_runs_at_the_executors_nice_the_applier_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    // SAFETY: gettid has no preconditions.
    let own = thread_nice(&unsafe { libc::gettid() }.to_string()).unwrap();
    let olap = OlapEngine::start(&db, OlapConfig { nice: 5, ..olap_config() }).unwrap();
    let mut seen = (0, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while seen.0 == 0 && std::time::Instant::now() < deadline {
        seen = (0, 0);
        for task in std::fs::read_dir("/proc/self/task").unwrap() {
            let tid = task.unwrap().file_name().into_string().unwrap();
            let comm = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).unwrap_or_default();
            let Some(nice) = thread_nice(&tid) else { continue };
            match comm.trim_end() {
                // Names are cut to 15 bytes. The merger lowers its own
                // priority as it starts: the loop waits for it.
                "pgtier-olap-mer" if nice == (own + 5).min(19) => seen.0 += 1,
                "pgtier-olap-app" => {
                    assert_eq!(nice, own, "the applier keeps the process's priority");
                    seen.1 += 1;
                }
                _ => {}
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(seen.0 >= 1 && seen.1 >= 1, "merger and applier threads found niced as said: {seen:?}");
    assert!(olap.executor_report().thread_errors.is_empty());
}
