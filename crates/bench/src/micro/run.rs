//! One measure window: `threads` sessions doing one test's step over and
//! over until the window's time is up, with the probes read around it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::seq::index;
use rand::{Rng, SeedableRng};

use super::probes::{Probes, WindowFigures};
use super::schema::{self, INSERT_TABLE, TABLE};
use super::{MicroError, MicroProgress, MicroTest};
use crate::target::{DbError, Session, StatementId, Target, Value};

/// Rows one update transaction changes (study 002: 32 rows per transaction).
pub const UPDATE_ROWS_PER_TXN: usize = 32;
/// Rows one insert transaction adds (study 002: 2 rows per commit).
pub const INSERT_ROWS_PER_TXN: u64 = 2;
/// How often the progress line is refreshed.
const TICK: Duration = Duration::from_millis(200);
/// How often the end of the workers is looked for.
const POLL: Duration = Duration::from_millis(2);

/// What the workers did in a window.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counts {
    pub rows: u64,
    pub ops: u64,
    /// Transactions rolled back on a serialization failure or deadlock and
    /// tried again with other keys (not counted in `ops`).
    pub retries: u64,
}

/// One worker's part of a test.
trait Step: Send {
    fn prepare(&mut self, s: &mut dyn Session) -> Result<(), DbError>;
    fn step(&mut self, s: &mut dyn Session, c: &mut Counts) -> Result<(), DbError>;
}

fn retryable(e: &DbError) -> bool {
    e.sqlstate_is("40001") || e.sqlstate_is("40P01")
}

struct SeqScan {
    rows: u64,
    stmt: StatementId,
    out: Vec<Value>,
}

impl Step for SeqScan {
    fn prepare(&mut self, s: &mut dyn Session) -> Result<(), DbError> {
        // Every row is read, pad included: the sums cannot be answered
        // from a count or from the key alone.
        self.stmt = s.prepare(&format!("SELECT count(*), sum(k)::int8, sum(length(pad))::int8 FROM {TABLE}"))?;
        Ok(())
    }

    fn step(&mut self, s: &mut dyn Session, c: &mut Counts) -> Result<(), DbError> {
        s.query(self.stmt, &[], &mut self.out)?;
        let seen = match self.out.first() {
            Some(Value::Int(n)) => *n as u64,
            other => return Err(DbError::new(None, format!("scan of {TABLE} answered {other:?} for count(*)"))),
        };
        if seen != self.rows {
            return Err(DbError::new(None, format!("scan of {TABLE} counted {seen} rows, {} loaded", self.rows)));
        }
        c.rows += seen;
        c.ops += 1;
        Ok(())
    }
}

struct RandomRead {
    rows: u64,
    rng: SmallRng,
    stmt: StatementId,
    out: Vec<Value>,
}

impl Step for RandomRead {
    fn prepare(&mut self, s: &mut dyn Session) -> Result<(), DbError> {
        self.stmt = s.prepare(&format!("SELECT id, k, grp, pad FROM {TABLE} WHERE id = $1"))?;
        Ok(())
    }

    fn step(&mut self, s: &mut dyn Session, c: &mut Counts) -> Result<(), DbError> {
        let id = self.rng.random_range(1..=self.rows) as i64;
        let n = s.query(self.stmt, &[Value::Int(id)], &mut self.out)?;
        if n != 1 {
            return Err(DbError::new(None, format!("{TABLE} row {id} read {n} times, expected once")));
        }
        c.rows += 1;
        c.ops += 1;
        Ok(())
    }
}

struct Insert {
    /// Shared by every worker of every window: keys are never reused.
    next_id: Arc<AtomicU64>,
    rng: SmallRng,
    pad: String,
    values: Vec<Value>,
    stmt: StatementId,
}

impl Step for Insert {
    fn prepare(&mut self, s: &mut dyn Session) -> Result<(), DbError> {
        self.stmt = s.prepare(&format!("INSERT INTO {INSERT_TABLE} (id, k, grp, pad) VALUES ($1, $2, $3, $4)"))?;
        Ok(())
    }

