//! The demo's watcher thread: every [`TICK`] it redraws the progress line
//! (phase, percent of the whole demo, ETA) and reads write-through's
//! figures from whichever cache is running (in this process, or the wire
//! server's, also in this process): a [`LagSample`] per tick, and per
//! [`lag::WINDOW_S`] a [`LagWindow`] with the lag of the transactions
//! applied in it (from the AWT lag histogram's counts at its two ends).

use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pgtier_cache::{Cache, LagCounts};

use super::lag::{self, LagFigures, LagSample, LagWindow};

const TICK: Duration = Duration::from_millis(250);
/// Samples kept at most (an hour at [`TICK`]); later ones are dropped.
const LAG_SAMPLES_MAX: usize = 14_400;
/// Windows kept at most (an hour).
const LAG_WINDOWS_MAX: usize = 3_600;

/// Write-through's counters at one moment.
pub(crate) struct LagReading {
    pub backlog_bytes: u64,
    pub written_bytes: u64,
    pub applied_txns: u64,
    pub counts: LagCounts,
}

/// Where write-through's figures are read from.
pub(crate) trait LagSource: Send {
    /// None when propagation is not running.
    fn read(&mut self) -> Option<LagReading>;
}

/// A cache in this process (direct mode, or the wire server's).
pub(crate) struct CacheLag(pub Arc<Cache>);

impl LagSource for CacheLag {
    fn read(&mut self) -> Option<LagReading> {
        let status = self.0.propagation()?;
        let info = self.0.propagation_info()?;
        Some(LagReading {
            backlog_bytes: info.backlog_bytes,
            written_bytes: self.0.database().wal_durable_end().0,
            applied_txns: info.applied_txns,
            counts: status.lag.snapshot(),
        })
    }
}

/// The window being filled: its start and the least backlog seen.
struct OpenWindow {
    from_s: f64,
    start: LagReading,
    backlog_min_bytes: u64,
}

