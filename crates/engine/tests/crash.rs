//! Crash test: a multi-threaded transfer workload runs in a child process
//! (this test binary re-executed with `PGTIER_CRASH_CHILD` set) and prints
//! every acknowledged commit; the parent SIGKILLs it at random moments,
//! reopens the same directory and checks the state against the log of
//! acknowledged commits. Background checkpoints and WAL truncation run
//! during the workload, so kills also land inside them.
//!
//! Each transaction moves `amount` from account `src` to `dst` (two
//! updates) and inserts a `hist` row with its id: a partly applied
//! transaction breaks the balance equation below.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pgtier_engine::{
    ColumnDef, CommitMode, DataType, Database, EngineConfig, ForeignKeyDef, IndexDef, RowBuf, SequenceOptions,
    TableDef, Value, WalConfig,
};
use rand::{Rng, SeedableRng};

const ACCOUNTS: i32 = 48;
const INITIAL_BALANCE: i64 = 1_000;
const WORKERS: i64 = 6;
const ENV_DIR: &str = "PGTIER_CRASH_CHILD";
const ENV_MODE: &str = "PGTIER_CRASH_MODE";

fn config(mode: CommitMode, background: bool) -> EngineConfig {
    EngineConfig {
        commit_mode: mode,
        wal: WalConfig {
            segment_bytes: 1 << 20,
            async_flush_interval: Duration::from_millis(10),
            record_bytes_max: 256 << 10,
            ..WalConfig::default()
        },
        lock_timeout: Duration::from_secs(5),
        checkpoint_interval: Some(Duration::from_millis(150)),
        checkpoint_wal_bytes: 512 << 10,
        checkpoint_on_close: false,
        background,
        ..EngineConfig::default()
    }
}

fn now_ms() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()
}

fn setup(db: &Database) {
    if db.catalog().table_by_name("acct").is_some() {
        return;
    }
    let mut t = db.begin().unwrap();
    let acct = t
        .create_table(&TableDef::new(
            "acct",
            vec![
                ColumnDef::new("id", DataType::Int4),
                ColumnDef::new("bal", DataType::Int8).not_null(),
                ColumnDef::new("last_txn", DataType::Int8),
                ColumnDef::new("tag", DataType::Varchar(20)),
            ],
            &["id"],
        ))
        .unwrap();
    let mut hist = TableDef::new(
        "hist",
        vec![
            ColumnDef::new("txn", DataType::Int8),
            ColumnDef::new("worker", DataType::Int4).not_null(),
            ColumnDef::new("src", DataType::Int4).not_null(),
            ColumnDef::new("dst", DataType::Int4).not_null(),
            ColumnDef::new("amount", DataType::Int8).not_null(),
            // From sequence hist_n, advanced in its own transaction.
            ColumnDef::new("n", DataType::Int8).not_null(),
        ],
        &["txn"],
    );
    t.create_sequence("hist_n", SequenceOptions::new(DataType::Int8, 1, None, None, None, false).unwrap()).unwrap();
    hist.foreign_keys.push(ForeignKeyDef {
        name: None,
        columns: vec!["src".into()],
        parent_table: "acct".into(),
        parent_columns: vec![],
        on_delete: Default::default(),
        timing: Default::default(),
    });
    t.create_table(&hist).unwrap();
    t.create_index(&IndexDef {
        name: "acct_tag".into(),
        table: "acct".into(),
        columns: vec!["tag".into()],
        unique: true,
        include: Vec::new(),
        options: Default::default(),
    })
    .unwrap();
    for id in 0..ACCOUNTS {
        t.insert(acct, &[Value::Int4(id), Value::Int8(INITIAL_BALANCE), Value::Null, Value::Text(format!("t{id}"))])
            .unwrap();
    }
    t.commit().unwrap();
}

