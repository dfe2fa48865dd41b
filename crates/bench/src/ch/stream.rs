//! The analytic streams: each runs Q1..Q22 in order, over and over, on its
//! own session, until the phase ends. What counts is decided afterwards
//! from each run's start and end: a query counts when it started at or
//! after the measure window's start and ended by its end, so queries of
//! the ramp-up and the one cut by the window's end are left out alike in
//! the phase alone and in the phase with OLTP beside it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::tpch::{Query, QuerySession, Side, Status, Timing, failed};

/// The measure window as the phase's coordinator sees it: set when the
/// window opens and closes; the streams stop when it has closed.
#[derive(Default)]
pub struct Window {
    bounds: Mutex<(Option<Instant>, Option<Instant>)>,
    closed: AtomicBool,
    /// Queries finished, every stream, every phase part (for progress).
    pub finished: AtomicU64,
}

impl Window {
    pub fn open(&self) {
        let mut b = self.bounds.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        b.0.get_or_insert_with(Instant::now);
    }

    pub fn close(&self) {
        self.open();
        let mut b = self.bounds.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        b.1.get_or_insert_with(Instant::now);
        self.closed.store(true, Ordering::Relaxed);
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    fn bounds(&self) -> Option<(Instant, Instant)> {
        let b = self.bounds.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Some((b.0?, b.1?))
    }
}

/// One run of one query in a stream.
pub struct QueryRun {
    pub query: u8,
    pub started: Instant,
    pub ended: Instant,
    /// Wall time in ms, or how it failed.
    pub outcome: Result<f64, Status>,
}

/// Runs the queries in order from `first` (an index into `queries`) until
/// the window closes; the query running then is finished, not cancelled
/// (its statement_timeout bounds it). The session sets `analytics` as
/// `pgtier.analytics` when given.
pub fn run_stream(
    side: &Side<'_>,
    queries: &[Query],
    first: usize,
    (timeout, analytics): (Duration, Option<&'static str>),
    window: &Window,
) -> Vec<QueryRun> {
    let mut session = QuerySession::new(side, timeout).with_analytics(analytics);
    let mut runs = Vec::new();
    let mut i = first;
    while !window.is_closed() && !queries.is_empty() {
        let q = &queries[i % queries.len()];
        let started = Instant::now();
        let outcome = session.run(&q.sql).map(|(_, ms)| ms).map_err(|e| failed(e, timeout));
        runs.push(QueryRun { query: q.number, started, ended: Instant::now(), outcome });
        window.finished.fetch_add(1, Ordering::Relaxed);
        i += 1;
    }
    runs
}

/// One query's figures over a phase's window, all streams together.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueryTimes {
    pub query: u8,
    /// The counted runs' times; `None` when none completed in the window.
    pub timing: Option<Timing>,
    /// Runs started in the window and ended by the statement_timeout
    /// (57014), wherever they ended.
    pub timeouts: u32,
    /// Runs started in the window that answered after its end (left out).
    pub cut: u32,
    /// Runs refused (another error), and the first refusal.
    pub refused: u32,
    pub refusal: Option<String>,
}

/// A phase's analytic figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnalyticFigures {
    pub streams: u32,
    pub window_s: f64,
    /// Queries answered in the window (started and ended in it).
    pub completed: u64,
    pub queries_per_hour: f64,
    pub timeouts: u64,
    pub refused: u64,
    /// Runs left out: started in the ramp-up, or ended after the window
    /// (timeouts among them are counted in `timeouts` too).
    pub outside_window: u64,
    pub per_query: Vec<QueryTimes>,
}

impl AnalyticFigures {
    pub fn query(&self, number: u8) -> Option<&QueryTimes> {
        self.per_query.iter().find(|q| q.query == number)
    }
}

