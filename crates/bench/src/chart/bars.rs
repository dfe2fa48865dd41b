//! Grouped bar charts: one group per transaction type, one bar per run, one
//! panel per statistic (average, p90). This is study 000's "backend vs
//! cache" figure.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::TickedAxis;
use super::render::{DrawResult, Figure, draw_footer, draw_header, text_width};
use super::style::{
    ANNOTATION_PX, AXIS_DESC_PX, FONT, GRID, LEGEND_PX, MUTED, TEXT, TICK_PX, YScale, axis_title, format_number, usable,
};

pub(crate) struct BarFigure {
    pub title: String,
    pub subtitle: Vec<String>,
    /// Bar series (the runs) with their colours, in drawing order.
    pub series: Vec<(String, RGBColor)>,
    /// Group names (transaction types), full length; abbreviated on the
    /// axis when they do not fit, with a key in the footnotes.
    pub groups: Vec<String>,
    pub panels: Vec<BarPanel>,
    pub footnotes: Vec<(String, RGBColor)>,
}

pub(crate) struct BarPanel {
    pub heading: String,
    /// Axis title without unit, e.g. "average latency".
    pub y_desc: String,
    pub y_unit: String,
    /// `values[series][group]`; `None` leaves the slot empty.
    pub values: Vec<Vec<Option<f64>>>,
    /// Text above each group, e.g. "37× lower".
    pub group_notes: Vec<Option<String>>,
}

const WIDTH_PX: u32 = 1400;
const PANEL_PX: u32 = 430;
/// Fraction of a group's slot the bars fill; the rest separates groups.
const GROUP_FILL: f64 = 0.8;
/// Log axis once the largest bar is this many times the smallest: beyond
/// it the small bars shrink to slivers on a linear axis.
const LOG_SPREAD_LIMIT: f64 = 25.0;

impl Figure for BarFigure {
    fn size(&self) -> (u32, u32) {
        let panels = u32::try_from(self.panels.len().max(1)).unwrap_or(1);
        (WIDTH_PX, 190 + PANEL_PX * panels)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let area = draw_header(root, &self.title, &self.subtitle)?;
        let area = self.draw_legend(&area)?;

        let tick_style = TextStyle::from((FONT, TICK_PX).into_font());
        let slot_px =
            (area.dim_in_pixel().0.saturating_sub(140)) / u32::try_from(self.groups.len().max(1)).unwrap_or(1);
        let fits = self.groups.iter().all(|g| text_width(&area, g, &tick_style) + 12 <= slot_px);
        let (axis_labels, key) = if fits { (self.groups.clone(), None) } else { abbreviate(&self.groups) };
        let mut footnotes = Vec::new();
        if let Some(key) = key {
            footnotes.push((key, MUTED));
        }
        footnotes.extend(self.footnotes.iter().cloned());
        let area = draw_footer(&area, &footnotes)?;

        let rows = self.panels.len().max(1);
        for (panel, panel_area) in self.panels.iter().zip(area.split_evenly((rows, 1))) {
            self.draw_panel(&panel_area, panel, &axis_labels)?;
        }
        Ok(())
    }
}

impl BarFigure {
    /// One row of colour swatches and run names under the header.
    fn draw_legend<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<DrawingArea<DB, Shift>, super::render::DrawFailure>
    where
        DB::ErrorType: 'static,
    {
        let style = TextStyle::from((FONT, LEGEND_PX).into_font()).color(&TEXT).pos(Pos::new(HPos::Left, VPos::Center));
        let y = 12;
        let mut x = 110;
        for (name, color) in &self.series {
            area.draw(&Rectangle::new([(x, y - 8), (x + 18, y + 8)], color.filled()))?;
            area.draw_text(name, &style, (x + 26, y))?;
            x += 26 + i32::try_from(text_width(area, name, &style)).unwrap_or(200) + 40;
        }
        let (_, below) = area.split_vertically(30);
        Ok(below)
    }

    fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        panel: &BarPanel,
        labels: &[String],
    ) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let groups = self.groups.len().max(1);
        let all = || panel.values.iter().flatten().flatten().copied();
        let scale = YScale::choose(all(), LOG_SPREAD_LIMIT);
        // Room above the bars for the value labels and the group note.
        let (y_range, y_ticks) = scale.axis_with(all(), true, 0.22, false);
        let x_ticks: Vec<f64> = (0..groups).map(|g| g as f64 + 0.5).collect();

        let mut chart = ChartBuilder::on(area)
            .caption(panel.heading.as_str(), (FONT, AXIS_DESC_PX).into_font().color(&TEXT))
            .margin_left(10)
            .margin_right(20)
            .margin_bottom(5)
            .x_label_area_size(40)
            .y_label_area_size(90)
            .build_cartesian_2d(
                TickedAxis::new(0.0..groups as f64, x_ticks),
                TickedAxis::new(y_range.clone(), y_ticks),
            )?;

        let x_label = |x: &f64| {
            let group = (x - 0.5).round();
            if group >= 0.0 { labels.get(group as usize).cloned().unwrap_or_default() } else { String::new() }
        };
        let y_label = |y: &f64| format_number(scale.value_at(*y));
        let y_desc = axis_title(&panel.y_desc, &panel.y_unit, scale);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .y_desc(y_desc)
            .label_style((FONT, TICK_PX).into_font().color(&TEXT))
            .axis_desc_style((FONT, AXIS_DESC_PX).into_font().color(&TEXT))
            .bold_line_style(GRID.stroke_width(1))
            .light_line_style(TRANSPARENT)
            .axis_style(MUTED.stroke_width(1))
            .draw()?;

        let log = scale.is_log();
        let bottom = y_range.start;
        let series_count = panel.values.len().max(1) as f64;
        let bar_width = GROUP_FILL / series_count;
        let value_style =
            TextStyle::from((FONT, ANNOTATION_PX).into_font()).color(&TEXT).pos(Pos::new(HPos::Center, VPos::Bottom));
        let mut group_tops = vec![bottom; groups];
        for (s, values) in panel.values.iter().enumerate() {
            let color = self.series.get(s).map_or(MUTED, |(_, c)| *c);
            for (g, value) in values.iter().enumerate().take(groups) {
                let Some(value) = value.and_then(|v| usable(v, log)) else { continue };
                let top = scale.to_axis(value).max(bottom);
                let left = g as f64 + (1.0 - GROUP_FILL) / 2.0 + s as f64 * bar_width;
                let right = left + bar_width * 0.94;
                chart.draw_series(std::iter::once(Rectangle::new([(left, bottom), (right, top)], color.filled())))?;
                let centre = (left + right) / 2.0;
                chart.draw_series(std::iter::once(
                    EmptyElement::at((centre, top)) + Text::new(format_number(value), (0, -3), value_style.clone()),
                ))?;
                group_tops[g] = group_tops[g].max(top);
            }
        }

        let note_style =
            TextStyle::from((FONT, LEGEND_PX).into_font()).color(&TEXT).pos(Pos::new(HPos::Center, VPos::Bottom));
        for (g, note) in panel.group_notes.iter().enumerate().take(groups) {
            let Some(note) = note else { continue };
            chart.draw_series(std::iter::once(
                EmptyElement::at((g as f64 + 0.5, group_tops[g]))
                    + Text::new(note.clone(), (0, -22), note_style.clone()),
            ))?;
        }

        if !all().any(|v| usable(v, log).is_some()) {
            let style = TextStyle::from((FONT, AXIS_DESC_PX).into_font())
                .color(&MUTED)
                .pos(Pos::new(HPos::Center, VPos::Center));
            let middle = (groups as f64 / 2.0, (y_range.start + y_range.end) / 2.0);
            chart.draw_series(std::iter::once(Text::new("no data", middle, style)))?;
        }
        Ok(())
    }
}

/// Axis labels short enough to sit under their group, and the key that
/// spells them out: initials of the words (INSERT_CALL_FORWARDING → ICF,
/// the abbreviations study 000 uses), or T1, T2… if initials would collide.
pub(crate) fn abbreviate(names: &[String]) -> (Vec<String>, Option<String>) {
    let initials: Vec<String> = names
        .iter()
        .map(|name| {
            let words: Vec<&str> = name.split(['_', ' ', '-']).filter(|w| !w.is_empty()).collect();
            if words.len() >= 2 {
                words.iter().filter_map(|w| w.chars().next()).flat_map(char::to_uppercase).collect()
            } else {
                name.chars().take(6).collect()
            }
        })
        .collect();
    let unique = initials.iter().enumerate().all(|(i, a)| !a.is_empty() && !initials[..i].contains(a));
    let short: Vec<String> = if unique { initials } else { (1..=names.len()).map(|i| format!("T{i}")).collect() };
    let key = short.iter().zip(names).map(|(s, n)| format!("{s} = {n}")).collect::<Vec<_>>().join(", ");
    (short, Some(key))
}

#[cfg(test)]
mod tests {
    use super::abbreviate;

    #[test]
    fn tatp_names_get_study_abbreviations() {
        let names: Vec<String> = ["GET_SUBSCRIBER_DATA", "INSERT_CALL_FORWARDING", "UPDATE_LOCATION"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (short, key) = abbreviate(&names);
        assert_eq!(short, ["GSD", "ICF", "UL"]);
        assert!(key.is_some_and(|k| k.contains("ICF = INSERT_CALL_FORWARDING")));
    }

    #[test]
    fn colliding_initials_fall_back_to_numbers() {
        let names: Vec<String> = ["a_b", "A-B", "x"].iter().map(|s| s.to_string()).collect();
        let (short, _) = abbreviate(&names);
        assert_eq!(short, ["T1", "T2", "T3"]);
    }
}
