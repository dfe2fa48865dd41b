//! The log: append buffer, group-commit writer thread, segment preallocator.
//!
//! Locks, in the only order they may nest: `create_lock` (serialises segment
//! creation between writer and preallocator) → `state` (append buffer,
//! positions, flags) → `segments` (the map of segment files). `segments` is
//! held only for map lookups and updates, never across I/O.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::format::{self, PAD_MARKER, RECORD_ALIGN_BYTES, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES};
use crate::fs::{self, DirLock, FileSystem, StdFileSystem};
use crate::reader::WalReader;
use crate::recovery;
use crate::segment::{self, Segment, SegmentMap};
use crate::waiters::{WaitOutcome, Waiters};
use crate::{Lsn, WalConfig, WalError, WalStats};

/// Bound on concurrently waiting committers and tailing readers.
const WAITERS_MAX: usize = 1 << 16;
/// Removed segments kept for reuse as future segments (PostgreSQL recycles
/// WAL segments the same way). Two cover a checkpoint that frees one segment
/// while the next is being created.
const SPARES_MAX: usize = 2;

/// Extra knobs for [`Wal::open_with`]; `Default` is what [`Wal::open`] uses.
#[derive(Clone, Debug)]
pub struct WalOpenOptions {
    /// File-system implementation; tests pass one that fails on demand.
    pub fs: Arc<dyn FileSystem>,
    /// Bound on the append buffer. `append` blocks (backpressure) while the
    /// buffer is this full and the writer is still busy. A record larger than
    /// the bound is accepted into an empty buffer on its own, so memory stays
    /// below `2 * (buffer_bytes_max + record_bytes_max)` (two buffers).
    pub buffer_bytes_max: usize,
}

impl Default for WalOpenOptions {
    fn default() -> WalOpenOptions {
        WalOpenOptions { fs: Arc::new(StdFileSystem), buffer_bytes_max: 4 << 20 }
    }
}

/// A contiguous piece of the append buffer that lands in one segment.
#[derive(Clone, Copy, Debug)]
struct Run {
    lsn: u64,
    buf_offset: usize,
    segment_start_lsn: u64,
}

struct State {
    /// Records appended but not yet handed to the writer, starting at
    /// `buf_start_lsn`, split into `runs` at segment boundaries.
    buf: Vec<u8>,
    runs: Vec<Run>,
    buf_start_lsn: u64,
    /// When the oldest byte in `buf` was appended (async flush deadline).
    buf_since: Option<Instant>,
    end_lsn: u64,
    segment_start_lsn: u64,
    segment_end_lsn: u64,
    appenders_blocked: u32,
    /// Start LSN of the last segment that should exist ahead of appends.
    prealloc_wanted_start_lsn: u64,
    poison_reason: Option<String>,
    shutdown: bool,
}

#[derive(Default)]
struct Counters {
    records_appended: AtomicU64,
    bytes_appended: AtomicU64,
    fsyncs: AtomicU64,
    flushes: AtomicU64,
    segments_created: AtomicU64,
    segments_recycled: AtomicU64,
    segments_removed: AtomicU64,
    backpressure_waits: AtomicU64,
    segment_waits: AtomicU64,
}

pub(crate) struct Shared {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    config: WalConfig,
    buffer_bytes_max: usize,
    state: Mutex<State>,
    /// Writer waits here for work.
    writer_cv: Condvar,
    /// Committers and tailing readers waiting for the durable end to move.
    waiters: Waiters,
    /// Appenders blocked by a full buffer wait here.
    space_cv: Condvar,
    prealloc_cv: Condvar,
    /// Everything before this is on stable storage. Written only by the
    /// writer thread, after fdatasync returned.
    durable_end_lsn: AtomicU64,
    /// Set (with `State::poison_reason`) when a write or fsync fails.
    poisoned: AtomicBool,
    /// One past the highest LSN a committer waits for: the writer must flush
    /// while this exceeds `State::buf_start_lsn`. Atomic so `wait_durable`
    /// need not take the append mutex (64 committers contend for it).
    sync_wanted_end_lsn: AtomicU64,
    /// The writer is (about to be) asleep on `writer_cv`. With
    /// `sync_wanted_end_lsn` this is a Dekker pair (both SeqCst): a committer
    /// raises the wanted LSN then reads `writer_idle`; the writer sets
    /// `writer_idle` then re-reads the wanted LSN; one of them sees the other.
    writer_idle: AtomicBool,
    end_lsn: AtomicU64,
    stopping: AtomicBool,
    pub(crate) segments: Mutex<SegmentMap>,
    create_lock: Mutex<()>,
    /// Spare segment files (paths), at most `SPARES_MAX`.
    spares: Mutex<Vec<PathBuf>>,
    counters: Counters,
    recovery: RecoveryReport,
    _dir_lock: Box<dyn DirLock>,
}

