//! AWT write-through measured with the bench kit's TATP over the wire
//! (issue 15, "done when"): a pgtier server in this process whose
//! `[backend]` is a private PostgreSQL with TATP populated by the kit, an
//! AWT cache group over the four TATP tables loaded from it, and the
//! standard TATP mix from 16 client threads through the pgwire target.
//! After the run, propagation drains; then `VERIFY CACHE GROUP` (what
//! `pgtier verify` sends) must find the cache equal to PostgreSQL, and every
//! table's checksum in the server's engine must equal PostgreSQL's.
//!
//! - (1) `tatp_on_an_awt_group_then_verify`: the mix for 2 minutes; TPS,
//!   drain time, lag p50/p99 from `pgtier_cache_propagation`, verify.
//! - (2) `postgres_down_during_tatp`: PostgreSQL stopped with immediate mode
//!   30 s into a 120 s run and started again 60 s later; TPS per 5 s window
//!   before, during and after, the backlog and lag while it is down, the
//!   time to catch up after the restart and to drain after the run, verify.
//!
//! The measurements are ignored tests, run by hand in release:
//! `cargo test --release -p pgtier-bench --test write_through -- --ignored --nocapture --test-threads 1`
//! (`scripts/measure-write-through.sh` runs them and keeps the output).
//! Each starts its own PostgreSQL with the benchmark settings. Knobs:
//!
//! | variable | default | used by |
//! |---|---|---|
//! | `PGTIER_MEASURE_SUBSCRIBERS` | 100,000 | both |
//! | `PGTIER_MEASURE_THREADS` | 16 | both: client sessions |
//! | `PGTIER_MEASURE_COMMIT` | `async` | both: the server's `commit_mode` |
//! | `PGTIER_MEASURE_APPLY_CONNECTIONS` | 4 (the default) | both: `[cache] awt_apply_connections` |
//! | `PGTIER_MEASURE_WT_SECONDS` | 120 | (1) run length |
//! | `PGTIER_MEASURE_OUTAGE_RUN_SECONDS` | 120 | (2) run length |
//! | `PGTIER_MEASURE_OUTAGE_AT_SECONDS` | 30 | (2) when PostgreSQL stops |
//! | `PGTIER_MEASURE_OUTAGE_SECONDS` | 60 | (2) how long it stays down |
//! | `PGTIER_MEASURE_OUTAGE_MIN_RATIO` | 0.5 | (2) mean TPS while down / before, at least |
//! | `PGTIER_MEASURE_RETAINED_WAL` | `4GB` | both: `[cache] awt_retained_wal_max` (large enough for the outage) |
//! | `PGTIER_MEASURE_DRAIN_TIMEOUT_SECONDS` | 600 | both: the longest wait for propagation to drain |
//! | `PGTIER_MEASURE_OUT` | the target's tmp dir | (2) CSV and charts |
//!
//! One small version of (2) is not ignored, so the normal test run
//! exercises every step (2,000 subscribers, 4 threads, 6 s, 2 s down).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{commit_mode, env_f64, env_u64, load_average, machine, out_dir, tatp_postgres};
use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_bench::chart::{TimeSeries, draw_time_series};
use pgtier_bench::driver::{LiveCounters, LoadSpec, Phase, RepetitionTally, run_repetition};
use pgtier_bench::targets::cached::{engine_checksum, postgres_checksum};
use pgtier_bench::targets::postgres::PgTarget;
use pgtier_bench::tatp::TatpWorkload;
use pgtier_bench::tatp::random::SubscriberKeys;
use pgtier_bench::tatp::schema::TABLES;
use pgtier_engine::CommitMode;
use pgtier_server::{RunningServer, ServerConfig};

/// How often the run is sampled (transactions finished, propagation).
const SAMPLE: Duration = Duration::from_secs(1);

/// One run: sizes, the server's settings, and an optional outage.
#[derive(Clone, Debug)]
struct Scenario {
    subscribers: u64,
    threads: u32,
    run: Duration,
    commit: CommitMode,
    apply_connections: u64,
    retained_wal_max: String,
    /// PostgreSQL stopped (immediate mode) at `.0` into the run for `.1`.
    outage: Option<(Duration, Duration)>,
    /// TPS windows of the report (whole samples).
    window_samples: usize,
    /// Mean TPS while PostgreSQL is down over the mean before, at least.
    outage_min_ratio: f64,
    drain_timeout: Duration,
}

