//! Look shared by every chart: the embedded font, sizes, colours, and how
//! numbers and axes are printed.

use std::sync::OnceLock;

use plotters::style::{FontStyle, RGBColor, register_font};

use super::ChartError;

/// DejaVu Sans 2.37 (Debian fonts-dejavu-core), licence in
/// `assets/DejaVu-LICENSE.txt`. Embedded because plotters' ab_glyph text
/// backend has no access to system fonts, and a fresh benchmark machine may
/// have none installed.
static DEJAVU_SANS: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// The family every chart asks for; SVG viewers substitute their own sans
/// font, PNGs are drawn with the embedded one.
pub(crate) const FONT: &str = "sans-serif";

/// Registers the embedded font once per process; plotters keeps a global
/// font table and fails every text layout until a font is registered.
pub(crate) fn ensure_font() -> Result<(), ChartError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| register_font(FONT, FontStyle::Normal, DEJAVU_SANS).is_ok());
    if ok { Ok(()) } else { Err(ChartError::Font) }
}

pub(crate) const TITLE_PX: u32 = 26;
pub(crate) const SUBTITLE_PX: u32 = 16;
pub(crate) const AXIS_DESC_PX: u32 = 18;
pub(crate) const TICK_PX: u32 = 15;
pub(crate) const LEGEND_PX: u32 = 15;
pub(crate) const ANNOTATION_PX: u32 = 13;
pub(crate) const FOOTNOTE_PX: u32 = 14;

pub(crate) const TEXT: RGBColor = RGBColor(0x22, 0x22, 0x22);
pub(crate) const MUTED: RGBColor = RGBColor(0x55, 0x55, 0x55);
pub(crate) const GRID: RGBColor = RGBColor(0xE4, 0xE4, 0xE4);
pub(crate) const WARNING: RGBColor = RGBColor(0xB0, 0x3A, 0x00);

/// Tableau 10, reordered so the pale yellow comes late: distinguishable on
/// white and for the common colour-vision deficiencies.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x4E, 0x79, 0xA7),
    RGBColor(0xF2, 0x8E, 0x2B),
    RGBColor(0x59, 0xA1, 0x4F),
    RGBColor(0xE1, 0x57, 0x59),
    RGBColor(0xB0, 0x7A, 0xA1),
    RGBColor(0x76, 0xB7, 0xB2),
    RGBColor(0x9C, 0x75, 0x5F),
    RGBColor(0xFF, 0x9D, 0xA7),
    RGBColor(0xBA, 0xB0, 0xAC),
    RGBColor(0xED, 0xC9, 0x48),
];

pub(crate) fn series_color(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// Value kept for a chart: finite, and positive when it will be drawn on a
/// log axis. Everything else is a gap, never a panic or a NaN coordinate.
pub(crate) fn usable(value: f64, log: bool) -> Option<f64> {
    (value.is_finite() && (!log || value > 0.0)).then_some(value)
}

/// Short human number for ticks and labels: 3 significant digits with k/M
/// suffixes ("950", "12.3k", "1.5M", "0.42").
pub(crate) fn format_number(value: f64) -> String {
    if !value.is_finite() {
        return "n/a".to_string();
    }
    let magnitude = value.abs();
    let (scaled, suffix) = if magnitude >= 1e9 {
        (value / 1e9, "G")
    } else if magnitude >= 1e6 {
        (value / 1e6, "M")
    } else if magnitude >= 1e4 {
        (value / 1e3, "k")
    } else {
        (value, "")
    };
    format!("{}{suffix}", significant(scaled, 3))
}

/// `value` with `digits` significant digits, trailing zeros removed.
fn significant(value: f64, digits: i32) -> String {
    if value == 0.0 {
        return "0".to_string();
    }
    let exponent = value.abs().log10().floor() as i32;
    let decimals = (digits - 1 - exponent).clamp(0, 6) as usize;
    let text = format!("{value:.decimals$}");
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text }
}

/// A ratio as printed in tables and charts: "37.2×", "1.05×".
pub(crate) fn format_ratio(ratio: f64) -> String {
    if ratio >= 100.0 {
        format!("{ratio:.0}×")
    } else if ratio >= 10.0 {
        format!("{ratio:.1}×")
    } else {
        format!("{ratio:.2}×")
    }
}

/// How values map onto the y axis. Log axes are drawn on a linear axis in
/// log10 space, so line and bar code is the same for both scales.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum YScale {
    Linear,
    Log,
}

impl YScale {
    /// Log when the largest positive value exceeds the smallest by more than
    /// `spread_limit` times: on a linear axis the small ones would be slivers.
    pub(crate) fn choose(values: impl IntoIterator<Item = f64>, spread_limit: f64) -> YScale {
        let (lo, hi) = positive_extent(values);
        match (lo, hi) {
            (Some(lo), Some(hi)) if hi / lo > spread_limit => YScale::Log,
            _ => YScale::Linear,
        }
    }