#[derive(Clone, Debug, Default)]
struct RecoveryReport {
    records: u64,
    cut: Option<(Lsn, String)>,
    segments_discarded: u64,
}

impl Shared {
    pub(crate) fn durable_end(&self) -> u64 {
        self.durable_end_lsn.load(Ordering::Acquire)
    }
}

/// The write-ahead log. `Send + Sync`: share it with `Arc<Wal>`.
pub struct Wal {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

fn validate_config(config: &WalConfig, options: &WalOpenOptions) -> Result<(), WalError> {
    let invalid = |what: String| Err(WalError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, what)));
    if config.segment_bytes < 4096 || !config.segment_bytes.is_multiple_of(4096) {
        return invalid(format!("segment_bytes {} must be a multiple of 4096", config.segment_bytes));
    }
    let record_bytes_max = config.record_bytes_max as u64;
    if record_bytes_max > format::RECORD_BYTES_FORMAT_MAX
        || format::framed_bytes(record_bytes_max) > config.segment_bytes - SEGMENT_HEADER_BYTES
    {
        return invalid(format!(
            "record_bytes_max {} does not fit in a segment of {} bytes",
            config.record_bytes_max, config.segment_bytes
        ));
    }
    if options.buffer_bytes_max < 4096 {
        return invalid(format!("buffer_bytes_max {} is below 4096", options.buffer_bytes_max));
    }
    Ok(())
}

impl Wal {
    /// Opens or creates the log in `dir`, recovering to the last whole record.
    pub fn open(dir: &Path, config: WalConfig) -> Result<Wal, WalError> {
        Wal::open_with(dir, config, WalOpenOptions::default())
    }