impl Scenario {
    fn from_env(run_var: &str, run_default_s: u64) -> Scenario {
        Scenario {
            subscribers: env_u64("PGTIER_MEASURE_SUBSCRIBERS", 100_000),
            threads: u32::try_from(env_u64("PGTIER_MEASURE_THREADS", 16)).unwrap(),
            run: Duration::from_secs(env_u64(run_var, run_default_s)),
            commit: commit_mode(),
            apply_connections: env_u64("PGTIER_MEASURE_APPLY_CONNECTIONS", 4),
            retained_wal_max: std::env::var("PGTIER_MEASURE_RETAINED_WAL").unwrap_or_else(|_| "4GB".into()),
            outage: None,
            window_samples: 5,
            outage_min_ratio: env_f64("PGTIER_MEASURE_OUTAGE_MIN_RATIO", 0.5),
            drain_timeout: Duration::from_secs(env_u64("PGTIER_MEASURE_DRAIN_TIMEOUT_SECONDS", 600)),
        }
    }
}

/// The pgtier server under test, with the TATP AWT group loaded.
struct Tier {
    server: Option<RunningServer>,
    url: String,
    _dir: tempfile::TempDir,
}

impl Tier {
    fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).unwrap()
    }

    fn server(&self) -> &RunningServer {
        self.server.as_ref().unwrap()
    }
}

impl Drop for Tier {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown();
        }
    }
}

/// Starts the server over PostgreSQL at `pg_url`, creates the AWT group
/// over the four TATP tables and loads all of it.
fn start_tier(pg_url: &str, s: &Scenario) -> Tier {
    let dir = tempfile::tempdir().unwrap();
    let commit = match s.commit {
        CommitMode::Async => "async",
        CommitMode::Sync => "sync",
    };
    let toml = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = {:?}\ncommit_mode = \"{commit}\"\n\
         [auth]\nmethod = \"trust\"\n\
         [backend]\nurl = {pg_url:?}\n\
         [cache]\nmemory_budget = \"16GB\"\nawt_apply_connections = {}\nawt_retained_wal_max = {:?}\n",
        dir.path().join("data").display().to_string(),
        s.apply_connections,
        s.retained_wal_max
    );
    let server = pgtier_server::start(ServerConfig::from_toml_str(&toml).unwrap()).unwrap();
    let addr = server.local_addr();
    let tier =
        Tier { server: Some(server), url: format!("postgres://app@{}:{}/app", addr.ip(), addr.port()), _dir: dir };
    let mut client = tier.client();
    client.batch_execute(&format!("CREATE AWT CACHE GROUP tatp FROM {}", TABLES.join(", "))).unwrap();
    let started = Instant::now();
    let loaded = client.execute("LOAD CACHE GROUP tatp PARALLEL 2", &[]).unwrap();
    println!(
        "  AWT group tatp over {} loaded: {loaded} instances in {:.1} s",
        TABLES.join(", "),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(loaded, s.subscribers);
    tier
}

/// A row of `pgtier_cache_propagation` (what `pgtier status` shows).
#[derive(Clone, Debug, Default)]
struct Propagation {
    connected: bool,
    applied_txns: i64,
    backlog_bytes: i64,
    lag_ms: f64,
    lag_p50_ms: f64,
    lag_p99_ms: f64,
    errors: i64,
    retries: i64,
    last_error: Option<String>,
}

fn propagation(client: &mut postgres::Client) -> Result<Propagation, postgres::Error> {
    let row = client.query_one(
        "SELECT connected, applied_txns, backlog_bytes, lag_ms, lag_p50_ms, lag_p99_ms, errors, retries, last_error FROM pgtier_cache_propagation",
        &[],
    )?;
    Ok(Propagation {
        connected: row.get(0),
        applied_txns: row.get(1),
        backlog_bytes: row.get(2),
        lag_ms: row.get(3),
        lag_p50_ms: row.get(4),
        lag_p99_ms: row.get(5),
        errors: row.get(6),
        retries: row.get(7),
        last_error: row.get(8),
    })
}

/// One sample of the run, [`SAMPLE`] apart from the run's start.
#[derive(Clone, Debug)]
struct Sample {
    at_s: f64,
    /// Transactions finished since the start (acceptable errors included).
    finished: u64,
    propagation: Propagation,
}

/// When PostgreSQL went down and came back, seconds into the run.
#[derive(Clone, Copy, Debug)]
struct Outage {
    stopped_s: f64,
    restarted_s: f64,
}

