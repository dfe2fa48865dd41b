//! Warm-up until steady: unmeasured windows of load run until the share of
//! transactions that miss memory stops moving, so the measure that follows
//! sees the steady state and not a cache still settling.
//!
//! A fixed warm-up did not do for caches smaller than their data: TATP's
//! NURand keys make the hot set settle slowly. At the wire's rate 15 s left
//! a flash side answering 0.24 misses per transaction from flash, 45 s 0.14
//! (`examples/flash_tatp.rs`, issue 32); in `pgtier demo flash` the direct
//! run, measured after the wire run on the same cache, missed half as often
//! as the wire run at 10 % of the data. What a "miss" is belongs to the
//! caller: for pgtier, instances answered from flash or loaded from
//! PostgreSQL; for PostgreSQL alone, reads from its device.

/// A window's share counts as steady within this fraction of the window
/// before it ...
pub const RELATIVE_TOLERANCE: f64 = 0.05;
/// ... or within this much in absolute terms (a share near zero moves by
/// more than 5 % of itself on noise alone).
pub const ABSOLUTE_TOLERANCE: f64 = 0.005;

/// The shares of successive warm-up windows and the stopping rule.
#[derive(Clone, Debug)]
pub struct SteadyShare {
    shares: Vec<f64>,
    windows_max: usize,
    steady: bool,
}

impl SteadyShare {
    /// At most `windows_max` windows (at least 2: steadiness compares two).
    pub fn new(windows_max: usize) -> SteadyShare {
        assert!(windows_max >= 2, "a steady share needs two windows to compare");
        SteadyShare { shares: Vec::new(), windows_max, steady: false }
    }

    /// Records one window's share of transactions that missed memory; true
    /// once the warm-up should stop (this window is within tolerance of the
    /// one before, or the last window allowed has run). A caller following
    /// several shares at once (one `SteadyShare` each) goes on until all are
    /// done together; a share steady before the others is judged again on
    /// every window.
    pub fn push(&mut self, share: f64) -> bool {
        let share = if share.is_finite() { share.max(0.0) } else { 0.0 };
        self.steady = self
            .shares
            .last()
            .is_some_and(|last| (share - last).abs() <= (RELATIVE_TOLERANCE * last).max(ABSOLUTE_TOLERANCE));
        self.shares.push(share);
        self.done()
    }

    /// Whether the warm-up should stop.
    pub fn done(&self) -> bool {
        self.steady || self.shares.len() >= self.windows_max
    }

    /// The last window was within tolerance of the one before (false when
    /// the warm-up stopped at its window limit still moving).
    pub fn steady(&self) -> bool {
        self.steady
    }

    /// Every window's share, in order.
    pub fn shares(&self) -> &[f64] {
        &self.shares
    }
}

/// The share of `transactions` that `misses` are, 0 when none ran.
pub fn share_of(misses: u64, transactions: f64) -> f64 {
    if transactions >= 1.0 { misses as f64 / transactions } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_once_two_windows_agree() {
        let mut warm = SteadyShare::new(10);
        assert!(!warm.push(0.60));
        assert!(!warm.push(0.45), "25 % lower is still settling");
        assert!(!warm.push(0.40), "11 % lower is still settling");
        assert!(warm.push(0.39), "2.5 % lower is steady");
        assert!(warm.steady());
        assert_eq!(warm.shares(), &[0.60, 0.45, 0.40, 0.39]);
    }

    #[test]
    fn a_share_near_zero_is_steady_within_the_absolute_tolerance() {
        let mut warm = SteadyShare::new(10);
        assert!(!warm.push(0.002));
        assert!(warm.push(0.006), "0.004 apart: noise, though 200 % relative");
    }

    #[test]
    fn stops_at_the_window_limit_unsteady() {
        let mut warm = SteadyShare::new(3);
        assert!(!warm.push(0.9));
        assert!(!warm.push(0.6));
        assert!(warm.push(0.3));
        assert!(!warm.steady(), "stopped by the limit, still moving");
    }

    #[test]
    fn a_rising_share_must_settle_too() {
        let mut warm = SteadyShare::new(10);
        assert!(!warm.push(0.10));
        assert!(!warm.push(0.20));
        assert!(warm.push(0.205));
    }

    #[test]
    fn a_steady_share_is_judged_again_while_others_settle() {
        let mut warm = SteadyShare::new(10);
        warm.push(0.40);
        assert!(warm.push(0.40));
        assert!(!warm.push(0.30), "moved again: no longer steady");
        assert!(warm.push(0.30));
    }

    #[test]
    fn shares_of_no_transactions_are_zero() {
        assert_eq!(share_of(5, 0.0), 0.0);
        assert!((share_of(30, 100.0) - 0.3).abs() < 1e-12);
    }
}