    /// [`Wal::open`] with a chosen file system and buffer bound.
    pub fn open_with(dir: &Path, config: WalConfig, options: WalOpenOptions) -> Result<Wal, WalError> {
        validate_config(&config, &options)?;
        let fs = Arc::clone(&options.fs);
        fs.create_dir_all(dir)?;
        let dir_lock = fs.lock_dir(dir)?;
        let mut rec = recovery::recover(fs.as_ref(), dir, config.segment_bytes)?;
        let spares = keep_spares(fs.as_ref(), dir, std::mem::take(&mut rec.spares), config.segment_bytes)?;
        let current = rec.segments.by_start.get(&rec.current_start_lsn).map(|s| (s.start_lsn, s.end_lsn()));
        let Some((segment_start_lsn, segment_end_lsn)) = current else {
            unreachable!("recovery returns its current segment in the map");
        };
        assert!(segment_start_lsn + SEGMENT_HEADER_BYTES <= rec.end_lsn && rec.end_lsn <= segment_end_lsn);
        let state = State {
            buf: Vec::with_capacity(options.buffer_bytes_max),
            runs: Vec::new(),
            buf_start_lsn: rec.end_lsn,
            buf_since: None,
            end_lsn: rec.end_lsn,
            segment_start_lsn,
            segment_end_lsn,
            appenders_blocked: 0,
            prealloc_wanted_start_lsn: segment_end_lsn,
            poison_reason: None,
            shutdown: false,
        };
        let counters = Counters::default();
        counters.segments_created.store(rec.segments_created, Ordering::Relaxed);
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            fs,
            buffer_bytes_max: options.buffer_bytes_max,
            state: Mutex::new(state),
            writer_cv: Condvar::new(),
            waiters: Waiters::new(WAITERS_MAX, config.commit_yields),
            space_cv: Condvar::new(),
            prealloc_cv: Condvar::new(),
            durable_end_lsn: AtomicU64::new(rec.end_lsn),
            poisoned: AtomicBool::new(false),
            sync_wanted_end_lsn: AtomicU64::new(0),
            writer_idle: AtomicBool::new(false),
            end_lsn: AtomicU64::new(rec.end_lsn),
            stopping: AtomicBool::new(false),
            segments: Mutex::new(rec.segments),
            create_lock: Mutex::new(()),
            spares: Mutex::new(spares),
            counters,
            recovery: RecoveryReport { records: rec.records, cut: rec.cut, segments_discarded: rec.segments_discarded },
            config,
            _dir_lock: dir_lock,
        });
        let writer = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new().name("pgtier-wal-writer".into()).spawn(move || writer_main(&shared))?
        };
        let prealloc = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new().name("pgtier-wal-prealloc".into()).spawn(move || prealloc_main(&shared))
        };
        let wal = Wal { shared, threads: Mutex::new(vec![writer]) };
        // On spawn failure `wal` drops here and stops the writer cleanly.
        wal.threads.lock().push(prealloc?);
        Ok(wal)
    }

    /// Appends one record; not yet durable. Blocks while the append buffer
    /// is full (backpressure).
    pub fn append(&self, payload: &[u8]) -> Result<Lsn, WalError> {
        let shared = &*self.shared;
        if payload.len() > shared.config.record_bytes_max {
            return Err(WalError::RecordTooLarge {
                size_bytes: payload.len(),
                limit_bytes: shared.config.record_bytes_max,
            });
        }
        let len = u32::try_from(payload.len()).map_err(|_| WalError::RecordTooLarge {
            size_bytes: payload.len(),
            limit_bytes: shared.config.record_bytes_max,
        })?;
        assert_ne!(len, PAD_MARKER);
        let payload_crc = format::payload_crc(payload);
        let framed_bytes = format::framed_bytes(u64::from(len));
        // Room for this record plus a pad record if it rolls the segment.
        let need_bytes = (framed_bytes + RECORD_HEADER_BYTES) as usize;
        let mut st = shared.state.lock();
        loop {
            if st.poison_reason.is_some() || st.shutdown {
                return Err(WalError::Poisoned);
            }
            if st.buf.is_empty() || st.buf.len() + need_bytes <= shared.buffer_bytes_max {
                break;
            }
            st.appenders_blocked += 1;
            shared.counters.backpressure_waits.fetch_add(1, Ordering::Relaxed);
            shared.writer_cv.notify_one();
            shared.space_cv.wait(&mut st);
            st.appenders_blocked -= 1;
        }
        let was_empty = st.buf.is_empty();
        if st.end_lsn + framed_bytes > st.segment_end_lsn {
            self.roll_segment(&mut st);
        }
        let lsn = st.end_lsn;
        assert!(lsn + framed_bytes <= st.segment_end_lsn, "record does not fit in a fresh segment");
        let header = format::encode_record_header(len, format::record_crc(payload_crc, lsn, len), lsn);
        let segment_start_lsn = st.segment_start_lsn;
        push_run(&mut st, lsn, segment_start_lsn);
        st.buf.extend_from_slice(&header);
        st.buf.extend_from_slice(payload);
        let pad_bytes = (framed_bytes - RECORD_HEADER_BYTES) as usize - payload.len();
        st.buf.extend_from_slice(&[0u8; RECORD_ALIGN_BYTES as usize][..pad_bytes]);
        st.end_lsn = lsn + framed_bytes;
        assert_eq!(st.end_lsn % RECORD_ALIGN_BYTES, 0);
        shared.end_lsn.store(st.end_lsn, Ordering::Release);
        if was_empty {
            st.buf_since = Some(Instant::now());
        }
        let wake_writer = was_empty || st.buf.len() >= shared.buffer_bytes_max / 2;
        drop(st);
        if wake_writer {
            shared.writer_cv.notify_one();
        }
        shared.counters.records_appended.fetch_add(1, Ordering::Relaxed);
        shared.counters.bytes_appended.fetch_add(framed_bytes, Ordering::Relaxed);
        Ok(Lsn(lsn))
    }

    /// Closes the current segment with a pad record (if a header fits) and
    /// moves the append position to the next segment's first record.
    fn roll_segment(&self, st: &mut State) {
        let remaining_bytes = st.segment_end_lsn - st.end_lsn;
        if remaining_bytes >= RECORD_HEADER_BYTES {
            let pad_lsn = st.end_lsn;
            let crc = format::record_crc(format::payload_crc(&[]), pad_lsn, PAD_MARKER);
            let segment_start_lsn = st.segment_start_lsn;
            push_run(st, pad_lsn, segment_start_lsn);
            st.buf.extend_from_slice(&format::encode_record_header(PAD_MARKER, crc, pad_lsn));
        }
        st.segment_start_lsn = st.segment_end_lsn;
        st.segment_end_lsn = st.segment_start_lsn + self.shared.config.segment_bytes;
        st.end_lsn = st.segment_start_lsn + SEGMENT_HEADER_BYTES;
        st.prealloc_wanted_start_lsn = st.segment_end_lsn;
        self.shared.prealloc_cv.notify_one();
    }

    /// Blocks until the record at `lsn` and all before it are durable.
    /// Returns `Poisoned` if a write or fsync failed before that happened.
    pub fn wait_durable(&self, lsn: Lsn) -> Result<(), WalError> {
        let shared = &*self.shared;
        if shared.durable_end() > lsn.0 {
            return Ok(());
        }
        assert!(lsn.0 < shared.end_lsn.load(Ordering::Acquire), "wait_durable({lsn:?}) beyond the appended end");
        let prev = shared.sync_wanted_end_lsn.fetch_max(lsn.0 + 1, Ordering::SeqCst);
        if prev <= lsn.0 && shared.writer_idle.load(Ordering::SeqCst) {
            // Taking the lock orders this notify after the writer's re-check:
            // it holds the lock from the re-check until it is waiting.
            let _st = shared.state.lock();
            shared.writer_cv.notify_one();
        }
        match shared.waiters.wait(&shared.durable_end_lsn, &shared.poisoned, lsn.0, None) {
            WaitOutcome::Durable => Ok(()),
            WaitOutcome::Poisoned => Err(WalError::Poisoned),
            WaitOutcome::TimedOut => unreachable!("no deadline"),
        }
    }

    /// Position just past the last durable record.
    pub fn durable_end(&self) -> Lsn {
        Lsn(self.shared.durable_end())
    }

    /// Position just past the last appended record.
    pub fn end(&self) -> Lsn {
        Lsn(self.shared.end_lsn.load(Ordering::Acquire))
    }

    /// Blocks until the durable end passes `after` or `timeout` elapses;
    /// returns the durable end. Lets commit-stream consumers tail the log.
    /// Does not itself force a flush: async appends become durable within
    /// `async_flush_interval`.
    pub fn wait_for_durable_beyond(&self, after: Lsn, timeout: Duration) -> Lsn {
        let shared = &*self.shared;
        let deadline = Instant::now() + timeout;
        shared.waiters.wait(&shared.durable_end_lsn, &shared.poisoned, after.0, Some(deadline));
        Lsn(shared.durable_end())
    }

    /// Reads durable records starting at the record whose LSN is `from`, or
    /// the first record after `from`. If `from` lies before the oldest
    /// segment (removed by `truncate_before`), reading starts at the oldest
    /// record still present. The reader returns `None` at the durable end
    /// and continues when polled again after more becomes durable.
    ///
    /// `Lsn(0)` is the oldest record kept. Any other position before the
    /// oldest segment is refused ([`WalError::Truncated`]): its records are
    /// gone, and a reader that began at the oldest one instead would skip
    /// them without a word.
    pub fn read_from(&self, from: Lsn) -> Result<WalReader, WalError> {
        if from.0 != 0
            && let Some(oldest) = self.shared.segments.lock().first().map(|first| first.start_lsn)
            && from.0 < oldest
        {
            return Err(WalError::Truncated { from, oldest: Lsn(oldest) });
        }
        Ok(WalReader::new(Arc::clone(&self.shared), from.0))
    }

    /// The checksum of the durable record at `lsn` (its header's CRC-32C,
    /// which covers the payload, the position and the length), or `None`
    /// when no record starts exactly there. Two logs whose records at one
    /// position have the same checksum hold the same record there.
    pub fn record_checksum_at(&self, lsn: Lsn) -> Result<Option<u32>, WalError> {
        match self.read_from(lsn)?.next().transpose()? {
            Some((at, payload)) if at == lsn => Ok(Some(record_checksum(at, &payload))),
            _ => Ok(None),
        }
    }

    /// The last durable record: its position and checksum
    /// ([`Wal::record_checksum_at`]); `None` for a log without records.
    /// Reads the newest segment holding one (up to a segment's bytes): for
    /// an occasional caller (a standby saying where its history ends).
    pub fn last_record(&self) -> Result<Option<(Lsn, u32)>, WalError> {
        let starts: Vec<u64> = self.shared.segments.lock().by_start.keys().rev().copied().collect();
        for (i, &start) in starts.iter().enumerate() {
            // Records of this segment only: the next one's start bounds it.
            let next_start = if i == 0 { u64::MAX } else { starts[i - 1] };
            let mut last = None;
            for record in self.read_from(Lsn(start))? {
                let (lsn, payload) = record?;
                if lsn.0 >= next_start {
                    break;
                }
                last = Some((lsn, payload));
            }
            if let Some((lsn, payload)) = last {
                return Ok(Some((lsn, record_checksum(lsn, &payload))));
            }
        }
        Ok(None)
    }

    /// Deletes whole segments that lie entirely before `lsn` and before the
    /// durable end. The segment being written is never deleted.
    pub fn truncate_before(&self, lsn: Lsn) -> Result<(), WalError> {
        let shared = &*self.shared;
        let limit_lsn = lsn.0.min(shared.durable_end());
        let mut removed: Vec<Arc<Segment>> = Vec::new();
        {
            let mut segments = shared.segments.lock();
            while segments.by_start.len() > 1 {
                let Some(first) = segments.first() else { break };
                if first.end_lsn() > limit_lsn {
                    break;
                }
                segments.by_start.remove(&first.start_lsn);
                removed.push(first);
            }
        }
        if removed.is_empty() {
            return Ok(());
        }
        for seg in &removed {
            assert!(seg.end_lsn() <= shared.durable_end());
            let path = segment::segment_path(&shared.dir, seg.start_lsn);
            let mut spares = shared.spares.lock();
            if spares.len() < SPARES_MAX && seg.size_bytes == shared.config.segment_bytes {
                let spare = shared.dir.join(format::segment_spare_name(seg.start_lsn));
                shared.fs.rename(&path, &spare)?;
                spares.push(spare);
            } else {
                drop(spares);
                shared.fs.remove(&path)?;
            }
            shared.counters.segments_removed.fetch_add(1, Ordering::Relaxed);
        }
        shared.fs.sync_dir(&shared.dir)?;
        Ok(())
    }

    pub fn stats(&self) -> WalStats {
        let shared = &*self.shared;
        let c = &shared.counters;
        let poisoned_reason = shared.state.lock().poison_reason.clone();
        let oldest_lsn = shared.segments.lock().first().map(|s| Lsn(s.first_record_lsn()));
        WalStats {
            records_appended: c.records_appended.load(Ordering::Relaxed),
            bytes_appended: c.bytes_appended.load(Ordering::Relaxed),
            fsyncs: c.fsyncs.load(Ordering::Relaxed),
            segments_created: c.segments_created.load(Ordering::Relaxed),
            segments_removed: c.segments_removed.load(Ordering::Relaxed),
            segments_recycled: c.segments_recycled.load(Ordering::Relaxed),
            flushes: c.flushes.load(Ordering::Relaxed),
            backpressure_waits: c.backpressure_waits.load(Ordering::Relaxed),
            segment_waits: c.segment_waits.load(Ordering::Relaxed),
            oldest_lsn: oldest_lsn.unwrap_or_default(),
            recovery_records: shared.recovery.records,
            recovery_cut_lsn: shared.recovery.cut.as_ref().map(|(lsn, _)| *lsn),
            recovery_cut_reason: shared.recovery.cut.as_ref().map(|(_, why)| why.clone()),
            recovery_segments_discarded: shared.recovery.segments_discarded,
            poisoned_reason,
        }
    }

    /// Flushes everything appended, stops the background threads and reports
    /// whether the log ended healthy. Dropping a `Wal` does the same and
    /// ignores the result.
    pub fn close(self) -> Result<(), WalError> {
        self.stop();
        if self.shared.state.lock().poison_reason.is_some() {
            return Err(WalError::Poisoned);
        }
        Ok(())
    }

    fn stop(&self) {
        {
            let mut st = self.shared.state.lock();
            st.shutdown = true;
        }
        self.shared.stopping.store(true, Ordering::Release);
        self.shared.writer_cv.notify_all();
        self.shared.prealloc_cv.notify_all();
        self.shared.waiters.wake_all();
        self.shared.space_cv.notify_all();
        let threads = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            // A panicked background thread already poisoned nothing we can
            // report better here; the join only reaps it.
            let _ = t.join();
        }
    }
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal")
            .field("dir", &self.shared.dir)
            .field("end", &self.end())
            .field("durable_end", &self.durable_end())
            .finish_non_exhaustive()
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Keeps up to `SPARES_MAX` spare files of the configured segment size and
/// deletes the rest (left by an earlier run, or of an older segment size).
fn keep_spares(
    fs: &dyn FileSystem,
    dir: &Path,
    found: Vec<PathBuf>,
    segment_bytes: u64,
) -> Result<Vec<PathBuf>, WalError> {
    let mut kept = Vec::new();
    let mut removed_any = false;
    for path in found {
        let fits = kept.len() < SPARES_MAX && fs.open(&path)?.len_bytes()? == segment_bytes;
        if fits {
            kept.push(path);
        } else {
            fs.remove(&path)?;
            removed_any = true;
        }
    }
    if removed_any {
        fs.sync_dir(dir)?;
    }
    Ok(kept)
}