fn sleep_until(deadline: Instant) {
    if let Some(wait) = deadline.checked_duration_since(Instant::now()) {
        std::thread::sleep(wait);
    }
}

/// Waits until the run's start is known; None when the run ended first.
fn wait_start(t0: &OnceLock<Instant>, ended: impl Fn() -> bool) -> Option<Instant> {
    loop {
        if let Some(&t0) = t0.get() {
            return Some(t0);
        }
        if ended() {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The standard TATP mix through the pgwire target for `s.run` (no ramps:
/// the samples' seconds are the run's), sampled every [`SAMPLE`]; with an
/// outage, PostgreSQL is stopped and restarted at its seconds meanwhile.
fn run_tatp(tier: &Tier, s: &Scenario, cluster: &mut PrivateCluster) -> (RepetitionTally, Vec<Sample>, Option<Outage>) {
    let target = PgTarget::open(&tier.url).unwrap();
    let workload = TatpWorkload { keys: SubscriberKeys::new(1, s.subscribers, false) };
    let spec = LoadSpec {
        threads: s.threads,
        rate_per_s: None,
        ramp_up: Duration::ZERO,
        measure: s.run,
        ramp_down: Duration::ZERO,
        seed: 15,
    };
    let live = LiveCounters::default();
    let t0 = OnceLock::new();
    let done = AtomicBool::new(false);
    let mut status = tier.client();
    std::thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            let mut samples = vec![Sample { at_s: 0.0, finished: 0, propagation: propagation(&mut status).unwrap() }];
            let Some(t0) = wait_start(&t0, || done.load(Ordering::Relaxed)) else { return samples };
            for k in 1u32.. {
                sleep_until(t0 + SAMPLE * k);
                if done.load(Ordering::Relaxed) {
                    break;
                }
                let finished = live.finished.load(Ordering::Relaxed);
                let propagation = propagation(&mut status).unwrap();
                samples.push(Sample { at_s: (SAMPLE * k).as_secs_f64(), finished, propagation });
            }
            samples
        });
        let driver = scope.spawn(|| {
            run_repetition(&target, &workload, &spec, &live, &mut |phase, elapsed| {
                // The driver's clock: its ticks say how far past the start they are.
                if phase != Phase::Connecting && !elapsed.is_zero() {
                    t0.get_or_init(|| Instant::now() - elapsed);
                }
            })
        });
        // On this thread: the cluster's server dies with the thread that
        // started it (PR_SET_PDEATHSIG), so restart it from its owner.
        let outage = s.outage.and_then(|(at, length)| {
            let t0 = wait_start(&t0, || driver.is_finished())?;
            sleep_until(t0 + at);
            let stopped_s = t0.elapsed().as_secs_f64();
            cluster.stop_immediate().unwrap();
            println!("  t={stopped_s:.1} s: PostgreSQL stopped (immediate mode)");
            sleep_until(t0 + at + length);
            cluster.restart().unwrap();
            let restarted_s = t0.elapsed().as_secs_f64();
            println!("  t={restarted_s:.1} s: PostgreSQL restarted (crash recovery done)");
            Some(Outage { stopped_s, restarted_s })
        });
        let tally = driver.join().unwrap();
        // The run's last second is sampled before the sampler stops.
        if let Some(&t0) = t0.get() {
            sleep_until(t0 + s.run + Duration::from_millis(50));
        }
        done.store(true, Ordering::Relaxed);
        let samples = sampler.join().unwrap();
        (tally.unwrap(), samples, outage)
    })
}

