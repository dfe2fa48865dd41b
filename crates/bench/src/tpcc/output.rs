//! `pgtier bench tpcc`'s outputs: a one-screen summary, `report.md` and
//! `tpcc.json`, the sides side by side with the pgtier / PostgreSQL ratio
//! and every difference between them stated.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use super::{SideKind, SideResult, TpccReport};

pub use crate::tpch::output::OutputError;

fn ratio(x: f64, reference: Option<f64>) -> String {
    match reference {
        Some(r) if r > 0.0 => format!("{:.2}x", x / r),
        _ => "-".to_owned(),
    }
}

fn reference(report: &TpccReport) -> Option<&SideResult> {
    report.sides.iter().find(|s| s.side == SideKind::Postgresql && s.error.is_none())
}

fn checks_word(s: &SideResult) -> &'static str {
    if s.checks_passed() { "consistent" } else { "INCONSISTENT" }
}

fn scale_line(report: &TpccReport) -> String {
    let s = &report.scale;
    format!(
        "TPC-C (HammerDB TPROC-C shape): {} warehouses{}, {} clients, ramp-up {} s, measure {} s, seed {}",
        s.warehouses,
        if s.is_spec() {
            String::new()
        } else {
            format!(" (test scale: {} items, {} customers/district)", s.items, s.customers)
        },
        report.clients,
        report.rampup_s,
        report.measure_s,
        report.seed
    )
}

/// The figures per side on one screen.
pub fn summary(report: &TpccReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", scale_line(report));
    let pg = reference(report);
    let _ = writeln!(out, "{:<15} {:>10} {:>10} {:>8} {:>12}  checks", "target", "NOPM", "TPM", "NOPM/PG", "NO p99 ms");
    for s in &report.sides {
        let p99 = s.transactions.first().map_or("-".to_owned(), |t| format!("{:.2}", t.p99_us / 1e3));
        let status = match &s.error {
            Some(e) => format!("STOPPED: {e}"),
            None => checks_word(s).to_owned(),
        };
        let _ = writeln!(
            out,
            "{:<15} {:>10.0} {:>10.0} {:>8} {:>12}  {status}",
            s.side.label(),
            s.nopm,
            s.tpm,
            ratio(s.nopm, pg.map(|p| p.nopm)),
            p99
        );
    }
    out
}

/// What differs between the sides besides the software: durability,
/// memory, how the client reaches them.
pub fn differences(report: &TpccReport) -> Vec<String> {
    let mut out = Vec::new();
    for s in &report.sides {
        let reach = match s.side {
            SideKind::Postgresql => "over TCP loopback (or its socket), the kit's native protocol client",
            SideKind::PgtierServer => "over TCP loopback, the kit's native protocol client",
            SideKind::Embedded | SideKind::Columnar => {
                "in-process: the client threads run the SQL and the engine themselves"
            }
        };
        let memory = match s.side {
            SideKind::Postgresql => format!(
                "shared_buffers {} (the rest of the data in the OS page cache)",
                s.settings.iter().find(|(k, _)| k == "shared_buffers").map_or("?", |(_, v)| v.as_str())
            ),
            _ => format!(
                "every row in memory (the engine); this process's RSS after the run {}",
                s.process_rss_mib.map_or("?".to_owned(), |m| format!("{m:.0} MiB"))
            ),
        };
        out.push(format!("{}: durability {}; memory: {memory}; reached {reach}", s.side.label(), s.durability));
    }
    out
}

