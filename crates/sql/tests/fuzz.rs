//! Grammar-based SQL fuzzing (issue 19, items 3 and 4).
//!
//! `differential`: random statements (tests/fuzz/grammar.rs) over TATP, a
//! TPC-C subset and a table of every type run on pgtier's embedded
//! `Connection` and on the private PostgreSQL with the same data. pgtier
//! must never panic, abort or hang (57014 under its statement_timeout is a
//! hang); where both accept a statement, rows (PostgreSQL's text output) and
//! row counts must be equal; where PostgreSQL refuses, pgtier must refuse
//! too. pgtier may refuse what PostgreSQL accepts only with a SQLSTATE:
//! those are counted by SQLSTATE and printed.
//!
//! `never_crash`: the same statements, mutated byte by byte
//! (tests/fuzz/mutate.rs), into `Connection::execute_sql`, `prepare` +
//! `query` and `prepare` + `execute`: `Ok` or an `Err` with a SQLSTATE,
//! never a panic, and the connection answers `SELECT 1` afterwards.
//!
//! Each runs in a child process (this binary re-run with `FUZZ_CHILD`): a
//! stack overflow aborts the process and cannot be caught, and a hang in
//! parse or bind is outside statement_timeout. Before every statement the
//! child writes it to a file, so the parent can name the statement that
//! killed or hung the child.
//!
//! Environment: `PGTIER_FUZZ_SECS` (default 60: differential runs that long,
//! never_crash half of it, in parallel), `PGTIER_FUZZ_SEED` (default: a
//! fixed seed, so CI is reproducible; `random` for a new one, printed),
//! `PGTIER_FUZZ_CASE` (replay one case of that seed and
//! print both sides' answers). Long run: see crates/sql/README.md.
//!
//! Not failed, counted and printed: PostgreSQL's plan-time errors from
//! constant folding, data errors PostgreSQL raised at run time on rows
//! pgtier never evaluated (evaluation order), and equal values printed
//! differently (-0 and 0, numeric scales) in ORDER BY ties or as the value
//! a dedup kept; see `Differential::judge`.
//!
//! KNOWN DEFECTS: none. The wrong answers and accepted invalid input the
//! grammar used to avoid (chained comparisons, NOT EXISTS ... IS, a unary
//! minus before `::`, ON naming a FROM item before the comma, casts
//! PostgreSQL lacks, bigint for int4 parameters, char(n)'s common type with
//! text, IN lists and IN subqueries with char(n), ON CONFLICT affecting a
//! row twice or hiding a NOT NULL violation) are fixed, or refused with
//! 0A000 where pgtier has no type for PostgreSQL's answer (a first
//! character(n) with text or a literal: bpchar without a length); the
//! grammar makes them again and tests/slt/29_fuzz_defects.slt holds their
//! regression records.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "fuzz/grammar.rs"]
mod grammar;
#[path = "fuzz/mutate.rs"]
mod mutate;

use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use grammar::{Case, Gen, Rng};
use pgtier_engine::{CommitMode, Database, EngineConfig};
use pgtier_sql::{Connection, DataType, Value};

/// pgtier's statement_timeout: the data is small (a three-way join is a
/// few thousand rows), so nothing the grammar makes comes near it.
const TIER_TIMEOUT: &str = "5s";
/// How long the parent waits beyond the run's length (cluster start,
/// setup, the last statement) before it calls the child hung.
const CHILD_GRACE: Duration = Duration::from_secs(180);