/// Opens the database once the handle closed just before has let go of
/// its directory: a dropped handle's background threads may still hold
/// the lock a moment (on a loaded machine, CI once ran two suites at once,
/// an open right after met DirectoryInUse: the child after the parent's
/// check, and the parent's recount after its check). A lock still held
/// after seconds fails.
fn open_when_free(dir: &Path, config: EngineConfig) -> Database {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Database::open(dir, config.clone()) {
            Err(pgtier_engine::EngineError::DirectoryInUse { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            opened => return opened.unwrap(),
        }
    }
}

/// Child: run transfers until killed, printing `ACK txn worker src dst amount commit_ts ms`.
fn child(dir: &Path, mode: CommitMode) {
    let db = open_when_free(dir, config(mode, true));
    setup(&db);
    let cat = db.catalog();
    let acct = cat.table_by_name("acct").unwrap().id;
    let hist = cat.table_by_name("hist").unwrap().id;
    let hist_pk = cat.table_by_name("hist").unwrap().primary_index;
    let hist_n = cat.table_by_name("hist_n").unwrap().id;
    // Continue every worker's sequence after what is already committed.
    let mut next_seq: HashMap<i64, i64> = HashMap::new();
    let mut t = db.begin().unwrap();
    t.scan(hist_pk, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded, |r| {
        let txn = r.get_i64(0).unwrap();
        let e = next_seq.entry(txn / 1_000_000_000).or_insert(0);
        *e = (*e).max(txn % 1_000_000_000 + 1);
        Ok(true)
    })
    .unwrap();
    t.commit().unwrap();
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let handles: Vec<_> = (0..WORKERS)
        .map(|w| {
            let db = db.clone();
            let out = out.clone();
            let mut seq = next_seq.get(&w).copied().unwrap_or(0);
            std::thread::spawn(move || {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(now_ms() as u64 ^ (w as u64) << 32);
                loop {
                    let txn = w * 1_000_000_000 + seq;
                    let src = rng.random_range(0..ACCOUNTS);
                    let dst = (src + rng.random_range(1..ACCOUNTS)) % ACCOUNTS;
                    let amount = rng.random_range(1..50i64);
                    let mut t = db.begin().unwrap();
                    let r = (|| {
                        t.update_with(acct, &[Value::Int4(src)], |r| {
                            Ok(Some(vec![(1, Value::Int8(r.get_i64(1).unwrap() - amount)), (2, Value::Int8(txn))]))
                        })?;
                        t.update_with(acct, &[Value::Int4(dst)], |r| {
                            Ok(Some(vec![(1, Value::Int8(r.get_i64(1).unwrap() + amount)), (2, Value::Int8(txn))]))
                        })?;
                        let n = t.nextval(hist_n)?;
                        t.insert(
                            hist,
                            &[
                                Value::Int8(txn),
                                Value::Int4(w as i32),
                                Value::Int4(src),
                                Value::Int4(dst),
                                Value::Int8(amount),
                                Value::Int8(n),
                            ],
                        )
                    })();
                    match r {
                        Ok(()) => {
                            let info = t.commit().unwrap();
                            let mut o = out.lock().unwrap();
                            writeln!(o, "ACK {txn} {w} {src} {dst} {amount} {} {}", info.commit_ts.unwrap(), now_ms())
                                .unwrap();
                            o.flush().unwrap();
                            seq += 1;
                        }
                        Err(e) => {
                            assert!(matches!(e.sqlstate(), "40P01" | "55P03"), "unexpected error {e}");
                            t.rollback();
                        }
                    }
                }
            })
        })
        .collect();
    // Workers run until the parent kills the process; one that ends has
    // failed (a panic, printed above): the process exits, and the parent,
    // finding it gone before its kill, fails.
    loop {
        std::thread::sleep(Duration::from_millis(20));
        if handles.iter().any(std::thread::JoinHandle::is_finished) {
            std::process::exit(3);
        }
    }
}

#[test]
#[ignore = "the child process of a test in this file (run by it with --ignored)"]
fn crash_child_entry() {
    let Ok(dir) = std::env::var(ENV_DIR) else { return };
    let mode = if std::env::var(ENV_MODE).as_deref() == Ok("async") { CommitMode::Async } else { CommitMode::Sync };
    child(Path::new(&dir), mode);
}

struct Ack {
    txn: i64,
    worker: i32,
    src: i32,
    dst: i32,
    amount: i64,
    commit_ts: u64,
    at_ms: u128,
}

/// A child that ended before its kill has failed (its own output says how).
fn assert_child_alive(child: &mut std::process::Child) {
    if let Some(status) = child.try_wait().unwrap() {
        panic!("the child process ended before it was killed ({status}): it failed (see its output above)");
    }
}

/// One round: run the child, kill it, return the acknowledged commits and the kill time.
fn run_child(dir: &Path, mode: &str, run_ms: u64) -> (Vec<Ack>, u128) {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["--exact", "crash_child_entry", "--ignored", "--nocapture", "--test-threads=1"])
        .env(ENV_DIR, dir)
        .env(ENV_MODE, mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let acks = Arc::new(Mutex::new(Vec::new()));
    let started = Arc::new(AtomicBool::new(false));
    let reader = {
        let acks = acks.clone();
        let started = started.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Some(rest) = line.strip_prefix("ACK ") else { continue };
                let f: Vec<&str> = rest.split(' ').collect();
                if f.len() != 7 {
                    continue; // torn last line at the kill
                }
                started.store(true, Ordering::Release);
                acks.lock().unwrap().push(Ack {
                    txn: f[0].parse().unwrap(),
                    worker: f[1].parse().unwrap(),
                    src: f[2].parse().unwrap(),
                    dst: f[3].parse().unwrap(),
                    amount: f[4].parse().unwrap(),
                    commit_ts: f[5].parse().unwrap(),
                    at_ms: f[6].parse().unwrap(),
                });
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !started.load(Ordering::Acquire) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(started.load(Ordering::Acquire), "child never acknowledged a commit");
    std::thread::sleep(Duration::from_millis(run_ms));
    assert_child_alive(&mut child);
    let killed_ms = now_ms();
    // SAFETY: plain kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    reader.join().unwrap();
    let acks = std::mem::take(&mut *acks.lock().unwrap());
    (acks, killed_ms)
}

struct RoundCheck {
    lost: usize,
    lost_window_ms: u128,
    /// Committed (found after recovery) but never acknowledged: in flight at the kill.
    committed_unacked: Vec<(i64, (i32, i32, i32, i64))>,
}

/// Reopens the database and checks it against every acknowledged commit.
fn check(
    dir: &Path,
    all_acks: &BTreeMap<i64, (i32, i32, i32, i64)>,
    round: &[Ack],
    killed_ms: u128,
    mode: CommitMode,
) -> RoundCheck {
    let db = open_when_free(dir, config(mode, false));
    db.verify().unwrap();
    let cat = db.catalog();
    let acct = cat.table_by_name("acct").unwrap().id;
    let hist = cat.table_by_name("hist").unwrap().id;
    let mut t = db.begin().unwrap();
    let mut present: BTreeMap<i64, (i32, i32, i32, i64)> = BTreeMap::new();
    let mut sequence_values = std::collections::HashSet::new();
    t.scan_table(hist, |r| {
        let v = (
            r.get_i64(1).unwrap() as i32,
            r.get_i64(2).unwrap() as i32,
            r.get_i64(3).unwrap() as i32,
            r.get_i64(4).unwrap(),
        );
        present.insert(r.get_i64(0).unwrap(), v);
        assert!(sequence_values.insert(r.get_i64(5).unwrap()), "two committed transfers drew the same sequence value");
        Ok(true)
    })
    .unwrap();
    // Balances must equal the replay of every committed transfer: a
    // transaction visible in part (hist row without both updates, or the
    // reverse) breaks this equation.
    let mut expect = vec![INITIAL_BALANCE; ACCOUNTS as usize];
    for (_, src, dst, amount) in present.values() {
        expect[*src as usize] -= amount;
        expect[*dst as usize] += amount;
    }
    let mut row = RowBuf::new();
    for id in 0..ACCOUNTS {
        assert!(t.get(acct, &[Value::Int4(id)], &mut row).unwrap());
        assert_eq!(row.get_i64(1), Some(expect[id as usize]), "account {id} balance != replay of committed transfers");
        if let Some(last) = row.get_i64(2) {
            let (_, src, dst, _) = present.get(&last).expect("last_txn names a committed transfer");
            assert!(*src == id || *dst == id);
        }
    }
    t.commit().unwrap();
    // The sequence continues past every value a committed row holds.
    let mut t = db.begin().unwrap();
    let next = t.nextval(cat.table_by_name("hist_n").unwrap().id).unwrap();
    t.rollback();
    assert!(sequence_values.iter().all(|&n| n < next), "nextval after recovery ({next}) repeats a committed value");
    // Acknowledged commits from earlier rounds are all still there; this
    // round's are too in sync mode, or all but a suffix (in commit order) in async.
    let round_ids: std::collections::HashSet<i64> = round.iter().map(|a| a.txn).collect();
    for (txn, v) in all_acks {
        if round_ids.contains(txn) && mode == CommitMode::Async {
            continue;
        }
        assert_eq!(present.get(txn), Some(v), "acknowledged transaction {txn} missing or different");
    }
    let mut lost: Vec<&Ack> = round.iter().filter(|a| !present.contains_key(&a.txn)).collect();
    if mode == CommitMode::Sync {
        assert!(lost.is_empty(), "sync mode lost {} acknowledged commits", lost.len());
    }
    lost.sort_by_key(|a| a.commit_ts);
    if let Some(first_lost) = lost.first() {
        let max_present_ts =
            round.iter().filter(|a| present.contains_key(&a.txn)).map(|a| a.commit_ts).max().unwrap_or(0);
        assert!(first_lost.commit_ts > max_present_ts, "lost commits are not a suffix of commit order");
    }
    for a in round.iter().filter(|a| present.contains_key(&a.txn)) {
        assert_eq!(present[&a.txn], (a.worker, a.src, a.dst, a.amount));
    }
    let acked: std::collections::HashSet<i64> = all_acks.keys().copied().collect();
    let committed_unacked = present.iter().filter(|(k, _)| !acked.contains(k)).map(|(k, v)| (*k, *v)).collect();
    let lost_window_ms = lost.iter().map(|a| killed_ms.saturating_sub(a.at_ms)).max().unwrap_or(0);
    db.close().unwrap();
    RoundCheck { lost: lost.len(), lost_window_ms, committed_unacked }
}

fn crash_loop(mode: CommitMode, rounds: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mode_name = if mode == CommitMode::Async { "async" } else { "sync" };
    let mut rng = rand::rngs::SmallRng::seed_from_u64(now_ms() as u64);
    let mut all_acks: BTreeMap<i64, (i32, i32, i32, i64)> = BTreeMap::new();
    let (mut total_acks, mut total_lost, mut max_window, mut max_lost, mut unacked) = (0, 0, 0, 0, 0);
    for round in 0..rounds {
        let run_ms = rng.random_range(20..400);
        let (acks, killed_ms) = run_child(dir.path(), mode_name, run_ms);
        total_acks += acks.len();
        for a in &acks {
            all_acks.insert(a.txn, (a.worker, a.src, a.dst, a.amount));
        }
        let r = check(dir.path(), &all_acks, &acks, killed_ms, mode);
        // Lost async commits are gone for good: later rounds must not expect them.
        if r.lost > 0 {
            let present: Vec<i64> = acks.iter().map(|a| a.txn).collect();
            let db = open_when_free(dir.path(), config(mode, false));
            let hist = db.catalog().table_by_name("hist").unwrap().id;
            let mut t = db.begin().unwrap();
            let mut row = RowBuf::new();
            for txn in present {
                if !t.get(hist, &[Value::Int8(txn)], &mut row).unwrap() {
                    all_acks.remove(&txn);
                }
            }
            drop(t);
            db.close().unwrap();
        }
        total_lost += r.lost;
        max_lost = max_lost.max(r.lost);
        max_window = max_window.max(r.lost_window_ms);
        // Recovered from disk, so durable from now on: later rounds must keep them.
        unacked += r.committed_unacked.len();
        all_acks.extend(r.committed_unacked);
        eprintln!(
            "crash[{mode_name}] round {round}: ran {run_ms} ms, {} acks, lost {} (window {} ms), committed-unacked so far {}",
            acks.len(),
            r.lost,
            r.lost_window_ms,
            unacked
        );
    }
    eprintln!(
        "crash[{mode_name}] SUMMARY: {rounds} kills, {total_acks} acknowledged commits, {total_lost} lost (max {max_lost} in a round, max window {max_window} ms), {unacked} committed-but-unacknowledged found whole"
    );
    // Async commits reach the disk within the flush interval (10 ms here);
    // the bound leaves room for a busy machine's scheduling, yet a WAL that
    // stopped flushing loses whole runs (up to 400 ms) and fails it.
    assert!(
        max_window <= ASYNC_LOSS_WINDOW_MAX_MS,
        "an acknowledged async commit {max_window} ms before the kill was lost (bound {ASYNC_LOSS_WINDOW_MAX_MS} ms)"
    );
}

/// How long before a kill an acknowledged async commit may have been and still be lost.
const ASYNC_LOSS_WINDOW_MAX_MS: u128 = 250;

#[test]
fn crash_sync_every_ack_survives() {
    if std::env::var(ENV_DIR).is_ok() {
        return;
    }
    crash_loop(CommitMode::Sync, 22);
}

#[test]
fn crash_async_loses_only_a_bounded_suffix() {
    if std::env::var(ENV_DIR).is_ok() {
        return;
    }
    crash_loop(CommitMode::Async, 20);
}