/// Starts a new run unless the record continues the last one contiguously.
fn push_run(st: &mut State, lsn: u64, segment_start_lsn: u64) {
    let contiguous = st.runs.last().is_some_and(|r| {
        r.segment_start_lsn == segment_start_lsn && r.lsn + (st.buf.len() - r.buf_offset) as u64 == lsn
    });
    if st.buf.is_empty() {
        assert!(st.runs.is_empty());
        assert_eq!(lsn, st.end_lsn, "first buffered byte must be at the append position");
    }
    if !contiguous {
        st.runs.push(Run { lsn, buf_offset: st.buf.len(), segment_start_lsn });
    }
}

/// Runs the writer loop; if it panics (a broken invariant), poisons the log
/// so committers get an error instead of waiting forever, then re-panics.
fn writer_main(shared: &Shared) {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| writer_loop(shared)));
    if let Err(panic) = outcome {
        poison(shared, "WAL writer thread panicked".into());
        std::panic::resume_unwind(panic);
    }
}

fn poison(shared: &Shared, reason: String) {
    {
        let mut st = shared.state.lock();
        if st.poison_reason.is_none() {
            st.poison_reason = Some(reason);
        }
    }
    shared.poisoned.store(true, Ordering::Release);
    shared.space_cv.notify_all();
    shared.waiters.wake_all();
}