struct State {
    started: Instant,
    /// (name, estimated seconds) per phase.
    phases: Vec<(&'static str, f64)>,
    current: usize,
    phase_started: Instant,
    /// Estimated seconds of the phases finished, and their real seconds.
    done_estimate_s: f64,
    done_real_s: f64,
    detail: String,
    source: Option<Box<dyn LagSource>>,
    lag: Vec<LagSample>,
    windows: Vec<(LagWindow, LagCounts)>,
    open: Option<OpenWindow>,
    stop: bool,
}

pub(crate) struct Monitor {
    state: Arc<Mutex<State>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    bar: ProgressBar,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // The state is plain data; a panic while it was held leaves it usable.
    state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Monitor {
    pub(crate) fn start(phases: Vec<(&'static str, f64)>, draw: bool) -> Monitor {
        let now = Instant::now();
        let state = Arc::new(Mutex::new(State {
            started: now,
            phases,
            current: 0,
            phase_started: now,
            done_estimate_s: 0.0,
            done_real_s: 0.0,
            detail: String::new(),
            source: None,
            lag: Vec::new(),
            windows: Vec::new(),
            open: None,
            stop: false,
        }));
        let bar = if draw {
            ProgressBar::new(1000)
        } else {
            ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::hidden())
        };
        bar.set_style(
            ProgressStyle::with_template("{prefix:.bold} {bar:24} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let (shared, drawn) = (state.clone(), bar.clone());
        let thread = std::thread::Builder::new().name("demo-monitor".into()).spawn(move || watch(&shared, &drawn)).ok();
        Monitor { state, thread: Mutex::new(thread), bar }
    }

    pub(crate) fn begin(&self, index: usize) {
        let mut s = lock(&self.state);
        s.current = index;
        s.phase_started = Instant::now();
        s.detail.clear();
        let name = s.phases.get(index).map_or("", |p| p.0);
        let total = s.phases.len();
        // A line per phase, above the bar; also where no bar is drawn (logs, CI).
        let line =
            format!("pgtier demo: [{}/{total}] {name} (t+{:.0} s)", index + 1, s.started.elapsed().as_secs_f64());
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    pub(crate) fn end(&self, index: usize) {
        let mut s = lock(&self.state);
        s.done_estimate_s += s.phases.get(index).map_or(0.0, |p| p.1);
        s.done_real_s += s.phase_started.elapsed().as_secs_f64();
    }

    /// Runs `body` as phase `index` (its line, the ETA's bookkeeping);
    /// returns what it returned and its wall seconds.
    pub(crate) fn phase<T>(&self, index: usize, body: impl FnOnce() -> T) -> (T, f64) {
        self.begin(index);
        let started = Instant::now();
        let result = body();
        let seconds = started.elapsed().as_secs_f64();
        self.end(index);
        (result, seconds)
    }

    pub(crate) fn detail(&self, text: String) {
        lock(&self.state).detail = text;
    }

    /// A new source starts a new window (counts of two caches never mix).
    pub(crate) fn set_lag_source(&self, source: Option<Box<dyn LagSource>>) {
        let mut s = lock(&self.state);
        s.source = source;
        s.open = None;
    }

    /// Write-through over `[from_s, to_s]` (seconds since start), once the
    /// window holding `to_s` has closed (at most about two seconds'
    /// wait; less when no source is set). None when nothing was sampled.
    pub(crate) fn lag_over(&self, from_s: f64, to_s: f64) -> Option<LagFigures> {
        let deadline = Instant::now() + Duration::from_secs_f64(2.0 * lag::WINDOW_S + 0.5);
        loop {
            {
                let s = lock(&self.state);
                let covered = s.windows.last().is_some_and(|(w, _)| w.to_s >= to_s);
                if covered || s.source.is_none() || Instant::now() >= deadline {
                    return lag::figures(&s.lag, &s.windows, from_s, to_s);
                }
            }
            std::thread::sleep(TICK / 2);
        }
    }

    pub(crate) fn now_s(&self) -> f64 {
        lock(&self.state).started.elapsed().as_secs_f64()
    }

    /// Stops the thread and returns every sample and window.
    pub(crate) fn finish(&self) -> (Vec<LagSample>, Vec<LagWindow>) {
        lock(&self.state).stop = true;
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
        let mut s = lock(&self.state);
        s.source = None;
        let windows = std::mem::take(&mut s.windows).into_iter().map(|(w, _)| w).collect();
        (std::mem::take(&mut s.lag), windows)
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

fn watch(state: &Mutex<State>, bar: &ProgressBar) {
    loop {
        {
            let mut s = lock(state);
            if s.stop {
                break;
            }
            sample(&mut s);
            draw(&s, bar);
        }
        std::thread::sleep(TICK);
    }
    bar.finish_and_clear();
}

/// One reading: a sample, and a window closed when it is due.
fn sample(s: &mut State) {
    let t_s = s.started.elapsed().as_secs_f64();
    let phase = s.phases.get(s.current).map_or("", |p| p.0).to_owned();
    let Some(reading) = s.source.as_mut().and_then(|src| src.read()) else { return };
    if s.lag.len() < LAG_SAMPLES_MAX {
        s.lag.push(LagSample {
            t_s,
            phase: phase.clone(),
            backlog_bytes: reading.backlog_bytes,
            written_bytes: reading.written_bytes,
            applied_txns: reading.applied_txns,
        });
    }
    let Some(open) = s.open.as_mut() else {
        s.open = Some(OpenWindow { from_s: t_s, backlog_min_bytes: reading.backlog_bytes, start: reading });
        return;
    };
    open.backlog_min_bytes = open.backlog_min_bytes.min(reading.backlog_bytes);
    // Due half a tick early, so windows stay about WINDOW_S long.
    if t_s - open.from_s < lag::WINDOW_S - TICK.as_secs_f64() / 2.0 {
        return;
    }
    let counts = reading.counts.since(&open.start.counts);
    let window = LagWindow {
        from_s: open.from_s,
        to_s: t_s,
        phase,
        applied_txns: reading.applied_txns.saturating_sub(open.start.applied_txns),
        lag_p50_ms: counts.quantile_us(0.5) / 1000.0,
        lag_p99_ms: counts.quantile_us(0.99) / 1000.0,
        lag_max_ms: counts.max_us as f64 / 1000.0,
        backlog_bytes: reading.backlog_bytes,
        backlog_min_bytes: open.backlog_min_bytes,
        written_bytes: reading.written_bytes.saturating_sub(open.start.written_bytes),
    };
    if s.windows.len() < LAG_WINDOWS_MAX {
        s.windows.push((window, counts));
    }
    s.open = Some(OpenWindow { from_s: t_s, backlog_min_bytes: reading.backlog_bytes, start: reading });
}

/// Percent of the estimated whole and the time left, scaled by how the
/// finished phases compared with their estimates.
fn draw(s: &State, bar: &ProgressBar) {
    let total: f64 = s.phases.iter().map(|p| p.1).sum::<f64>().max(1.0);
    let estimate = s.phases.get(s.current).map_or(1.0, |p| p.1);
    let in_phase = s.phase_started.elapsed().as_secs_f64().min(estimate * 0.95);
    let done = (s.done_estimate_s + in_phase).min(total);
    let pace = if s.done_estimate_s > 0.0 { (s.done_real_s / s.done_estimate_s).clamp(0.3, 5.0) } else { 1.0 };
    let eta_s = (total - done) * pace;
    bar.set_position((1000.0 * done / total) as u64);
    bar.set_prefix(format!("[{}/{}] {}", s.current + 1, s.phases.len(), s.phases.get(s.current).map_or("", |p| p.0)));
    bar.set_message(format!("{:>3.0} % · ETA {} · {}", 100.0 * done / total, clock(eta_s), s.detail));
}

fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    format!("{}:{:02}", s / 60, s % 60)
}