fn run_secs() -> u64 {
    std::env::var("PGTIER_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60)
}

/// The seed CI runs: a fixed one, so a CI failure is a regression anyone
/// can reproduce, not a new finding of a random seed (those are for the
/// long runs: `PGTIER_FUZZ_SEED=random`).
const CI_SEED: u64 = 20_261_124;

fn run_seed() -> u64 {
    match std::env::var("PGTIER_FUZZ_SEED").ok().as_deref() {
        Some("random") => {}
        Some(s) => return s.parse().unwrap_or(CI_SEED),
        None => return CI_SEED,
    }
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    Rng::new(nanos ^ u64::from(std::process::id())).next_u64() >> 1
}

fn replay_case() -> Option<u64> {
    std::env::var("PGTIER_FUZZ_CASE").ok().and_then(|s| s.parse().ok())
}

// ---- the parent: run a child, watch it --------------------------------

#[test]
fn differential() {
    run_child("differential", run_secs());
}

#[test]
fn never_crash() {
    run_child("never_crash", run_secs().div_ceil(2));
}

fn run_child(mode: &str, secs: u64) {
    if std::env::var("FUZZ_CHILD").is_ok() {
        return;
    }
    let seed = run_seed();
    let dir = tempfile::tempdir().unwrap();
    let last = dir.path().join("last_case");
    println!("fuzz {mode}: seed {seed}, {secs} s (PGTIER_FUZZ_SEED={seed} reproduces it)");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "fuzz_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env("FUZZ_CHILD", mode)
        .env("PGTIER_FUZZ_SEED", seed.to_string())
        .env("PGTIER_FUZZ_SECS", secs.to_string())
        .env("FUZZ_LAST", &last)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let limit = Duration::from_secs(secs) + CHILD_GRACE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    print!("{out}");
    let last_case = std::fs::read_to_string(&last).unwrap_or_default();
    match status {
        None => panic!(
            "fuzz {mode} (seed {seed}): HANG: the child still ran after {limit:?} (a {secs} s run); the statement it was running:\n{last_case}"
        ),
        Some(s) if !s.success() => {
            let tail: Vec<&str> = err.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect();
            panic!(
                "fuzz {mode} (seed {seed}) failed ({s}); last statement:\n{last_case}\nstderr tail:\n{}",
                tail.join("\n")
            )
        }
        Some(_) => {}
    }
}

#[test]
#[ignore = "the child process of the fuzz tests (run by them with --ignored)"]
fn fuzz_child() {
    let Ok(mode) = std::env::var("FUZZ_CHILD") else { return };
    let seed = run_seed();
    let deadline = Instant::now() + Duration::from_secs(run_secs());
    let last = PathBuf::from(std::env::var("FUZZ_LAST").unwrap_or_else(|_| "/dev/null".into()));
    match mode.as_str() {
        "differential" => differential_child(seed, deadline, &last),
        _ => never_crash_child(seed, deadline, &last),
    }
}

/// Records the statement about to run, for the parent to name if the
/// child dies or hangs.
fn note(last: &Path, seed: u64, case: u64, sql: &str) {
    let _ = std::fs::write(
        last,
        format!("seed {seed} case {case} (PGTIER_FUZZ_SEED={seed} PGTIER_FUZZ_CASE={case}):\n{sql}\n"),
    );
}

// ---- outcomes ----------------------------------------------------------

type Rows = Vec<Vec<Option<String>>>;

#[derive(Debug, Clone)]
enum Outcome {
    Ok { count: u64, rows: Option<Rows> },
    Err { sqlstate: String, message: String },
    Panic(String),
}

impl Outcome {
    fn short(&self) -> String {
        match self {
            Outcome::Ok { count, rows: Some(rows) } => {
                let shown: Vec<String> = rows
                    .iter()
                    .take(8)
                    .map(|r| {
                        format!(
                            "{:?}",
                            r.iter()
                                .map(|c| c.as_deref().map(|s| truncate(s, 60)).unwrap_or_else(|| "NULL".into()))
                                .collect::<Vec<_>>()
                        )
                    })
                    .collect();
                format!("{count} rows: {}{}", shown.join(" "), if rows.len() > 8 { " ..." } else { "" })
            }
            Outcome::Ok { count, rows: None } => format!("ok, count {count}"),
            Outcome::Err { sqlstate, message } => format!("ERROR {sqlstate}: {}", truncate(message, 200)),
            Outcome::Panic(m) => format!("PANIC {m}"),
        }
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_owned();
    }
    let mut i = n;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    format!("{}…({} bytes)", &s[..i], s.len())
}

fn run_pg(client: &mut postgres::Client, sql: &str) -> Outcome {
    match client.simple_query(sql) {
        Ok(msgs) => {
            let mut rows: Option<Rows> = None;
            let mut count = 0;
            for m in msgs {
                match m {
                    postgres::SimpleQueryMessage::Row(r) => rows
                        .get_or_insert_with(Vec::new)
                        .push((0..r.len()).map(|k| r.get(k).map(str::to_owned)).collect()),
                    postgres::SimpleQueryMessage::RowDescription(_) => {
                        rows.get_or_insert_with(Vec::new);
                    }
                    postgres::SimpleQueryMessage::CommandComplete(n) => count = n,
                    _ => {}
                }
            }
            Outcome::Ok { count, rows }
        }
        Err(e) => match e.as_db_error() {
            Some(db) => Outcome::Err { sqlstate: db.code().code().to_owned(), message: db.message().to_owned() },
            None => panic!("PostgreSQL connection failed: {e}"),
        },
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".into())
}

fn run_tier(conn: &mut Connection, sql: &str) -> Outcome {
    match catch_unwind(AssertUnwindSafe(|| conn.execute_sql(sql))) {
        Ok(Ok(res)) => {
            let rows =
                res.rows.map(|rows| rows.iter().map(|row| (0..row.len()).map(|k| row.text(k)).collect()).collect());
            Outcome::Ok { count: res.rows_affected, rows }
        }
        Ok(Err(e)) => Outcome::Err { sqlstate: e.sqlstate.to_owned(), message: e.message },
        Err(p) => Outcome::Panic(panic_text(p.as_ref())),
    }
}

/// The first row where two answers differ, for a finding's report.
fn first_difference(pg: &Outcome, tier: &Outcome) -> String {
    let (Outcome::Ok { rows: Some(p), .. }, Outcome::Ok { rows: Some(t), .. }) = (pg, tier) else {
        return String::new();
    };
    let show = |r: Option<&Vec<Option<String>>>| {
        r.map_or_else(
            || "(none)".to_owned(),
            |r| {
                format!(
                    "{:?}",
                    r.iter()
                        .map(|c| c.as_deref().map_or_else(|| "NULL".to_owned(), |s| truncate(s, 80)))
                        .collect::<Vec<_>>()
                )
            },
        )
    };
    match (0..p.len().max(t.len())).find(|&i| p.get(i) != t.get(i)) {
        Some(i) => format!(
            "\n  first difference, row {i}:\n    PostgreSQL: {}\n    pgtier:     {}",
            show(p.get(i)),
            show(t.get(i))
        ),
        None => String::new(),
    }
}

/// The answers differ only where values are equal but print differently
/// (-0 and 0; a numeric's scale): in the same order once such numbers are
/// normalized, and, unless `representatives` (which of several equal
/// values a dedup keeps is not defined), the same rows as printed.
fn tie_order_only(pg: &Option<Rows>, tier: &Option<Rows>, representatives: bool) -> bool {
    let (Some(p), Some(t)) = (pg, tier) else { return false };
    let norm = |rows: &Rows| -> Rows {
        rows.iter().map(|r| r.iter().map(|c| c.as_deref().map(normal_number)).collect()).collect()
    };
    if norm(p) != norm(t) {
        return false;
    }
    if representatives {
        return true;
    }
    let (mut ps, mut ts) = (p.clone(), t.clone());
    ps.sort();
    ts.sort();
    ps == ts
}

/// A decimal number without trailing fractional zeros and without the
/// sign of zero ("-0.00" -> "0"); other text unchanged.
fn normal_number(s: &str) -> String {
    let body = s.strip_prefix('-').unwrap_or(s);
    if body.is_empty()
        || !body.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        || body.bytes().filter(|&b| b == b'.').count() > 1
    {
        return s.to_owned();
    }
    let body = if body.contains('.') { body.trim_end_matches('0').trim_end_matches('.') } else { body };
    if body.bytes().all(|b| b == b'0') {
        return "0".to_owned();
    }
    if s.starts_with('-') { format!("-{body}") } else { body.to_owned() }
}

/// The statement may keep one of several equal values (DISTINCT, GROUP BY,
/// UNION without ALL, INTERSECT and EXCEPT with or without ALL (they match
/// copies), min, max, GREATEST, LEAST, LIMIT).
fn dedups(sql: &str) -> bool {
    // min / max / GREATEST / LEAST of equal values keep one of them too.
    // So does LIMIT when ties straddle it.
    ["DISTINCT ", " GROUP BY ", "min(", "max(", "GREATEST(", "LEAST(", " LIMIT "].iter().any(|w| sql.contains(w))
        || sql.contains(" INTERSECT ")
        || sql.contains(" EXCEPT ")
        || sql.contains(" UNION ") && !sql.contains(" UNION ALL ")
}

fn valid_sqlstate(s: &str) -> bool {
    s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
}

// ---- differential --------------------------------------------------------

#[derive(Default)]
struct Stats {
    statements: u64,
    both_accepted: u64,
    matched: u64,
    both_refused: u64,
    /// Matched once equal values that print differently (-0 and 0, numeric
    /// scales) may come in either order, or stand for each other after
    /// DISTINCT / GROUP BY / a set operation.
    ties: u64,
    /// PostgreSQL raised an error while planning (constant folding) for
    /// an expression pgtier never evaluated (no row).
    plan_time: u64,
    /// PostgreSQL raised a data error at run time that pgtier did not
    /// (evaluation order; see `judge`): count and an example per SQLSTATE.
    eval_order: BTreeMap<String, (u64, String)>,
    /// pgtier refused what PostgreSQL accepted: count and one example.
    tier_refused: BTreeMap<String, (u64, String, String)>,
    /// Both refused with different SQLSTATEs (not a failure: shown so the
    /// team can see error-code drift).
    other_sqlstate: BTreeMap<(String, String), (u64, String)>,
    shapes: HashSet<u64>,
    findings: Vec<String>,
}

struct Differential {
    seed: u64,
    pg: postgres::Client,
    db: Database,
    tier: Connection,
    stats: Stats,
    verbose: bool,
}

fn tier_connection(db: &Database) -> Connection {
    let mut c = Connection::new(db.clone());
    c.execute_sql(&format!("SET statement_timeout = '{TIER_TIMEOUT}'")).unwrap();
    // A runaway statement fails with 53200 instead of taking the machine.
    c.execute_sql("SET pgtier.statement_mem = '256MB'").unwrap();
    c
}

fn differential_child(seed: u64, deadline: Instant, last: &Path) {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("fuzz_{}_{seed}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&url).unwrap();
    // PostgreSQL's text output in pgtier's only settings; a generous
    // timeout so PostgreSQL's side can never hang the run.
    pg.batch_execute(
        "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, MDY'; SET extra_float_digits = 1; SET statement_timeout = '60s'",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { commit_mode: CommitMode::Async, background: false, ..EngineConfig::default() };
    let db = Database::open(dir.path(), config).unwrap();
    let tier = tier_connection(&db);
    let replay = replay_case();
    let mut d = Differential { seed, pg, db, tier, stats: Stats::default(), verbose: replay.is_some() };
    let tables = grammar::schema();
    d.setup(&tables, seed);
    let mut gen_ = Gen::new(&tables);
    let cases: Box<dyn Iterator<Item = u64>> = match replay {
        Some(c) => Box::new(std::iter::once(c)),
        None => Box::new(0..),
    };
    for case in cases {
        if replay.is_none() && Instant::now() >= deadline {
            break;
        }
        let mut rng = Rng::new(grammar::case_seed(seed, case));
        let c = gen_.case(&mut rng);
        note(last, seed, case, c.sql());
        d.stats.shapes.insert(shape(c.sql()));
        d.run_case(case, &c);
    }
    d.report();
}

/// A statement's shape: its text without literals, hashed (how many
/// different statements the run covered, whatever the constants).
fn shape(sql: &str) -> u64 {
    let mut s = String::with_capacity(sql.len());
    let mut in_str = false;
    for ch in sql.chars() {
        match ch {
            '\'' => in_str = !in_str,
            c if in_str || c.is_ascii_digit() => {}
            c => s.push(c),
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

impl Differential {
    /// The schemas and their data on both sides. Every statement must
    /// succeed on PostgreSQL (the generator's data is valid); a row pgtier
    /// refuses is counted and removed from PostgreSQL, so both sides hold
    /// the same rows.
    fn setup(&mut self, tables: &[grammar::Table], seed: u64) {
        for t in tables {
            let pg = run_pg(&mut self.pg, t.ddl);
            assert!(matches!(pg, Outcome::Ok { .. }), "PostgreSQL: {}: {}", t.ddl, pg.short());
            let tier = run_tier(&mut self.tier, t.ddl);
            assert!(matches!(tier, Outcome::Ok { .. }), "pgtier: {}: {}", t.ddl, tier.short());
        }
        let mut rng = Rng::new(seed);
        for sql in grammar::data(&mut rng) {
            let pg = run_pg(&mut self.pg, &sql);
            assert!(matches!(pg, Outcome::Ok { .. }), "PostgreSQL refuses the fuzzer's data: {sql}: {}", pg.short());
            match run_tier(&mut self.tier, &sql) {
                Outcome::Ok { .. } => {}
                Outcome::Err { sqlstate, message } if valid_sqlstate(&sqlstate) => {
                    println!(
                        "setup: pgtier refuses a row PostgreSQL accepts ({sqlstate} {message}): {}",
                        truncate(&sql, 300)
                    );
                    self.stats.tier_refused.entry(sqlstate).or_insert((0, sql.clone(), message)).0 += 1;
                    undo_insert(&mut self.pg, &sql);
                }
                other => self.stats.findings.push(format!("setup: {sql}\n  pgtier: {}", other.short())),
            }
        }
    }

    fn run_case(&mut self, case: u64, c: &Case) {
        self.stats.statements += 1;
        let (pg, tier, tier_time) = match c {
            Case::Query(sql) => {
                let pg = run_pg(&mut self.pg, sql);
                let t = Instant::now();
                let tier = run_tier(&mut self.tier, sql);
                (pg, tier, t.elapsed())
            }
            Case::Write { sql, table } => self.run_write(sql, table),
        };
        if self.verbose {
            println!("case {case}: {}\n  PostgreSQL: {}\n  pgtier:     {}", c.sql(), pg.short(), tier.short());
        }
        if let Some(kind) = self.judge(c, &pg, &tier) {
            let took = if kind == "HANG" { format!(" after {tier_time:?}") } else { String::new() };
            self.stats.findings.push(format!(
                "{kind}{took} (PGTIER_FUZZ_SEED={} PGTIER_FUZZ_CASE={case}):\n  {}\n  PostgreSQL: {}\n  pgtier:     {}{}",
                self.seed,
                truncate(c.sql(), 2000),
                pg.short(),
                tier.short(),
                first_difference(&pg, &tier)
            ));
        }
        if matches!(tier, Outcome::Panic(_)) || self.tier.in_transaction() {
            // A panic may leave the session anywhere: a fresh one (the old
            // one's drop rolls its transaction back).
            self.tier = tier_connection(&self.db);
        }
    }

    /// INSERT/UPDATE/DELETE in BEGIN ... ROLLBACK on both sides; when both
    /// accept, RETURNING rows are sorted (their order is not defined) and
    /// the table's rows inside the transaction are appended, so a wrong
    /// effect is a mismatch even when the statement's answer is right.
    fn run_write(&mut self, sql: &str, table: &str) -> (Outcome, Outcome, Duration) {
        let check = format!(
            "SELECT * FROM {table} ORDER BY {}",
            (1..=15).take_while(|i| *i <= self.width(table)).map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
        );
        run_pg(&mut self.pg, "BEGIN");
        let mut pg = run_pg(&mut self.pg, sql);
        run_tier(&mut self.tier, "BEGIN");
        let t = Instant::now();
        let mut tier = run_tier(&mut self.tier, sql);
        let took = t.elapsed();
        if let (Outcome::Ok { rows: pr, .. }, Outcome::Ok { rows: tr, .. }) = (&mut pg, &mut tier) {
            let after_pg = run_pg(&mut self.pg, &check);
            let after_tier = run_tier(&mut self.tier, &check);
            for (rows, after) in [(pr, after_pg), (tr, after_tier)] {
                let mut all = rows.take().unwrap_or_default();
                all.sort();
                all.push(vec![Some("-- table after the statement --".into())]);
                match after {
                    Outcome::Ok { rows: Some(r), .. } => all.extend(r),
                    other => all.push(vec![Some(other.short())]),
                }
                *rows = Some(all);
            }
        }
        run_pg(&mut self.pg, "ROLLBACK");
        if !matches!(tier, Outcome::Panic(_)) {
            run_tier(&mut self.tier, "ROLLBACK");
        }
        (pg, tier, took)
    }

    fn width(&self, table: &str) -> usize {
        grammar::schema().iter().find(|t| t.name == table).map_or(1, |t| t.cols.len())
    }

    /// None when the pair is acceptable; else the kind of finding.
    fn judge(&mut self, c: &Case, pg: &Outcome, tier: &Outcome) -> Option<&'static str> {
        let sql = c.sql();
        match (pg, tier) {
            (_, Outcome::Panic(_)) => Some("PANIC"),
            (_, Outcome::Err { sqlstate, .. }) if sqlstate == "57014" => Some("HANG"),
            (_, Outcome::Err { sqlstate, .. }) if !valid_sqlstate(sqlstate) => Some("BAD SQLSTATE"),
            (Outcome::Panic(_), _) => unreachable!("PostgreSQL's side never panics"),
            (Outcome::Ok { count: pc, rows: pr }, Outcome::Ok { count: tc, rows: tr }) => {
                self.stats.both_accepted += 1;
                if pc == tc && pr == tr {
                    self.stats.matched += 1;
                    None
                } else if pc == tc && tie_order_only(pr, tr, false) {
                    // Equal values that print differently (-0 and 0, 1.0 and
                    // 1.00) tie in ORDER BY: their order is not defined.
                    self.stats.matched += 1;
                    self.stats.ties += 1;
                    None
                } else if pc == tc && dedups(sql) && tie_order_only(pr, tr, true) {
                    // DISTINCT, GROUP BY or a set operation keeps one of
                    // several equal values that print differently: which
                    // one is not defined either.
                    self.stats.matched += 1;
                    self.stats.ties += 1;
                    None
                } else {
                    Some("MISMATCH")
                }
            }
            (Outcome::Err { sqlstate, .. }, Outcome::Ok { .. }) => {
                // PostgreSQL folds constant subexpressions while planning and
                // raises their errors even when no row would evaluate them
                // (`SELECT 1/0 FROM t WHERE false`); pgtier evaluates per row.
                // EXPLAIN plans without running: the same error from it is a
                // plan-time one. Counted, not failed: the fuzzer cannot tell
                // whether pgtier skipped the expression or got it wrong.
                if !sqlstate.starts_with("22") {
                    return Some("ACCEPTED INVALID");
                }
                let explain = run_pg(&mut self.pg, &format!("EXPLAIN {sql}"));
                let plan_time = matches!(&explain, Outcome::Err { sqlstate: e, .. } if e == sqlstate);
                // (With rows too: a CASE or COALESCE arm pgtier never
                // reached is folded by PostgreSQL all the same.)
                if plan_time {
                    self.stats.plan_time += 1;
                    return None;
                }
                // A data error while running: PostgreSQL evaluated an
                // expression on a row pgtier never evaluated it on. SQL
                // leaves that order open (quals reordered by cost, pushed
                // below joins, IN lists and ANDs not short-circuited), so
                // it is counted and shown, not failed. A statement without
                // FROM evaluates everything once: there it is a finding.
                if !plan_time && sql.contains(" FROM ") {
                    let e = self.stats.eval_order.entry(sqlstate.clone()).or_insert_with(|| (0, sql.to_owned()));
                    e.0 += 1;
                    return None;
                }
                Some("ACCEPTED INVALID")
            }
            (Outcome::Ok { .. }, Outcome::Err { sqlstate, message }) => {
                let e = self
                    .stats
                    .tier_refused
                    .entry(sqlstate.clone())
                    .or_insert_with(|| (0, sql.to_owned(), message.clone()));
                e.0 += 1;
                None
            }
            (Outcome::Err { sqlstate: ps, .. }, Outcome::Err { sqlstate: ts, .. }) => {
                self.stats.both_refused += 1;
                if ps != ts {
                    let e = self
                        .stats
                        .other_sqlstate
                        .entry((ps.clone(), ts.clone()))
                        .or_insert_with(|| (0, sql.to_owned()));
                    e.0 += 1;
                }
                None
            }
        }
    }

    fn report(&self) {
        let s = &self.stats;
        let refused: u64 = s.tier_refused.values().map(|v| v.0).sum();
        println!(
            "fuzz differential: seed {}; {} statements, {} distinct shapes; both accepted {}, matched {}; both refused {}; PostgreSQL's plan-time (constant folding) errors {}; ties of equal values printed differently {}; refused by pgtier only {refused}; findings {}",
            self.seed,
            s.statements,
            s.shapes.len(),
            s.both_accepted,
            s.matched,
            s.both_refused,
            s.plan_time,
            s.ties,
            s.findings.len()
        );
        let mut by_count: Vec<_> = s.tier_refused.iter().collect();
        by_count.sort_by_key(|e| std::cmp::Reverse(e.1.0));
        println!("refused by pgtier, accepted by PostgreSQL, by SQLSTATE:");
        for (state, (n, sql, msg)) in by_count.iter().take(12) {
            println!("  {state} x{n}: {}\n      e.g. {}", truncate(msg, 150), truncate(sql, 300));
        }
        let mut drift: Vec<_> = s.other_sqlstate.iter().collect();
        drift.sort_by_key(|e| std::cmp::Reverse(e.1.0));
        println!("both refused, different SQLSTATE (PostgreSQL -> pgtier):");
        for ((p, t), (n, sql)) in drift.iter().take(12) {
            println!("  {p} -> {t} x{n}: {}", truncate(sql, 300));
        }
        println!(
            "data errors PostgreSQL raised at run time on rows pgtier did not evaluate (evaluation order, not failed):"
        );
        for (state, (n, sql)) in &s.eval_order {
            println!("  {state} x{n}: {}", truncate(sql, 300));
        }
        for f in s.findings.iter().take(40) {
            println!("FINDING {f}");
        }
        assert!(s.statements > 0, "no statement ran");
        assert!(s.findings.is_empty(), "{} findings (printed above), seed {}", s.findings.len(), self.seed);
    }
}

/// Deletes on PostgreSQL the row an `INSERT INTO t VALUES (k, ...)` of the
/// setup added (the first value is the key of every setup table with a
/// one-column key; the others are never refused).
fn undo_insert(pg: &mut postgres::Client, sql: &str) {
    let Some(rest) = sql.strip_prefix("INSERT INTO ") else { return };
    let Some((table, values)) = rest.split_once(" VALUES (") else { return };
    let key = values.split(',').next().unwrap_or("").trim();
    let pk = grammar::schema().into_iter().find(|t| t.name == table).map(|t| t.pk[0]).unwrap_or("id");
    let out = run_pg(pg, &format!("DELETE FROM {table} WHERE {pk} = {key}"));
    assert!(matches!(out, Outcome::Ok { .. }), "undo {sql}: {}", out.short());
}

// ---- never crash -------------------------------------------------------

/// A fresh engine with the fuzzer's schema and data (pgtier only).
fn crash_target(seed: u64) -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { commit_mode: CommitMode::Async, background: false, ..EngineConfig::default() };
    let db = Database::open(dir.path(), config).unwrap();
    let mut c = tier_connection(&db);
    for t in grammar::schema() {
        c.execute_sql(t.ddl).unwrap();
    }
    for sql in grammar::data(&mut Rng::new(seed)) {
        let _ = c.execute_sql(&sql);
    }
    (dir, c)
}

fn never_crash_child(seed: u64, deadline: Instant, last: &Path) {
    let tables = grammar::schema();
    let mut gen_ = Gen::new(&tables);
    let (mut _dir, mut conn) = crash_target(seed);
    let mut findings = Vec::new();
    let mut by_state: BTreeMap<String, u64> = BTreeMap::new();
    let (mut cases, mut oks) = (0u64, 0u64);
    let replay = replay_case();
    for case in 0.. {
        if replay.is_some_and(|r| case != r) {
            continue;
        }
        if replay.is_none() && Instant::now() >= deadline {
            break;
        }
        // A mutated DROP or COMMIT may change the data: start over now and then.
        if case > 0 && case % 2000 == 0 {
            (_dir, conn) = crash_target(seed);
        }
        let mut rng = Rng::new(grammar::case_seed(seed, case));
        let base = gen_.case(&mut rng);
        let sql = mutate::mutate(&mut rng, base.sql());
        let entry = rng.below(3);
        note(last, seed, case, &format!("entry {entry}: {sql}"));
        cases += 1;
        // Mostly inside a block that is rolled back, so DML and DDL leave
        // the data as it was.
        let in_block = rng.chance(80);
        if in_block {
            let _ = conn.execute_sql("BEGIN");
        }
        let result = catch_unwind(AssertUnwindSafe(|| entry_point(&mut conn, &mut rng, entry, &sql)));
        let broken = match result {
            Ok(Ok(())) => {
                oks += 1;
                None
            }
            Ok(Err((state, _))) if valid_sqlstate(&state) => {
                *by_state.entry(state).or_default() += 1;
                None
            }
            Ok(Err((state, msg))) => Some(format!("error without a SQLSTATE ({state:?}): {msg}")),
            Err(p) => Some(format!("PANIC {}", panic_text(p.as_ref()))),
        };
        if replay.is_some() {
            println!("case {case} entry {entry}: {}\n  -> {broken:?}", truncate(&sql, 2000));
        }
        if let Some(b) = broken {
            findings.push(format!(
                "{b} (PGTIER_FUZZ_SEED={seed} PGTIER_FUZZ_CASE={case}, entry {entry}):\n  {}",
                truncate(&sql, 1000)
            ));
            (_dir, conn) = crash_target(seed);
            continue;
        }
        // The connection must still answer.
        if conn.in_transaction() {
            let _ = conn.execute_sql("ROLLBACK");
        }
        let lower = sql.to_ascii_lowercase();
        if lower.contains("timeout") || lower.contains("statement_mem") || lower.contains("reset") {
            conn.execute_sql(&format!("SET statement_timeout = '{TIER_TIMEOUT}'")).unwrap();
            conn.execute_sql("SET pgtier.statement_mem = '256MB'").unwrap();
        }
        match catch_unwind(AssertUnwindSafe(|| conn.execute_sql("SELECT 1"))) {
            Ok(Ok(r))
                if r.rows.as_ref().and_then(|rows| rows.get(0)).and_then(|row| row.text(0)).as_deref() == Some("1") => {
            }
            other => {
                let got = match other {
                    Ok(Ok(r)) => format!("{r:?}"),
                    Ok(Err(e)) => format!("{} {}", e.sqlstate, e.message),
                    Err(p) => format!("PANIC {}", panic_text(p.as_ref())),
                };
                findings.push(format!("SELECT 1 after the case answers {got} (PGTIER_FUZZ_SEED={seed} PGTIER_FUZZ_CASE={case}, entry {entry}):\n  {}", truncate(&sql, 1000)));
                (_dir, conn) = crash_target(seed);
            }
        }
        if replay.is_some() {
            break;
        }
    }
    let mut top: Vec<_> = by_state.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1));
    let top: Vec<String> = top.iter().take(10).map(|(s, n)| format!("{s} x{n}")).collect();
    println!(
        "fuzz never_crash: seed {seed}; {cases} mutated statements, {oks} answered, errors by SQLSTATE: {}; findings {}",
        top.join(", "),
        findings.len()
    );
    for f in findings.iter().take(40) {
        println!("FINDING {f}");
    }
    assert!(cases > 0, "no case ran");
    assert!(findings.is_empty(), "{} findings (printed above), seed {seed}", findings.len());
}

/// Runs `sql` through entry point 0 (`execute_sql`), 1 (`prepare` +
/// `query`) or 2 (`prepare` + `execute`); parameters get NULL or a value of
/// their type, sometimes of another type (the API must refuse, not panic).
fn entry_point(conn: &mut Connection, rng: &mut Rng, entry: usize, sql: &str) -> Result<(), (String, String)> {
    let err = |e: pgtier_sql::SqlError| (e.sqlstate.to_owned(), e.message);
    if entry == 0 {
        return conn.execute_sql(sql).map(|_| ()).map_err(err);
    }
    let stmt = conn.prepare(sql).map_err(err)?;
    let params: Vec<Value> = stmt.param_types().iter().map(|t| param(rng, t)).collect();
    if entry == 1 {
        conn.query(&stmt, &params).map(|_| ()).map_err(err)
    } else {
        conn.execute(&stmt, &params).map(|_| ()).map_err(err)
    }
}

fn param(rng: &mut Rng, t: &DataType) -> Value {
    if rng.chance(25) {
        return Value::Null;
    }
    let t = if rng.chance(15) { &DataType::Text } else { t };
    match t {
        DataType::Bool => Value::Bool(rng.chance(50)),
        DataType::Int2 => Value::Int2(rng.next_u64() as i16),
        DataType::Int4 => Value::Int4(rng.next_u64() as i32),
        DataType::Int8 => Value::Int8(rng.next_u64() as i64),
        DataType::Float4 => Value::Float4(f32::from_bits(rng.next_u64() as u32)),
        DataType::Float8 => Value::Float8(f64::from_bits(rng.next_u64())),
        DataType::Bytea => Value::Bytea(vec![0, 255, 39]),
        DataType::Date => Value::Date(rng.next_u64() as i32),
        DataType::Timestamp(_) => Value::Timestamp(rng.next_u64() as i64),
        DataType::TimestampTz(_) => Value::TimestampTz(rng.next_u64() as i64),
        DataType::Numeric { .. } => Value::Int8(rng.next_u64() as i64),
        _ => Value::Text(rng.pick(&["", "x", "12", "NaN", "2000-01-01", "\u{0}", "é"]).to_string()),
    }
}
