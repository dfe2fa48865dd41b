//! Side-by-side comparison of two result files: the same workload against a
//! baseline (PostgreSQL alone) and a candidate (pgtier), reported as ratios
//! (DESIGN.md §4).
//!
//! Iterations are matched by thread count and transactions by name; what has
//! no partner is listed, never silently dropped. Throughput ratios are
//! candidate ÷ baseline (>1: the candidate does more work); latency ratios
//! are baseline ÷ candidate (>1: the candidate answers that many times
//! faster), so in both a number above 1 favours the candidate.

mod chart;
mod table;

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::chart::{format_number, headline, loop_mode, thousands, usable};
use crate::result::{Iteration, LatencyUs, RunConfig, RunResult};

pub use chart::draw_comparison_chart;

/// The outcome of [`compare`].
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub baseline: RunSummary,
    pub candidate: RunSummary,
    /// Settings that differ between the runs: the ratios may then measure
    /// the setup rather than the system.
    pub config_differences: Vec<ConfigDifference>,
    /// Throughput at every thread count either run measured.
    pub throughput: Vec<ThroughputRow>,
    /// Detail at the thread counts both runs measured, ascending (possibly
    /// narrowed by [`Comparison::restricted_to`]).
    pub points: Vec<ThreadComparison>,
}

/// What a comparison needs to say about each run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    pub label: String,
    /// "postgresql · TATP · 100,000 subscribers · closed loop".
    pub headline: String,
    pub config: RunConfig,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ConfigDifference {
    pub setting: String,
    pub baseline: String,
    pub candidate: String,
}

/// Mean, min and max MQTh of one run at one thread count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mqth {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ThroughputRow {
    pub threads: u32,
    pub baseline: Option<Mqth>,
    pub candidate: Option<Mqth>,
    /// candidate ÷ baseline mean MQTh, when both are measured and positive.
    pub ratio: Option<f64>,
}

/// Both runs at one thread count.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadComparison {
    pub threads: u32,
    pub baseline_mqth: f64,
    pub candidate_mqth: f64,
    /// candidate ÷ baseline.
    pub mqth_ratio: Option<f64>,
    /// Transactions both runs executed, in the baseline's order.
    pub transactions: Vec<TxnComparison>,
    pub baseline_only_transactions: Vec<String>,
    pub candidate_only_transactions: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TxnComparison {
    pub name: String,
    pub baseline: LatencyUs,
    pub candidate: LatencyUs,
    /// baseline ÷ candidate: how many times lower the candidate's latency is.
    pub avg_ratio: Option<f64>,
    pub p90_ratio: Option<f64>,
    pub p99_ratio: Option<f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("no common thread counts (baseline measured {baseline}; candidate measured {candidate})")]
    NoCommonThreads { baseline: String, candidate: String },
    #[error("thread count {threads} was not measured by both runs (common: {common})")]
    ThreadsNotCommon { threads: u32, common: String },
}

/// Why a file could not be loaded as a result file. Messages leave the
/// cause to the source chain, so `{:#}` prints each part once.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path} is not JSON")]
    NotJson { path: PathBuf, source: serde_json::Error },
    #[error("{path} is not a pgtier result file")]
    NotResult { path: PathBuf, source: serde_json::Error },
}

/// Reads a result file written by `pgtier bench` (extra top-level fields,
/// such as a workload's own section, are ignored).
pub fn load_result(path: &Path) -> Result<RunResult, LoadError> {
    let at = || path.to_path_buf();
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read { path: at(), source })?;
    // Parsing twice tells "not JSON" apart from "JSON, but not ours".
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| LoadError::NotJson { path: at(), source })?;
    RunResult::deserialize(value).map_err(|source| LoadError::NotResult { path: at(), source })
}

/// Matches `candidate` against `baseline` by thread count and transaction
/// name and computes the ratios. Never fails: an empty `points` means the
/// runs share no thread count (see [`Comparison::require_common`]).
pub fn compare(baseline: &RunResult, candidate: &RunResult) -> Comparison {
    let base = by_threads(baseline);
    let cand = by_threads(candidate);
    let mut threads: Vec<u32> = base.iter().chain(&cand).map(|it| it.threads).collect();
    threads.sort_unstable();
    threads.dedup();

    let throughput = threads
        .iter()
        .map(|&t| {
            let b = find(&base, t).map(mqth);
            let c = find(&cand, t).map(mqth);
            let ratio = b.zip(c).and_then(|(b, c)| ratio(c.mean, b.mean));
            ThroughputRow { threads: t, baseline: b, candidate: c, ratio }
        })
        .collect();
    let points = threads.iter().filter_map(|&t| Some(compare_iteration(find(&base, t)?, find(&cand, t)?))).collect();

    Comparison {
        baseline: summary(baseline),
        candidate: summary(candidate),
        config_differences: config_differences(baseline, candidate),
        throughput,
        points,
    }
}

impl Comparison {
    /// Thread counts both runs measured.
    pub fn common_threads(&self) -> Vec<u32> {
        self.points.iter().map(|p| p.threads).collect()
    }

    /// Fails when the runs share no thread count: nothing to compare.
    pub fn require_common(&self) -> Result<(), CompareError> {
        if self.points.is_empty() {
            let list = |pick: fn(&ThroughputRow) -> bool| {
                list_threads(self.throughput.iter().filter(|r| pick(r)).map(|r| r.threads))
            };
            return Err(CompareError::NoCommonThreads {
                baseline: list(|r| r.baseline.is_some()),
                candidate: list(|r| r.candidate.is_some()),
            });
        }
        Ok(())
    }

