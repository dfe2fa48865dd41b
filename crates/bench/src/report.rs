//! Turning measured tallies into the result file ([`crate::result`]), the
//! printed tables, and CSV.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use comfy_table::{Cell, CellAlignment, ContentArrangement, Table, presets};
use serde::{Deserialize, Serialize};

use crate::driver::{RepetitionTally, ScheduleTally, TxnTally};
use crate::result::{
    BackendFigures, CpuShare, Iteration, LatencyUs, MachineInfo, Repetition, RunResult, ThreadStats, TxnStats,
};
use crate::stats::Spread;

/// Figures of one repetition that the shared result format has no field for
/// yet. Kept beside it in the same JSON file (see [`RunFile`]) so readers of
/// [`RunResult`] are unaffected.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RepetitionExtra {
    pub threads: u32,
    /// 1-based.
    pub repetition: u32,
    /// Attempts per second including acceptable errors (what pgbench counts).
    pub attempts_per_s: f64,
    /// Open loop only: the schedule's bookkeeping.
    #[serde(default)]
    pub open_loop: Option<OpenLoopSummary>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpenLoopSummary {
    pub rate_per_s: f64,
    pub intended: u64,
    pub completed: u64,
    pub missed: u64,
    pub max_start_lag_us: u64,
    /// The load generator's wakes more than `driver::LATE_WAKE` late (not
    /// charged to the system: see `driver`).
    #[serde(default)]
    pub late_wakes: u64,
    #[serde(default)]
    pub max_wake_delay_us: u64,
}

/// Population figures when the run populated the database.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PopulationSummary {
    pub subscribers: u64,
    pub total_s: f64,
    /// (table, rows, expected rows).
    pub tables: Vec<(String, u64, f64)>,
    /// (phase, seconds).
    pub phases: Vec<(String, f64)>,
    pub streams: usize,
    pub copy_format: String,
}