fn writer_loop(shared: &Shared) {
    let mut batch: Vec<u8> = Vec::with_capacity(shared.buffer_bytes_max);
    let mut runs: Vec<Run> = Vec::new();
    while let Some(batch_end_lsn) = next_batch(shared, &mut batch, &mut runs) {
        let result = write_batch(shared, &batch, &runs);
        batch.clear();
        runs.clear();
        if batch.capacity() > 2 * shared.buffer_bytes_max {
            // A record larger than the buffer bound grew this buffer; do not
            // keep that memory for the life of the log.
            batch.shrink_to(shared.buffer_bytes_max);
        }
        match result {
            Ok(()) => {
                let prev = shared.durable_end_lsn.swap(batch_end_lsn, Ordering::AcqRel);
                assert!(batch_end_lsn > prev, "durable end must move forward");
                shared.counters.flushes.fetch_add(1, Ordering::Relaxed);
                shared.waiters.wake_durable(batch_end_lsn);
            }
            Err(e) => {
                // fsyncgate: after a failed write or fsync the kernel may have
                // dropped the dirty pages; nothing after the durable end can
                // ever be reported durable. Stop here.
                poison(shared, e.to_string());
                return;
            }
        }
    }
}

/// Waits until a flush is due, then swaps the append buffer with the
/// writer's empty one (double buffering: appends continue into it while
/// this batch is written and synced). Returns the batch's end LSN, or None
/// when the writer should stop (poisoned, or shut down with nothing left).
fn next_batch(shared: &Shared, batch: &mut Vec<u8>, runs: &mut Vec<Run>) -> Option<u64> {
    assert!(batch.is_empty() && runs.is_empty());
    let mut st = shared.state.lock();
    loop {
        if st.poison_reason.is_some() || (st.buf.is_empty() && st.shutdown) {
            return None;
        }
        let deadline = st.buf_since.map(|t| t + shared.config.async_flush_interval);
        if flush_due(shared, &st, deadline) {
            break;
        }
        shared.writer_idle.store(true, Ordering::SeqCst);
        // Re-check after publishing `writer_idle` (see its doc).
        if flush_due(shared, &st, deadline) {
            shared.writer_idle.store(false, Ordering::SeqCst);
            break;
        }
        match deadline {
            Some(d) => {
                shared.writer_cv.wait_until(&mut st, d);
            }
            None => shared.writer_cv.wait(&mut st),
        }
        shared.writer_idle.store(false, Ordering::SeqCst);
    }
    std::mem::swap(&mut st.buf, batch);
    std::mem::swap(&mut st.runs, runs);
    // A roll without a pad record leaves a gap before the first run.
    assert!(runs[0].lsn >= st.buf_start_lsn);
    st.buf_start_lsn = st.end_lsn;
    st.buf_since = None;
    if st.appenders_blocked > 0 {
        shared.space_cv.notify_all();
    }
    Some(st.end_lsn)
}

