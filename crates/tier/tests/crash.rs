//! kill -9 of a real process writing Durable records (and checkpointing):
//! after every kill, each acknowledged record is there with its exact value,
//! each acknowledged removal stays removed, and nothing returns wrong bytes.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{config, value};
use pgtier_tier::{FlashStore, Inserted, Retention, TierConfig};

const CHILD_ENV: &str = "PGTIER_TIER_KILL9_DIR";
/// Set for rounds whose child never checkpoints (the restart scans).
const NO_CHECKPOINT_ENV: &str = "PGTIER_TIER_KILL9_NO_CHECKPOINT";
const THREADS: u64 = 3;
const KEYS_PER_THREAD: u64 = 300;

fn store_config(dir: &Path) -> TierConfig {
    config(dir, 32)
}

fn k(key: u64) -> Vec<u8> {
    format!("crash-{key}").into_bytes()
}

fn len_of(version: u64) -> usize {
    100 + (version.wrapping_mul(7919) % 900) as usize
}

/// Child mode of the kill tests: writer threads loop forever, each on its
/// own keys (so its printed order is the order of effects on them), and
/// print `OP` before and `ACK` after each Durable insert or removal; a
/// thread churns Evictable records (reclamation compacts the Durable ones)
/// and one checkpoints in a loop (so kills land inside checkpoints).
#[test]
#[ignore = "the child process of the kill -9 tests (run by them with --ignored)"]
fn kill9_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else { return };
    let (store, _) = FlashStore::open(&store_config(Path::new(&dir)), b"T").expect("child open");
    let store = Arc::new(store);
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let say = move |out: &Mutex<std::io::Stdout>, line: String| {
        let mut out = out.lock().expect("stdout");
        writeln!(out, "{line}").expect("print");
        out.flush().expect("flush");
    };
    let run = u64::from(std::process::id()) << 32;
    let mut handles = Vec::new();
    for t in 0..THREADS {
        let (store, out) = (Arc::clone(&store), Arc::clone(&out));
        handles.push(std::thread::spawn(move || {
            for i in 0u64.. {
                let key = t + THREADS * ((i.wrapping_mul(0x9e37_79b9) >> 7) % KEYS_PER_THREAD);
                let version = run | (t << 28) | i;
                if i % 7 == 3 {
                    say(&out, format!("OP {key} DEL"));
                    store.remove(&k(key)).expect("remove");
                    say(&out, format!("ACK {key} DEL"));
                    continue;
                }
                say(&out, format!("OP {key} {version}"));
                match store.insert(&k(key), &value(key, version, len_of(version)), Retention::Durable) {
                    Ok(Inserted::Stored) => say(&out, format!("ACK {key} {version}")),
                    Ok(Inserted::Rejected(r)) => panic!("Durable insert rejected: {r:?}"),
                    Err(pgtier_tier::TierError::Full(_)) => say(&out, format!("NACK {key}")),
                    Err(e) => panic!("insert: {e}"),
                }
            }
        }));
    }
    let churn = Arc::clone(&store);
    handles.push(std::thread::spawn(move || {
        for i in 0u64.. {
            let key = 1_000_000 + i % 5000;
            churn.insert(&k(key), &value(key, i, 300), Retention::Evictable).expect("churn");
        }
    }));
    let (ckpt, out2) = (Arc::clone(&store), Arc::clone(&out));
    let checkpoints = std::env::var(NO_CHECKPOINT_ENV).is_err();
    handles.push(std::thread::spawn(move || {
        if !checkpoints {
            return;
        }
        loop {
            say(&out2, "CKPT BEGIN".into());
            ckpt.checkpoint(b"T").expect("checkpoint");
            say(&out2, "CKPT END".into());
            std::thread::sleep(Duration::from_millis(5));
        }
    }));
    for h in handles {
        h.join().expect("join");
    }
}

/// What a key must read as: the last acknowledged state, or (if an
/// operation was in flight at the kill) the state that operation leaves.
#[derive(Clone, Default)]
struct Expect {
    acked: Option<Option<u64>>,
    pending: Option<Option<u64>>,
}