impl PopulationSummary {
    /// What a finished population reports, for result files and reports.
    pub fn of(
        done: &crate::tatp::population::PopulateReport,
        options: &crate::tatp::population::PopulateOptions,
        copy_format: &str,
    ) -> PopulationSummary {
        PopulationSummary {
            subscribers: options.subscribers,
            total_s: done.total.as_secs_f64(),
            tables: done.tables.iter().map(|t| (t.table.to_owned(), t.rows, t.expected_rows)).collect(),
            phases: done.phases.iter().map(|(p, d)| (p.clone(), d.as_secs_f64())).collect(),
            streams: options.streams,
            copy_format: copy_format.to_owned(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TatpExtras {
    #[serde(default)]
    pub population: Option<PopulationSummary>,
    #[serde(default)]
    pub server_settings: Vec<(String, String)>,
    #[serde(default)]
    pub repetitions: Vec<RepetitionExtra>,
    /// The key distribution actually used, e.g. "NURand(A=65535, 1, 100000)".
    #[serde(default)]
    pub keys: String,
    /// Seed of the run's random choices (`--seed` reproduces them).
    #[serde(default)]
    pub seed: u64,
    /// Client library of the measured sessions.
    #[serde(default)]
    pub client: String,
}

/// What `pgtier bench tatp --json` writes: a [`RunResult`] (all its fields at
/// the top level, so any `RunResult` reader loads the file) plus `tatp`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunFile {
    #[serde(flatten)]
    pub run: RunResult,
    #[serde(default)]
    pub tatp: TatpExtras,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("writing {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ReportError + '_ {
    move |source| ReportError::Io { path: path.display().to_string(), source }
}

/// A demo's report directory (`pgtier demo flash`, `pgtier demo htap`):
/// the charts drawn (a chart that fails is named in the report instead),
/// `report_file` from `markdown` (given the chart files' names and the
/// failures), and `report` as JSON in `json_file`. Returns the report's
/// path and its text.
pub fn write_demo_report<R: Serialize>(
    dir: &Path,
    charts: Vec<(&str, Result<Vec<std::path::PathBuf>, crate::chart::ChartError>)>,
    markdown: impl FnOnce(&[String], &[String]) -> String,
    report_file: &str,
    json_file: &str,
    report: &R,
) -> Result<(std::path::PathBuf, String), ReportError> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let mut missing = Vec::new();
    let mut files = Vec::new();
    for (what, drawn) in charts {
        match drawn {
            Ok(drawn) => files.extend(drawn),
            Err(e) => missing.push(format!("{what}: {e}")),
        }
    }
    let names: Vec<String> =
        files.iter().filter_map(|f| f.file_name()).map(|n| n.to_string_lossy().into_owned()).collect();
    let text = markdown(&names, &missing);
    let path = dir.join(report_file);
    std::fs::write(&path, &text).map_err(io_err(&path))?;
    let json = dir.join(json_file);
    std::fs::write(&json, serde_json::to_string_pretty(report)?).map_err(io_err(&json))?;
    Ok((path, text))
}

/// Per-transaction stats from merged tallies.
pub fn txn_stats(names: &[&str], spec_success: &[f64], tallies: &[TxnTally]) -> Vec<TxnStats> {
    names
        .iter()
        .zip(tallies)
        .enumerate()
        .map(|(i, (name, t))| {
            let attempts = t.executed + t.acceptable_errors;
            TxnStats {
                name: (*name).to_owned(),
                executed: t.executed,
                found: t.found,
                acceptable_errors: t.acceptable_errors,
                success_ratio: if attempts == 0 { 0.0 } else { t.found as f64 / attempts as f64 },
                spec_success_ratio: spec_success.get(i).copied().unwrap_or(0.0),
                latency_us: t.latency.summary(),
                latency_from_wake_us: (!t.latency_from_wake.is_empty()).then(|| t.latency_from_wake.summary()),
            }
        })
        .collect()
}

pub fn repetition_result(
    tally: &RepetitionTally,
    names: &[&str],
    spec_success: &[f64],
    per_thread: bool,
) -> Repetition {
    let measure_s = tally.spec.measure.as_secs_f64();
    let per_thread = if per_thread {
        tally
            .workers
            .iter()
            .map(|w| {
                let executed: u64 = w.txns.iter().map(|t| t.executed).sum();
                ThreadStats {
                    thread: w.thread,
                    executed,
                    mqth: executed as f64 / measure_s,
                    latency_us: tally.worker_latency(w),
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    Repetition {
        mqth: tally.mqth(),
        transactions: txn_stats(names, spec_success, &tally.txns),
        backend: tally.backend.clone(),
        per_thread,
    }
}

pub fn repetition_extra(tally: &RepetitionTally, repetition: u32) -> RepetitionExtra {
    RepetitionExtra {
        threads: tally.spec.threads,
        repetition,
        attempts_per_s: tally.attempts_per_s(),
        open_loop: tally.spec.rate_per_s.zip(tally.schedule.as_ref()).map(|(rate, s): (f64, &ScheduleTally)| {
            OpenLoopSummary {
                rate_per_s: rate,
                intended: s.intended,
                completed: s.completed,
                missed: s.missed,
                max_start_lag_us: s.max_start_lag_us,
                late_wakes: s.late_wakes,
                max_wake_delay_us: s.max_wake_delay_us,
            }
        }),
    }
}

/// One thread count's repetitions, with MQTh spread and per-transaction
/// stats from histograms merged over all repetitions.
pub fn iteration_result(
    threads: u32,
    tallies: &[RepetitionTally],
    names: &[&str],
    spec_success: &[f64],
    per_thread: bool,
) -> Iteration {
    let repetitions: Vec<Repetition> =
        tallies.iter().map(|t| repetition_result(t, names, spec_success, per_thread)).collect();
    let spread = Spread::of(&repetitions.iter().map(|r| r.mqth).collect::<Vec<_>>());
    let mut merged: Vec<TxnTally> = (0..names.len()).map(|_| TxnTally::default()).collect();
    for t in tallies {
        for (m, x) in merged.iter_mut().zip(&t.txns) {
            m.merge(x);
        }
    }
    Iteration {
        threads,
        repetitions,
        mqth_mean: spread.mean,
        mqth_min: spread.min,
        mqth_max: spread.max,
        mqth_stddev: spread.stddev,
        transactions: txn_stats(names, spec_success, &merged),
    }
}

/// Backend figures averaged over the repetitions that have them.
pub fn mean_backend(iteration: &Iteration) -> Option<BackendFigures> {
    let all: Vec<&BackendFigures> = iteration.repetitions.iter().filter_map(|r| r.backend.as_ref()).collect();
    let first = all.first()?;
    let n = all.len() as f64;
    let mean = |f: fn(&BackendFigures) -> f64| all.iter().map(|b| f(b)).sum::<f64>() / n;
    let cpu: Vec<f64> = all.iter().filter_map(|b| b.cpu_percent).collect();
    Some(BackendFigures {
        source: first.source.clone(),
        window_s: mean(|b| b.window_s),
        commits: (mean(|b| b.commits as f64)).round() as u64,
        commits_per_s: mean(|b| b.commits_per_s),
        wal_bytes: (mean(|b| b.wal_bytes as f64)).round() as u64,
        wal_bytes_per_s: mean(|b| b.wal_bytes_per_s),
        wal_wait_share: mean(|b| b.wal_wait_share),
        cpu_percent: if cpu.len() == all.len() { Some(cpu.iter().sum::<f64>() / n) } else { None },
        samples: all.iter().map(|b| b.samples).sum(),
        active_sessions: mean(|b| b.active_sessions),
        wal_wait_sessions: mean(|b| b.wal_wait_sessions),
        process_cpu: mean_cpu(&all),
    })
}

/// Each component's CPU averaged over the repetitions (a repetition
/// without it counts as 0 %).
fn mean_cpu(all: &[&BackendFigures]) -> Vec<CpuShare> {
    let mut out: Vec<CpuShare> = Vec::new();
    for share in all.iter().flat_map(|b| &b.process_cpu) {
        match out.iter_mut().find(|s| s.component == share.component) {
            Some(s) => {
                s.percent += share.percent;
                s.threads = s.threads.max(share.threads);
            }
            None => out.push(share.clone()),
        }
    }
    for s in &mut out {
        s.percent /= all.len().max(1) as f64;
    }
    out
}

fn us(v: f64) -> String {
    if v < 100.0 { format!("{v:.1}") } else { format!("{v:.0}") }
}

fn right(s: impl Into<String>) -> Cell {
    Cell::new(s.into()).set_alignment(CellAlignment::Right)
}

fn new_table() -> Table {
    let mut table = Table::new();
    table.load_style(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Disabled);
    table
}

/// The per-transaction table of one iteration. `notes` maps a transaction
/// name to a footnote marker shown next to its spec ratio.
pub fn transactions_table(transactions: &[TxnStats], notes: &[(&str, &str)]) -> Table {
    let mut table = new_table();
    table.set_header(vec![
        "transaction",
        "count",
        "acc.err",
        "success %",
        "spec %",
        "min µs",
        "avg µs",
        "p50 µs",
        "p90 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
    ]);
    for t in transactions {
        let marker = notes.iter().find(|(n, _)| *n == t.name).map_or("", |(_, m)| m);
        let l = &t.latency_us;
        table.add_row(vec![
            Cell::new(&t.name),
            right(t.executed.to_string()),
            right(t.acceptable_errors.to_string()),
            right(format!("{:.2}", 100.0 * t.success_ratio)),
            right(format!("{:.2}{marker}", 100.0 * t.spec_success_ratio)),
            right(us(l.min)),
            right(us(l.avg)),
            right(us(l.p50)),
            right(us(l.p90)),
            right(us(l.p99)),
            right(us(l.p999)),
            right(us(l.max)),
        ]);
    }
    table
}

pub fn per_thread_table(iteration: &Iteration) -> Table {
    let mut table = new_table();
    table.set_header(vec!["rep", "thread", "executed", "txn/s", "avg µs", "p90 µs", "p99 µs", "max µs"]);
    for (r, rep) in iteration.repetitions.iter().enumerate() {
        for t in &rep.per_thread {
            table.add_row(vec![
                right((r + 1).to_string()),
                right(t.thread.to_string()),
                right(t.executed.to_string()),
                right(format!("{:.1}", t.mqth)),
                right(us(t.latency_us.avg)),
                right(us(t.latency_us.p90)),
                right(us(t.latency_us.p99)),
                right(us(t.latency_us.max)),
            ]);
        }
    }
    table
}

pub fn backend_line(b: &BackendFigures) -> String {
    let cpu = b.cpu_percent.map_or_else(|| "n/a (remote server)".to_owned(), |c| format!("{c:.0} %"));
    format!(
        "backend ({}): {:.0} commits/s, WAL {:.2} MB/s, WAL-wait share {:.1} % of {} samples, server CPU {cpu}",
        b.source,
        b.commits_per_s,
        b.wal_bytes_per_s / 1e6,
        100.0 * b.wal_wait_share,
        b.samples
    )
}

pub fn mqth_line(iteration: &Iteration) -> String {
    let n = iteration.repetitions.len();
    if n <= 1 {
        format!("MQTh {:.1} txn/s", iteration.mqth_mean)
    } else {
        let rel = if iteration.mqth_mean == 0.0 { 0.0 } else { 100.0 * iteration.mqth_stddev / iteration.mqth_mean };
        format!(
            "MQTh {:.1} txn/s (mean of {n}; min {:.1}, max {:.1}, stddev {:.1} = {rel:.1} %)",
            iteration.mqth_mean, iteration.mqth_min, iteration.mqth_max, iteration.mqth_stddev
        )
    }
}

/// Summary over thread counts: MQTh and avg/p90 per transaction.
pub fn summary_table(run: &RunResult) -> Table {
    let mut table = new_table();
    let mut header = vec!["threads".to_owned(), "MQTh".to_owned(), "± sd".to_owned()];
    if let Some(first) = run.iterations.first() {
        for t in &first.transactions {
            header.push(format!("{} avg/p90 µs", short_name(&t.name)));
        }
    }
    header.push("WAL-wait %".to_owned());
    header.push("srv CPU %".to_owned());
    table.set_header(header);
    for it in &run.iterations {
        let mut row = vec![right(it.threads.to_string()), right(format!("{:.1}", it.mqth_mean))];
        row.push(right(format!("{:.1}", it.mqth_stddev)));
        for t in &it.transactions {
            row.push(right(format!("{}/{}", us(t.latency_us.avg), us(t.latency_us.p90))));
        }
        let backend = mean_backend(it);
        row.push(right(backend.as_ref().map_or("-".to_owned(), |b| format!("{:.1}", 100.0 * b.wal_wait_share))));
        row.push(right(backend.and_then(|b| b.cpu_percent).map_or("-".to_owned(), |c| format!("{c:.0}"))));
        table.add_row(row);
    }
    table
}

/// Initials of a TATP name, as the study's figures label them ("ICF").
pub fn short_name(name: &str) -> String {
    name.split('_').filter_map(|w| w.chars().next()).collect()
}

/// CSV columns. One row per iteration × transaction (`kind = txn`), plus one
/// per repetition × thread (`kind = thread`) when per-thread detail was asked.
pub const CSV_HEADER: &str = "label,kind,threads,repetitions,repetition,thread,transaction,mqth_mean,mqth_stddev,\
executed,found,acceptable_errors,success_ratio,spec_success_ratio,\
lat_min_us,lat_avg_us,lat_p50_us,lat_p90_us,lat_p99_us,lat_p999_us,lat_max_us,\
commits_per_s,wal_bytes_per_s,wal_wait_share,server_cpu_percent";

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_owned() }
}

fn opt(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| format!("{v}"))
}

fn latency_fields(out: &mut String, l: &LatencyUs) {
    let _ = write!(out, ",{},{},{},{},{},{},{}", l.min, l.avg, l.p50, l.p90, l.p99, l.p999, l.max);
}

pub fn csv_string(run: &RunResult, per_thread: bool) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    let label = csv_field(&run.label);
    for it in &run.iterations {
        let b = mean_backend(it);
        let backend = format!(
            ",{},{},{},{}",
            opt(b.as_ref().map(|b| b.commits_per_s)),
            opt(b.as_ref().map(|b| b.wal_bytes_per_s)),
            opt(b.as_ref().map(|b| b.wal_wait_share)),
            opt(b.as_ref().and_then(|b| b.cpu_percent)),
        );
        for t in &it.transactions {
            let _ = write!(
                out,
                "{label},txn,{},{},,,{},{},{},{},{},{},{},{}",
                it.threads,
                it.repetitions.len(),
                csv_field(&t.name),
                it.mqth_mean,
                it.mqth_stddev,
                t.executed,
                t.found,
                t.acceptable_errors,
                t.success_ratio,
                t.spec_success_ratio
            );
            latency_fields(&mut out, &t.latency_us);
            out.push_str(&backend);
            out.push('\n');
        }
        if per_thread {
            for (r, rep) in it.repetitions.iter().enumerate() {
                for t in &rep.per_thread {
                    let _ = write!(
                        out,
                        "{label},thread,{},{},{},{},,{},,{},,,,",
                        it.threads,
                        it.repetitions.len(),
                        r + 1,
                        t.thread,
                        t.mqth,
                        t.executed
                    );
                    latency_fields(&mut out, &t.latency_us);
                    out.push_str(",,,,\n");
                }
            }
        }
    }
    out
}

pub fn write_csv(path: &Path, run: &RunResult, per_thread: bool) -> Result<(), ReportError> {
    write_file(path, csv_string(run, per_thread).as_bytes())
}

pub fn write_json(path: &Path, file: &RunFile) -> Result<(), ReportError> {
    let mut text = serde_json::to_string_pretty(file)?;
    text.push('\n');
    write_file(path, text.as_bytes())
}

/// Reads a file written by [`write_json`] (or a plain [`RunResult`] file,
/// whose `tatp` part is then empty).
pub fn read_run_file(path: &Path) -> Result<RunFile, ReportError> {
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    Ok(serde_json::from_str(&text)?)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    }
    // Write then rename, so a reader never sees half a file.
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(bytes).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err(path))
}

/// This machine, for the result file.
pub fn machine_info() -> MachineInfo {
    let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_owned()).unwrap_or_default();
    let memory_kib: f64 = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    let os = read("/etc/os-release")
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_owned())
        .unwrap_or_else(|| std::env::consts::OS.to_owned());
    MachineInfo {
        hostname: read("/proc/sys/kernel/hostname"),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        memory_gib: memory_kib / (1024.0 * 1024.0),
        os,
        kernel: read("/proc/sys/kernel/osrelease"),
    }
}

