//! One point of the grid. Queue depth N is N threads, each with one
//! synchronous `pread`/`pwrite` outstanding at a time (fio's
//! `--ioengine=psync --numjobs=N`): the device sees up to N requests in
//! flight, and every I/O's latency runs from the moment its thread issued
//! it to the moment the call returned.
//!
//! The window: all threads start together, I/Os that complete during the
//! warm-up are not counted, those that complete inside the measure window
//! are (IOPS = completions / window); no I/O starts after the window.
//! Random modes draw block-aligned offsets uniformly over the whole span
//! (with replacement, fio's `norandommap`); sequential modes give each
//! thread its own slice of the span (fio's `offset_increment`), read or
//! written front to back and around again.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use serde::{Deserialize, Serialize};

use super::buffer::AlignedBuf;
use super::spec::{IoPlan, Mode, Point};
use super::target::{Target, advise_buffered, open_with};
use super::{IoError, io_error};
use crate::cpu;
use crate::result::LatencyUs;
use crate::stats::LatencyHistogram;

/// What pgtier measured at one point.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// I/Os completed in the measure window.
    pub ios: u64,
    pub reads: u64,
    pub writes: u64,
    /// `--fsync-every`: fsyncs issued in the window (their time is not in the latencies).
    pub fsyncs: u64,
    pub iops: f64,
    /// 10^6 bytes per second (fio's MB/s).
    pub mb_per_s: f64,
    /// Per I/O, from its issue to its completion (HdrHistogram, 3 significant digits).
    pub latency_us: LatencyUs,
    /// This process's CPU over the measure window, % of one core (200 = two cores busy).
    pub cpu_percent: f64,
}

/// The settings every thread of a point shares.
struct Shared<'a> {
    file: &'a File,
    point: Point,
    span_bytes: u64,
    read_pct: u8,
    fsync_every: Option<u32>,
    seed: u64,
    warm_end: Instant,
    end: Instant,
    /// A thread failed: the others stop early.
    abort: AtomicBool,
    /// Threads wait for this after their last I/O, so they are alive when
    /// the coordinator reads their CPU time at the end of the window.
    release: AtomicBool,
    /// I/Os completed so far per thread (warm-up included), for the progress line.
    live: Vec<LiveCount>,
}

/// One thread's counter on a cache line of its own.
#[repr(align(64))]
#[derive(Default)]
struct LiveCount(AtomicU64);

#[derive(Default)]
struct Tally {
    latency: LatencyHistogram,
    reads: u64,
    writes: u64,
    fsyncs: u64,
    bytes: u64,
}

/// Runs one point; `tick(completed I/Os so far, elapsed)` is called about
/// every 100 ms for a progress line.
pub fn measure_point(
    target: &Target,
    plan: &IoPlan,
    point: Point,
    tick: &mut dyn FnMut(u64, Duration),
) -> Result<Figures, IoError> {
    let label = point.label();
    let file = open_with(&target.path, point.mode.writes(), target.direct)
        .map_err(|e| io_error(format!("{label}: opening {}", target.path.display()), e))?;
    if !target.direct {
        advise_buffered(&file, point.mode).map_err(|e| io_error(format!("{label}: posix_fadvise"), e))?;
    }
    let threads = point.queue_depth as usize;
    let started = Instant::now();
    let warm_end = started + plan.warmup;
    let shared = Shared {
        file: &file,
        point,
        span_bytes: target.size_bytes,
        read_pct: plan.read_pct,
        fsync_every: plan.fsync_every,
        seed: plan.seed ^ point.block_size.rotate_left(17) ^ u64::from(point.queue_depth).rotate_left(41),
        warm_end,
        end: warm_end + plan.duration,
        abort: AtomicBool::new(false),
        release: AtomicBool::new(false),
        live: (0..threads).map(|_| LiveCount::default()).collect(),
    };
    let (tallies, cpu_percent) = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads);
        let mut spawn_error = None;
        for index in 0..threads {
            let shared = &shared;
            // Named like the driver's workers, so `cpu` counts them as the application's threads.
            let spawned = std::thread::Builder::new()
                .name(format!("bench-client-{index}"))
                .spawn_scoped(scope, move || worker(shared, index));
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    spawn_error = Some(io_error(format!("{label}: starting thread {}", index + 1), e));
                    shared.abort.store(true, Ordering::Relaxed);
                    break;
                }
            }
        }
        let cpu_percent = coordinate(&shared, started, tick);
        shared.release.store(true, Ordering::Release);
        let joined: Vec<Result<Tally, IoError>> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(IoError::Invalid(format!("{label}: an I/O thread panicked")))))
            .collect();
        match spawn_error {
            Some(e) => Err(e),
            None => joined.into_iter().collect::<Result<Vec<Tally>, IoError>>().map(|t| (t, cpu_percent)),
        }
    })?;
    Ok(figures(&tallies, plan.duration, cpu_percent))
}