pub fn markdown(report: &TpccReport) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# pgtier bench tpcc\n");
    let _ = writeln!(md, "{}\n", scale_line(report));
    let _ = writeln!(
        md,
        "Started {}; pgtier {}; {} ({} CPUs, {:.1} GiB); load average before: {}. The machine may be shared \
         with other work: compare the sides of one run, not runs of different days.\n",
        report.started_at,
        report.tool_version,
        report.machine.hostname,
        report.machine.cpus,
        report.machine.memory_gib,
        report.load_average_before
    );
    let pg = reference(report);
    let _ = writeln!(md, "## Throughput\n");
    let _ = writeln!(
        md,
        "| target | NOPM | TPM | TPM with rollbacks | NOPM pgtier/PostgreSQL | TPM pgtier/PostgreSQL | consistency |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---|");
    for s in &report.sides {
        let _ = writeln!(
            md,
            "| {} | {:.0} | {:.0} | {:.0} | {} | {} | {} |",
            s.side.label(),
            s.nopm,
            s.tpm,
            s.tpm_with_rollbacks,
            ratio(s.nopm, pg.map(|p| p.nopm)),
            ratio(s.tpm, pg.map(|p| p.tpm)),
            match &s.error {
                Some(e) => format!("run STOPPED: {e}"),
                None => checks_word(s).to_owned(),
            }
        );
    }
    let _ = writeln!(
        md,
        "\nNOPM: committed New-Orders per minute of the measure window. TPM: committed transactions of all five \
         types per minute, counted by the client (HammerDB's TPM counts the database's commits and rollbacks; \
         'with rollbacks' adds New-Order's 1 % rollbacks).\n"
    );
    let _ = writeln!(md, "## Transactions (latency from the start of each call, ms)\n");
    let _ = writeln!(
        md,
        "| target | transaction | committed | rolled back | 40001/40P01 | per minute | p50 | p95 | p99 | max |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for s in &report.sides {
        for t in &s.transactions {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} |",
                s.side.label(),
                t.name,
                t.committed,
                t.rolled_back,
                t.serialization_failures,
                t.committed_per_minute,
                t.p50_us / 1e3,
                t.p95_us / 1e3,
                t.p99_us / 1e3,
                t.max_us / 1e3
            );
        }
    }
    let _ = writeln!(md, "\n## Consistency (TPC-C 3.3.2)\n");
    let _ = writeln!(md, "| target | when | clause | condition | examined | result |");
    let _ = writeln!(md, "|---|---|---|---|---:|---|");
    for s in &report.sides {
        for (when, checks) in [("after load", &s.checks_after_load), ("after run", &s.checks)] {
            for c in checks {
                let result =
                    if c.passed() { "ok".to_owned() } else { format!("**FAILED**: {}", c.violations.join("; ")) };
                let _ = writeln!(
                    md,
                    "| {} | {when} | {} | {} | {} | {result} |",
                    s.side.label(),
                    c.clause,
                    c.condition,
                    c.examined
                );
            }
        }
    }
    let _ = writeln!(md, "\n## The sides\n");
    for s in &report.sides {
        let _ = writeln!(md, "- {}: {}", s.side.label(), s.target);
        if let Some(l) = &s.load {
            let rows: u64 = l.rows.iter().map(|(_, n)| n).sum();
            let _ = writeln!(
                md,
                "  - loaded {rows} rows in {:.1} s, keys/indexes/ANALYZE/CHECKPOINT {:.1} s{}",
                l.load_s,
                l.build_s,
                if l.refused.is_empty() { String::new() } else { format!("; refused: {}", l.refused.join("; ")) }
            );
        }
        if !s.settings.is_empty() {
            let set: Vec<String> = s.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(md, "  - settings: {}", set.join(", "));
        }
    }
    let _ = writeln!(md, "\n## Differences between the sides\n");
    for d in differences(report) {
        let _ = writeln!(md, "- {d}");
    }
    let _ = writeln!(md, "\n## Deviations from TPC-C and from HammerDB\n");
    for d in &report.deviations {
        let _ = writeln!(md, "- {d}");
    }
    md
}

fn write(path: &Path, text: &str) -> Result<(), OutputError> {
    std::fs::write(path, text).map_err(|source| OutputError::Io { path: path.display().to_string(), source })
}

/// Writes `report.md` and `tpcc.json` into `dir`.
pub fn write_files(dir: &Path, report: &TpccReport) -> Result<Vec<PathBuf>, OutputError> {
    std::fs::create_dir_all(dir).map_err(|source| OutputError::Io { path: dir.display().to_string(), source })?;
    let md_path = dir.join("report.md");
    write(&md_path, &markdown(report))?;
    let json_path = dir.join("tpcc.json");
    let json = serde_json::to_string_pretty(report)
        .map_err(|e| OutputError::Encode { path: json_path.display().to_string(), message: e.to_string() })?;
    write(&json_path, &json)?;
    Ok(vec![md_path, json_path])
}