/// Where a KVM guest's halt polling is set: how long an idle vCPU spins
/// before it halts and leaves its wake-up to the host.
pub const GUEST_HALT_POLL: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";

/// A line for a report's deviations when this machine is a VM guest whose
/// halt polling is off: request/response work then runs slower on idle
/// CPUs than beside a busy thread, which flatters any "kept alone vs
/// together" figure. None where the setting is absent or non-zero.
pub fn idle_wakeup_deviation() -> Option<String> {
    let ns = std::fs::read_to_string(GUEST_HALT_POLL).ok()?;
    (ns.trim() == "0").then(|| {
        format!(
            "this VM's guest halt polling is off ({GUEST_HALT_POLL} = 0): an idle vCPU halts and is woken \
             through the host, so a request/response stream runs faster while another thread keeps the CPUs \
             busy (pgbench -N, 1 client, on the 2-core VM of this kit's figures: 1,417 and 1,266 TPS with it off, \
             2,948 and 2,346 with 200 us). Phases alone pay those wake-ups and phases beside a busy stream do \
             not, which inflates OLTP's \"kept\" (most on PostgreSQL, whose client and backend are two \
             processes). As root, `echo 200000 > {GUEST_HALT_POLL}` removes it until reboot"
        )
    })
}

/// Current time as RFC 3339 UTC (seconds precision).
pub fn now_rfc3339() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    rfc3339(secs)
}

