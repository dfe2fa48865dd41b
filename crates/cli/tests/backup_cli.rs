//! `pgtier backup` against a serving `pgtier serve` under load from client
//! threads, `pgtier restore` into a new directory, `pgtier serve` on it:
//! everything acknowledged before the backup began is there, and no
//! transaction is there by half. Damaged backups and used targets are
//! refused as one line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const WRITERS: i32 = 3;

fn write_config(path: &Path, data_dir: &Path) {
    let config = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\ncommit_mode = \"sync\"\n[auth]\nmethod = \"trust\"\n",
        data_dir.display()
    );
    std::fs::write(path, config).unwrap();
}

fn serve(config: &Path) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pgtier"))
        .args(["serve", "--config"])
        .arg(config)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let addr =
        first.strip_prefix("pgtier: listening on ").unwrap_or_else(|| panic!("{first}")).split(' ').next().unwrap();
    let addr = addr.to_owned();
    std::thread::spawn(move || for _ in lines.by_ref() {});
    (child, format!("postgresql://app@{addr}/app"))
}

fn terminate(child: &mut Child) {
    // SAFETY: signals our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    assert!(child.wait().unwrap().success());
}

fn pgtier(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pgtier")).args(args).output().unwrap()
}

/// One writer: each transaction inserts an event row and bumps the
/// writer's counter, so a transaction half restored shows as a counter
/// that disagrees with the rows. Records each id once acknowledged.
fn writer(url: &str, w: i32, stop: &AtomicBool, acked: &Mutex<Vec<BTreeSet<i32>>>) {
    let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let id = w * 1_000_000 + n;
        c.batch_execute(&format!(
            "BEGIN; INSERT INTO events VALUES ({id}, {w}, repeat('x', {})); \
             UPDATE counters SET n = n + 1 WHERE w = {w}; COMMIT",
            n % 200
        ))
        .unwrap();
        acked.lock().unwrap()[w as usize].insert(id);
    }
}

#[test]
fn backup_under_load_restores_everything_acknowledged_before_it() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("pgtier.toml");
    write_config(&config, &tmp.path().join("data"));
    let (mut server, url) = serve(&config);
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute(
        "CREATE TABLE events (id int PRIMARY KEY, w int NOT NULL, pad text); \
         CREATE TABLE counters (w int PRIMARY KEY, n int NOT NULL); \
         INSERT INTO counters VALUES (0, 0), (1, 0), (2, 0)",
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(vec![BTreeSet::new(); WRITERS as usize]));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (url, stop, acked) = (url.clone(), Arc::clone(&stop), Arc::clone(&acked));
            std::thread::spawn(move || writer(&url, w, &stop, &acked))
        })
        .collect();
    while acked.lock().unwrap().iter().map(BTreeSet::len).sum::<usize>() < 300 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let backup = tmp.path().join("backup");
    // Acknowledged before the backup began: must all be in it.
    let before: Vec<BTreeSet<i32>> = acked.lock().unwrap().clone();
    let out = pgtier(&["backup", "--url", &url, backup.to_str().unwrap()]);
    let after_backup: usize = acked.lock().unwrap().iter().map(BTreeSet::len).sum();
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    for h in writers {
        h.join().unwrap();
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.starts_with(&format!("BACKUP {} (end LSN ", backup.display())), "{stdout}");
    assert!(stderr.contains("pgtier: backup complete: end LSN "), "{stderr}");
    let total: usize = acked.lock().unwrap().iter().map(BTreeSet::len).sum();
    eprintln!("acknowledged: {} before the backup, {after_backup} when it ended, {total} in all", {
        before.iter().map(BTreeSet::len).sum::<usize>()
    });
    terminate(&mut server);

    // A backup into a used directory is refused by the server.
    let (mut server, url) = serve(&config);
    let out = pgtier(&["backup", "--url", &url, backup.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("is not empty (SQLSTATE 22023)"), "{stderr}");
    terminate(&mut server);

    // Restore into a new directory and serve it.
    let restored = tmp.path().join("restored");
    let out = pgtier(&["restore", backup.to_str().unwrap(), restored.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("RESTORE "));
    let restored_config = tmp.path().join("restored.toml");
    write_config(&restored_config, &restored);
    let (mut server, url) = serve(&restored_config);
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    for w in 0..WRITERS {
        let ids: BTreeSet<i32> =
            c.query("SELECT id FROM events WHERE w = $1", &[&w]).unwrap().iter().map(|r| r.get(0)).collect();
        let counter: i32 = c.query_one("SELECT n FROM counters WHERE w = $1", &[&w]).unwrap().get(0);
        let missing: Vec<_> = before[w as usize].difference(&ids).collect();
        assert!(missing.is_empty(), "writer {w}: acknowledged before the backup, not restored: {missing:?}");
        assert_eq!(counter as usize, ids.len(), "writer {w}: a transaction restored by half");
        // Each writer's transactions are sequential: the restored ones are a prefix.
        let n_max = ids.iter().max().map_or(0, |id| id - w * 1_000_000);
        assert_eq!(ids.len(), n_max as usize, "writer {w}: not a prefix of its commits");
    }
    terminate(&mut server);
}

#[test]
fn restore_refuses_damage_and_used_targets_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("pgtier.toml");
    write_config(&config, &tmp.path().join("data"));
    let (mut server, url) = serve(&config);
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute("CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)").unwrap();
    let backup = tmp.path().join("backup");
    // Over the wire as a statement too (what psql users type).
    c.batch_execute(&format!("BACKUP TO '{}'", backup.display())).unwrap();
    let e = c.batch_execute("BACKUP TO 'relative/dir'").unwrap_err();
    assert_eq!(e.as_db_error().unwrap().code().code(), "22023");
    terminate(&mut server);

    let out = pgtier(&["restore", "--verify-only", backup.to_str().unwrap(), "unused"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let used = tmp.path().join("used");
    std::fs::create_dir(&used).unwrap();
    std::fs::write(used.join("x"), "").unwrap();
    let out = pgtier(&["restore", backup.to_str().unwrap(), used.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("is not empty"), "{stderr}");

    let ckpt = std::fs::read_dir(&backup)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "ckpt"))
        .unwrap();
    let mut bytes = std::fs::read(&ckpt).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 1;
    std::fs::write(&ckpt, bytes).unwrap();
    let target = tmp.path().join("target");
    let out = pgtier(&["restore", backup.to_str().unwrap(), target.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("fails its checksum"), "{stderr}");
    assert!(!target.exists());

    std::fs::write(backup.join("backup_manifest"), "pgtier backup manifest 1\nchecksum 00000000\n").unwrap();
    let out = pgtier(&["restore", backup.to_str().unwrap(), target.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("backup manifest: checksum mismatch"), "{stderr}");
}
