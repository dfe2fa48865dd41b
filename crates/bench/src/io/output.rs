//! What a run leaves: the table (pgtier and fio side by side, with their
//! ratio), `results.json`, `results.csv` and one chart (IOPS against block
//! size per mode, at the highest queue depth measured, fio dashed beside
//! pgtier).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use comfy_table::{Cell, CellAlignment, ContentArrangement, Table, presets};
use serde::{Deserialize, Serialize};

use super::IoError;
use super::fio::FioFigures;
use super::measure::Figures;
use super::spec::{Mode, Point, format_bytes};
use super::target::Target;
use crate::chart::{self, LineFigure, LineSpec, MUTED, YScale, axis_title, format_number, format_ratio, series_color};
use crate::report::ReportError;
use crate::result::{LatencyUs, MachineInfo};

pub const JSON_FILE: &str = "results.json";
pub const CSV_FILE: &str = "results.csv";
pub const CHART_STEM: &str = "iops-by-block-size";
/// Points whose IOPS differ from fio's by more than this fraction are listed.
const RATIO_TOLERANCE: f64 = 0.10;

/// The settings a run was asked for (what reproduces it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub modes: Vec<Mode>,
    pub read_pct: u8,
    pub block_sizes: Vec<u64>,
    pub queue_depths: Vec<u32>,
    pub duration_s: f64,
    pub warmup_s: f64,
    /// O_DIRECT asked for (see `Target::direct` for what was used).
    pub direct_requested: bool,
    pub fsync_every: Option<u32>,
    pub seed: u64,
}

/// One point: pgtier's figures and, when fio ran, fio's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    #[serde(flatten)]
    pub point: Point,
    /// Mixed mode only.
    pub read_pct: Option<u8>,
    pub pgtier: Figures,
    pub fio: Option<FioFigures>,
    /// Why fio has no figures at this point although it was run.
    pub fio_error: Option<String>,
    /// The fio command run, to repeat it by hand.
    pub fio_command: Option<String>,
    /// fio ran before pgtier at this point (the order alternates).
    #[serde(default)]
    pub fio_ran_first: bool,
    /// The machine's 1-minute load average when the point ended: above its
    /// CPU count, other processes competed with the measured threads.
    #[serde(default)]
    pub load_average: Option<f64>,
}

impl IoRun {
    pub fn fio_ran(&self) -> bool {
        self.fio_version.is_some()
    }
}

impl PointResult {
    /// pgtier's IOPS / fio's.
    pub fn iops_ratio(&self) -> Option<f64> {
        self.fio.as_ref().filter(|f| f.iops > 0.0).map(|f| self.pgtier.iops / f.iops)
    }

    /// pgtier's p99 / fio's.
    pub fn p99_ratio(&self) -> Option<f64> {
        self.fio.as_ref().filter(|f| f.latency_us.p99 > 0.0).map(|f| self.pgtier.latency_us.p99 / f.latency_us.p99)
    }
}

/// `results.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IoRun {
    pub tool_version: String,
    /// RFC 3339 UTC.
    pub started_at: String,
    pub machine: MachineInfo,
    pub target: Target,
    pub settings: Settings,
    /// How the figures were measured, one sentence each (printed as the header).
    pub method: Vec<String>,
    /// fio's version and path, or why it did not run.
    pub fio: String,
    /// The version of fio run at the points; `None`: not run (absent or `--no-fio`).
    pub fio_version: Option<String>,
    pub points: Vec<PointResult>,
}

/// The method sentences for a run with these settings on this target
/// (`fio`: fio runs beside pgtier).
pub fn method(settings: &Settings, target: &Target, fio: bool) -> Vec<String> {
    let mut lines = vec![
        "queue depth N = N threads, each with one synchronous pread/pwrite outstanding \
         (fio: --ioengine=psync --numjobs=N)"
            .to_owned(),
    ];
    let io = if target.direct {
        "O_DIRECT".to_owned()
    } else if target.direct_refused.is_some() {
        "BUFFERED (O_DIRECT refused by the file system), posix_fadvise DONTNEED + RANDOM/SEQUENTIAL per point"
            .to_owned()
    } else {
        "buffered (--buffered), posix_fadvise DONTNEED + RANDOM/SEQUENTIAL per point".to_owned()
    };
    lines.push(format!(
        "{io}; 4096-aligned buffers; offsets aligned to the block size, uniform over the span for random \
         modes, one slice per thread for sequential ones"
    ));
    lines.push(match settings.fsync_every {
        None => "writes: no fsync (a volatile device cache may hold them; --fsync-every N to sync)".to_owned(),
        Some(n) => format!("writes: each thread fsyncs after every {n} of its writes (fsync time not in latencies)"),
    });
    if settings.modes.contains(&Mode::Mixed) {
        lines.push(format!("mixed: random, {} % reads", settings.read_pct));
    }
    lines.push(format!(
        "per point: {} s warm-up (not counted), then {} s measured; latency per I/O from its issue \
         (HdrHistogram, 3 significant digits); MB/s = 10^6 bytes/s; CPU = this process, % of one core",
        settings.warmup_s, settings.duration_s
    ));
    if fio {
        lines.push("fio runs the same job at each point, before or after pgtier, alternately".to_owned());
    }
    lines
}