pub fn rfc3339(unix_s: u64) -> String {
    // The engine's civil-date conversion counts days from 2000-01-01 (the
    // PostgreSQL epoch), which is 10,957 days after the Unix epoch.
    const UNIX_TO_PG_EPOCH_DAYS: i64 = 10_957;
    let days_since_unix = i64::try_from(unix_s / 86_400).unwrap_or(i64::MAX / 2);
    let rem = unix_s % 86_400;
    let (year, month, day) = pgtier_engine::civil_from_days(days_since_unix - UNIX_TO_PG_EPOCH_DAYS);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::result::RunConfig;

    fn sample_run() -> RunResult {
        let txn = |name: &str, executed: u64| TxnStats {
            name: name.to_owned(),
            executed,
            found: executed / 2,
            acceptable_errors: 3,
            success_ratio: 0.5,
            spec_success_ratio: 0.625,
            latency_us: LatencyUs { min: 10.0, avg: 55.5, p50: 50.0, p90: 90.0, p99: 99.0, p999: 150.0, max: 2000.0 },
            latency_from_wake_us: None,
        };
        let rep = Repetition {
            mqth: 1234.5,
            transactions: vec![txn("GET_ACCESS_DATA", 100), txn("UPDATE_LOCATION", 40)],
            backend: Some(BackendFigures {
                source: "postgresql 15".to_owned(),
                window_s: 10.0,
                commits: 100,
                commits_per_s: 10.0,
                wal_bytes: 1000,
                wal_bytes_per_s: 100.0,
                wal_wait_share: 0.25,
                cpu_percent: Some(150.0),
                samples: 1000,
                active_sessions: 2.0,
                wal_wait_sessions: 0.5,
                process_cpu: Vec::new(),
            }),
            per_thread: vec![ThreadStats {
                thread: 0,
                executed: 140,
                mqth: 14.0,
                latency_us: LatencyUs { max: 2000.0, ..LatencyUs::default() },
            }],
        };
        RunResult {
            tool_version: "0.1.0".to_owned(),
            started_at: rfc3339(0),
            label: "pg, \"quoted\"".to_owned(),
            config: RunConfig { workload: "tatp".to_owned(), subscribers: 1000, ..RunConfig::default() },
            // A value JSON gives back exactly: serde_json's float parsing
            // may be one ulp off for this machine's real memory size.
            machine: MachineInfo { memory_gib: 23.5, ..machine_info() },
            iterations: vec![Iteration {
                threads: 4,
                repetitions: vec![rep.clone(), rep.clone()],
                mqth_mean: 1234.5,
                mqth_min: 1234.5,
                mqth_max: 1234.5,
                mqth_stddev: 0.0,
                transactions: rep.transactions.clone(),
            }],
        }
    }

    #[test]
    fn json_round_trip_keeps_everything() {
        let file = RunFile {
            run: sample_run(),
            tatp: TatpExtras {
                population: Some(PopulationSummary { subscribers: 1000, total_s: 1.5, ..Default::default() }),
                repetitions: vec![RepetitionExtra {
                    threads: 4,
                    repetition: 1,
                    attempts_per_s: 1240.0,
                    open_loop: Some(OpenLoopSummary {
                        rate_per_s: 200.0,
                        intended: 800,
                        completed: 800,
                        ..Default::default()
                    }),
                }],
                ..Default::default()
            },
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out/run.json");
        write_json(&path, &file).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let back: RunFile = serde_json::from_str(&text).unwrap();
        assert_eq!(back, file);
        // A plain RunResult reader (charts, compare) loads the same file.
        let plain: RunResult = serde_json::from_str(&text).unwrap();
        assert_eq!(plain, file.run);
    }

    /// Minimal CSV reader for our own output (quoted fields with "" escapes).
    fn parse_csv(text: &str) -> Vec<Vec<String>> {
        text.lines()
            .map(|line| {
                let mut fields = Vec::new();
                let mut cur = String::new();
                let mut quoted = false;
                let mut chars = line.chars().peekable();
                while let Some(c) = chars.next() {
                    match (c, quoted) {
                        ('"', true) if chars.peek() == Some(&'"') => {
                            cur.push('"');
                            chars.next();
                        }
                        ('"', _) => quoted = !quoted,
                        (',', false) => fields.push(std::mem::take(&mut cur)),
                        _ => cur.push(c),
                    }
                }
                fields.push(cur);
                fields
            })
            .collect()
    }

    #[test]
    fn csv_round_trip() {
        let run = sample_run();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.csv");
        write_csv(&path, &run, true).unwrap();
        let rows = parse_csv(&std::fs::read_to_string(&path).unwrap());
        let header = &rows[0];
        assert_eq!(header.join(","), CSV_HEADER);
        let col = |name: &str| header.iter().position(|h| h == name).unwrap();
        // 2 transactions + 2 repetitions × 1 thread.
        assert_eq!(rows.len(), 1 + 2 + 2);
        for row in &rows[1..] {
            assert_eq!(row.len(), header.len(), "row width: {row:?}");
            assert_eq!(row[col("label")], run.label);
        }
        let txn = &rows[1];
        let t = &run.iterations[0].transactions[0];
        assert_eq!(txn[col("kind")], "txn");
        assert_eq!(txn[col("transaction")], t.name);
        assert_eq!(txn[col("executed")].parse::<u64>().unwrap(), t.executed);
        assert_eq!(txn[col("acceptable_errors")].parse::<u64>().unwrap(), t.acceptable_errors);
        assert_eq!(txn[col("lat_p999_us")].parse::<f64>().unwrap(), t.latency_us.p999);
        assert_eq!(txn[col("mqth_mean")].parse::<f64>().unwrap(), 1234.5);
        assert_eq!(txn[col("server_cpu_percent")].parse::<f64>().unwrap(), 150.0);
        assert_eq!(txn[col("wal_wait_share")].parse::<f64>().unwrap(), 0.25);
        let thread = &rows[3];
        assert_eq!(thread[col("kind")], "thread");
        assert_eq!(thread[col("repetition")], "1");
        assert_eq!(thread[col("executed")], "140");
        assert_eq!(thread[col("lat_max_us")].parse::<f64>().unwrap(), 2000.0);
        // Without per-thread detail only the transaction rows remain.
        assert_eq!(parse_csv(&csv_string(&run, false)).len(), 3);
    }

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn short_names() {
        assert_eq!(short_name("INSERT_CALL_FORWARDING"), "ICF");
        assert_eq!(short_name("GET_SUBSCRIBER_DATA"), "GSD");
    }
}