/// Waits out the window, reading this process's CPU at its start and end;
/// returns the CPU in % of one core.
fn coordinate(shared: &Shared<'_>, started: Instant, tick: &mut dyn FnMut(u64, Duration)) -> f64 {
    let mut before: Option<(Instant, Vec<cpu::ThreadTicks>)> = None;
    loop {
        let now = Instant::now();
        if before.is_none() && now >= shared.warm_end {
            before = Some((now, cpu::threads()));
        }
        if now >= shared.end || shared.abort.load(Ordering::Relaxed) {
            break;
        }
        tick(shared.live.iter().map(|c| c.0.load(Ordering::Relaxed)).sum(), now - started);
        let next = if before.is_none() { shared.warm_end } else { shared.end };
        std::thread::sleep(next.saturating_duration_since(now).min(Duration::from_millis(100)));
    }
    let Some((from, before)) = before else { return 0.0 };
    let window_s = from.elapsed().as_secs_f64();
    cpu::shares(&before, &cpu::threads(), window_s).iter().map(|s| s.percent).sum()
}

fn worker(shared: &Shared<'_>, index: usize) -> Result<Tally, IoError> {
    let result = run_ios(shared, index);
    if result.is_err() {
        shared.abort.store(true, Ordering::Relaxed);
    }
    while !shared.release.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(1));
    }
    result
}

