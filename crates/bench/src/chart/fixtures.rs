//! Synthetic result files for the chart and comparison tests.

use crate::result::{Iteration, LatencyUs, Repetition, RunConfig, RunResult, TxnStats};

/// Latency with avg `avg_us`, p90 twice and p99 four times that.
pub(crate) fn latency(avg_us: f64) -> LatencyUs {
    LatencyUs {
        min: avg_us / 4.0,
        avg: avg_us,
        p50: avg_us * 0.9,
        p90: avg_us * 2.0,
        p99: avg_us * 4.0,
        p999: avg_us * 8.0,
        max: avg_us * 16.0,
    }
}

pub(crate) fn txn(name: &str, avg_us: f64) -> TxnStats {
    TxnStats {
        name: name.to_string(),
        executed: 1000,
        found: 900,
        acceptable_errors: 0,
        success_ratio: 0.9,
        spec_success_ratio: 0.9,
        latency_us: latency(avg_us),
        latency_from_wake_us: None,
    }
}

/// An iteration with three repetitions spread ±10 % around `mqth`.
pub(crate) fn iteration(threads: u32, mqth: f64, txns: &[(&str, f64)]) -> Iteration {
    let transactions: Vec<TxnStats> = txns.iter().map(|(n, avg)| txn(n, *avg)).collect();
    let repetition =
        |m: f64| Repetition { mqth: m, transactions: transactions.clone(), backend: None, per_thread: Vec::new() };
    Iteration {
        threads,
        repetitions: vec![repetition(mqth * 0.9), repetition(mqth), repetition(mqth * 1.1)],
        mqth_mean: mqth,
        mqth_min: mqth * 0.9,
        mqth_max: mqth * 1.1,
        mqth_stddev: mqth * 0.08,
        transactions,
    }
}

pub(crate) fn run(label: &str, iterations: Vec<Iteration>) -> RunResult {
    RunResult {
        tool_version: "0.1.0".to_string(),
        started_at: "2025-01-01T00:00:00Z".to_string(),
        label: label.to_string(),
        config: RunConfig {
            workload: "tatp".to_string(),
            target: "postgres://localhost/tatp".to_string(),
            subscribers: 100_000,
            min_subscriber_id: 1,
            max_subscriber_id: 100_000,
            key_distribution: "nurand".to_string(),
            rate_per_s: None,
            duration_s: 30.0,
            ramp_up_s: 5.0,
            ramp_down_s: 2.0,
            repetitions: 3,
            durability: "local-sync".to_string(),
            isolation: "read committed".to_string(),
            deviations: Vec::new(),
        },
        machine: Default::default(),
        iterations,
    }
}

/// The seven TATP transactions with PostgreSQL-like average latencies (µs):
/// reads fast, writes slow.
pub(crate) const TATP_US: [(&str, f64); 7] = [
    ("GET_SUBSCRIBER_DATA", 95.0),
    ("GET_NEW_DESTINATION", 120.0),
    ("GET_ACCESS_DATA", 90.0),
    ("UPDATE_SUBSCRIBER_DATA", 1900.0),
    ("UPDATE_LOCATION", 1750.0),
    ("INSERT_CALL_FORWARDING", 2300.0),
    ("DELETE_CALL_FORWARDING", 2100.0),
];

/// A TATP-like run over 1, 2, 4, 8 threads; latency grows with load, and
/// `speedup` divides every latency (a cache is faster than its backend).
pub(crate) fn tatp_run(label: &str, speedup: f64, mqth_at_1: f64) -> RunResult {
    let iterations = [1u32, 2, 4, 8]
        .iter()
        .enumerate()
        .map(|(i, threads)| {
            let load = 1.0 + 0.15 * i as f64;
            let txns: Vec<(&str, f64)> = TATP_US.iter().map(|(n, us)| (*n, us * load / speedup)).collect();
            iteration(*threads, mqth_at_1 * f64::from(*threads).powf(0.8), &txns)
        })
        .collect();
    run(label, iterations)
}