/// Waits until propagation has applied everything (no backlog, applied
/// count unchanged over a pause longer than the WAL's asynchronous flush
/// interval); returns the seconds it took and the final row.
fn drain(client: &mut postgres::Client, timeout: Duration) -> (f64, Propagation) {
    let started = Instant::now();
    let mut previous: Option<Propagation> = None;
    loop {
        let now = propagation(client).unwrap();
        if let Some(before) = &previous
            && before.backlog_bytes == 0
            && now.backlog_bytes == 0
            && before.applied_txns == now.applied_txns
        {
            return (started.elapsed().as_secs_f64(), now);
        }
        assert!(started.elapsed() < timeout, "propagation did not drain in {timeout:?}: {now:?}");
        previous = Some(now);
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `VERIFY CACHE GROUP tatp` (what `pgtier verify tatp` sends) must be
/// clean, and every table's checksum in the server's engine must equal
/// PostgreSQL's. Returns the instances verify compared.
fn verify_clean(tier: &Tier, pg_url: &str) -> u64 {
    let started = Instant::now();
    let compared = match tier.client().execute("VERIFY CACHE GROUP tatp", &[]) {
        Ok(n) => n,
        Err(e) => {
            let db = e.as_db_error();
            panic!(
                "VERIFY CACHE GROUP tatp: {e}\nDETAIL: {:?}\nHINT: {:?}",
                db.and_then(|d| d.detail()),
                db.and_then(|d| d.hint())
            )
        }
    };
    println!(
        "  VERIFY CACHE GROUP tatp: clean, {compared} instances compared in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let mut pg = pgtier_backend::connect(pg_url).unwrap();
    let mut rows = 0;
    for table in TABLES {
        let cached = engine_checksum(tier.server().database(), table).unwrap();
        let postgres = postgres_checksum(&mut pg, table).unwrap();
        assert_eq!(cached, postgres, "table {table}: the cache differs from PostgreSQL");
        rows += cached.rows;
        println!("  {table:<16} {:>9} rows, checksum {:016x} = PostgreSQL's", cached.rows, cached.hash_sum);
    }
    println!("  checksums of {rows} rows equal in {:.1} s", started.elapsed().as_secs_f64());
    compared
}

fn print_tally(tally: &RepetitionTally) {
    let acceptable: u64 = tally.txns.iter().map(|t| t.acceptable_errors).sum();
    println!(
        "  TATP standard mix, {} threads over the wire, {} s: {:.0} txn/s ({} executed, {acceptable} acceptable errors); load average {}",
        tally.spec.threads,
        tally.spec.measure.as_secs(),
        tally.mqth(),
        tally.executed(),
        load_average()
    );
}

fn print_propagation(what: &str, p: &Propagation) {
    println!(
        "  {what}: applied {} txns, lag p50 {:.2} ms, p99 {:.2} ms, refused {}, reconnects {}, backlog {} bytes",
        p.applied_txns, p.lag_p50_ms, p.lag_p99_ms, p.errors, p.retries, p.backlog_bytes
    );
}

/// Prints one line per window of `per` samples: txn/s, write-through's
/// applied txn/s, and where it stands at the window's end; returns each
/// window's phase (before, down, after the outage; "(edge)" when it
/// straddles one; "run" without an outage) and txn/s.
fn print_windows(samples: &[Sample], per: usize, outage: Option<Outage>) -> Vec<(&'static str, f64)> {
    let phase = |start_s: f64, end_s: f64| match outage {
        None => "run",
        Some(o) if end_s <= o.stopped_s => "before",
        Some(o) if start_s >= o.stopped_s && end_s <= o.restarted_s => "down",
        Some(o) if start_s >= o.restarted_s => "after",
        Some(_) => "(edge)",
    };
    println!("  window (s)  | phase  |    txn/s | applied/s | connected | backlog (MB) | lag now (ms)");
    let starts = samples.iter().step_by(per);
    let ends = samples.iter().skip(per).step_by(per);
    starts
        .zip(ends)
        .map(|(a, b)| {
            let seconds = b.at_s - a.at_s;
            let tps = (b.finished - a.finished) as f64 / seconds;
            let applied = (b.propagation.applied_txns - a.propagation.applied_txns) as f64 / seconds;
            let (p, name) = (&b.propagation, phase(a.at_s, b.at_s));
            println!(
                "  {:>4.0} - {:<4.0} | {name:<6} | {tps:>8.0} | {applied:>9.0} | {:>9} | {:>12.2} | {:>12.0}",
                a.at_s,
                b.at_s,
                p.connected,
                p.backlog_bytes as f64 / 1e6,
                p.lag_ms
            );
            (name, tps)
        })
        .collect()
}

// ------------------------------------------------------------------ (1)

#[test]
#[ignore = "minutes long; run by hand in release"]
fn tatp_on_an_awt_group_then_verify() {
    let s = Scenario::from_env("PGTIER_MEASURE_WT_SECONDS", 120);
    println!("(1) TATP on an AWT group on {}, {s:?}; load average {}", machine(), load_average());
    let (mut cluster, pg_url) = tatp_postgres(ClusterOptions::for_benchmark(), s.subscribers);
    let tier = start_tier(&pg_url, &s);
    let (tally, samples, _) = run_tatp(&tier, &s, &mut cluster);
    print_tally(&tally);
    print_windows(&samples, s.window_samples, None);
    let at_end = &samples.last().unwrap().propagation;
    let backlog_max = samples.iter().map(|x| x.propagation.backlog_bytes).max().unwrap_or(0);
    let lag_max = samples.iter().map(|x| x.propagation.lag_ms).fold(0.0, f64::max);
    println!(
        "  during the run: backlog at most {backlog_max} bytes, lag now at most {lag_max:.0} ms; at the end backlog {} bytes",
        at_end.backlog_bytes
    );
    let mut status = tier.client();
    let (drain_s, drained) = drain(&mut status, s.drain_timeout);
    println!("  drained {drain_s:.2} s after the run");
    print_propagation("propagation", &drained);
    assert_eq!(drained.errors, 0, "TATP's writes are all valid in PostgreSQL: {:?}", drained.last_error);
    assert!(drained.applied_txns > 0, "nothing was propagated");
    assert_eq!(verify_clean(&tier, &pg_url), s.subscribers);
    drop(tier);
    cluster.stop().unwrap();
}

// ------------------------------------------------------------------ (2)

/// Runs (2) and checks what the issue asks: TPS goes on while PostgreSQL
/// is down, the lag grows, it drains after the restart, verify is clean.
fn outage_run(s: &Scenario, options: ClusterOptions, chart_stem: Option<&str>) {
    let (at, length) = s.outage.unwrap();
    assert!(at + length < s.run, "the outage must end within the run");
    let (mut cluster, pg_url) = tatp_postgres(options, s.subscribers);
    let tier = start_tier(&pg_url, s);
    let (tally, samples, outage) = run_tatp(&tier, s, &mut cluster);
    let outage = outage.expect("the outage happened within the run");
    print_tally(&tally);

    let windows = print_windows(&samples, s.window_samples, Some(outage));
    let in_phase = |name: &str| windows.iter().filter(|(p, _)| *p == name).map(|(_, tps)| *tps).collect::<Vec<f64>>();
    let down_windows = in_phase("down");
    let mean = |v: &[f64]| if v.is_empty() { f64::NAN } else { v.iter().sum::<f64>() / v.len() as f64 };
    let (before, down, after) = (mean(&in_phase("before")), mean(&down_windows), mean(&in_phase("after")));
    println!(
        "  mean txn/s per window: before {before:.0}, while PostgreSQL is down {down:.0} ({:.2} of before), after the restart {after:.0}",
        down / before
    );

    // The lag while down: the newest sample before the restart.
    let last_down = samples.iter().rfind(|x| x.at_s < outage.restarted_s).unwrap();
    let before_stop = samples.iter().rfind(|x| x.at_s <= outage.stopped_s).unwrap();
    println!(
        "  while down: backlog {:.2} MB -> {:.2} MB, lag now {:.0} ms -> {:.0} ms",
        before_stop.propagation.backlog_bytes as f64 / 1e6,
        last_down.propagation.backlog_bytes as f64 / 1e6,
        before_stop.propagation.lag_ms,
        last_down.propagation.lag_ms
    );
    // Caught up: the first sample after the restart whose lag is under a second.
    let caught_up = samples
        .iter()
        .find(|x| x.at_s > outage.restarted_s && x.propagation.connected && x.propagation.lag_ms < 1000.0);
    match caught_up {
        Some(x) => println!(
            "  caught up (lag under 1 s) {:.1} s after the restart, at t={:.0} s",
            x.at_s - outage.restarted_s,
            x.at_s
        ),
        None => println!("  not caught up (lag under 1 s) before the run ended"),
    }
    let mut status = tier.client();
    let (drain_s, drained) = drain(&mut status, s.drain_timeout);
    println!(
        "  drained to 0 {drain_s:.2} s after the run ({:.1} s after the restart)",
        s.run.as_secs_f64() - outage.restarted_s + drain_s
    );
    print_propagation("propagation", &drained);

    if let Some(stem) = chart_stem {
        write_outage_files(s, &samples, outage, stem);
    }

    assert!(!down_windows.is_empty(), "no whole window while PostgreSQL was down");
    assert!(
        down_windows.iter().all(|&tps| tps > 0.0),
        "local commits stopped while PostgreSQL was down: {down_windows:?}"
    );
    assert!(
        down >= s.outage_min_ratio * before,
        "TPS while down {down:.0} < {} x before {before:.0}",
        s.outage_min_ratio
    );
    let down_s = outage.restarted_s - outage.stopped_s;
    assert!(
        last_down.propagation.lag_ms >= 0.5 * down_s * 1000.0,
        "the lag did not grow while PostgreSQL was down: {:?}",
        last_down.propagation
    );
    assert!(
        last_down.propagation.backlog_bytes > before_stop.propagation.backlog_bytes,
        "the backlog did not grow while down"
    );
    assert!(drained.retries >= 1, "propagation never noticed the outage");
    assert_eq!(drained.errors, 0, "TATP's writes are all valid in PostgreSQL: {:?}", drained.last_error);
    assert_eq!(verify_clean(&tier, &pg_url), s.subscribers);
    drop(tier);
    cluster.stop().unwrap();
}

/// Per-second CSV and two charts (TPS, lag) in [`out_dir`].
fn write_outage_files(s: &Scenario, samples: &[Sample], outage: Outage, stem: &str) {
    let mut csv = String::from("seconds,txn_per_s,connected,backlog_bytes,lag_ms,applied_txns\n");
    let per_second: Vec<(f64, f64)> = samples
        .windows(2)
        .map(|w| (w[1].at_s, (w[1].finished - w[0].finished) as f64 / (w[1].at_s - w[0].at_s)))
        .collect();
    for (sample, (_, tps)) in samples.iter().skip(1).zip(&per_second) {
        let p = &sample.propagation;
        csv.push_str(&format!(
            "{:.0},{tps:.0},{},{},{:.1},{}\n",
            sample.at_s, p.connected, p.backlog_bytes, p.lag_ms, p.applied_txns
        ));
    }
    let path = out_dir().join(format!("{stem}.csv"));
    std::fs::write(&path, csv).unwrap();
    let subtitle = vec![format!(
        "TATP standard mix, {} threads over the wire, {} subscribers, AWT group; PostgreSQL down {:.0}-{:.0} s; {}",
        s.threads,
        s.subscribers,
        outage.stopped_s,
        outage.restarted_s,
        machine()
    )];
    let x_labels: Vec<String> = per_second.iter().map(|(at, _)| format!("{at:.0}")).collect();
    let tps = TimeSeries {
        title: "Local TPS while PostgreSQL is down (AWT write-through)".into(),
        subtitle: subtitle.clone(),
        x_labels: x_labels.clone(),
        label_every: 10,
        y_desc: "transactions/s".into(),
        series: vec![("txn/s", per_second.iter().map(|(_, t)| *t).collect())],
        reference_y: None,
        log_when_wide: false,
    };
    let lag = TimeSeries {
        title: "Write-through lag while PostgreSQL is down".into(),
        subtitle,
        x_labels,
        label_every: 10,
        y_desc: "lag (s)".into(),
        series: vec![("lag", samples.iter().skip(1).map(|x| x.propagation.lag_ms / 1000.0).collect())],
        reference_y: None,
        log_when_wide: false,
    };
    let mut files = vec![path];
    files.extend(draw_time_series(&tps, &out_dir(), &format!("{stem}_tps")).unwrap());
    files.extend(draw_time_series(&lag, &out_dir(), &format!("{stem}_lag")).unwrap());
    println!("  files: {}", files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", "));
}

#[test]
#[ignore = "minutes long; run by hand in release"]
fn postgres_down_during_tatp() {
    let mut s = Scenario::from_env("PGTIER_MEASURE_OUTAGE_RUN_SECONDS", 120);
    s.outage = Some((
        Duration::from_secs(env_u64("PGTIER_MEASURE_OUTAGE_AT_SECONDS", 30)),
        Duration::from_secs(env_u64("PGTIER_MEASURE_OUTAGE_SECONDS", 60)),
    ));
    println!(
        "(2) PostgreSQL down during TATP on an AWT group on {}, {s:?}; load average {}",
        machine(),
        load_average()
    );
    outage_run(&s, ClusterOptions::for_benchmark(), Some("write_through_outage"));
}

/// (2), small: every step runs in the normal test run.
#[test]
fn smoke_postgres_down_during_tatp() {
    let s = Scenario {
        subscribers: 2_000,
        threads: 4,
        run: Duration::from_secs(6),
        commit: CommitMode::Async,
        apply_connections: 2,
        retained_wal_max: "1GB".into(),
        outage: Some((Duration::from_secs(2), Duration::from_secs(2))),
        window_samples: 1,
        // One-second windows on a shared machine: that it goes on is the point.
        outage_min_ratio: 0.1,
        drain_timeout: Duration::from_secs(60),
    };
    outage_run(&s, ClusterOptions::default(), None);
}
