//! A linear f64 axis whose ticks are exactly the ones given. plotters' own
//! `with_key_points` cannot be combined with label formatters on f64 axes
//! in 0.3.7, and its automatic ticks land between thread-count slots.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};

#[derive(Clone, Debug)]
pub(crate) struct TickedAxis {
    range: Range<f64>,
    ticks: Vec<f64>,
}

impl TickedAxis {
    /// `range` must be non-empty and finite; callers build it from
    /// [`super::style::YScale::axis`] or slot counts, which guarantee that.
    pub(crate) fn new(range: Range<f64>, ticks: Vec<f64>) -> Self {
        debug_assert!(range.start.is_finite() && range.end.is_finite() && range.end > range.start);
        let ticks = ticks.into_iter().filter(|t| range.contains(t) || *t == range.end).collect();
        Self { range, ticks }
    }
}

impl Ranged for TickedAxis {
    // Labels always come from our own formatters; the Debug default is only
    // there to satisfy plotters' mesh bounds.
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        let fraction = if span > 0.0 { (value - self.range.start) / span } else { 0.5 };
        let pixels = f64::from(limit.1 - limit.0) * fraction;
        // Clamp so a stray value cannot overflow the i32 cast.
        limit.0 + pixels.clamp(-1e7, 1e7).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() { Vec::new() } else { self.ticks.clone() }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}
