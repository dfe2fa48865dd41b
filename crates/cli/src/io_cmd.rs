//! `pgtier bench io`: study 001's ORION-style I/O calibration of the device
//! that will hold the flash tier file, with fio's figures for the same jobs
//! beside pgtier's. The measuring is `pgtier_bench::io`; this file turns
//! flags into a plan, shows progress and prints.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use pgtier_bench::io::fio::{self, FioStatus};
use pgtier_bench::io::output::{self, IoRun, PointResult};
use pgtier_bench::io::spec::{self, FioUse, IoPlan, Mode, format_bytes};
use pgtier_bench::io::sweep::{self, Phase};
use pgtier_bench::io::target;

use crate::bench_cmd::seconds;

const HELP: &str = "\
What it measures: for every point of the grid (mode x block size x queue depth) the I/O
per second, MB/s (10^6 bytes), latency per I/O from its issue to its completion (p50, p90,
p99, p99.9, max; HdrHistogram) and this process's CPU, over --duration seconds after
--warmup seconds that are not counted.

Queue depth: QD N = N threads, each with one synchronous pread/pwrite outstanding, so the
device sees up to N requests at once. This is fio's --ioengine=psync --numjobs=N.

The file: --file is created on the device the flash tier will use, preallocated, filled
once with random non-zero data (so reads hit real blocks) and kept: later runs with the
same --size reuse it. I/O is O_DIRECT with 4096-aligned buffers and block-aligned offsets
(uniform over the file for random modes; one slice per thread for sequential ones). Where
the file system refuses O_DIRECT, the run says so and measures buffered I/O with
posix_fadvise instead. Writes are not fsynced unless --fsync-every N is given.

fio: when fio is on PATH (apt-get install fio), each point also runs as the equivalent fio
job (same file, --direct, --rw, --bs, --ioengine=psync, --numjobs=QD, --group_reporting,
--time_based --runtime --ramp_time, --output-format=json) and the table shows fio's IOPS
and latency percentiles beside pgtier's, with the ratio pgtier/fio. Each fio command is
kept in results.json to rerun by hand.

Output: the table, and in --out: results.json, results.csv and iops-by-block-size.png/.svg.

Examples:
  pgtier bench io --file /mnt/flash/pgtier-io.bench            # the full grid, ~25 min with fio
  pgtier bench io --quick --file /tmp/io.bench                   # 64 MiB, 8 points, ~30 s
  pgtier bench io --mode randread --block-sizes 4k --queue-depths 1,4,16,32,64";

#[derive(clap::Args)]
#[command(after_long_help = HELP)]
pub struct IoArgs {
    /// File to measure, on the device the flash tier will use (created and filled once, then reused), or a block device
    #[arg(long, value_name = "PATH", default_value = "./pgtier-io.bench")]
    file: PathBuf,
    /// File size: the span random offsets cover [default: 4g; --quick: 64m]
    #[arg(long, value_name = "SIZE", value_parser = spec::parse_size)]
    size: Option<u64>,
    /// Modes, comma-separated: randread, randwrite, seqread, seqwrite, mixed [default: all; --quick: randread,randwrite]
    #[arg(long = "mode", value_name = "LIST", value_delimiter = ',', value_parser = Mode::parse)]
    modes: Vec<Mode>,
    /// Reads in % of the I/Os of the mixed mode
    #[arg(long, value_name = "PCT", default_value_t = 70, value_parser = clap::value_parser!(u8).range(0..=100))]
    read_pct: u8,
    /// Block sizes, powers of two from 512 to 16m [default: 4k,8k,16k,64k,256k,1m; --quick: 4k,64k]
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = spec::parse_block_size)]
    block_sizes: Vec<u64>,
    /// Queue depths = threads with one synchronous I/O each, 1 to 1024 [default: 1,4,16,32; --quick: 1,4]
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = spec::parse_queue_depth)]
    queue_depths: Vec<u32>,
    /// Measured seconds per point [default: 5; --quick: 1]
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    duration: Option<f64>,
    /// Seconds run before each point's window, not counted [default: 1; --quick: 0.5]
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    warmup: Option<f64>,
    /// Buffered I/O (page cache) instead of O_DIRECT
    #[arg(long)]
    buffered: bool,
    /// Each thread fsyncs after every N of its writes [default: never]
    #[arg(long, value_name = "N")]
    fsync_every: Option<u32>,
    /// Do not run fio beside pgtier
    #[arg(long)]
    no_fio: bool,
    /// Short run for CI and a first look: 64m file, randread and randwrite, 4k and 64k, QD 1 and 4, 1 s per point
    #[arg(long)]
    quick: bool,
    /// Directory for results.json, results.csv and the chart [default: ./bench-io-<UTC time>]
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Allow write modes on a block device (overwrites what it holds)
    #[arg(long)]
    destroy_device_data: bool,
    /// Seed of the random offsets [default: a fresh one]
    #[arg(long)]
    seed: Option<u64>,
}

