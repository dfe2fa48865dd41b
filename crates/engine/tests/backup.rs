//! Online backup (backup.rs): writers commit while the backup copies; the
//! restored directory holds exactly the transactions whose WAL records lie
//! before the backup's end point, each whole. Restore refuses damaged
//! backups and non-empty targets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::open;
use pgtier_engine::{ColumnDef, DataType, Database, Lsn, TableDef, TableId, Value};

const WRITERS: i64 = 3;
const KEYS_PER_WRITER: i64 = 200;

/// What one committed transaction wrote: its commit record's position and,
/// per key, the new value (None: deleted).
struct Committed {
    lsn: Lsn,
    writes: Vec<(i64, Option<(i64, String)>)>,
}

fn create_kv(db: &Database) -> TableId {
    let mut t = db.begin().unwrap();
    let table = t
        .create_table(&TableDef::new(
            "kv",
            vec![
                ColumnDef::new("k", DataType::Int8),
                ColumnDef::new("v", DataType::Int8),
                ColumnDef::new("pad", DataType::Text),
            ],
            &["k"],
        ))
        .unwrap();
    t.commit().unwrap();
    table
}

fn rows(db: &Database, table: TableId) -> BTreeMap<i64, (i64, String)> {
    let mut t = db.begin().unwrap();
    let mut out = BTreeMap::new();
    t.scan_table(table, |r| {
        out.insert(r.get_i64(0).unwrap(), (r.get_i64(1).unwrap(), r.get_str(2).unwrap().to_owned()));
        Ok(true)
    })
    .unwrap();
    t.commit().unwrap();
    out
}