    /// The same comparison with detail (tables, bar charts) at one thread
    /// count only; throughput keeps every thread count.
    pub fn restricted_to(&self, threads: u32) -> Result<Comparison, CompareError> {
        self.require_common()?;
        let Some(point) = self.points.iter().find(|p| p.threads == threads) else {
            return Err(CompareError::ThreadsNotCommon { threads, common: list_threads(self.common_threads()) });
        };
        Ok(Comparison { points: vec![point.clone()], ..self.clone() })
    }

    /// One line per setting that differs, for printing as warnings.
    pub fn warnings(&self) -> Vec<String> {
        self.config_differences
            .iter()
            .map(|d| format!("{} differs: baseline {}, candidate {}", d.setting, d.baseline, d.candidate))
            .collect()
    }
}

impl ThreadComparison {
    /// Geometric mean of a latency ratio over the matched transactions:
    /// the "N times faster on average" of study 000, averaged the way ratios
    /// must be (an arithmetic mean would let one outlier dominate).
    pub fn geomean(&self, pick: impl Fn(&TxnComparison) -> Option<f64>) -> Option<f64> {
        let logs: Vec<f64> = self.transactions.iter().filter_map(&pick).map(f64::ln).collect();
        if logs.is_empty() {
            return None;
        }
        usable((logs.iter().sum::<f64>() / logs.len() as f64).exp(), true)
    }
}

/// `numerator / denominator` when both are finite and positive.
fn ratio(numerator: f64, denominator: f64) -> Option<f64> {
    let (n, d) = (usable(numerator, true)?, usable(denominator, true)?);
    usable(n / d, true)
}

fn find<'a>(iterations: &[&'a Iteration], threads: u32) -> Option<&'a Iteration> {
    iterations.iter().find(|it| it.threads == threads).copied()
}

/// Iterations in thread order; a repeated thread count keeps its first
/// iteration, as a result file should not have two.
fn by_threads(run: &RunResult) -> Vec<&Iteration> {
    let mut its: Vec<&Iteration> = run.iterations.iter().collect();
    its.sort_by_key(|it| it.threads);
    its.dedup_by_key(|it| it.threads);
    its
}

fn mqth(it: &Iteration) -> Mqth {
    Mqth { mean: it.mqth_mean, min: it.mqth_min, max: it.mqth_max }
}

fn compare_iteration(base: &Iteration, cand: &Iteration) -> ThreadComparison {
    let transactions = base
        .transactions
        .iter()
        .filter_map(|b| {
            let c = cand.transactions.iter().find(|c| c.name == b.name)?;
            let (bl, cl) = (&b.latency_us, &c.latency_us);
            Some(TxnComparison {
                name: b.name.clone(),
                baseline: bl.clone(),
                candidate: cl.clone(),
                avg_ratio: ratio(bl.avg, cl.avg),
                p90_ratio: ratio(bl.p90, cl.p90),
                p99_ratio: ratio(bl.p99, cl.p99),
            })
        })
        .collect();
    let missing_from = |from: &Iteration, other: &Iteration| -> Vec<String> {
        from.transactions
            .iter()
            .filter(|t| !other.transactions.iter().any(|o| o.name == t.name))
            .map(|t| t.name.clone())
            .collect()
    };
    ThreadComparison {
        threads: base.threads,
        baseline_mqth: base.mqth_mean,
        candidate_mqth: cand.mqth_mean,
        mqth_ratio: ratio(cand.mqth_mean, base.mqth_mean),
        transactions,
        baseline_only_transactions: missing_from(base, cand),
        candidate_only_transactions: missing_from(cand, base),
    }
}

fn summary(run: &RunResult) -> RunSummary {
    RunSummary { label: run.label.clone(), headline: headline(run), config: run.config.clone() }
}

/// Settings that must match for the ratios to mean what they say. The
/// target is left out on purpose: it is what is being compared.
fn config_differences(baseline: &RunResult, candidate: &RunResult) -> Vec<ConfigDifference> {
    let describe = |run: &RunResult| -> Vec<(&'static str, String)> {
        let c = &run.config;
        vec![
            ("workload", c.workload.clone()),
            ("subscribers", thousands(c.subscribers)),
            ("subscriber ids", format!("{}–{}", c.min_subscriber_id, c.max_subscriber_id)),
            ("key distribution", c.key_distribution.clone()),
            ("load", loop_mode(c.rate_per_s)),
            ("duration", format!("{} s", format_number(c.duration_s))),
            ("ramp-up", format!("{} s", format_number(c.ramp_up_s))),
            ("ramp-down", format!("{} s", format_number(c.ramp_down_s))),
            ("repetitions", c.repetitions.to_string()),
            ("durability", c.durability.clone()),
            ("isolation", c.isolation.clone()),
            (
                "deviations from spec",
                if c.deviations.is_empty() { "none".to_string() } else { c.deviations.join("; ") },
            ),
            ("machine", run.machine.hostname.clone()),
            ("CPUs", run.machine.cpus.to_string()),
        ]
    };
    describe(baseline)
        .into_iter()
        .zip(describe(candidate))
        .filter(|((_, b), (_, c))| b != c)
        .map(|((setting, b), (_, c))| ConfigDifference {
            setting: setting.to_string(),
            baseline: quote_empty(b),
            candidate: quote_empty(c),
        })
        .collect()
}

fn quote_empty(value: String) -> String {
    if value.is_empty() { "(unset)".to_string() } else { value }
}

fn list_threads(threads: impl IntoIterator<Item = u32>) -> String {
    let list: Vec<String> = threads.into_iter().map(|t| t.to_string()).collect();
    if list.is_empty() { "none".to_string() } else { list.join(", ") }
}

#[cfg(test)]
mod tests;
