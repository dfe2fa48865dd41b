//! The micro suite's outputs: the study's metrics table in Markdown, CSV
//! (one row per test × thread count) and the JSON result file.

use std::fmt::Write as _;
use std::path::Path;

use super::{MicroReport, MicroResult};

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("writing {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("reading {path}: {message}")]
    Parse { path: String, message: String },
}

/// Columns of the table and the CSV, after the study's (#N and #J left
/// out: always 1 and #T).
const COLUMNS: [&str; 15] = [
    "test",
    "threads",
    "rows/s",
    "ops/s",
    "op",
    "MB/s rows",
    "CPU % self",
    "CPU % server",
    "read IOPS",
    "write IOPS",
    "read MB/s",
    "write MB/s",
    "WAL MB/s",
    "time s",
    "retries",
];

/// A figure with about three significant digits, no exponent.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return "?".to_owned();
    }
    let a = x.abs();
    if a >= 100.0 || a == 0.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn opt(x: Option<f64>) -> String {
    x.map_or_else(|| "unknown".to_owned(), num)
}

/// One result's cells, in [`COLUMNS`] order.
fn cells(r: &MicroResult) -> Vec<String> {
    let mut c = vec![r.test.name().to_owned(), r.threads.to_string()];
    let Some(f) = &r.figures else {
        c.push(format!("refused: {}", r.refused.as_deref().unwrap_or("?")));
        c.resize(COLUMNS.len(), String::new());
        return c;
    };
    let disk = |g: fn(&super::DiskFigures) -> f64| opt(f.device.as_ref().map(g));
    c.extend([
        num(f.rows_per_s),
        num(f.ops_per_s),
        r.test.op_unit().trim_end_matches("/s").to_owned(),
        num(f.mb_per_s),
        num(f.process_cpu_percent),
        opt(f.server_cpu_percent),
        disk(|d| d.read_iops),
        disk(|d| d.write_iops),
        disk(|d| d.read_mb_per_s),
        disk(|d| d.write_mb_per_s),
        opt(f.wal_mb_per_s),
        format!("{:.2}", f.seconds),
        f.retries.to_string(),
    ]);
    c
}

/// The header lines and the metrics table, in Markdown.
pub fn markdown(report: &MicroReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## pgtier bench micro — {}", report.target);
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "- rows: {} of {} bytes (loaded in {:.1} s by {}, {} streams); window {} s per test and thread count",
        report.rows,
        report.row_bytes,
        report.population.seconds,
        report.population.method,
        report.population.streams,
        report.duration_s
    );
    let _ = writeln!(s, "- durability: {}", report.durability);
    let _ = writeln!(s, "- device: {}", report.sources.device);
    let _ = writeln!(s, "- WAL: {}", report.sources.wal);
    let _ = writeln!(s, "- server CPU: {}", report.sources.server_cpu);
    let _ = writeln!(
        s,
        "- machine: {} CPUs, {:.1} GiB; load average before the run {}",
        report.machine.cpus, report.machine.memory_gib, report.load_average_before
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "| {} |", COLUMNS.join(" | "));
    let _ = writeln!(
        s,
        "|{}",
        COLUMNS.iter().enumerate().map(|(i, _)| if i < 2 { "---|" } else { "---:|" }).collect::<String>()
    );
    for r in &report.results {
        let _ = writeln!(s, "| {} |", cells(r).join(" | ").replace('\n', " "));
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "CPU % is of one core (200 = two cores); MB/s are 10^6 bytes per second.");
    if !report.checks.is_empty() {
        let _ = writeln!(s, "Checked after the run:");
        for c in &report.checks {
            let _ = writeln!(s, "- {c}");
        }
    }
    let _ = writeln!(s, "Deviations from study 002:");
    for d in &report.deviations {
        let _ = writeln!(s, "- {d}");
    }
    s
}

fn csv_field(x: &str) -> String {
    if x.contains([',', '"', '\n']) { format!("\"{}\"", x.replace('"', "\"\"")) } else { x.to_owned() }
}

/// One header line, then one line per result; "refused" rows carry the
/// reason in the rows/s column, like the table.
pub fn csv(report: &MicroReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "target,{}", COLUMNS.join(","));
    for r in &report.results {
        let fields: Vec<String> = cells(r).iter().map(|c| csv_field(c)).collect();
        let _ = writeln!(s, "{},{}", csv_field(&report.target), fields.join(","));
    }
    s
}

fn write(path: &Path, text: &str) -> Result<(), OutputError> {
    let io = |source| OutputError::Io { path: path.display().to_string(), source };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    std::fs::write(path, text).map_err(io)
}

pub fn write_csv(path: &Path, report: &MicroReport) -> Result<(), OutputError> {
    write(path, &csv(report))
}

pub fn write_json(path: &Path, report: &MicroReport) -> Result<(), OutputError> {
    let text = serde_json::to_string_pretty(report)
        .map_err(|e| OutputError::Parse { path: path.display().to_string(), message: e.to_string() })?;
    write(path, &text)
}

pub fn read_json(path: &Path) -> Result<MicroReport, OutputError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| OutputError::Io { path: path.display().to_string(), source })?;
    serde_json::from_str(&text)
        .map_err(|e| OutputError::Parse { path: path.display().to_string(), message: e.to_string() })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::{MicroFigures, MicroTest};
    use super::*;

    #[test]
    fn refused_rows_say_so_in_table_and_csv() {
        let report = MicroReport {
            target: "t".to_owned(),
            results: vec![
                MicroResult {
                    test: MicroTest::SeqScan,
                    threads: 2,
                    figures: Some(MicroFigures { rows_per_s: 1.5e6, ops_per_s: 15.0, ..MicroFigures::default() }),
                    refused: None,
                },
                MicroResult {
                    test: MicroTest::IndexBuild,
                    threads: 1,
                    figures: None,
                    refused: Some("0A000: CREATE INDEX, not supported".to_owned()),
                },
            ],
            ..MicroReport::default()
        };
        let table = markdown(&report);
        assert!(table.contains("| seq_scan | 2 | 1500000 | 15.0 | scans |"), "{table}");
        assert!(table.contains("| index_build | 1 | refused: 0A000: CREATE INDEX, not supported |"), "{table}");
        assert!(table.contains("| unknown |"), "unknown device figures are said: {table}");
        let csv = csv(&report);
        assert_eq!(csv.lines().count(), 3);
        assert!(csv.contains("t,index_build,1,\"refused: 0A000: CREATE INDEX, not supported\""), "{csv}");
        assert!(csv.lines().all(|l| l.matches(',').count() >= COLUMNS.len()), "{csv}");
    }
}
