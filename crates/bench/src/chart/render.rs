//! Writing one figure twice, as PNG (for reports and chat) and SVG (for
//! papers and zooming), from a single drawing routine.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::ChartError;
use super::style::{FONT, FOOTNOTE_PX, MUTED, SUBTITLE_PX, TEXT, TITLE_PX};

/// A drawing failure with the backend's type erased, so figure code can use
/// `?` on any backend and the caller attaches the file name.
#[derive(Debug)]
pub(crate) struct DrawFailure(pub(crate) String);

impl<E: std::error::Error + Send + Sync> From<DrawingAreaErrorKind<E>> for DrawFailure {
    fn from(error: DrawingAreaErrorKind<E>) -> Self {
        DrawFailure(error.to_string())
    }
}

pub(crate) type DrawResult = Result<(), DrawFailure>;

/// Something that can draw itself on any plotters backend.
pub(crate) trait Figure {
    /// Canvas size in pixels (PNG) or user units (SVG).
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static;
}

/// Draws `figure` into `<dir>/<stem>.png` and `<dir>/<stem>.svg` and returns
/// both paths.
pub(crate) fn write_figure(figure: &impl Figure, dir: &Path, stem: &str) -> Result<Vec<PathBuf>, ChartError> {
    super::style::ensure_font()?;
    std::fs::create_dir_all(dir).map_err(|source| ChartError::CreateDir { path: dir.to_path_buf(), source })?;
    let size = figure.size();

    let png = dir.join(format!("{stem}.png"));
    {
        let root = BitMapBackend::new(&png, size).into_drawing_area();
        draw_and_present(figure, &root).map_err(|e| draw_error(&png, e))?;
    }
    let svg = dir.join(format!("{stem}.svg"));
    {
        let root = SVGBackend::new(&svg, size).into_drawing_area();
        draw_and_present(figure, &root).map_err(|e| draw_error(&svg, e))?;
    }
    Ok(vec![png, svg])
}

fn draw_and_present<DB: DrawingBackend>(figure: &impl Figure, root: &DrawingArea<DB, Shift>) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    figure.draw(root)?;
    // Present explicitly: the backends' Drop would swallow a write error.
    root.present()?;
    Ok(())
}

fn draw_error(path: &Path, failure: DrawFailure) -> ChartError {
    ChartError::Draw { path: path.to_path_buf(), message: failure.0 }
}

/// Title and subtitle lines at the top of `area`; returns the area below.
pub(crate) fn draw_header<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    subtitle: &[String],
) -> Result<DrawingArea<DB, Shift>, DrawFailure>
where
    DB::ErrorType: 'static,
{
    let title_style = TextStyle::from((FONT, TITLE_PX).into_font()).color(&TEXT);
    let sub_style = TextStyle::from((FONT, SUBTITLE_PX).into_font()).color(&MUTED);
    let line_px = i32::try_from(SUBTITLE_PX + 6).unwrap_or(22);
    area.draw_text(title, &title_style, (20, 14))?;
    let mut y = 14 + i32::try_from(TITLE_PX + 10).unwrap_or(36);
    // Settings lines are long ("keys: … · durability: … · …"): wrapped to
    // the canvas, never clipped at its right edge.
    let max_width = area.dim_in_pixel().0.saturating_sub(40);
    for line in subtitle {
        for part in wrap(area, line, &sub_style, max_width) {
            area.draw_text(&part, &sub_style, (20, y))?;
            y += line_px;
        }
    }
    let (_, below) = area.split_vertically(y + 8);
    Ok(below)
}

/// Footnote lines at the bottom of `area`; returns the area above. Lines
/// wider than the canvas are wrapped at spaces.
pub(crate) fn draw_footer<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lines: &[(String, RGBColor)],
) -> Result<DrawingArea<DB, Shift>, DrawFailure>
where
    DB::ErrorType: 'static,
{
    if lines.is_empty() {
        return Ok(area.clone());
    }
    let (width, height) = area.dim_in_pixel();
    let max_width = width.saturating_sub(40);
    let mut wrapped: Vec<(String, RGBColor)> = Vec::new();
    for (line, color) in lines {
        let style = TextStyle::from((FONT, FOOTNOTE_PX).into_font()).color(color);
        for part in wrap(area, line, &style, max_width) {
            wrapped.push((part, *color));
        }
    }
    let line_px = FOOTNOTE_PX + 6;
    let block = u32::try_from(wrapped.len()).unwrap_or(u32::MAX).saturating_mul(line_px) + 12;
    let top = height.saturating_sub(block);
    let (above, below) = area.split_vertically(top);
    let mut y = 4;
    for (line, color) in &wrapped {
        let style = TextStyle::from((FONT, FOOTNOTE_PX).into_font()).color(color);
        below.draw_text(line, &style, (20, y))?;
        y += i32::try_from(line_px).unwrap_or(20);
    }
    Ok(above)
}

/// Greedy word wrap by measured text width.
fn wrap<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    style: &TextStyle<'_>,
    max_width: u32,
) -> Vec<String> {
    let fits = |candidate: &str| area.estimate_text_size(candidate, style).map(|(w, _)| w <= max_width).unwrap_or(true);
    let mut lines = Vec::new();
    let mut current = String::new();
    for word in text.split(' ') {
        let candidate = if current.is_empty() { word.to_string() } else { format!("{current} {word}") };
        if fits(&candidate) {
            current = candidate;
        } else {
            if !current.is_empty() {
                lines.push(std::mem::take(&mut current));
            }
            // A word wider than the canvas (a long URL) is cut where it
            // must be: clipped text says less than a broken word.
            for c in word.chars() {
                current.push(c);
                if !fits(&current) && current.chars().count() > 1 {
                    current.pop();
                    lines.push(std::mem::replace(&mut current, c.to_string()));
                }
            }
        }
    }
    if !current.is_empty() {
        lines.push(current);
    }
    lines
}

/// Pixel width of `text` in `style`, or a rough estimate when the font
/// cannot measure it.
pub(crate) fn text_width<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, text: &str, style: &TextStyle<'_>) -> u32 {
    area.estimate_text_size(text, style)
        .map(|(w, _)| w)
        .unwrap_or_else(|_| u32::try_from(text.chars().count()).unwrap_or(u32::MAX).saturating_mul(9))
}