    fn step(&mut self, s: &mut dyn Session, c: &mut Counts) -> Result<(), DbError> {
        let first = self.next_id.fetch_add(INSERT_ROWS_PER_TXN, Ordering::Relaxed);
        s.begin()?;
        let mut inserted = 0;
        for id in first..first + INSERT_ROWS_PER_TXN {
            self.values.clear();
            schema::row(&mut self.rng, id as i64, &mut self.pad, &mut self.values);
            match s.execute(self.stmt, &self.values) {
                Ok(n) => inserted += n,
                Err(e) => {
                    let _ = s.rollback();
                    return Err(e);
                }
            }
        }
        s.commit()?;
        c.rows += inserted;
        c.ops += 1;
        Ok(())
    }
}

struct Update {
    rows: u64,
    rng: SmallRng,
    ids: Vec<i64>,
    stmt: StatementId,
}

impl Step for Update {
    fn prepare(&mut self, s: &mut dyn Session) -> Result<(), DbError> {
        self.stmt = s.prepare(&format!("UPDATE {TABLE} SET k = k + 1 WHERE id = $1"))?;
        Ok(())
    }

    fn step(&mut self, s: &mut dyn Session, c: &mut Counts) -> Result<(), DbError> {
        // 32 distinct keys, locked in key order by every worker: no deadlocks.
        self.ids.clear();
        let picked = index::sample(&mut self.rng, self.rows as usize, UPDATE_ROWS_PER_TXN);
        self.ids.extend(picked.iter().map(|i| i as i64 + 1));
        self.ids.sort_unstable();
        s.begin()?;
        let mut updated = 0;
        for &id in &self.ids {
            match s.execute(self.stmt, &[Value::Int(id)]) {
                Ok(n) => updated += n,
                Err(e) => {
                    let _ = s.rollback();
                    if retryable(&e) {
                        c.retries += 1;
                        return Ok(());
                    }
                    return Err(e);
                }
            }
        }
        match s.commit() {
            Ok(()) => {}
            Err(e) if retryable(&e) => {
                c.retries += 1;
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        if updated != UPDATE_ROWS_PER_TXN as u64 {
            return Err(DbError::new(None, format!("an update of {UPDATE_ROWS_PER_TXN} keys changed {updated} rows")));
        }
        c.rows += updated;
        c.ops += 1;
        Ok(())
    }
}

/// What a window needs to know about the run.
pub(crate) struct WindowSpec<'a> {
    pub test: MicroTest,
    pub threads: u32,
    pub duration: Duration,
    pub rows: u64,
    pub seed: u64,
    pub next_insert_id: &'a Arc<AtomicU64>,
}

fn step_for(spec: &WindowSpec<'_>, worker: u32) -> Box<dyn Step> {
    let rng = SmallRng::seed_from_u64(spec.seed ^ (u64::from(spec.threads) << 40) ^ u64::from(worker));
    match spec.test {
        MicroTest::SeqScan => Box::new(SeqScan { rows: spec.rows, stmt: 0, out: Vec::new() }),
        MicroTest::RandomRead => Box::new(RandomRead { rows: spec.rows, rng, stmt: 0, out: Vec::new() }),
        MicroTest::Insert => Box::new(Insert {
            next_id: Arc::clone(spec.next_insert_id),
            rng,
            pad: String::new(),
            values: Vec::new(),
            stmt: 0,
        }),
        MicroTest::Update => {
            Box::new(Update { rows: spec.rows, rng, ids: Vec::with_capacity(UPDATE_ROWS_PER_TXN), stmt: 0 })
        }
        MicroTest::IndexBuild => unreachable!("the index build is one statement, not a timed window"),
    }
}

/// Runs a timed window of `spec.test`. Errors carry the worker's
/// [`DbError`], so the caller can tell a refusal from a failure.
pub(crate) fn timed_window(
    target: &dyn Target,
    probes: &Probes,
    spec: &WindowSpec<'_>,
    progress: &mut dyn MicroProgress,
) -> Result<(Counts, WindowFigures), MicroError> {
    let mut window = probes.open()?;
    let n = spec.threads as usize;
    let ready = Barrier::new(n + 1);
    let go = Barrier::new(n + 1);
    let stop = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    let first_error: Mutex<Option<DbError>> = Mutex::new(None);
    let fail = |e: DbError| {
        stop.store(true, Ordering::Relaxed);
        let mut slot = first_error.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(e);
    };
    let mut totals = Counts::default();
    let mut started_probes: Result<(), MicroError> = Ok(());
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..spec.threads)
            .map(|worker| {
                let mut step = step_for(spec, worker);
                let (ready, go, stop, ops, fail) = (&ready, &go, &stop, &ops, &fail);
                // Every worker reaches both barriers, even one whose session
                // failed: the window never hangs on a missing party.
                scope.spawn(move || {
                    crate::cpu::name_current_thread(&format!("bench-client-{worker}"));
                    let session = target.connect().and_then(|mut s| step.prepare(s.as_mut()).map(|()| s));
                    let mut session = match session {
                        Ok(s) => Some(s),
                        Err(e) => {
                            fail(e);
                            None
                        }
                    };
                    ready.wait();
                    go.wait();
                    let mut counts = Counts::default();
                    let Some(s) = session.as_mut() else { return counts };
                    let deadline = Instant::now() + spec.duration;
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        let before = counts.ops;
                        if let Err(e) = step.step(s.as_mut(), &mut counts) {
                            fail(e);
                            break;
                        }
                        ops.fetch_add(counts.ops - before, Ordering::Relaxed);
                    }
                    counts
                })
            })
            .collect();
        ready.wait();
        if !stop.load(Ordering::Relaxed) {
            started_probes = probes.start(&mut window);
            if started_probes.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
        }
        go.wait();
        let started = Instant::now();
        let mut handles = handles;
        // Polled often, so the window (and the probes' reading of it) ends
        // within a poll of the last worker; the display only every TICK.
        let mut next_tick = started + TICK;
        while handles.iter().any(|h| !h.is_finished()) {
            std::thread::sleep(POLL);
            if Instant::now() >= next_tick {
                progress.window_tick(started.elapsed(), ops.load(Ordering::Relaxed));
                next_tick += TICK;
            }
        }
        for h in handles.drain(..) {
            match h.join() {
                Ok(c) => {
                    totals.rows += c.rows;
                    totals.ops += c.ops;
                    totals.retries += c.retries;
                }
                Err(_) => fail(DbError::new(None, "a benchmark worker panicked")),
            }
        }
    });
    started_probes?;
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(MicroError::Db(e));
    }
    let figures = probes.finish(window)?;
    Ok((totals, figures))
}

