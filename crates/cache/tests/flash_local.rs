//! Rows of plain local tables on the flash tier (write-back mode,
//! `[tier] local_tables`): past their memory budget, aging moves the rows
//! not used lately to flash and the table keeps stubs; every read gives
//! the rows as written, across updates, deletes, a clean restart (the rows
//! stay on flash), DISABLE (they come back) and kill -9 (nothing
//! acknowledged is lost). No PostgreSQL: local tables have none behind them.
//! CI runs a short kill loop; the full count:
//! `PGTIER_LOCAL_KILL_ROUNDS=20 cargo test --release -p pgtier-cache --test flash_local -- --nocapture`.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::ops::Bound;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgtier_cache::{Cache, CacheConfig, TierCommand, TierMode};
use pgtier_engine::{ColumnDef, CommitMode, DataType, Database, IndexDef, RowBuf, TableDef, TableId, Value};
use rand::{Rng, SeedableRng};

const ENV_DIR: &str = "PGTIER_LOCAL_CRASH_DIR";
const ENV_SEED: &str = "PGTIER_LOCAL_CRASH_SEED";

fn open(dir: &Path, budget: u64, aging_interval: Duration) -> Arc<Cache> {
    let db = common::open_when_free(&dir.join("db"));
    let config = CacheConfig {
        aging_interval,
        tier: Some(common::small_tier(dir)),
        tier_mode: TierMode::WriteBack,
        local_tables_budget: Some(budget),
        ..CacheConfig::default()
    };
    Cache::open(db, None, config).unwrap()
}

/// notes(id int PK, owner int indexed, n bigint NOT NULL, body text): a
/// plain local table; `body` is what stubs leave behind.
fn create_notes(db: &Database) -> TableId {
    if let Some(t) = db.catalog().table_by_name("notes") {
        return t.id;
    }
    let mut t = db.begin().unwrap();
    let id = t
        .create_table(&TableDef::new(
            "notes",
            vec![
                ColumnDef::new("id", DataType::Int4),
                ColumnDef::new("owner", DataType::Int4),
                ColumnDef::new("n", DataType::Int8).not_null(),
                ColumnDef::new("body", DataType::Text),
            ],
            &["id"],
        ))
        .unwrap();
    t.create_index(&IndexDef {
        name: "notes_owner".into(),
        table: "notes".into(),
        columns: vec!["owner".into()],
        unique: false,
        include: Vec::new(),
        options: Default::default(),
    })
    .unwrap();
    t.commit().unwrap();
    id
}

fn note(id: i32, n: i64) -> Vec<Value> {
    vec![
        Value::Int4(id),
        Value::Int4(id % 97),
        Value::Int8(n),
        Value::Text(format!("{id:08}-{n}-{}", "b".repeat(120 + (id % 40) as usize))),
    ]
}

/// Every row of `notes` by id, through a scan of the table.
fn all_notes(db: &Database, table: TableId) -> BTreeMap<i32, Vec<Value>> {
    let mut t = db.begin().unwrap();
    let mut rows = BTreeMap::new();
    t.scan_table(table, |r| {
        let values = r.values();
        let Value::Int4(id) = values[0] else { panic!("id {:?}", values[0]) };
        rows.insert(id, values);
        Ok(true)
    })
    .unwrap();
    t.commit().unwrap();
    rows
}

fn stubs(db: &Database, table: TableId) -> usize {
    let mut n = 0;
    db.for_each_stub(table, |_, _| n += 1);
    n
}