/// The figures of every stream's runs against the window's bounds.
pub fn figures(queries: &[Query], streams: &[Vec<QueryRun>], window: &Window) -> AnalyticFigures {
    let (start, end) = window.bounds().unwrap_or_else(|| {
        let now = Instant::now();
        (now, now)
    });
    let window_s = end.saturating_duration_since(start).as_secs_f64();
    let runs: Vec<&QueryRun> = streams.iter().flatten().collect();
    let inside = |r: &QueryRun| r.started >= start && r.ended <= end;
    let mut per_query = Vec::new();
    for q in queries {
        let counted: Vec<&QueryRun> = runs.iter().copied().filter(|r| r.query == q.number && inside(r)).collect();
        let ms: Vec<f64> = counted.iter().filter_map(|r| r.outcome.as_ref().ok().copied()).collect();
        let started_inside: Vec<&QueryRun> =
            runs.iter().copied().filter(|r| r.query == q.number && r.started >= start).collect();
        let timeouts =
            started_inside.iter().filter(|r| matches!(r.outcome, Err(Status::Timeout { .. }))).count() as u32;
        let cut = started_inside.iter().filter(|r| r.ended > end && r.outcome.is_ok()).count() as u32;
        let refusals: Vec<&Status> = counted
            .iter()
            .filter_map(|r| r.outcome.as_ref().err())
            .filter(|s| !matches!(s, Status::Timeout { .. }))
            .collect();
        per_query.push(QueryTimes {
            query: q.number,
            timing: (!ms.is_empty()).then(|| Timing::of(ms)),
            timeouts,
            cut,
            refused: refusals.len() as u32,
            refusal: refusals.first().map(|s| s.describe()),
        });
    }
    let completed = runs.iter().filter(|r| inside(r) && r.outcome.is_ok()).count() as u64;
    AnalyticFigures {
        streams: streams.len() as u32,
        window_s,
        completed,
        queries_per_hour: if window_s > 0.0 { completed as f64 * 3600.0 / window_s } else { 0.0 },
        timeouts: per_query.iter().map(|q| u64::from(q.timeouts)).sum(),
        refused: per_query.iter().map(|q| u64::from(q.refused)).sum(),
        outside_window: runs.iter().filter(|r| !inside(r)).count() as u64,
        per_query,
    }
}

/// Where stream `k` of `streams` starts in the 22: spread evenly, so two
/// streams do not run the same query side by side.
pub fn first_query(k: u32, streams: u32, queries: usize) -> usize {
    (k as usize * queries) / streams.max(1) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_start_spread_over_the_queries() {
        assert_eq!(first_query(0, 1, 22), 0);
        assert_eq!((first_query(0, 2, 22), first_query(1, 2, 22)), (0, 11));
        assert_eq!(first_query(2, 3, 22), 14);
    }

    #[test]
    fn only_runs_inside_the_window_count() {
        let queries = crate::ch::queries::all();
        let window = Window::default();
        let t = Instant::now();
        let run = |query, from_ms: u64, to_ms: u64, outcome| QueryRun {
            query,
            started: t + Duration::from_millis(from_ms),
            ended: t + Duration::from_millis(to_ms),
            outcome,
        };
        *window.bounds.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            (Some(t + Duration::from_millis(100)), Some(t + Duration::from_millis(1_100)));
        let stream = vec![
            run(1, 0, 150, Ok(150.0)),
            run(2, 150, 350, Ok(200.0)),
            run(3, 350, 400, Err(Status::Timeout { after_s: 1.0 })),
            run(4, 400, 500, Err(Status::Refused { sqlstate: Some("0A000".into()), message: "no".into() })),
            run(2, 500, 900, Ok(400.0)),
            run(5, 900, 1_200, Ok(300.0)),
        ];
        let f = figures(&queries, &[stream], &window);
        assert_eq!((f.completed, f.timeouts, f.refused, f.outside_window), (2, 1, 1, 2));
        assert_eq!(f.query(5).map(|q| q.cut), Some(1));
        assert!((f.window_s - 1.0).abs() < 1e-9 && (f.queries_per_hour - 7_200.0).abs() < 1e-6);
        assert_eq!(f.query(2).and_then(|q| q.timing.as_ref()).map(|t| t.median_ms), Some(300.0));
        assert!(f.query(1).is_some_and(|q| q.timing.is_none()), "started in the ramp-up");
        assert!(f.query(5).is_some_and(|q| q.timing.is_none()), "cut by the window's end");
        assert_eq!(f.query(4).and_then(|q| q.refusal.clone()).as_deref(), Some("refused: 0A000 no"));
    }
}