fn right(s: impl Into<String>) -> Cell {
    Cell::new(s.into()).set_alignment(CellAlignment::Right)
}

/// Latency in µs: one decimal below 100.
fn us(v: f64) -> String {
    if v < 100.0 { format!("{v:.1}") } else { format!("{v:.0}") }
}

fn count(v: f64) -> String {
    chart::thousands(v.round().max(0.0) as u64)
}

/// One row per point; fio's columns only when fio ran.
pub fn table(run: &IoRun) -> Table {
    let mut table = Table::new();
    table.load_style(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Disabled);
    let mut header: Vec<&str> =
        vec!["mode", "bs", "QD", "IOPS", "MB/s", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs", "CPU %"];
    if run.fio_ran() {
        header.extend(["fio IOPS", "fio p50", "fio p99", "fio p99.9", "IOPS ×", "p99 ×"]);
    }
    table.set_header(header);
    for p in &run.points {
        let f = &p.pgtier;
        let l = &f.latency_us;
        let mut row = vec![
            Cell::new(p.point.mode.name()),
            right(format_bytes(p.point.block_size)),
            right(p.point.queue_depth.to_string()),
            right(count(f.iops)),
            right(format!("{:.1}", f.mb_per_s)),
            right(us(l.p50)),
            right(us(l.p90)),
            right(us(l.p99)),
            right(us(l.p999)),
            right(us(l.max)),
            right(format!("{:.0}", f.cpu_percent)),
        ];
        if run.fio_ran() {
            let ratio = |r: Option<f64>| right(r.map_or_else(|| "—".to_owned(), format_ratio));
            match &p.fio {
                Some(fio) => row.extend([
                    right(count(fio.iops)),
                    right(us(fio.latency_us.p50)),
                    right(us(fio.latency_us.p99)),
                    right(us(fio.latency_us.p999)),
                ]),
                None => row.extend([right("failed"), right("—"), right("—"), right("—")]),
            }
            row.extend([ratio(p.iops_ratio()), ratio(p.p99_ratio())]);
        }
        table.add_row(row);
    }
    table
}

/// Points listed by name in the notes at most (the furthest apart first).
const APART_LISTED_MAX: usize = 8;

/// Lines under the table: whether the machine was busy, how far pgtier
/// and fio agree, the points furthest apart (more than 10 % in IOPS), and
/// fio's failures.
pub fn notes(run: &IoRun) -> Vec<String> {
    let mut notes = Vec::new();
    let cpus = f64::from(run.machine.cpus.max(1));
    let busiest = run
        .points
        .iter()
        .filter_map(|p| Some((p.load_average?, p.point.label())))
        .reduce(|a, b| if b.0 > a.0 { b } else { a });
    if let Some((load, label)) = busiest.filter(|(load, _)| *load > cpus) {
        let busy = run.points.iter().filter(|p| p.load_average.is_some_and(|l| l > cpus)).count();
        notes.push(format!(
            "WARNING: the machine was busy: load average above its {cpus} CPUs at {busy} of {} points, up to {load:.1} \
             (at {label}); other processes competed with the measured threads, so figures (tails most) vary from \
             point to point and between pgtier and fio: rerun on an idle machine",
            run.points.len()
        ));
    }
    if !run.fio_ran() {
        return notes;
    }
    let mut ratios: Vec<(f64, String)> =
        run.points.iter().filter_map(|p| Some((p.iops_ratio()?, p.point.label()))).collect();
    ratios.sort_by(|a, b| a.0.total_cmp(&b.0));
    if let (Some(lo), Some(hi)) = (ratios.first(), ratios.last()) {
        let median = ratios[ratios.len() / 2].0;
        notes.push(format!(
            "IOPS pgtier/fio: median {} over {} points, from {} ({}) to {} ({})",
            format_ratio(median),
            ratios.len(),
            format_ratio(lo.0),
            lo.1,
            format_ratio(hi.0),
            hi.1
        ));
        let mut apart: Vec<&(f64, String)> = ratios.iter().filter(|(r, _)| (r - 1.0).abs() > RATIO_TOLERANCE).collect();
        // Furthest first, whichever side: 0.5x is as far as 2x.
        apart.sort_by(|a, b| a.0.ln().abs().total_cmp(&b.0.ln().abs()).reverse());
        if !apart.is_empty() {
            let listed: Vec<String> =
                apart.iter().take(APART_LISTED_MAX).map(|(r, label)| format!("{label} {}", format_ratio(*r))).collect();
            let more = if apart.len() > listed.len() { ", ..." } else { "" };
            notes.push(format!(
                "{} of {} points more than 10 % apart in IOPS: {}{more}",
                apart.len(),
                ratios.len(),
                listed.join(", ")
            ));
        }
    }
    for p in &run.points {
        if let Some(e) = &p.fio_error {
            notes.push(format!("fio failed at {}: {e}", p.point.label()));
        }
    }
    notes
}

pub const CSV_HEADER: &str = "mode,block_size_bytes,queue_depth,read_pct,ios,iops,mb_per_s,\
lat_min_us,lat_avg_us,lat_p50_us,lat_p90_us,lat_p99_us,lat_p999_us,lat_max_us,cpu_percent,\
fio_status,fio_ios,fio_iops,fio_mb_per_s,\
fio_lat_min_us,fio_lat_avg_us,fio_lat_p50_us,fio_lat_p90_us,fio_lat_p99_us,fio_lat_p999_us,fio_lat_max_us,\
iops_ratio,p99_ratio,load_average";

fn latency_fields(out: &mut String, l: Option<&LatencyUs>) {
    match l {
        Some(l) => {
            for v in [l.min, l.avg, l.p50, l.p90, l.p99, l.p999, l.max] {
                let _ = write!(out, ",{v}");
            }
        }
        None => out.push_str(",,,,,,,"),
    }
}

fn optional(v: Option<impl std::fmt::Display>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

pub fn csv(run: &IoRun) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    for p in &run.points {
        let f = &p.pgtier;
        let _ = write!(
            out,
            "{},{},{},{},{},{},{}",
            p.point.mode.name(),
            p.point.block_size,
            p.point.queue_depth,
            optional(p.read_pct),
            f.ios,
            f.iops,
            f.mb_per_s
        );
        latency_fields(&mut out, Some(&f.latency_us));
        let status = match (&p.fio, &p.fio_error) {
            (Some(_), _) => "ok",
            (None, Some(_)) => "failed",
            (None, None) => "not_run",
        };
        let fio = p.fio.as_ref();
        let _ = write!(
            out,
            ",{},{status},{},{},{}",
            f.cpu_percent,
            optional(fio.map(|x| x.ios)),
            optional(fio.map(|x| x.iops)),
            optional(fio.map(|x| x.mb_per_s))
        );
        latency_fields(&mut out, fio.map(|x| &x.latency_us));
        let _ = writeln!(out, ",{},{},{}", optional(p.iops_ratio()), optional(p.p99_ratio()), optional(p.load_average));
    }
    out
}

/// Writes `results.json` and `results.csv` into `dir` (created if missing).
pub fn write_results(run: &IoRun, dir: &Path) -> Result<Vec<PathBuf>, IoError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| ReportError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let json = dir.join(JSON_FILE);
    let mut text = serde_json::to_string_pretty(run).map_err(ReportError::from)?;
    text.push('\n');
    std::fs::write(&json, text).map_err(io(&json))?;
    let csv_path = dir.join(CSV_FILE);
    std::fs::write(&csv_path, csv(run)).map_err(io(&csv_path))?;
    Ok(vec![json, csv_path])
}

