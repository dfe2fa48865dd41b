//! Line charts over thread count: one evenly spaced slot per measured thread
//! count (as in reference study 000, which plots by iteration), one line per
//! series, optional min–max whiskers and value labels.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::TickedAxis;
use super::render::{DrawResult, Figure, draw_footer, draw_header, text_width};
use super::style::{
    ANNOTATION_PX, AXIS_DESC_PX, FONT, GRID, LEGEND_PX, MUTED, TEXT, TICK_PX, YScale, format_number, usable,
};

pub(crate) struct LineFigure {
    pub title: String,
    pub subtitle: Vec<String>,
    pub x_desc: String,
    /// One label per x slot (the thread counts).
    pub x_labels: Vec<String>,
    pub y_desc: String,
    pub y_scale: YScale,
    pub y_from_zero: bool,
    pub series: Vec<LineSpec>,
    /// A dashed horizontal guide, e.g. the 1× level of a relative chart.
    pub reference_y: Option<(f64, String)>,
    pub legend_title: Option<String>,
    pub footnotes: Vec<(String, RGBColor)>,
}

pub(crate) struct LineSpec {
    pub name: String,
    pub color: RGBColor,
    /// Drawn thicker and dashed, for the one series the others are read
    /// against (relative throughput among relative latencies).
    pub emphasis: bool,
    /// Horizontal shift in slots, so whiskers of series measured at the
    /// same thread counts do not hide each other.
    pub dodge: f64,
    /// One value per x slot; `None` is a gap in the line.
    pub values: Vec<Option<f64>>,
    /// Min–max whiskers per slot; empty for none.
    pub spread: Vec<Option<(f64, f64)>>,
    /// Text drawn beside each point; empty for none.
    pub point_labels: Vec<Option<String>>,
}

const WIDTH_PX: u32 = 1200;
const HEIGHT_PX: u32 = 720;
/// Half-width of whisker caps, in pixels.
const CAP_HALF_PX: i32 = 7;

impl LineFigure {
    fn slots(&self) -> usize {
        self.x_labels.len().max(1)
    }

    /// Every y value that must fit on the axis: points, whiskers, guide.
    fn extent(&self) -> Vec<f64> {
        let mut all = Vec::new();
        for series in &self.series {
            all.extend(series.values.iter().flatten());
            for (lo, hi) in series.spread.iter().flatten() {
                all.push(*lo);
                all.push(*hi);
            }
        }
        if let Some((y, _)) = &self.reference_y {
            all.push(*y);
        }
        all
    }

    fn has_data(&self) -> bool {
        self.series.iter().any(|s| self.series_has_data(s))
    }

    fn series_has_data(&self, series: &LineSpec) -> bool {
        let log = self.y_scale.is_log();
        series.values.iter().flatten().any(|v| usable(*v, log).is_some())
    }
}

impl Figure for LineFigure {
    fn size(&self) -> (u32, u32) {
        (WIDTH_PX, HEIGHT_PX)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let area = draw_header(root, &self.title, &self.subtitle)?;
        let area = draw_footer(&area, &self.footnotes)?;
        let legend_style = TextStyle::from((FONT, LEGEND_PX).into_font()).color(&TEXT);
        let show_legend = self.series.len() > 1 || self.legend_title.is_some();
        let (plot, legend) = if show_legend {
            let widest = self.series.iter().map(|s| text_width(&area, &s.name, &legend_style)).max().unwrap_or(0);
            let legend_px = (widest + 80).clamp(160, 420);
            let (plot, legend) = area.split_horizontally(area.dim_in_pixel().0.saturating_sub(legend_px));
            (plot, Some(legend))
        } else {
            (area, None)
        };
        self.draw_plot(&plot)?;
        if let Some(legend) = legend {
            self.draw_legend(&legend, &legend_style)?;
        }
        Ok(())
    }
}