/// A flush is due when there is data and a committer waits for it, an
/// appender is blocked, the buffer is half full, we are shutting down, or
/// the oldest unflushed append is `async_flush_interval` old. No artificial
/// delay: the first waiter starts a flush, and whoever appends during it
/// rides the next one.
fn flush_due(shared: &Shared, st: &State, deadline: Option<Instant>) -> bool {
    !st.buf.is_empty()
        && (shared.sync_wanted_end_lsn.load(Ordering::SeqCst) > st.buf_start_lsn
            || st.appenders_blocked > 0
            || st.buf.len() >= shared.buffer_bytes_max / 2
            || st.shutdown
            || deadline.is_some_and(|d| Instant::now() >= d))
}

/// pwrite every run into its segment, then fdatasync each touched segment.
fn write_batch(shared: &Shared, batch: &[u8], runs: &[Run]) -> Result<(), WalError> {
    assert!(!runs.is_empty() && runs[0].buf_offset == 0);
    let mut touched: Vec<Arc<Segment>> = Vec::with_capacity(2);
    for (i, run) in runs.iter().enumerate() {
        let end = runs.get(i + 1).map_or(batch.len(), |next| next.buf_offset);
        let bytes = &batch[run.buf_offset..end];
        let seg = segment_for_write(shared, run.segment_start_lsn)?;
        assert!(seg.contains(run.lsn) && run.lsn + bytes.len() as u64 <= seg.end_lsn());
        assert!(run.lsn >= seg.first_record_lsn());
        fs::write_all_at(seg.file.as_ref(), bytes, run.lsn - seg.start_lsn)?;
        if !touched.iter().any(|t| t.start_lsn == seg.start_lsn) {
            touched.push(seg);
        }
    }
    for seg in &touched {
        seg.file.sync_data()?;
        shared.counters.fsyncs.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

fn segment_for_write(shared: &Shared, start_lsn: u64) -> Result<Arc<Segment>, WalError> {
    if let Some(seg) = shared.segments.lock().by_start.get(&start_lsn) {
        return Ok(Arc::clone(seg));
    }
    shared.counters.segment_waits.fetch_add(1, Ordering::Relaxed);
    ensure_segment(shared, start_lsn, &|| true)?
        .ok_or_else(|| WalError::Io(std::io::Error::other("segment creation interrupted")))
}

/// Creates segment `start_lsn` unless it exists. Segments are created in
/// order, so `start_lsn` must be the end of the newest one.
fn ensure_segment(
    shared: &Shared,
    start_lsn: u64,
    keep_going: &dyn Fn() -> bool,
) -> Result<Option<Arc<Segment>>, WalError> {
    let _creating = shared.create_lock.lock();
    {
        let segments = shared.segments.lock();
        if let Some(seg) = segments.by_start.get(&start_lsn) {
            return Ok(Some(Arc::clone(seg)));
        }
        let newest_end = segments.by_start.values().next_back().map(|s| s.end_lsn());
        assert_eq!(newest_end, Some(start_lsn), "segments must be created contiguously");
    }
    let spare = shared.spares.lock().pop();
    let created = match spare {
        Some(spare) => {
            let seg = segment::recycle_segment(
                shared.fs.as_ref(),
                &shared.dir,
                &spare,
                start_lsn,
                shared.config.segment_bytes,
            )?;
            shared.counters.segments_recycled.fetch_add(1, Ordering::Relaxed);
            Some(seg)
        }
        None => segment::create_segment(
            shared.fs.as_ref(),
            &shared.dir,
            start_lsn,
            shared.config.segment_bytes,
            keep_going,
        )?,
    };
    let Some(seg) = created else { return Ok(None) };
    let seg = Arc::new(seg);
    shared.segments.lock().by_start.insert(start_lsn, Arc::clone(&seg));
    shared.counters.segments_created.fetch_add(1, Ordering::Relaxed);
    Ok(Some(seg))
}

/// Keeps the segment after the one being appended to created ahead of time,
/// so a commit rarely waits for a segment to be zero-filled.
fn prealloc_main(shared: &Shared) {
    let keep_going = || !shared.stopping.load(Ordering::Acquire);
    loop {
        let wanted_start_lsn = {
            let mut st = shared.state.lock();
            loop {
                if st.shutdown || st.poison_reason.is_some() {
                    return;
                }
                let newest_end = shared.segments.lock().by_start.values().next_back().map(|s| s.end_lsn());
                if newest_end.is_some_and(|end| end <= st.prealloc_wanted_start_lsn) {
                    break newest_end;
                }
                shared.prealloc_cv.wait(&mut st);
            }
        };
        let Some(start_lsn) = wanted_start_lsn else { return };
        // A failure here is not fatal: the writer retries the creation when
        // it needs the segment and poisons the log if that fails too.
        match ensure_segment(shared, start_lsn, &keep_going) {
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => {
                let mut st = shared.state.lock();
                if st.shutdown {
                    return;
                }
                // Back off until the next roll instead of spinning on a
                // persistent error (e.g. ENOSPC).
                shared.prealloc_cv.wait_for(&mut st, Duration::from_millis(100));
            }
        }
    }
}

/// A record's header checksum, computed again from what a reader returned.
fn record_checksum(lsn: Lsn, payload: &[u8]) -> u32 {
    let len = u32::try_from(payload.len()).unwrap_or(PAD_MARKER);
    format::record_crc(format::payload_crc(payload), lsn.0, len)
}