/// IOPS against block size, one line per mode at the highest queue depth
/// measured (the most the device gave), fio dashed beside each: ORION's
/// "maximum IOPS per I/O size" view. PNG and SVG.
pub fn draw_chart(run: &IoRun, dir: &Path) -> Result<Vec<PathBuf>, IoError> {
    let qd = run.settings.queue_depths.iter().copied().max().unwrap_or(1);
    let sizes = &run.settings.block_sizes;
    let at =
        |mode: Mode, bs: u64| run.points.iter().find(|p| p.point == Point { mode, block_size: bs, queue_depth: qd });
    let mut series = Vec::new();
    for (i, &mode) in run.settings.modes.iter().enumerate() {
        let line = |name: String, fio: bool, values: Vec<Option<f64>>| LineSpec {
            name,
            color: series_color(i),
            emphasis: fio,
            dodge: 0.0,
            values,
            spread: Vec::new(),
            point_labels: Vec::new(),
        };
        let values = sizes.iter().map(|&bs| at(mode, bs).map(|p| p.pgtier.iops)).collect();
        series.push(line(mode.name().to_owned(), false, values));
        if run.fio_ran() {
            let values = sizes.iter().map(|&bs| at(mode, bs).and_then(|p| p.fio.as_ref().map(|f| f.iops))).collect();
            series.push(line(format!("{} (fio)", mode.name()), true, values));
        }
    }
    let y_scale = YScale::choose(series.iter().flat_map(|s| s.values.iter().flatten().copied()), 10.0);
    for s in &mut series {
        s.values = s.values.iter().map(|v| v.and_then(|v| chart::usable(v, y_scale.is_log()))).collect();
    }
    let io = if run.target.direct { "O_DIRECT" } else { "buffered" };
    let mut footnotes = vec![(format!("Queue depth {qd} = {qd} threads with one synchronous I/O each."), MUTED)];
    if run.fio_ran() {
        footnotes.push(("Solid: pgtier bench io; dashed: fio running the same job.".to_owned(), MUTED));
    }
    let figure = LineFigure {
        title: format!("IOPS by block size at queue depth {qd}"),
        subtitle: vec![
            format!("{} on {} · {io}", run.target.path.display(), run.target.device),
            format!(
                "{} s per point after {} s warm-up · {} · {}",
                format_number(run.settings.duration_s),
                format_number(run.settings.warmup_s),
                run.started_at,
                run.fio_version.as_deref().unwrap_or("fio not run")
            ),
        ],
        x_desc: "block size".to_owned(),
        x_labels: sizes.iter().map(|&bs| format_bytes(bs)).collect(),
        y_desc: axis_title("I/O per second", "", y_scale),
        y_scale,
        y_from_zero: !y_scale.is_log(),
        series,
        reference_y: None,
        legend_title: Some("mode".to_owned()),
        footnotes,
    };
    Ok(chart::write_figure(&figure, dir, CHART_STEM)?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn latency(base: f64) -> LatencyUs {
        LatencyUs {
            min: base / 2.0,
            avg: base,
            p50: base,
            p90: base * 1.5,
            p99: base * 2.0,
            p999: base * 4.0,
            max: base * 10.0,
        }
    }

    pub(crate) fn sample_run(fio_ran: bool) -> IoRun {
        let settings = Settings {
            modes: vec![Mode::RandRead, Mode::SeqWrite],
            read_pct: 70,
            block_sizes: vec![4096, 65536],
            queue_depths: vec![1, 4],
            duration_s: 1.0,
            warmup_s: 0.5,
            direct_requested: true,
            fsync_every: None,
            seed: 9,
        };
        let target = Target::for_test(&super::super::spec::IoPlan::for_test(PathBuf::from("/tmp/x.bench")));
        let mut points = Vec::new();
        for &mode in &settings.modes {
            for &block_size in &settings.block_sizes {
                for &queue_depth in &settings.queue_depths {
                    let iops = 10_000.0 * f64::from(queue_depth) / (block_size / 4096) as f64;
                    let pgtier = Figures {
                        ios: iops as u64,
                        iops,
                        mb_per_s: iops * block_size as f64 / 1e6,
                        latency_us: latency(100.0),
                        cpu_percent: 20.0,
                        ..Figures::default()
                    };
                    let fio = fio_ran.then(|| FioFigures {
                        ios: iops as u64,
                        iops: iops * if queue_depth == 4 { 1.25 } else { 1.0 },
                        latency_us: latency(90.0),
                        ..FioFigures::default()
                    });
                    let failed = fio_ran && mode == Mode::SeqWrite && block_size == 65536 && queue_depth == 4;
                    points.push(PointResult {
                        point: Point { mode, block_size, queue_depth },
                        read_pct: None,
                        pgtier,
                        fio: if failed { None } else { fio },
                        fio_error: failed.then(|| "fio exited with exit status: 1: boom, \"quoted\"".to_owned()),
                        fio_command: None,
                        fio_ran_first: queue_depth == 4,
                        load_average: Some(if block_size == 4096 { 1.0 } else { 3.5 }),
                    });
                }
            }
        }
        IoRun {
            tool_version: "0.1.0".to_owned(),
            started_at: "2026-11-29T10:00:00Z".to_owned(),
            machine: MachineInfo { memory_gib: 23.5, cpus: 2, ..crate::report::machine_info() },
            method: method(&settings, &target, fio_ran),
            target,
            settings,
            fio: "fio-3.33 at /usr/bin/fio: each point run again".to_owned(),
            fio_version: fio_ran.then(|| "fio-3.33".to_owned()),
            points,
        }
    }

    #[test]
    fn json_round_trip_and_csv_rows() {
        let run = sample_run(true);
        let dir = tempfile::tempdir().unwrap();
        let written = write_results(&run, dir.path()).unwrap();
        assert_eq!(written.len(), 2);
        let back: IoRun = serde_json::from_str(&std::fs::read_to_string(&written[0]).unwrap()).unwrap();
        assert_eq!(back, run);
        let text = std::fs::read_to_string(&written[1]).unwrap();
        let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
        let header = &rows[0];
        assert_eq!(rows[0].join(","), CSV_HEADER);
        assert_eq!(rows.len(), 1 + run.points.len());
        for row in &rows[1..] {
            assert_eq!(row.len(), header.len(), "{row:?}");
        }
        let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
        assert_eq!(rows[1][col("mode")], "randread");
        assert_eq!(rows[2][col("queue_depth")], "4");
        assert_eq!(rows[2][col("iops_ratio")].parse::<f64>().unwrap(), 0.8);
        assert_eq!(rows[1][col("lat_p999_us")].parse::<f64>().unwrap(), 400.0);
        let failed = &rows[8];
        assert_eq!((failed[col("fio_status")], failed[col("fio_iops")], failed[col("iops_ratio")]), ("failed", "", ""));
    }

    #[test]
    fn table_and_notes() {
        let run = sample_run(true);
        let text = table(&run).to_string();
        assert!(text.contains("fio IOPS") && text.contains("IOPS ×"), "{text}");
        assert!(text.contains("40,000") && text.contains("0.80×") && text.contains("failed"), "{text}");
        let lines = notes(&run);
        let busy = "load average above its 2 CPUs at 4 of 8 points, up to 3.5 (at randread 64k QD1)";
        assert!(lines[0].starts_with("WARNING: the machine was busy: ") && lines[0].contains(busy), "{lines:?}");
        assert!(lines[1].starts_with("IOPS pgtier/fio: median "), "{lines:?}");
        assert!(lines[1].contains("over 7 points"), "{lines:?}");
        assert!(lines[2].starts_with("3 of 7 points more than 10 % apart in IOPS: randread 4k QD4 0.80×"), "{lines:?}");
        assert!(lines.last().unwrap().starts_with("fio failed at seqwrite 64k QD4: "), "{lines:?}");

        let alone = sample_run(false);
        let text = table(&alone).to_string();
        assert!(!text.contains("fio"), "{text}");
        assert!(notes(&alone).iter().all(|n| n.starts_with("WARNING: the machine was busy")));
        assert!(csv(&alone).lines().nth(1).unwrap().contains(",not_run,"));
    }

    #[test]
    fn method_names_the_queue_depth_model_and_fsync() {
        let run = sample_run(false);
        assert!(run.method[0].contains("N threads") && run.method[0].contains("--numjobs=N"));
        assert!(run.method.iter().any(|l| l.contains("no fsync")));
        let refused = Target { direct: false, direct_refused: Some("no".to_owned()), ..run.target.clone() };
        assert!(method(&run.settings, &refused, false)[1].starts_with("BUFFERED (O_DIRECT refused"));
        assert!(!run.method.iter().any(|l| l.contains("alternately")));
        assert!(sample_run(true).method.last().unwrap().contains("fio runs the same job at each point"));
    }

    #[test]
    fn chart_is_drawn() {
        let dir = tempfile::tempdir().unwrap();
        for fio in [true, false] {
            let files = draw_chart(&sample_run(fio), dir.path()).unwrap();
            assert_eq!(files.len(), 2);
            assert!(std::fs::metadata(&files[0]).unwrap().len() > 1000);
        }
    }
}