    pub(crate) fn is_log(self) -> bool {
        self == YScale::Log
    }

    pub(crate) fn to_axis(self, value: f64) -> f64 {
        match self {
            YScale::Linear => value,
            YScale::Log => value.log10(),
        }
    }

    pub(crate) fn value_at(self, axis: f64) -> f64 {
        match self {
            YScale::Linear => axis,
            YScale::Log => 10f64.powf(axis),
        }
    }

    /// Axis range (in axis space) and tick positions covering `values`, with
    /// `headroom` (a fraction of the axis span) above the highest value for
    /// labels drawn over the data.
    pub(crate) fn axis(
        self,
        values: impl IntoIterator<Item = f64>,
        from_zero: bool,
        headroom: f64,
    ) -> (std::ops::Range<f64>, Vec<f64>) {
        self.axis_with(values, from_zero, headroom, true)
    }

    /// As [`YScale::axis`]; `tight` = false makes a log axis start and end
    /// on whole decades, so bars drawn from its bottom compare fairly.
    pub(crate) fn axis_with(
        self,
        values: impl IntoIterator<Item = f64>,
        from_zero: bool,
        headroom: f64,
        tight: bool,
    ) -> (std::ops::Range<f64>, Vec<f64>) {
        let log = self.is_log();
        let kept: Vec<f64> = values.into_iter().filter_map(|v| usable(v, log)).collect();
        let lo = kept.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = kept.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        match self {
            YScale::Log => log_axis(lo, hi, headroom, tight),
            YScale::Linear => linear_axis(lo, hi, from_zero, headroom),
        }
    }
}

fn positive_extent(values: impl IntoIterator<Item = f64>) -> (Option<f64>, Option<f64>) {
    let mut lo: Option<f64> = None;
    let mut hi: Option<f64> = None;
    for v in values.into_iter().filter_map(|v| usable(v, true)) {
        lo = Some(lo.map_or(v, |l| l.min(v)));
        hi = Some(hi.map_or(v, |h| h.max(v)));
    }
    (lo, hi)
}

/// Least share of a log axis's span between its floor and the smallest value.
const LOG_FLOOR_GAP: f64 = 0.08;

fn log_axis(lo: f64, hi: f64, headroom: f64, tight: bool) -> (std::ops::Range<f64>, Vec<f64>) {
    let (lo, hi) = if lo.is_finite() && hi.is_finite() { (lo, hi) } else { (1.0, 10.0) };
    let (mut bottom, mut top) = if tight {
        (snap_125(lo.log10(), false), snap_125(hi.log10(), true))
    } else {
        (lo.log10().floor(), hi.log10().ceil())
    };
    if top <= bottom {
        top = bottom + 1.0;
    }
    // A value on the axis floor (1.01 µs on an axis from 1) would draw as a
    // bar of no height: the floor steps down until the smallest value stands
    // a visible part of the span above it.
    let floor_gap_min = (top - bottom) * LOG_FLOOR_GAP;
    while lo.log10() - bottom < floor_gap_min {
        bottom = if tight { snap_125(bottom - 1e-9, false) } else { bottom - 1.0 };
    }
    // Ticks at 1, 2, 5 per decade while few decades are shown; beyond that
    // the intermediate ticks would crowd the axis.
    let steps: &[f64] = if top - bottom <= 2.0 { &[1.0, 2.0, 5.0] } else { &[1.0] };
    let mut ticks = Vec::new();
    let mut exponent = bottom.floor();
    while exponent <= top + 1e-9 {
        for step in steps {
            let tick = exponent + step.log10();
            if tick >= bottom - 1e-9 && tick <= top + 1e-9 {
                ticks.push(tick);
            }
        }
        exponent += 1.0;
    }
    let room = (hi.log10() + (top - bottom) * headroom).max(top);
    (bottom..room, ticks)
}

/// `log10_value` moved down (or `up`) to the log10 of the nearest value
/// of the form 1, 2 or 5 times a power of ten.
fn snap_125(log10_value: f64, up: bool) -> f64 {
    let decade = log10_value.floor();
    let marks = [0.0, 2f64.log10(), 5f64.log10(), 1.0].map(|step| decade + step);
    let slack = 1e-12;
    if up {
        marks.into_iter().find(|m| *m >= log10_value - slack).unwrap_or(decade + 1.0)
    } else {
        marks.into_iter().rev().find(|m| *m <= log10_value + slack).unwrap_or(decade)
    }
}