/// One writer: transactions of two to four writes (insert, update or
/// delete of its own keys), each recorded with its commit position.
fn writer(db: &Database, table: TableId, w: i64, stop: &AtomicBool, commits: &AtomicU64) -> Vec<Committed> {
    let mut present: BTreeMap<i64, (i64, String)> = BTreeMap::new();
    let mut log = Vec::new();
    let mut seq = 0i64;
    let mut rng = (w as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    while !stop.load(Ordering::Relaxed) {
        let mut t = db.begin().unwrap();
        let mut writes = Vec::new();
        for _ in 0..2 + next() % 3 {
            let k = w * 1_000_000 + (next() % KEYS_PER_WRITER as u64) as i64;
            if writes.iter().any(|(wk, _)| *wk == k) {
                continue;
            }
            seq += 1;
            let pad = format!("w{w}-{seq}-{}", "x".repeat((next() % 300) as usize));
            if present.contains_key(&k) && next() % 5 == 0 {
                assert!(t.delete(table, &[Value::Int8(k)]).unwrap());
                writes.push((k, None));
            } else if present.contains_key(&k) {
                let changes = [(1, Value::Int8(seq)), (2, Value::Text(pad.clone()))];
                assert!(t.update(table, &[Value::Int8(k)], &changes).unwrap());
                writes.push((k, Some((seq, pad))));
            } else {
                t.insert(table, &[Value::Int8(k), Value::Int8(seq), Value::Text(pad.clone())]).unwrap();
                writes.push((k, Some((seq, pad))));
            }
        }
        let info = t.commit().unwrap();
        for (k, v) in &writes {
            match v {
                Some(v) => present.insert(*k, v.clone()),
                None => present.remove(k),
            };
        }
        log.push(Committed { lsn: info.lsn.unwrap(), writes });
        commits.fetch_add(1, Ordering::Relaxed);
    }
    log
}

/// The committed prefix: every transaction whose record lies before `end`,
/// applied in log order.
fn state_at(base: &BTreeMap<i64, (i64, String)>, log: &mut [Committed], end: Lsn) -> BTreeMap<i64, (i64, String)> {
    log.sort_by_key(|c| c.lsn);
    let mut state = base.clone();
    for c in log.iter().take_while(|c| c.lsn < end) {
        for (k, v) in &c.writes {
            match v {
                Some(v) => state.insert(*k, v.clone()),
                None => state.remove(k),
            };
        }
    }
    state
}

#[test]
fn backup_under_writers_restores_exactly_the_end_point() {
    let src_dir = tempfile::tempdir().unwrap();
    let backups = tempfile::tempdir().unwrap();
    let backup_dir = backups.path().join("b1");
    // Small segments: the backup copies several, and the checkpoints taken
    // during it would truncate the first ones but for the backup's pin.
    let mut config = common::config();
    config.wal.segment_bytes = 512 << 10;
    config.wal.record_bytes_max = 128 << 10;
    let db = Database::open(src_dir.path(), config.clone()).unwrap();
    let table = create_kv(&db);
    // Rows before the backup (in the checkpoint and in the WAL before it),
    // under keys no writer touches.
    let mut base = BTreeMap::new();
    for chunk in 0..20 {
        let mut t = db.begin().unwrap();
        for i in 0..500 {
            let k = -(chunk * 500 + i) - 1;
            let pad = format!("base-{k}-{}", "y".repeat(100));
            t.insert(table, &[Value::Int8(k), Value::Int8(k), Value::Text(pad.clone())]).unwrap();
            base.insert(k, (k, pad));
        }
        t.commit().unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let commits = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (db, stop, commits) = (db.clone(), Arc::clone(&stop), Arc::clone(&commits));
            std::thread::spawn(move || writer(&db, table, w, &stop, &commits))
        })
        .collect();
    while commits.load(Ordering::Relaxed) < 200 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut waited = false;
    let report = db
        .backup(&backup_dir, &mut |_| {
            if !waited {
                waited = true;
                // Commits go on during the copy: let the WAL the backup is
                // about to read grow two segments past its end point...
                let target = db.wal_end().0 + 2 * (512 << 10);
                let deadline = Instant::now() + Duration::from_secs(60);
                while db.wal_end().0 < target && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(1));
                }
                // ...then two checkpoints delete the backup's checkpoint file
                // and would truncate the segments it copies but for its pin.
                db.checkpoint().unwrap();
                db.checkpoint().unwrap();
            }
        })
        .unwrap();
    // A few more commits after the backup ended.
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    let mut log: Vec<Committed> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    let end = report.manifest.end_lsn;
    let before = log.iter().filter(|c| c.lsn < end).count();
    let after = log.len() - before;
    eprintln!(
        "backup: {} files, {} bytes in {:?}; end {end:?}; {before} commits before the end point, {after} after",
        report.manifest.files.len(),
        report.bytes,
        report.duration
    );
    assert!(before >= 200 && after >= 150, "the backup ran beside the writers: {before} before, {after} after");
    let expected = state_at(&base, &mut log, end);
    let source_now = rows(&db, table);
    assert_ne!(source_now, expected, "the source moved on past the end point");

    let restored_dir = backups.path().join("restored");
    let restored_report = pgtier_engine::restore(&backup_dir, &restored_dir, &mut |_| {}).unwrap();
    assert_eq!(restored_report.manifest, report.manifest);
    let restored = Database::open(&restored_dir, config.clone()).unwrap();
    let got = rows(&restored, table);
    assert_eq!(got.len(), expected.len(), "row count at the end point");
    assert!(got == expected, "the restored rows differ from the committed prefix at the end point");
    restored.verify().unwrap();
    assert_ne!(restored.incarnation().id, db.incarnation().id, "a restored directory is a new incarnation");
    // The restored database goes on from the end point: new commits, a
    // restart, and they are kept.
    let mut t = restored.begin().unwrap();
    t.insert(table, &[Value::Int8(i64::MAX), Value::Int8(1), Value::Text("after restore".into())]).unwrap();
    t.commit().unwrap();
    restored.checkpoint().unwrap();
    drop(restored);
    let reopened = Database::open(&restored_dir, config).unwrap();
    let mut again = rows(&reopened, table);
    assert_eq!(again.remove(&i64::MAX), Some((1, "after restore".to_owned())));
    assert!(again == expected);
}

