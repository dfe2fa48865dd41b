//! The demo's watcher thread: every [`TICK`] it redraws the progress line
//! (phase, percent of the whole demo, ETA) and samples the AWT lag from
//! whichever cache is running (in this process, or a server over SQL).

use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pgtier_cache::Cache;
use serde::{Deserialize, Serialize};

use crate::target::DbError;
use crate::targets::postgres::db_error;

const TICK: Duration = Duration::from_millis(250);
/// Lag samples kept at most (an hour at [`TICK`]); later ones are dropped.
const LAG_SAMPLES_MAX: usize = 14_400;

/// The AWT lag at one moment of the demo.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LagSample {
    /// Seconds since the demo started.
    pub t_s: f64,
    pub phase: String,
    pub lag_ms: f64,
    pub backlog_bytes: u64,
}

/// Where the lag is read from.
pub(super) trait LagSource: Send {
    /// (lag ms, backlog bytes), or None when propagation is not running.
    fn sample(&mut self) -> Option<(f64, u64)>;
}

pub(super) struct DirectLag(pub Arc<Cache>);

impl LagSource for DirectLag {
    fn sample(&mut self) -> Option<(f64, u64)> {
        self.0.propagation_info().map(|p| (p.lag_ms, p.backlog_bytes))
    }
}

/// `pgtier_cache_propagation` of a server, on a connection of its own.
pub(super) struct WireLag(postgres::Client);

impl WireLag {
    pub(super) fn connect(url: &str) -> Result<WireLag, DbError> {
        pgtier_backend::connect::connect(url).map(WireLag).map_err(|e| DbError::new(Some(e.sqlstate()), e.to_string()))
    }

    fn read(&mut self) -> Result<Option<(f64, u64)>, DbError> {
        let rows = self.0.query("SELECT lag_ms, backlog_bytes FROM pgtier_cache_propagation", &[]).map_err(|e| db_error(&e))?;
        Ok(rows.first().map(|r| (r.get::<_, f64>(0), r.get::<_, i64>(1).max(0) as u64)))
    }
}

impl LagSource for WireLag {
    fn sample(&mut self) -> Option<(f64, u64)> {
        self.read().ok().flatten()
    }
}

/// Drains through a server: polls its backlog until it is empty twice in
/// a row (a commit may be written but not yet counted in between).
pub(super) struct WireDrain(pub Mutex<WireLag>);

impl super::Drainer for WireDrain {
    fn drain(&self, timeout: Duration, interrupt: &std::sync::atomic::AtomicBool) -> Result<bool, DbError> {
        let deadline = Instant::now() + timeout;
        let mut lag = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut empty_polls = 0;
        while Instant::now() < deadline && !interrupt.load(std::sync::atomic::Ordering::Relaxed) {
            match lag.read()? {
                Some((_, 0)) | None => empty_polls += 1,
                Some(_) => empty_polls = 0,
            }
            if empty_polls >= 2 {
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(false)
    }
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
    stop: bool,
}

pub(super) struct Monitor {
    state: Arc<Mutex<State>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    bar: ProgressBar,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // The state is plain data; a panic while it was held leaves it usable.
    state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Monitor {
    pub(super) fn start(phases: Vec<(&'static str, f64)>, draw: bool) -> Monitor {
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
            stop: false,
        }));
        let bar = if draw { ProgressBar::new(1000) } else { ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::hidden()) };
        bar.set_style(
            ProgressStyle::with_template("{prefix:.bold} {bar:24} {msg}").unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let (shared, drawn) = (state.clone(), bar.clone());
        let thread = std::thread::Builder::new().name("demo-monitor".into()).spawn(move || watch(&shared, &drawn)).ok();
        Monitor { state, thread: Mutex::new(thread), bar }
    }

    pub(super) fn begin(&self, index: usize) {
        let mut s = lock(&self.state);
        s.current = index;
        s.phase_started = Instant::now();
        s.detail.clear();
        let name = s.phases.get(index).map_or("", |p| p.0);
        let total = s.phases.len();
        // A line per phase, above the bar; also where no bar is drawn (logs, CI).
        let line = format!("pgtier demo: [{}/{total}] {name} (t+{:.0} s)", index + 1, s.started.elapsed().as_secs_f64());
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    pub(super) fn end(&self, index: usize) {
        let mut s = lock(&self.state);
        s.done_estimate_s += s.phases.get(index).map_or(0.0, |p| p.1);
        s.done_real_s += s.phase_started.elapsed().as_secs_f64();
    }

    pub(super) fn detail(&self, text: String) {
        lock(&self.state).detail = text;
    }

    pub(super) fn set_lag_source(&self, source: Option<Box<dyn LagSource>>) {
        lock(&self.state).source = source;
    }

    /// The lag samples between `from_s` and `to_s` (seconds since start).
    pub(super) fn lag_between(&self, from_s: f64, to_s: f64) -> Vec<LagSample> {
        lock(&self.state).lag.iter().filter(|l| l.t_s >= from_s && l.t_s <= to_s).cloned().collect()
    }

    pub(super) fn now_s(&self) -> f64 {
        lock(&self.state).started.elapsed().as_secs_f64()
    }

    /// Stops the thread and returns every lag sample.
    pub(super) fn finish(&self) -> Vec<LagSample> {
        lock(&self.state).stop = true;
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
        let mut s = lock(&self.state);
        s.source = None;
        std::mem::take(&mut s.lag)
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
            let t_s = s.started.elapsed().as_secs_f64();
            let phase = s.phases.get(s.current).map_or("", |p| p.0).to_owned();
            if let Some(sample) = s.source.as_mut().and_then(|src| src.sample())
                && s.lag.len() < LAG_SAMPLES_MAX
            {
                s.lag.push(LagSample { t_s, phase, lag_ms: sample.0, backlog_bytes: sample.1 });
            }
            draw(&s, bar);
        }
        std::thread::sleep(TICK);
    }
    bar.finish_and_clear();
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