impl LineFigure {
    fn draw_plot<DB: DrawingBackend>(&self, plot: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let scale = self.y_scale;
        let slots = self.slots();
        let x_ticks: Vec<f64> = (0..slots).map(|i| i as f64).collect();
        let x_range = -0.5..(slots as f64 - 0.5);
        let headroom = if self.series.iter().any(|s| !s.point_labels.is_empty()) { 0.12 } else { 0.06 };
        let (y_range, y_ticks) = scale.axis(self.extent(), self.y_from_zero, headroom);

        let mut chart = ChartBuilder::on(plot)
            .margin_top(10)
            .margin_left(10)
            .margin_right(25)
            .margin_bottom(5)
            .x_label_area_size(55)
            .y_label_area_size(90)
            .build_cartesian_2d(TickedAxis::new(x_range, x_ticks), TickedAxis::new(y_range.clone(), y_ticks))?;

        let x_label = |x: &f64| {
            let slot = x.round();
            if (x - slot).abs() < 1e-6 && slot >= 0.0 {
                self.x_labels.get(slot as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        let y_label = |y: &f64| format_number(scale.value_at(*y));
        chart
            .configure_mesh()
            .x_desc(self.x_desc.as_str())
            .y_desc(self.y_desc.as_str())
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .label_style((FONT, TICK_PX).into_font().color(&TEXT))
            .axis_desc_style((FONT, AXIS_DESC_PX).into_font().color(&TEXT))
            .bold_line_style(GRID.stroke_width(1))
            .light_line_style(TRANSPARENT)
            .axis_style(MUTED.stroke_width(1))
            .draw()?;

        if let Some((y, label)) = &self.reference_y
            && let Some(y) = usable(*y, scale.is_log())
        {
            let y = scale.to_axis(y);
            let ends = [(-0.5, y), (slots as f64 - 0.5, y)];
            chart.draw_series(DashedLineSeries::new(ends, 6, 5, MUTED.stroke_width(1)))?;
            let style = TextStyle::from((FONT, ANNOTATION_PX).into_font())
                .color(&MUTED)
                .pos(Pos::new(HPos::Right, VPos::Bottom));
            chart.draw_series(std::iter::once(Text::new(label.clone(), (slots as f64 - 0.55, y), style)))?;
        }

        for series in &self.series {
            draw_series(&mut chart, series, scale)?;
        }

        if !self.has_data() {
            let style = TextStyle::from((FONT, AXIS_DESC_PX).into_font())
                .color(&MUTED)
                .pos(Pos::new(HPos::Center, VPos::Center));
            let middle = (slots as f64 / 2.0 - 0.5, (y_range.start + y_range.end) / 2.0);
            chart.draw_series(std::iter::once(Text::new("no data", middle, style)))?;
        }
        Ok(())
    }

    fn draw_legend<DB: DrawingBackend>(&self, legend: &DrawingArea<DB, Shift>, style: &TextStyle<'_>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let row_px = i32::try_from(LEGEND_PX + 13).unwrap_or(28);
        let mut y = 30;
        if let Some(title) = &self.legend_title {
            legend.draw_text(title, &style.color(&MUTED), (10, y - 8))?;
            y += row_px;
        }
        let centred = style.pos(Pos::new(HPos::Left, VPos::Center));
        for series in &self.series {
            let line = series.color.stroke_width(if series.emphasis { 3 } else { 2 });
            if series.emphasis {
                // Dashed like its line in the plot.
                legend.draw(&PathElement::new(vec![(10, y), (20, y)], line))?;
                legend.draw(&PathElement::new(vec![(34, y), (44, y)], line))?;
            } else {
                legend.draw(&PathElement::new(vec![(10, y), (44, y)], line))?;
            }
            legend.draw(&Circle::new((27, y), 4, series.color.filled()))?;
            if self.series_has_data(series) {
                legend.draw_text(&series.name, &centred, (54, y))?;
            } else {
                let muted = centred.color(&MUTED);
                legend.draw_text(&format!("{} (no data)", series.name), &muted, (54, y))?;
            }
            y += row_px;
        }
        Ok(())
    }
}

type LineChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<TickedAxis, TickedAxis>>;

fn draw_series<DB: DrawingBackend>(chart: &mut LineChart<'_, DB>, series: &LineSpec, scale: YScale) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let log = scale.is_log();
    let point = |slot: usize, value: Option<f64>| {
        value.and_then(|v| usable(v, log)).map(|v| (slot as f64 + series.dodge, scale.to_axis(v)))
    };
    let line = series.color.stroke_width(if series.emphasis { 3 } else { 2 });

    // Whiskers first so the points sit on top of them; caps are fixed in
    // pixels so they stay small however many thread counts share the axis.
    for (slot, spread) in series.spread.iter().enumerate() {
        let Some((lo, hi)) = spread else { continue };
        let (Some(lo), Some(hi)) = (usable(*lo, log), usable(*hi, log)) else { continue };
        let (x, lo, hi) = (slot as f64 + series.dodge, scale.to_axis(lo), scale.to_axis(hi));
        let whisker = series.color.stroke_width(1);
        chart.draw_series([PathElement::new(vec![(x, lo), (x, hi)], whisker)])?;
        chart.draw_series([lo, hi].map(|y| {
            EmptyElement::at((x, y)) + PathElement::new(vec![(-CAP_HALF_PX, 0), (CAP_HALF_PX, 0)], whisker)
        }))?;
    }

    // Lines break at gaps rather than bridging a missing measurement.
    let mut run: Vec<(f64, f64)> = Vec::new();
    let points: Vec<Option<(f64, f64)>> = series.values.iter().enumerate().map(|(i, v)| point(i, *v)).collect();
    for p in points.iter().chain(std::iter::once(&None)) {
        match p {
            Some(p) => run.push(*p),
            None => {
                if run.len() > 1 {
                    if series.emphasis {
                        chart.draw_series(DashedLineSeries::new(run.clone(), 10, 6, line))?;
                    } else {
                        chart.draw_series(LineSeries::new(run.clone(), line))?;
                    }
                }
                run.clear();
            }
        }
    }
    chart.draw_series(points.iter().flatten().map(|p| Circle::new(*p, 4, series.color.filled())))?;

    // Labels go right of the point, on the side away from the line leaving
    // it: below a rising line, above a falling one (or the last point).
    let base_style = TextStyle::from((FONT, ANNOTATION_PX).into_font()).color(&TEXT);
    for (slot, (label, p)) in series.point_labels.iter().zip(&points).enumerate() {
        let (Some(label), Some(p)) = (label, p) else { continue };
        let rising = points.get(slot + 1).copied().flatten().is_some_and(|next| next.1 > p.1);
        let (v_pos, dy) = if rising { (VPos::Top, 5) } else { (VPos::Bottom, -5) };
        let style = base_style.pos(Pos::new(HPos::Left, v_pos));
        chart.draw_series(std::iter::once(
            EmptyElement::at(*p) + Text::new(label.clone(), (CAP_HALF_PX + 5, dy), style),
        ))?;
    }
    Ok(())
}