fn small_backup(dir: &Path) -> (tempfile::TempDir, Database) {
    let src = tempfile::tempdir().unwrap();
    let db = open(src.path());
    let table = create_kv(&db);
    let mut t = db.begin().unwrap();
    t.insert(table, &[Value::Int8(1), Value::Int8(1), Value::Text("one".into())]).unwrap();
    t.commit().unwrap();
    db.backup(dir, &mut |_| {}).unwrap();
    (src, db)
}

#[test]
fn restore_refuses_damaged_backups_and_used_targets() {
    let tmp = tempfile::tempdir().unwrap();
    let backup = tmp.path().join("b");
    let (_src, db) = small_backup(&backup);
    let manifest = pgtier_engine::verify_backup(&backup).unwrap();

    // A backup into a directory that holds something is refused.
    let e = db.backup(&backup, &mut |_| {}).unwrap_err();
    assert_eq!(e.sqlstate(), "22023");
    assert!(e.to_string().contains("is not empty"), "{e}");

    // A non-empty restore target is refused, and left alone.
    let used = tmp.path().join("used");
    std::fs::create_dir(&used).unwrap();
    std::fs::write(used.join("keep"), "mine").unwrap();
    let e = pgtier_engine::restore(&backup, &used, &mut |_| {}).unwrap_err();
    assert_eq!(e.sqlstate(), "22023");
    assert_eq!(std::fs::read_dir(&used).unwrap().count(), 1);

    // A flipped byte in a WAL segment: refused before anything is written.
    let segment = manifest.files.iter().find(|f| f.path.starts_with("wal/")).unwrap();
    let flip = |path: &Path, at: u64| {
        let mut bytes = std::fs::read(path).unwrap();
        bytes[at as usize] ^= 0x40;
        std::fs::write(path, bytes).unwrap();
    };
    flip(&backup.join(&segment.path), 40);
    let target = tmp.path().join("t1");
    let e = pgtier_engine::restore(&backup, &target, &mut |_| {}).unwrap_err();
    assert_eq!(e.sqlstate(), "XX001");
    assert!(e.to_string().contains(&format!("backup file {} fails its checksum", segment.path)), "{e}");
    assert!(!target.exists(), "nothing written for a damaged backup");
    flip(&backup.join(&segment.path), 40);

    // A missing file.
    let ckpt = manifest.files.iter().find(|f| f.path.starts_with("checkpoint-")).unwrap();
    std::fs::rename(backup.join(&ckpt.path), tmp.path().join("aside")).unwrap();
    let e = pgtier_engine::restore(&backup, &target, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("is missing"), "{e}");
    std::fs::rename(tmp.path().join("aside"), backup.join(&ckpt.path)).unwrap();

    // An edited manifest.
    let path = backup.join(pgtier_engine::MANIFEST_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    let end = format!("end_lsn {}", manifest.end_lsn.0);
    std::fs::write(&path, text.replace(&end, &format!("end_lsn {}", manifest.end_lsn.0 + 8))).unwrap();
    let e = pgtier_engine::restore(&backup, &target, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("backup manifest: checksum mismatch"), "{e}");
    std::fs::write(&path, &text).unwrap();

    // No manifest: an unfinished backup.
    std::fs::remove_file(&path).unwrap();
    let e = pgtier_engine::restore(&backup, &target, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("did not finish"), "{e}");
    std::fs::write(&path, &text).unwrap();

    // Put back together, it restores.
    pgtier_engine::restore(&backup, &target, &mut |_| {}).unwrap();
    assert!(!target.join("restore_in_progress").exists());
    let restored = open(&target);
    let table = restored.catalog().table_by_name("kv").unwrap().id;
    assert_eq!(rows(&restored, table).len(), 1);
    drop(restored);

    // A restore cut short (here: its marker put back) is not opened.
    std::fs::write(target.join("restore_in_progress"), "").unwrap();
    let e = Database::open(&target, common::config()).err().unwrap();
    assert_eq!(e.sqlstate(), "XX001");
    assert!(e.to_string().contains("holds a restore that did not finish"), "{e}");
}
