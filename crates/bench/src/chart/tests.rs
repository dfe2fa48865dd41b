use super::fixtures::{iteration, run, tatp_run};
use super::*;

const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// Asserts the PNG/SVG pairs are real files and returns the SVG texts.
pub(crate) fn check_written(paths: &[PathBuf]) -> Vec<String> {
    let mut svgs = Vec::new();
    for path in paths {
        let bytes = std::fs::read(path).expect("chart file readable");
        assert!(bytes.len() > 1000, "{} is only {} bytes", path.display(), bytes.len());
        match path.extension().and_then(|e| e.to_str()) {
            Some("png") => assert!(bytes.starts_with(PNG_SIGNATURE), "{} is not a PNG", path.display()),
            Some("svg") => {
                let text = String::from_utf8(bytes).expect("SVG is UTF-8");
                assert!(text.trim_start().starts_with("<svg"), "{} does not start with <svg", path.display());
                assert!(text.trim_end().ends_with("</svg>"), "{} is not closed", path.display());
                svgs.push(text);
            }
            other => panic!("unexpected extension {other:?}"),
        }
    }
    svgs
}

#[test]
fn run_charts_are_written_as_png_and_svg() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = tatp_run("postgresql", 1.0, 2000.0);
    let paths = draw_run_charts(&run, dir.path()).expect("charts drawn");
    assert_eq!(paths.len(), 8);
    let names: Vec<String> =
        paths.iter().filter_map(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned()).collect();
    for stem in ["mqth", "latency-avg", "latency-relative", "latency-p90"] {
        assert!(names.contains(&format!("postgresql-{stem}.png")), "{names:?}");
        assert!(names.contains(&format!("postgresql-{stem}.svg")), "{names:?}");
    }
    let svgs = check_written(&paths);
    for svg in &svgs {
        assert!(svg.contains("postgresql · TATP · 100,000 subscribers · closed loop"), "title missing");
        assert!(svg.contains("threads"));
    }
    assert!(svgs[0].contains("MQTh"));
    assert!(svgs[1].contains("INSERT_CALL_FORWARDING"));
    assert!(svgs[2].contains("MQTh (throughput)"));
}

#[test]
fn odd_values_do_not_break_charts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut single = iteration(1, f64::NAN, &[("A_B", 0.0), ("C_D", f64::INFINITY), ("E_F", -3.0)]);
    single.mqth_min = f64::NAN;
    let run = run("", vec![single]);
    let paths = draw_run_charts(&run, dir.path()).expect("charts drawn");
    let svgs = check_written(&paths);
    assert!(paths[0].ends_with("run-mqth.png"));
    assert!(svgs.iter().all(|s| s.contains("no data")));

    let zero = run_with_mqth(&[0.0, 0.0]);
    check_written(&draw_run_charts(&zero, dir.path()).expect("charts drawn"));
}

fn run_with_mqth(mqth: &[f64]) -> RunResult {
    let iterations = mqth.iter().enumerate().map(|(i, m)| iteration(i as u32 + 1, *m, &[("X", 0.0)])).collect();
    run("zeros", iterations)
}

#[test]
fn empty_run_is_an_error_not_a_blank_chart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = run("empty", Vec::new());
    let error = draw_run_charts(&run, dir.path()).expect_err("nothing to draw");
    assert!(matches!(error, ChartError::NoData(_)));
}

#[test]
fn unwritable_directory_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x").expect("write");
    let error = draw_run_charts(&tatp_run("x", 1.0, 100.0), &file.join("sub")).expect_err("cannot create");
    assert!(matches!(error, ChartError::CreateDir { .. }), "{error}");
}

#[test]
fn relative_divides_by_first_usable_value() {
    let values = [None, Some(0.0), Some(2.0), Some(3.0), Some(f64::NAN)];
    assert_eq!(relative(&values), [None, Some(0.0), Some(1.0), Some(1.5), None]);
    assert_eq!(relative(&[Some(0.0), Some(0.0)]), [None, None]);
}

#[test]
fn thousands_groups_digits() {
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(1000), "1,000");
    assert_eq!(thousands(1_234_567), "1,234,567");
}

#[test]
fn markup_in_labels_is_escaped_in_svg() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = run("pg<15> & co", vec![iteration(1, 10.0, &[("A&B", 5.0)])]);
    let paths = draw_run_charts(&run, dir.path()).expect("charts drawn");
    assert!(paths[0].ends_with("pg_15_co-mqth.png"), "{}", paths[0].display());
    let svgs = check_written(&paths);
    assert!(svgs[0].contains("pg&lt;15&gt; &amp; co") || svgs[0].contains("pg&lt;15> &amp; co"));
    assert!(svgs[1].contains("A&amp;B"));
}

/// The settings line under a thread-sweep chart's title used to run off the
/// right edge: every subtitle piece must now fit the canvas. Measured with
/// the embedded font at the subtitle size, as the renderer measures it.
#[test]
fn long_settings_lines_wrap_inside_the_canvas() {
    use plotters::prelude::*;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut run = tatp_run("postgresql", 1.0, 2000.0);
    run.config.durability =
        "fsync=on, synchronous_commit=on, wal_sync_method=fdatasync, full_page_writes=on, wal_level=logical".to_owned();
    run.config.target = format!("postgresql postgres://postgres@127.0.0.1:5432/{}", "tatp_database_".repeat(12));
    let paths = draw_run_charts(&run, dir.path()).expect("charts drawn");
    let svg = check_written(&paths).remove(0);
    super::style::ensure_font().expect("font");
    let width = 1400u32;
    let (area, _) = {
        let mut buffer = vec![0u8; (width * 10 * 3) as usize];
        let root = BitMapBackend::with_buffer(&mut buffer, (width, 10)).into_drawing_area();
        let style = TextStyle::from((super::style::FONT, super::style::SUBTITLE_PX).into_font());
        let mut widths = Vec::new();
        for piece in svg.split("<text").skip(1) {
            let text = piece.split('>').nth(1).and_then(|t| t.split('<').next()).unwrap_or("").trim();
            if text.contains("durability") || text.contains("tatp_database_") {
                widths.push((text.to_owned(), root.estimate_text_size(text, &style).map(|(w, _)| w).unwrap_or(0)));
            }
        }
        (widths, ())
    };
    assert!(area.len() >= 2, "the settings lines were not found or not wrapped: {area:?}");
    for (text, w) in &area {
        assert!(20 + w <= width, "'{text}' is {w} px wide, past the {width} px canvas");
    }
}