#[test]
fn idle_local_rows_live_on_flash_and_read_as_written() {
    let dir = tempfile::tempdir().unwrap();
    const ROWS: i32 = 20_000;
    let budget = 1 << 20;
    let cache = open(dir.path(), budget, Duration::from_secs(3600));
    let db = cache.database().clone();
    let table = create_notes(&db);
    let mut t = db.begin().unwrap();
    for id in 0..ROWS {
        t.insert(table, &note(id, 0)).unwrap();
    }
    t.commit().unwrap();
    let mut expected: BTreeMap<i32, Vec<Value>> = (0..ROWS).map(|id| (id, note(id, 0))).collect();
    let whole = db.table_memory(table);
    assert!(whole > 3 * budget, "the table must outgrow its budget: {whole} bytes");
    // The first round attaches the table and stamps nothing old enough;
    // the next ones move what was not used during a whole interval.
    for _ in 0..4 {
        cache.age_now().unwrap();
    }
    let moved = stubs(&db, table);
    let after = db.table_memory(table);
    println!("{ROWS} rows, {whole} bytes in memory whole; {moved} moved to flash, {after} bytes left");
    assert!(moved > ROWS as usize / 2, "only {moved} rows moved");
    assert!(after < whole / 2, "memory {whole} -> {after}");
    let local = cache.tier_stats().into_iter().find(|r| r.group.as_deref() == Some("(local tables)")).unwrap();
    assert_eq!(local.demotions, moved as u64);
    assert_eq!(all_notes(&db, table), expected);

    // Point reads, an index scan, writes over rows on flash.
    let mut t = db.begin().unwrap();
    let mut buf = RowBuf::new();
    for id in (0..ROWS).step_by(997) {
        assert!(t.get(table, &[Value::Int4(id)], &mut buf).unwrap());
        assert_eq!(buf.values(), expected[&id]);
    }
    let mut owned = Vec::new();
    t.scan(
        db.catalog().index_by_name("notes_owner").unwrap().id,
        Bound::Included(&[Value::Int4(5)][..]),
        Bound::Included(&[Value::Int4(5)][..]),
        |r| {
            owned.push(r.values());
            Ok(true)
        },
    )
    .unwrap();
    let want: Vec<Vec<Value>> = expected.values().filter(|r| r[1] == Value::Int4(5)).cloned().collect();
    assert_eq!(owned, want);
    for id in (0..ROWS).step_by(101) {
        assert!(t.update(table, &[Value::Int4(id)], &[(2, Value::Int8(7))]).unwrap());
        expected.insert(id, note(id, 0)).unwrap();
        expected.get_mut(&id).unwrap()[2] = Value::Int8(7);
    }
    for id in (50..ROWS).step_by(203) {
        assert!(t.delete(table, &[Value::Int4(id)]).unwrap());
        expected.remove(&id);
    }
    t.commit().unwrap();
    db.vacuum();
    assert_eq!(all_notes(&db, table), expected);
    db.verify().unwrap();

    // A clean restart: the rows stay on flash (memory does not fill again).
    let on_flash = stubs(&db, table);
    cache.shutdown();
    drop(cache);
    db.close().unwrap();
    let cache = open(dir.path(), budget, Duration::from_secs(3600));
    let db = cache.database().clone();
    assert_eq!(stubs(&db, table), on_flash);
    assert_eq!(all_notes(&db, table), expected);
    db.verify().unwrap();

    // A dropped table's rows on flash: nobody's any more.
    let mut t = db.begin().unwrap();
    let scratch = t
        .create_table(&TableDef::new(
            "scratch",
            vec![ColumnDef::new("id", DataType::Int4), ColumnDef::new("body", DataType::Text)],
            &["id"],
        ))
        .unwrap();
    t.commit().unwrap();
    let mut t = db.begin().unwrap();
    for id in 0..5000 {
        t.insert(scratch, &[Value::Int4(id), Value::Text("s".repeat(300))]).unwrap();
    }
    t.commit().unwrap();
    for _ in 0..3 {
        cache.age_now().unwrap();
    }
    assert!(stubs(&db, scratch) > 0, "the scratch table's rows should have moved");
    let mut t = db.begin().unwrap();
    t.drop_table("scratch").unwrap();
    t.commit().unwrap();

    // DISABLE: everything back in memory first, then the store goes (the
    // dropped table's images with it).
    let message = cache.tier_command(TierCommand::Disable).unwrap();
    assert!(message.contains("local tables came back"), "{message}");
    assert_eq!(stubs(&db, table), 0);
    assert_eq!(all_notes(&db, table), expected);
    assert!(db.table_memory(table) > 2 * budget);
    cache.shutdown();
}

