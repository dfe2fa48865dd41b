//! The `[cache]` settings a configuration reload changes while the cache
//! runs: the memory budget and its watermarks, how often aging looks, the
//! default LOAD parallelism, and write-through's and autorefresh's tuning.
//!
//! Each is read where it is used (an aging round, a miss, an AWT write's
//! guard, a lane's next batch, the stall watch, an autorefresh slot check),
//! so the next use after `Cache::retune` sees the new value; nothing is
//! restarted and no session notices. What a running cache cannot change
//! (the node name, the apply lane count, the sequence block, the flash
//! tier) stays in `CacheConfig` and needs a restart.

use std::time::Duration;

use parking_lot::RwLock;

use crate::CacheConfig;
use crate::error::CacheError;

/// The live part of `[cache]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    /// Memory all cache groups may use (bytes); None: no global budget.
    pub memory_budget: Option<u64>,
    /// Aging starts evicting above `high_watermark * budget` ...
    pub high_watermark: f64,
    /// ... and stops below `low_watermark * budget`.
    pub low_watermark: f64,
    /// How often the aging thread looks.
    pub aging_interval: Duration,
    /// PARALLEL when LOAD/REFRESH does not say.
    pub load_parallel: usize,
    /// WAL kept for write-through before writes to AWT groups fail (53400).
    pub awt_retained_wal_max: u64,
    /// How long an AWT batch waits for more transactions after its first.
    pub awt_batch_delay: Duration,
    /// An AWT lane with work and no progress this long is reported and reconnected.
    pub awt_stall_timeout: Duration,
    /// WAL a READONLY group's slot may retain before the group reloads.
    pub autorefresh_retained_wal_max: u64,
}

impl Tuning {
    /// The live part of a cache's configuration.
    pub fn of(config: &CacheConfig) -> Tuning {
        Tuning {
            memory_budget: config.memory_budget,
            high_watermark: config.high_watermark,
            low_watermark: config.low_watermark,
            aging_interval: config.aging_interval,
            load_parallel: config.load_parallel,
            awt_retained_wal_max: config.awt.retained_wal_max,
            awt_batch_delay: config.awt.batch_delay,
            awt_stall_timeout: config.awt.stall_timeout,
            autorefresh_retained_wal_max: config.autorefresh.retained_wal_max,
        }
    }

    /// The bounds every consumer relies on (aging divides by the budget
    /// and walks from the high watermark down to the low one).
    fn check(&self) -> Result<(), CacheError> {
        let bad = |reason: String| Err(CacheError::InvalidSpec { group: String::new(), reason });
        if self.memory_budget == Some(0) {
            return bad("memory_budget must be more than 0".into());
        }
        let in_unit = |w: f64| w > 0.0 && w <= 1.0;
        if !in_unit(self.high_watermark) || !in_unit(self.low_watermark) || self.low_watermark >= self.high_watermark {
            return bad(format!(
                "watermarks must satisfy 0 < low ({}) < high ({}) <= 1",
                self.low_watermark, self.high_watermark
            ));
        }
        if self.aging_interval.is_zero() || self.load_parallel == 0 || self.awt_stall_timeout.is_zero() {
            return bad("aging_interval, load_parallel and awt_stall_timeout must be more than 0".into());
        }
        Ok(())
    }
}

/// The tuning in force, shared by the cache and its background threads.
#[derive(Debug)]
pub(crate) struct LiveTuning(RwLock<Tuning>);

impl LiveTuning {
    pub(crate) fn new(config: &CacheConfig) -> LiveTuning {
        LiveTuning(RwLock::new(Tuning::of(config)))
    }

    /// A copy of the tuning in force (a short read lock; taken once per
    /// aging round, batch or guarded write, never per row).
    pub(crate) fn get(&self) -> Tuning {
        self.0.read().clone()
    }

    /// Replaces the tuning, after checking it whole: a bad value changes nothing.
    pub(crate) fn set(&self, tuning: Tuning) -> Result<(), CacheError> {
        tuning.check()?;
        *self.0.write() = tuning;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_tuning_changes_nothing() {
        let live = LiveTuning::new(&CacheConfig::default());
        let before = live.get();
        for broken in [
            Tuning { memory_budget: Some(0), ..before.clone() },
            Tuning { low_watermark: 0.95, ..before.clone() },
            Tuning { high_watermark: 1.5, ..before.clone() },
            Tuning { load_parallel: 0, ..before.clone() },
            Tuning { aging_interval: Duration::ZERO, ..before.clone() },
        ] {
            assert!(live.set(broken).is_err());
            assert_eq!(live.get(), before);
        }
        let lowered = Tuning { memory_budget: Some(64 << 20), awt_batch_delay: Duration::from_millis(5), ..before };
        live.set(lowered.clone()).expect("a good tuning is taken");
        assert_eq!(live.get(), lowered);
    }
}