/// Parses one child's output into `expect`; returns whether it was killed
/// inside a checkpoint, and how many acknowledgements it printed.
fn absorb(lines: &[String], expect: &mut HashMap<u64, Expect>) -> (bool, usize) {
    let mut in_checkpoint = false;
    let mut acks = 0;
    for line in lines {
        let f: Vec<&str> = line.split_whitespace().collect();
        let state = |s: &str| if s == "DEL" { None } else { Some(s.parse::<u64>().expect("version")) };
        match f.as_slice() {
            ["OP", key, what] => expect.entry(key.parse().expect("key")).or_default().pending = Some(state(what)),
            ["ACK", key, what] => {
                let e = expect.entry(key.parse().expect("key")).or_default();
                e.acked = Some(state(what));
                e.pending = None;
                acks += 1;
            }
            ["NACK", key] => expect.entry(key.parse().expect("key")).or_default().pending = None,
            ["CKPT", "BEGIN"] => in_checkpoint = true,
            ["CKPT", "END"] => in_checkpoint = false,
            _ => {}
        }
    }
    (in_checkpoint, acks)
}

/// Checks every key, then makes what was read the acknowledged state: an
/// operation in flight at the kill either happened or not, for good.
fn check(store: &FlashStore, expect: &mut HashMap<u64, Expect>, round: usize) {
    for (&key, e) in expect.iter_mut() {
        let got = store.get(&k(key)).unwrap_or_else(|err| panic!("round {round}: key {key}: {err}"));
        let got_version = got.as_ref().map(|(v, r)| {
            assert_eq!(*r, Retention::Durable, "round {round}: key {key}");
            let version = parse_version(key, v).unwrap_or_else(|| panic!("round {round}: key {key}: wrong bytes"));
            assert_eq!(v, &value(key, version, len_of(version)), "round {round}: key {key}: wrong bytes");
            version
        });
        let acked = e.acked.unwrap_or(None);
        let ok = got_version == acked || e.pending.is_some_and(|p| got_version == p);
        assert!(
            ok,
            "round {round}: key {key}: read {got_version:?}, acknowledged {acked:?}, in flight {:?}",
            e.pending
        );
        *e = Expect { acked: Some(got_version), pending: None };
    }
}

fn parse_version(key: u64, v: &[u8]) -> Option<u64> {
    let head = String::from_utf8_lossy(&v[..v.len().min(40)]).into_owned();
    head.strip_prefix(&format!("v{key}."))?.split(':').next()?.parse().ok()
}

fn kill_loop(rounds: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = std::env::current_exe().expect("current_exe");
    let mut expect: HashMap<u64, Expect> = HashMap::new();
    let mut rng = 0x2545_f491_4f6c_dd1d_u64 ^ u64::from(std::process::id());
    let (mut acks, mut in_checkpoint, mut from_index, mut from_scan) = (0, 0, 0, 0);
    for round in 0..rounds {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let mut child = Command::new(&exe)
            .args(["--exact", "kill9_child", "--ignored", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, dir.path())
            .envs((round % 3 == 2).then_some((NO_CHECKPOINT_ENV, "1")))
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("child.stderr")).expect("stderr file"))
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("stdout");
        let reader =
            std::thread::spawn(move || BufReader::new(stdout).lines().map_while(Result::ok).collect::<Vec<_>>());
        std::thread::sleep(Duration::from_millis(150 + rng % 400));
        if let Some(status) = child.try_wait().expect("try_wait") {
            let stderr = std::fs::read_to_string(dir.path().join("child.stderr")).unwrap_or_default();
            panic!("round {round}: the child ended before it was killed ({status}):\n{stderr}");
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("wait");
        let lines = reader.join().expect("reader");
        let (killed_in_checkpoint, n) = absorb(&lines, &mut expect);
        acks += n;
        in_checkpoint += usize::from(killed_in_checkpoint);
        let (store, report) = FlashStore::open(&store_config(dir.path()), b"T").expect("reopen after kill");
        from_index += usize::from(report.warm == pgtier_tier::Warm::FromIndex);
        from_scan += usize::from(report.warm == pgtier_tier::Warm::FromScan);
        assert!(!report.clean, "round {round}: a killed store cannot be clean");
        check(&store, &mut expect, round);
    }
    eprintln!(
        "{rounds} kills: {acks} acknowledged operations, {in_checkpoint} kills inside a checkpoint, \
         {from_index} restarts from an index, {from_scan} from a scan"
    );
    assert!(acks > 50 * rounds, "children acknowledged too little to mean anything: {acks}");
    assert!(from_index > 0 && from_scan > 0, "both restart paths must be exercised");
}

#[test]
fn kill9_acknowledged_durable_records_survive() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    kill_loop(6);
}

#[test]
#[ignore = "long: 25 kills (cargo test -p pgtier-tier --test crash -- --ignored kill9_many)"]
fn kill9_many() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    kill_loop(25);
}