/// The grid's defaults: the full one, or `--quick`'s.
struct Preset {
    size: u64,
    modes: &'static [Mode],
    block_sizes: &'static [u64],
    queue_depths: &'static [u32],
    duration_s: f64,
    warmup_s: f64,
}

const FULL: Preset = Preset {
    size: 4 << 30,
    modes: &Mode::ALL,
    block_sizes: &[4 << 10, 8 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20],
    queue_depths: &[1, 4, 16, 32],
    duration_s: 5.0,
    warmup_s: 1.0,
};

const QUICK: Preset = Preset {
    size: 64 << 20,
    modes: &[Mode::RandRead, Mode::RandWrite],
    block_sizes: &[4 << 10, 64 << 10],
    queue_depths: &[1, 4],
    duration_s: 1.0,
    warmup_s: 0.5,
};

/// A list flag's entries in order, each once; the preset's when not given.
fn or_preset<T: Copy + PartialEq>(given: &[T], preset: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for &x in if given.is_empty() { preset } else { given } {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

fn plan(args: &IoArgs) -> anyhow::Result<IoPlan> {
    let preset = if args.quick { &QUICK } else { &FULL };
    let plan = IoPlan {
        file: args.file.clone(),
        size_bytes: args.size.unwrap_or(preset.size),
        modes: or_preset(&args.modes, preset.modes),
        read_pct: args.read_pct,
        block_sizes: or_preset(&args.block_sizes, preset.block_sizes),
        queue_depths: or_preset(&args.queue_depths, preset.queue_depths),
        duration: seconds("duration", args.duration.unwrap_or(preset.duration_s), false)?,
        warmup: seconds("warmup", args.warmup.unwrap_or(preset.warmup_s), true)?,
        direct: !args.buffered,
        fsync_every: args.fsync_every,
        fio: if args.no_fio { FioUse::Skip } else { FioUse::IfInstalled },
        device_writes: args.destroy_device_data,
        seed: args.seed.unwrap_or_else(pgtier_bench::driver::fresh_seed),
    };
    plan.check()?;
    Ok(plan)
}

pub fn run(args: IoArgs) -> anyhow::Result<()> {
    let plan = plan(&args)?;
    let fio = match plan.fio {
        FioUse::Skip => FioStatus::Skipped,
        FioUse::IfInstalled => fio::detect(),
    };
    println!("I/O calibration (study 001's ORION tests) — pgtier bench io");
    let target = prepare(&plan)?;
    if let Some(why) = &target.direct_refused {
        eprintln!("pgtier: WARNING: {why}");
    }
    let mut run = sweep::new_run(&plan, target, &fio);
    let out_dir = args.out.clone().unwrap_or_else(default_out_dir);
    let points = plan.points();
    print_header(&run, &plan, points.len());

    let phases = if run.fio_ran() { 2 } else { 1 };
    let per_phase_ms = (plan.warmup + plan.duration).as_millis().max(1) as u64;
    let bar = ProgressBar::new(points.len() as u64 * phases * per_phase_ms);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {elapsed_precise}/~{duration_precise} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    for (i, &point) in points.iter().enumerate() {
        let title = format!("[{}/{}] {}", i + 1, points.len(), point.label());
        let base_ms = i as u64 * phases * per_phase_ms;
        // Alternate which tool runs first, so neither always follows the other's writes.
        let fio_first = i % 2 == 1;
        let (pgtier_at, fio_at) = if fio_first { (per_phase_ms, 0) } else { (0, per_phase_ms) };
        let result = sweep::run_point(&plan, &run.target, &fio, point, fio_first, &mut |phase, elapsed, ios| {
            let (offset, what) = match phase {
                Phase::Pgtier => (pgtier_at, "pgtier"),
                Phase::Fio => (fio_at, "fio"),
            };
            bar.set_position(base_ms + offset + (elapsed.as_millis() as u64).min(per_phase_ms));
            let rate = match ios {
                Some(n) if !elapsed.is_zero() => format!(" {:.0} I/O/s", n as f64 / elapsed.as_secs_f64()),
                _ => String::new(),
            };
            bar.set_message(format!("{title} {what}{rate}"));
        });
        let result = result.with_context(|| point.label())?;
        bar.suspend(|| println!("{}", point_line(&title, &result)));
        run.points.push(result);
        // After every point, so an interrupted sweep still leaves its results.
        output::write_results(&run, &out_dir)?;
    }
    bar.finish_and_clear();

    println!("\n{}", output::table(&run));
    for note in output::notes(&run) {
        println!("  {note}");
    }
    if let Some(why) = &run.target.direct_refused {
        // Again under the table: a long sweep has scrolled the first warning away.
        println!("  WARNING: buffered I/O, not O_DIRECT: {why}");
    }
    let mut files = output::write_results(&run, &out_dir)?;
    files.extend(output::draw_chart(&run, &out_dir).context("drawing the chart")?);
    for f in files {
        println!("wrote {}", f.display());
    }
    if run.target.kind == target::TargetKind::File {
        println!(
            "kept {} ({}) for the next run with the same --size; remove it when done",
            run.target.path.display(),
            format_bytes(run.target.size_bytes)
        );
    }
    Ok(())
}

/// `pgtier demo flash`'s device table: random 4k reads and writes at queue
/// depths 1 and 8 on `file` (64 MB, kept), fio beside pgtier when installed;
/// results into `out`. Returns the table as text and its notes.
pub fn device_table(file: &std::path::Path, out: &std::path::Path) -> anyhow::Result<(String, Vec<String>)> {
    let plan = IoPlan {
        file: file.to_path_buf(),
        size_bytes: QUICK.size,
        modes: vec![Mode::RandRead, Mode::RandWrite],
        read_pct: 70,
        block_sizes: vec![4 << 10],
        queue_depths: vec![1, 8],
        duration: Duration::from_secs(2),
        warmup: Duration::from_millis(500),
        direct: true,
        fsync_every: None,
        fio: FioUse::IfInstalled,
        device_writes: false,
        seed: pgtier_bench::driver::fresh_seed(),
    };
    plan.check()?;
    let fio = fio::detect();
    let mut run = sweep::new_run(&plan, prepare(&plan)?, &fio);
    for (i, &point) in plan.points().iter().enumerate() {
        let result = sweep::run_point(&plan, &run.target, &fio, point, i % 2 == 1, &mut |_, _, _| {});
        run.points.push(result.with_context(|| point.label())?);
    }
    output::write_results(&run, out)?;
    let mut notes = output::notes(&run);
    if let Some(why) = &run.target.direct_refused {
        notes.push(format!("buffered I/O, not O_DIRECT: {why}"));
    }
    notes.push(format!("device: {}; fio: {}", run.target.device, run.fio));
    Ok((output::table(&run).to_string(), notes))
}

/// The target, with a progress bar while a new file is filled.
fn prepare(plan: &IoPlan) -> anyhow::Result<target::Target> {
    let bar = ProgressBar::new(plan.size_bytes);
    bar.set_style(
        ProgressStyle::with_template("filling {bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let target = target::prepare(plan, &mut |done, _| bar.set_position(done));
    bar.finish_and_clear();
    Ok(target?)
}

fn default_out_dir() -> PathBuf {
    let stamp: String = pgtier_bench::report::now_rfc3339().chars().filter(|c| !matches!(c, '-' | ':')).collect();
    PathBuf::from(format!("bench-io-{stamp}"))
}

fn print_header(run: &IoRun, plan: &IoPlan, points: usize) {
    let t = &run.target;
    let s = &run.settings;
    println!("  target        {} ({}; {})", t.path.display(), format_bytes(t.size_bytes), t.prepared);
    println!("  device        {}", t.device);
    for (i, line) in run.method.iter().enumerate() {
        println!("  {:<13} {line}", if i == 0 { "method" } else { "" });
    }
    let list = |v: Vec<String>| v.join(",");
    println!(
        "  grid          modes {}; block sizes {}; queue depths {}: {points} point{}",
        list(s.modes.iter().map(|m| m.name().to_owned()).collect()),
        list(s.block_sizes.iter().map(|&b| format_bytes(b)).collect()),
        list(s.queue_depths.iter().map(u32::to_string).collect()),
        if points == 1 { "" } else { "s" }
    );
    let per_point = (plan.warmup + plan.duration).as_secs_f64() * if run.fio_ran() { 2.0 } else { 1.0 };
    println!(
        "  time          about {} ({:.1} s per point{})",
        duration_text(Duration::from_secs_f64(per_point * points as f64)),
        per_point,
        if run.fio_ran() { ", pgtier and fio" } else { "" }
    );
    println!("  fio           {}", run.fio);
    println!("  seed          {} (--seed {} draws the same offsets again)", s.seed, s.seed);
}

fn duration_text(d: Duration) -> String {
    let s = d.as_secs();
    if s < 120 { format!("{s} s") } else { format!("{} min", s.div_ceil(60)) }
}

/// One line per finished point while the sweep runs.
fn point_line(title: &str, r: &PointResult) -> String {
    let f = &r.pgtier;
    let mut line = format!(
        "{title:<28} {:>9.0} IOPS {:>8.1} MB/s  p50 {:>7.1} µs  p99 {:>8.1} µs",
        f.iops, f.mb_per_s, f.latency_us.p50, f.latency_us.p99
    );
    match (&r.fio, &r.fio_error, r.iops_ratio()) {
        (Some(fio), _, Some(ratio)) => line.push_str(&format!(
            "  | fio {:>9.0} IOPS  p50 {:>7.1} µs  p99 {:>8.1} µs  ({ratio:.2}×)",
            fio.iops, fio.latency_us.p50, fio.latency_us.p99
        )),
        (_, Some(e), _) => line.push_str(&format!("  | fio failed: {e}")),
        _ => {}
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_keep_order_and_drop_repeats() {
        assert_eq!(or_preset(&[4, 1, 4], &[9]), vec![4, 1]);
        assert_eq!(or_preset::<u32>(&[], &[1, 4]), vec![1, 4]);
    }
}
