//! Latency histograms and the small statistics the reports need.
//!
//! Every worker thread records into histograms it owns (no sharing on the hot
//! path); the driver merges them once the measure window is over. Values are
//! recorded in nanoseconds with 3 significant digits and reported in µs with
//! fractions: a direct-mode transaction takes 1-3 µs, and whole microseconds
//! (truncated) would bias its average down by about half a microsecond.
//! p99.9 of a 200 µs transaction is exact to ±0.1 µs and a 10 s stall still
//! fits.

use std::time::Duration;

use hdrhistogram::Histogram;

use crate::result::LatencyUs;

/// A latency histogram (HdrHistogram of nanoseconds, 3 significant digits,
/// auto-resizing so an unexpected multi-second stall is recorded, not clipped).
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    histogram: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl LatencyHistogram {
    /// Significant decimal digits kept for every recorded value.
    pub const SIGNIFICANT_DIGITS: u8 = 3;

    pub fn new() -> LatencyHistogram {
        // `new` only fails for more than 5 significant digits.
        #[allow(clippy::expect_used)]
        let histogram = Histogram::new(Self::SIGNIFICANT_DIGITS).expect("3 significant digits is a valid precision");
        LatencyHistogram { histogram }
    }

    /// Records one latency given in whole microseconds.
    pub fn record_us(&mut self, latency_us: u64) {
        self.record_ns(latency_us.saturating_mul(NANOS_PER_MICRO));
    }

    pub fn record(&mut self, latency: Duration) {
        self.record_ns(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Zero counts as 1 ns: the histogram's lowest discernible value is 1.
    fn record_ns(&mut self, latency_ns: u64) {
        let value = latency_ns.max(1);
        if self.histogram.record(value).is_err() {
            // Only reachable past u64::MAX / 2 ns (290 years); clamp rather than drop it.
            self.histogram.saturating_record(value);
        }
    }

    /// Adds every value of `other` (both auto-resize, so this cannot fail for
    /// histograms made by [`LatencyHistogram::new`]).
    pub fn merge(&mut self, other: &LatencyHistogram) {
        if self.histogram.add(&other.histogram).is_err() {
            // Unreachable with auto-resize; keep the counts approximately by
            // re-recording each bucket rather than losing them.
            for value in other.histogram.iter_recorded() {
                self.histogram.saturating_record_n(value.value_iterated_to(), value.count_at_value());
            }
        }
    }

    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    pub fn is_empty(&self) -> bool {
        self.histogram.is_empty()
    }

    /// Value at `quantile` (0..=1) in µs; 0 when empty.
    pub fn quantile_us(&self, quantile: f64) -> f64 {
        if self.is_empty() { 0.0 } else { us(self.histogram.value_at_quantile(quantile)) }
    }

    pub fn max_us(&self) -> f64 {
        if self.is_empty() { 0.0 } else { us(self.histogram.max()) }
    }

    /// The report's summary; all zeros when nothing was recorded.
    pub fn summary(&self) -> LatencyUs {
        if self.is_empty() {
            return LatencyUs::default();
        }
        let h = &self.histogram;
        LatencyUs {
            min: us(h.min()),
            avg: h.mean() / NANOS_PER_MICRO as f64,
            p50: us(h.value_at_quantile(0.50)),
            p90: us(h.value_at_quantile(0.90)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        }
    }
}

const NANOS_PER_MICRO: u64 = 1000;

fn us(ns: u64) -> f64 {
    ns as f64 / NANOS_PER_MICRO as f64
}

/// Mean, minimum, maximum and sample standard deviation of repeated
/// measurements (e.g. MQTh over repetitions).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spread {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Sample standard deviation (n − 1); 0 for fewer than two values.
    pub stddev: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Spread {
        if values.is_empty() {
            return Spread::default();
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let stddev = if values.len() < 2 {
            0.0
        } else {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        };
        Spread { mean, min, max, stddev }
    }

    /// Standard deviation relative to the mean, in % (0 when the mean is 0).
    pub fn relative_stddev_percent(&self) -> f64 {
        if self.mean == 0.0 { 0.0 } else { 100.0 * self.stddev / self.mean }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_values() {
        let mut h = LatencyHistogram::new();
        for us in 1..=1000 {
            h.record_us(us);
        }
        let s = h.summary();
        // 3 significant digits: within 0.1 %.
        assert_eq!(s.min, 1.0);
        assert!((s.max - 1000.0).abs() <= 1.0, "max {}", s.max);
        assert!((s.avg - 500.5).abs() < 1.0, "avg {}", s.avg);
        assert!((s.p50 - 500.0).abs() <= 1.0, "p50 {}", s.p50);
        assert!((s.p90 - 900.0).abs() <= 1.0, "p90 {}", s.p90);
        assert!((s.p99 - 990.0).abs() <= 1.0, "p99 {}", s.p99);
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        let mut all = LatencyHistogram::new();
        for us in 0..5000u64 {
            let v = (us * 7919) % 100_000 + 1;
            if us % 3 == 0 {
                a.record_us(v)
            } else {
                b.record_us(v)
            }
            all.record_us(v);
        }
        // A multi-second stall in one of them must survive the merge.
        b.record(Duration::from_secs(3));
        all.record(Duration::from_secs(3));
        a.merge(&b);
        assert_eq!(a.count(), all.count());
        assert_eq!(a.summary(), all.summary());
        assert!(a.max_us() >= 2_990_000.0, "stall kept: {}", a.max_us());
    }

    #[test]
    fn empty_histogram_summarises_to_zero() {
        let h = LatencyHistogram::new();
        assert_eq!(h.summary(), LatencyUs::default());
        assert_eq!(h.quantile_us(0.99), 0.0);
    }

    #[test]
    fn sub_microsecond_resolution() {
        // 1.9 µs must not be reported as 1 µs (truncation biased direct-mode
        // averages down by about half a microsecond).
        let mut h = LatencyHistogram::new();
        for _ in 0..10 {
            h.record(Duration::from_nanos(1900));
        }
        h.record(Duration::from_nanos(2600));
        let s = h.summary();
        assert!((s.avg - (19.0 + 2.6) / 11.0).abs() < 0.01, "avg {}", s.avg);
        assert!((s.p50 - 1.9).abs() < 0.005, "p50 {}", s.p50);
        assert!((s.max - 2.6).abs() < 0.005, "max {}", s.max);
    }

    #[test]
    fn spread_of_repetitions() {
        let s = Spread::of(&[10.0, 12.0, 14.0]);
        assert_eq!(s.mean, 12.0);
        assert_eq!(s.min, 10.0);
        assert_eq!(s.max, 14.0);
        assert!((s.stddev - 2.0).abs() < 1e-9);
        assert_eq!(Spread::of(&[5.0]).stddev, 0.0);
        assert_eq!(Spread::of(&[]), Spread::default());
    }
}