/// The index build: one `CREATE INDEX` on `grp`, dropped again afterwards
/// so the next build (and the next run) starts from the same table. It
/// runs on a session opened before the window, so the server process doing
/// the work is there when the probes start (and counted by them).
pub(crate) fn index_build(
    target: &dyn Target,
    probes: &Probes,
    threads: u32,
    parallel_setting: bool,
) -> Result<WindowFigures, MicroError> {
    let drop_sql = format!("DROP INDEX IF EXISTS {}", schema::INDEX);
    target.execute_batch(&drop_sql).map_err(MicroError::Db)?;
    let mut window = probes.open()?;
    let mut session = target.connect().map_err(MicroError::Db)?;
    if parallel_setting {
        // PostgreSQL's parallel index build: the leader and threads - 1 workers.
        let set = format!("SET max_parallel_maintenance_workers = {}", threads.saturating_sub(1));
        let stmt = session.prepare(&set).map_err(MicroError::Db)?;
        session.execute(stmt, &[]).map_err(MicroError::Db)?;
    }
    let create =
        session.prepare(&format!("CREATE INDEX {} ON {TABLE} (grp)", schema::INDEX)).map_err(MicroError::Db)?;
    probes.start(&mut window)?;
    let built = session.execute(create, &[]);
    // Closed before the window ends: the probes wait for the sessions of
    // the window to be gone (their WAL statistics flushed).
    drop(session);
    let figures = probes.finish(window)?;
    built.map_err(MicroError::Db)?;
    target.execute_batch(&drop_sql).map_err(MicroError::Db)?;
    Ok(figures)
}