fn run_ios(shared: &Shared<'_>, index: usize) -> Result<Tally, IoError> {
    let point = shared.point;
    let bs = point.block_size;
    let mut rng = SmallRng::seed_from_u64(shared.seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut buf = AlignedBuf::new(bs as usize).map_err(|e| io_error(format!("{}: buffer", point.label()), e))?;
    // Writes carry random, never all-zero data, as the fill did.
    rng.fill_bytes(buf.as_mut_slice());
    buf.as_mut_slice()[0] |= 1;
    let mut offsets = Offsets::new(point, shared.span_bytes, index);
    let mut tally = Tally::default();
    let mut writes_since_sync = 0u32;
    let mut completed = 0u64;
    loop {
        let read = match point.mode {
            Mode::RandRead | Mode::SeqRead => true,
            Mode::RandWrite | Mode::SeqWrite => false,
            Mode::Mixed => rng.random_range(0..100u8) < shared.read_pct,
        };
        let offset = offsets.next(&mut rng);
        let issued = Instant::now();
        if issued >= shared.end || shared.abort.load(Ordering::Relaxed) {
            return Ok(tally);
        }
        let done = if read {
            shared.file.read_exact_at(buf.as_mut_slice(), offset)
        } else {
            shared.file.write_all_at(buf.as_slice(), offset)
        };
        let completed_at = Instant::now();
        done.map_err(|e| {
            let verb = if read { "reading" } else { "writing" };
            io_error(format!("{}: {verb} {bs} bytes at offset {offset}", point.label()), e)
        })?;
        let counted = completed_at >= shared.warm_end && completed_at < shared.end;
        if counted {
            tally.latency.record(completed_at - issued);
            tally.bytes += bs;
            if read {
                tally.reads += 1;
            } else {
                tally.writes += 1;
            }
        }
        if !read && let Some(every) = shared.fsync_every {
            writes_since_sync += 1;
            if writes_since_sync >= every {
                writes_since_sync = 0;
                shared.file.sync_all().map_err(|e| io_error(format!("{}: fsync", point.label()), e))?;
                tally.fsyncs += u64::from(counted);
            }
        }
        completed += 1;
        shared.live[index].0.store(completed, Ordering::Relaxed);
    }
}

/// Block-aligned offsets of one thread.
struct Offsets {
    block_size: u64,
    random: bool,
    /// Random: blocks in the span. Sequential: blocks in this thread's slice.
    blocks: u64,
    /// Sequential: the slice's first block and the next one to use.
    first: u64,
    next: u64,
}

impl Offsets {
    fn new(point: Point, span_bytes: u64, thread: usize) -> Offsets {
        let block_size = point.block_size;
        let span_blocks = (span_bytes / block_size).max(1);
        if point.mode.is_random() {
            return Offsets { block_size, random: true, blocks: span_blocks, first: 0, next: 0 };
        }
        let (first, blocks) = slice(span_blocks, u64::from(point.queue_depth), thread as u64);
        Offsets { block_size, random: false, blocks, first, next: 0 }
    }

    fn next(&mut self, rng: &mut SmallRng) -> u64 {
        let block = if self.random {
            rng.random_range(0..self.blocks)
        } else {
            let b = self.first + self.next;
            self.next = (self.next + 1) % self.blocks;
            b
        };
        block * self.block_size
    }
}

/// Thread `thread` of `threads`' slice of `span_blocks` blocks: (first
/// block, blocks). Equal slices side by side, the remainder unused (as
/// fio's `size` + `offset_increment`); one block each, shared round the
/// span, when there are more threads than blocks.
pub fn slice(span_blocks: u64, threads: u64, thread: u64) -> (u64, u64) {
    let per = (span_blocks / threads.max(1)).max(1);
    ((thread * per) % span_blocks.max(1), per)
}

fn figures(tallies: &[Tally], window: Duration, cpu_percent: f64) -> Figures {
    let mut latency = LatencyHistogram::new();
    let (mut reads, mut writes, mut fsyncs, mut bytes) = (0, 0, 0, 0);
    for t in tallies {
        latency.merge(&t.latency);
        reads += t.reads;
        writes += t.writes;
        fsyncs += t.fsyncs;
        bytes += t.bytes;
    }
    let seconds = window.as_secs_f64();
    Figures {
        ios: reads + writes,
        reads,
        writes,
        fsyncs,
        iops: (reads + writes) as f64 / seconds,
        mb_per_s: bytes as f64 / seconds / 1e6,
        latency_us: latency.summary(),
        cpu_percent,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::target::prepare;
    use super::*;

    #[test]
    fn sequential_slices_cover_the_span_side_by_side() {
        assert_eq!(slice(100, 4, 0), (0, 25));
        assert_eq!(slice(100, 4, 3), (75, 25));
        assert_eq!(slice(10, 3, 2), (6, 3));
        // More threads than blocks: one block each, round the span.
        assert_eq!(slice(4, 8, 5), (1, 1));
        let point = Point { mode: Mode::SeqRead, block_size: 4096, queue_depth: 2 };
        let mut offsets = Offsets::new(point, 4 * 4096, 1);
        let mut rng = SmallRng::seed_from_u64(1);
        let seen: Vec<u64> = (0..5).map(|_| offsets.next(&mut rng)).collect();
        assert_eq!(seen, vec![2 * 4096, 3 * 4096, 2 * 4096, 3 * 4096, 2 * 4096]);
    }

    #[test]
    fn random_offsets_are_aligned_and_inside_the_span() {
        let point = Point { mode: Mode::Mixed, block_size: 16384, queue_depth: 1 };
        let span = 1 << 20;
        let mut offsets = Offsets::new(point, span, 0);
        let mut rng = SmallRng::seed_from_u64(2);
        let all: Vec<u64> = (0..2000).map(|_| offsets.next(&mut rng)).collect();
        assert!(all.iter().all(|o| o % 16384 == 0 && o + 16384 <= span));
        // 64 blocks, 2000 draws: every block drawn (uniform, not a fixed few).
        let distinct: std::collections::BTreeSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), 64);
    }

    #[test]
    fn figures_merge_threads_and_give_percentiles_of_every_io() {
        // Thread 0: 1..=900 µs; thread 1: 901..=1000 µs. Merged: 1..=1000.
        let mut a = Tally { reads: 900, bytes: 900 * 4096, ..Tally::default() };
        let mut b = Tally { writes: 100, fsyncs: 2, bytes: 100 * 4096, ..Tally::default() };
        for us in 1..=900 {
            a.latency.record(Duration::from_micros(us));
        }
        for us in 901..=1000 {
            b.latency.record(Duration::from_micros(us));
        }
        let f = figures(&[a, b], Duration::from_secs(2), 37.5);
        assert_eq!((f.ios, f.reads, f.writes, f.fsyncs), (1000, 900, 100, 2));
        assert_eq!(f.iops, 500.0);
        assert!((f.mb_per_s - 1000.0 * 4096.0 / 2.0 / 1e6).abs() < 1e-9);
        let l = &f.latency_us;
        // HdrHistogram with 3 significant digits: within 0.1 %.
        for (got, want) in [(l.p50, 500.0), (l.p90, 900.0), (l.p99, 990.0), (l.p999, 999.0), (l.max, 1000.0)] {
            assert!((got - want).abs() <= want * 0.001 + 0.001, "{got} vs {want}: {l:?}");
        }
        assert_eq!(l.min, 1.0);
        assert_eq!(f.cpu_percent, 37.5);
    }

    #[test]
    fn a_short_point_counts_ios_inside_its_window() {
        let dir = tempfile::tempdir().unwrap();
        let plan = IoPlan {
            size_bytes: 8 << 20,
            modes: vec![Mode::Mixed],
            read_pct: 50,
            queue_depths: vec![2],
            duration: Duration::from_millis(300),
            warmup: Duration::from_millis(100),
            fsync_every: Some(8),
            ..IoPlan::for_test(dir.path().join("m.bench"))
        };
        let target = prepare(&plan, &mut |_, _| {}).unwrap();
        let mut ticks = 0;
        let point = plan.points()[0];
        let f = measure_point(&target, &plan, point, &mut |_, _| ticks += 1).unwrap();
        assert!(f.ios > 0 && f.reads > 0 && f.writes > 0, "{f:?}");
        assert_eq!(f.ios, f.reads + f.writes);
        assert!(f.fsyncs > 0, "{f:?}");
        assert!((f.iops - f.ios as f64 / 0.3).abs() < 1e-6);
        assert!((f.mb_per_s - f.ios as f64 * 4096.0 / 0.3 / 1e6).abs() < 1e-6);
        let l = &f.latency_us;
        assert!(l.min > 0.0 && l.min <= l.p50 && l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.p999);
        assert!(l.p999 <= l.max, "{l:?}");
        assert!(f.cpu_percent.is_finite() && f.cpu_percent >= 0.0, "{f:?}");
        assert!(ticks > 0);
    }
}