/// Child: writers insert and update notes, printing `ACK id n` once each
/// commit returns, while aging moves rows to flash every 20 ms; until killed.
#[test]
#[ignore = "the child process of a test in this file (run by it with --ignored)"]
fn local_crash_child_entry() {
    let (Ok(dir), Ok(seed)) = (std::env::var(ENV_DIR), std::env::var(ENV_SEED)) else { return };
    let seed: u64 = seed.parse().unwrap();
    common::end_child_on_panic();
    let cache = open(Path::new(&dir), 256 << 10, Duration::from_millis(20));
    let db = cache.database().clone();
    let table = create_notes(&db);
    println!("STUBS {}", stubs(&db, table));
    // Stubs outlive a crash through checkpoints (the WAL never holds one):
    // checkpoint often, so kills land on every side of one.
    let checkpointer = {
        let db = db.clone();
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(150));
                db.checkpoint().unwrap();
            }
        })
    };
    let threads: Vec<_> = (0..3u64)
        .map(|me| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed * 10 + me);
                loop {
                    let id = rng.random_range(0..3000) * 3 + me as i32;
                    // Writer 2 commits asynchronously: a crash may lose its
                    // last commits, and with them the change that made a
                    // stub of an older version unreachable. That stub must
                    // still read back (its image released only once the
                    // change was durable).
                    let asynchronous = me == 2;
                    let mut t =
                        if asynchronous { db.begin_with(CommitMode::Async).unwrap() } else { db.begin().unwrap() };
                    let mut buf = RowBuf::new();
                    let n = if t.get(table, &[Value::Int4(id)], &mut buf).unwrap() {
                        let Value::Int8(n) = buf.values()[2] else { panic!("n") };
                        assert!(
                            t.update(
                                table,
                                &[Value::Int4(id)],
                                &[(2, Value::Int8(n + 1)), (3, note(id, n + 1)[3].clone())]
                            )
                            .unwrap()
                        );
                        n + 1
                    } else {
                        t.insert(table, &note(id, 1)).unwrap();
                        1
                    };
                    t.commit().unwrap();
                    if !asynchronous {
                        println!("ACK {id} {n}");
                    }
                }
            })
        })
        .collect();
    // The writers and the checkpointer run until the parent kills us.
    drop((threads, checkpointer));
    loop {
        std::thread::park();
    }
}

#[test]
fn kills_lose_no_acknowledged_row_of_a_local_table_on_flash() {
    let rounds = common::env_u64("PGTIER_LOCAL_KILL_ROUNDS", 3);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(common::env_u64("PGTIER_LOCAL_KILL_SEED", 33));
    let mut acked: BTreeMap<i32, i64> = BTreeMap::new();
    let mut stubs_at_start = 0;
    for round in 0..rounds {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "local_crash_child_entry", "--ignored", "--nocapture", "--test-threads=1"])
            .env(ENV_DIR, dir.path())
            .env(ENV_SEED, round.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (first_tx, first_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut acks: Vec<(i32, i64)> = Vec::new();
            let mut stubs = 0;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(at) = line.find("STUBS ") {
                    stubs = line[at + 6..].trim().parse::<usize>().unwrap();
                    continue;
                }
                let Some(ack) = line.strip_prefix("ACK ") else { continue };
                let (id, n) = ack.split_once(' ').unwrap();
                if acks.is_empty() {
                    let _ = first_tx.send(());
                }
                acks.push((id.parse().unwrap(), n.parse().unwrap()));
            }
            (acks, stubs)
        });
        first_rx.recv_timeout(Duration::from_secs(60)).expect("the child never acknowledged a commit");
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(rng.random_range(800..2500)));
        assert!(child.try_wait().unwrap().is_none(), "the child ended before its kill (see its output above)");
        child.kill().unwrap();
        child.wait().unwrap();
        let (acks, stubs) = reader.join().unwrap();
        stubs_at_start += stubs;
        for &(id, n) in &acks {
            let seen = acked.entry(id).or_insert(0);
            *seen = (*seen).max(n);
        }
        println!(
            "round {round}: {stubs} rows on flash at the start; killed after {} acknowledged commits ({:?})",
            acks.len(),
            started.elapsed()
        );
    }
    let cache = open(dir.path(), 256 << 10, Duration::from_secs(3600));
    let db = cache.database().clone();
    let table = create_notes(&db);
    let on_flash = stubs(&db, table);
    assert!(stubs_at_start + on_flash > 0, "no kill left a row on flash: nothing tested");
    let rows = all_notes(&db, table);
    for (&id, &n) in &acked {
        let row = rows.get(&id).unwrap_or_else(|| panic!("acknowledged row {id} lost"));
        let Value::Int8(have) = row[2] else { panic!("n of {id}") };
        // Later commits may have landed unacknowledged; none went back.
        assert!(have >= n, "row {id}: acknowledged n = {n}, found {have}");
        assert_eq!(*row, note(id, have), "row {id} is not whole");
    }
    // Every row, acknowledged or not (the asynchronous writer's), is whole.
    for (id, row) in &rows {
        let Value::Int8(have) = row[2] else { panic!("n of {id}") };
        assert_eq!(*row, note(*id, have), "row {id} is not whole");
    }
    db.verify().unwrap();
    println!(
        "{rounds} kills, {} rows acknowledged, {on_flash} rows on flash at the end ({stubs_at_start} at the children's starts); every acknowledged commit is there",
        acked.len()
    );
    cache.shutdown();
}