fn linear_axis(lo: f64, hi: f64, from_zero: bool, headroom: f64) -> (std::ops::Range<f64>, Vec<f64>) {
    let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    if from_zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        // A flat series: give it a band around its value instead of a zero range.
        let pad = if hi == 0.0 { 1.0 } else { hi.abs() * 0.5 };
        hi += pad;
        if !from_zero {
            lo -= pad;
        }
    }
    let step = nice_step((hi - lo) / 6.0);
    let bottom = (lo / step).floor() * step;
    let top = (hi / step).ceil() * step;
    let ticks = (0..).map(|i| bottom + f64::from(i) * step).take_while(|t| *t <= top + step * 1e-6).collect();
    let room = (hi + (hi - lo) * headroom).max(top);
    (bottom..room, ticks)
}

/// The 1-2-2.5-5 step closest above `raw`.
fn nice_step(raw: f64) -> f64 {
    let raw = if raw.is_finite() && raw > 0.0 { raw } else { 1.0 };
    let power = 10f64.powf(raw.log10().floor());
    let fraction = raw / power;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 2.5 {
        2.5
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// "average latency (µs, log scale)": what, unit, and the scale when it
/// is not linear.
pub(crate) fn axis_title(what: &str, unit: &str, scale: YScale) -> String {
    match (unit.is_empty(), scale.is_log()) {
        (true, false) => what.to_string(),
        (true, true) => format!("{what} (log scale)"),
        (false, false) => format!("{what} ({unit})"),
        (false, true) => format!("{what} ({unit}, log scale)"),
    }
}

/// A file-name-safe stem from a user label ("postgresql 15/sync" →
/// "postgresql_15_sync").
pub(crate) fn file_stem(label: &str) -> String {
    let mut stem = String::with_capacity(label.len());
    for c in label.trim().chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' };
        // One underscore per run of unsafe characters keeps names readable.
        if !(c == '_' && stem.ends_with('_')) {
            stem.push(c);
        }
    }
    let stem = stem.trim_matches(['_', '.']);
    if stem.is_empty() { "run".to_string() } else { stem.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_short() {
        assert_eq!(format_number(950.0), "950");
        assert_eq!(format_number(12_345.0), "12.3k");
        assert_eq!(format_number(1_500_000.0), "1.5M");
        assert_eq!(format_number(0.4249), "0.425");
        assert_eq!(format_number(0.0), "0");
        assert_eq!(format_number(f64::NAN), "n/a");
        assert_eq!(format_number(1000.0), "1000");
        assert_eq!(format_number(2.0), "2");
    }

    #[test]
    fn axes_never_collapse() {
        let (range, ticks) = YScale::Linear.axis([f64::NAN, 0.0], true, 0.1);
        assert!(range.end > range.start);
        assert!(!ticks.is_empty());
        let (range, _) = YScale::Log.axis([0.0, -1.0, f64::INFINITY], false, 0.0);
        assert!(range.end > range.start);
        // A single value sits above the floor (a bar from the floor shows).
        let (range, ticks) = YScale::Log.axis([100.0], false, 0.0);
        assert!(range.start < 2.0 && range.end >= 3.0, "{range:?}");
        assert!(ticks.contains(&2.0));
        // Tight log axes stop at the nearest 1-2-5 value, decade axes do not.
        let (range, _) = YScale::Log.axis([90.0, 3300.0], false, 0.0);
        assert!((range.start - 50f64.log10()).abs() < 1e-9 && (range.end - 5000f64.log10()).abs() < 1e-9);
        let (range, _) = YScale::Log.axis_with([90.0, 3300.0], false, 0.0, false);
        assert!(range.start == 1.0 && range.end == 4.0);
        let (range, _) = YScale::Linear.axis([5.0, 5.0], false, 0.0);
        assert!(range.start < 5.0 && range.end > 5.0);
    }

    #[test]
    fn a_value_at_the_log_floor_stays_visible() {
        for tight in [false, true] {
            let (range, ticks) = YScale::Log.axis_with([1.01, 950.0], false, 0.0, tight);
            let gap = 1.01f64.log10() - range.start;
            assert!(
                gap >= 0.08 * (range.end - range.start) * 0.9,
                "tight {tight}: floor {} too close to 1.01",
                range.start
            );
            assert!(ticks.iter().all(|t| *t >= range.start - 1e-9));
        }
        // Values well above the floor keep the floor where it was.
        let (range, _) = YScale::Log.axis_with([3.0, 950.0], false, 0.0, false);
        assert_eq!(range.start, 0.0);
    }

    #[test]
    fn scale_goes_log_for_wide_spreads() {
        assert_eq!(YScale::choose([10.0, 2000.0], 20.0), YScale::Log);
        assert_eq!(YScale::choose([10.0, 50.0, 0.0, f64::NAN], 20.0), YScale::Linear);
        assert_eq!(YScale::choose([], 20.0), YScale::Linear);
    }

    #[test]
    fn stems_are_file_safe() {
        assert_eq!(file_stem("postgresql 15/sync"), "postgresql_15_sync");
        assert_eq!(file_stem("  "), "run");
        assert_eq!(file_stem("../x"), "x");
    }
}
