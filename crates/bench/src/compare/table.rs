//! The printed comparison: config warnings, a throughput table over all
//! thread counts, and a per-transaction latency table per compared count.

use std::fmt;

use comfy_table::{CellAlignment, Table, presets};

use super::{Comparison, ThreadComparison, TxnComparison};
use crate::chart::{format_number, format_ratio};

impl Comparison {
    /// Names to print for the two runs: their labels, unless those are
    /// empty or equal and would not tell the runs apart.
    pub(crate) fn display_names(&self) -> (String, String) {
        let (b, c) = (self.baseline.label.trim(), self.candidate.label.trim());
        if b.is_empty() || c.is_empty() || b == c {
            ("baseline".to_string(), "candidate".to_string())
        } else {
            (b.to_string(), c.to_string())
        }
    }

    /// MQTh of both runs at every thread count, with the candidate ÷
    /// baseline ratio and the geometric-mean latency ratios.
    pub fn throughput_table(&self) -> Table {
        let (b, c) = self.display_names();
        let mut table = new_table(&[
            "threads".to_string(),
            format!("MQTh {b}"),
            format!("MQTh {c}"),
            format!("{c} ÷ {b}"),
            "avg lat. ×lower".to_string(),
            "p90 ×lower".to_string(),
            "p99 ×lower".to_string(),
        ]);
        for row in &self.throughput {
            let point = self.points.iter().find(|p| p.threads == row.threads);
            let geo = |pick: fn(&TxnComparison) -> Option<f64>| point.and_then(|p| p.geomean(pick));
            table.add_row(vec![
                row.threads.to_string(),
                row.baseline.map_or_else(dash, |m| format_number(m.mean)),
                row.candidate.map_or_else(dash, |m| format_number(m.mean)),
                ratio_cell(row.ratio),
                ratio_cell(geo(|t| t.avg_ratio)),
                ratio_cell(geo(|t| t.p90_ratio)),
                ratio_cell(geo(|t| t.p99_ratio)),
            ]);
        }
        table
    }

    /// Per-transaction latencies of both runs at one thread count.
    pub fn latency_table(&self, point: &ThreadComparison) -> Table {
        let (b, c) = self.display_names();
        let mut table = new_table(&[
            "transaction".to_string(),
            format!("avg {b}"),
            format!("avg {c}"),
            "×lower".to_string(),
            format!("p90 {b}"),
            format!("p90 {c}"),
            "×lower".to_string(),
            format!("p99 {b}"),
            format!("p99 {c}"),
            "×lower".to_string(),
        ]);
        for t in &point.transactions {
            table.add_row(vec![
                t.name.clone(),
                format_number(t.baseline.avg),
                format_number(t.candidate.avg),
                ratio_cell(t.avg_ratio),
                format_number(t.baseline.p90),
                format_number(t.candidate.p90),
                ratio_cell(t.p90_ratio),
                format_number(t.baseline.p99),
                format_number(t.candidate.p99),
                ratio_cell(t.p99_ratio),
            ]);
        }
        if point.transactions.len() > 1 {
            let geo = |pick: fn(&TxnComparison) -> Option<f64>| ratio_cell(point.geomean(pick));
            let blank = String::new;
            table.add_row(vec![
                "geometric mean".to_string(),
                blank(),
                blank(),
                geo(|t| t.avg_ratio),
                blank(),
                blank(),
                geo(|t| t.p90_ratio),
                blank(),
                blank(),
                geo(|t| t.p99_ratio),
            ]);
        }
        if let Some(column) = table.column_mut(0) {
            column.set_cell_alignment(CellAlignment::Left);
        }
        table
    }
}

/// The whole report as printed by `pgtier bench compare`.
impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "baseline:  {}", self.baseline.headline)?;
        writeln!(f, "candidate: {}", self.candidate.headline)?;
        if !self.config_differences.is_empty() {
            writeln!(f)?;
            writeln!(f, "warning: the runs' settings differ; the ratios may measure the setup, not the system:")?;
            for warning in self.warnings() {
                writeln!(f, "  - {warning}")?;
            }
        }
        writeln!(f)?;
        writeln!(
            f,
            "Throughput (MQTh: successful transactions/s). Ratios favour the candidate when above 1:\n\
             throughput = candidate ÷ baseline; latency ×lower = baseline ÷ candidate (geometric mean over transactions)."
        )?;
        writeln!(f, "{}", self.throughput_table())?;
        for point in &self.points {
            writeln!(f)?;
            writeln!(f, "Latency at {} thread{} (µs):", point.threads, if point.threads == 1 { "" } else { "s" })?;
            writeln!(f, "{}", self.latency_table(point))?;
            let (b, c) = self.display_names();
            if !point.baseline_only_transactions.is_empty() {
                writeln!(f, "only in {b}: {}", point.baseline_only_transactions.join(", "))?;
            }
            if !point.candidate_only_transactions.is_empty() {
                writeln!(f, "only in {c}: {}", point.candidate_only_transactions.join(", "))?;
            }
        }
        Ok(())
    }
}

fn new_table(header: &[String]) -> Table {
    let mut table = Table::new();
    table.load_style(presets::UTF8_FULL_CONDENSED).set_header(header.to_vec());
    for column in table.column_iter_mut() {
        column.set_cell_alignment(CellAlignment::Right);
    }
    table
}

fn ratio_cell(ratio: Option<f64>) -> String {
    ratio.map_or_else(dash, format_ratio)
}

fn dash() -> String {
    "—".to_string()
}
