//! Keys the database generates, on cached tables (crates/cache README,
//! "Keys the database generates"): serial and identity columns of AWT
//! groups take their values from PostgreSQL's own sequence, reserved in
//! blocks through nextval, against a private PostgreSQL.
//!
//! - `two_caches_and_postgres_draw_from_one_sequence`: two caches (two
//!   engines, nodes `a` and `b`, blocks of 7 and 16) and PostgreSQL itself
//!   insert parents (serial) and children (GENERATED ALWAYS identity, the
//!   parent found by `currval`) at once: no 23505 anywhere, every value
//!   unique, each session's values rising, and after drain PostgreSQL holds
//!   every row and equals each cache. `PGTIER_GENKEYS_ROWS` (default 200) rows
//!   per session; 2,000 is the long run.
//! - `outage_uses_the_reserved_block_then_fails_clearly`: PostgreSQL stopped,
//!   inserts go on from the block, then fail with 08xxx and a hint, leaving
//!   nothing; after PostgreSQL returns they work again and everything drains.
//! - `session_functions_and_refusals`: nextval / currval / lastval of
//!   PostgreSQL's sequence by name, GENERATED ALWAYS (428C9), setval (0A000),
//!   the catalogs, a sequence nobody caches (42P01), DROP of the group.
//! - `swt_and_readonly_groups`: an SWT group's drawn keys are in PostgreSQL
//!   at commit; a READONLY group refuses the insert (25006).
//!
//! - `measure_default_keys_against_supplied_ones` (ignored): inserts/s with
//!   the key drawn against supplied, blocks of 32 and 1,000, one run.
//!
//! What one session sees, record by record against PostgreSQL itself:
//! tests/slt/77_cached_generated_keys.slt.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgtier_cache::{AwtConfig, Cache, CacheConfig};
use pgtier_engine::{Database, EngineConfig};
use pgtier_sql::Connection;

const SCHEMA: &str = "
    CREATE TABLE items (id serial PRIMARY KEY, origin text NOT NULL, n int NOT NULL);
    CREATE TABLE parts (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                        item_id int NOT NULL REFERENCES items ON DELETE CASCADE, qty int NOT NULL);
    INSERT INTO items (origin, n) SELECT 'seed', g FROM generate_series(1, 20) g;
    INSERT INTO parts (item_id, qty) SELECT id, n FROM items;";

/// A database `genkeys_<name>` on the shared private PostgreSQL with
/// [`SCHEMA`]: its URL and a client.
fn database(name: &str) -> (String, postgres::Client) {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("genkeys_{name}_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&url).unwrap();
    pg.batch_execute(SCHEMA).unwrap();
    (url, pg)
}

/// A cache over `url` with its own engine: write-through node `name`,
/// `block` values reserved at a time.
struct Node {
    _dir: tempfile::TempDir,
    db: Database,
    cache: Arc<Cache>,
}

fn open_node(url: &str, name: &str, block: u32) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    let params = pgtier_backend::BackendConfig { url: Some(url.to_owned()), ..Default::default() }.resolve().unwrap();
    let config = CacheConfig {
        awt: AwtConfig { node: name.to_owned(), ..AwtConfig::default() },
        sequence_block: block,
        ..CacheConfig::default()
    };
    let cache = Cache::open(db.clone(), Some(params), config).unwrap();
    Node { _dir: dir, db, cache }
}

/// [`open_node`] with the AWT group `items` created and loaded.
fn node(url: &str, name: &str, block: u32) -> Node {
    let node = open_node(url, name, block);
    let mut conn = node.connect();
    conn.execute_sql("CREATE AWT CACHE GROUP items FROM items, parts").unwrap();
    conn.execute_sql("LOAD CACHE GROUP items").unwrap();
    node
}

impl Node {
    fn connect(&self) -> Connection {
        let mut conn = Connection::new(self.db.clone());
        conn.attach_cache(self.cache.clone());
        conn
    }
}

fn int(conn: &mut Connection, sql: &str) -> i64 {
    let result = conn.execute_sql(sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    let rows = result.rows.unwrap();
    rows.get(0).unwrap().text(0).unwrap().parse().unwrap()
}

/// `(id, origin, n)` of items and `(id, item_id, qty)` of parts, as text.
fn cached_rows(conn: &mut Connection) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut dump = |sql: &str| -> BTreeSet<String> {
        let rows = conn.execute_sql(sql).unwrap().rows.unwrap();
        rows.iter().map(|r| (0..r.len()).map(|k| r.text(k).unwrap_or_default()).collect::<Vec<_>>().join("|")).collect()
    };
    (dump("SELECT id, origin, n FROM items"), dump("SELECT id, item_id, qty FROM parts"))
}

fn postgres_rows(pg: &mut postgres::Client) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut dump = |sql: &str| -> BTreeSet<String> {
        pg.simple_query(sql)
            .unwrap()
            .into_iter()
            .filter_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) => {
                    Some((0..r.len()).map(|k| r.get(k).unwrap_or_default().to_owned()).collect::<Vec<_>>().join("|"))
                }
                _ => None,
            })
            .collect()
    };
    (dump("SELECT id, origin, n FROM items"), dump("SELECT id, item_id, qty FROM parts"))
}

/// One session's inserts: a parent by its serial default, a child by its
/// identity default naming the parent through `currval`; `currval` and
/// `lastval` checked against what RETURNING said. Returns (item, part) ids.
fn insert_through_cache(conn: &mut Connection, origin: &str, rows: usize) -> Vec<(i64, i64)> {
    let mut ids = Vec::with_capacity(rows);
    for n in 0..rows {
        conn.execute_sql("BEGIN").unwrap();
        let item = int(conn, &format!("INSERT INTO items (origin, n) VALUES ('{origin}', {n}) RETURNING id"));
        assert_eq!(int(conn, "SELECT currval('items_id_seq')"), item);
        assert_eq!(int(conn, "SELECT lastval()"), item);
        let part =
            int(conn, &format!("INSERT INTO parts (item_id, qty) VALUES (currval('items_id_seq'), {n}) RETURNING id"));
        assert_eq!(int(conn, "SELECT lastval()"), part, "lastval follows the identity's sequence");
        conn.execute_sql("COMMIT").unwrap();
        ids.push((item, part));
    }
    ids
}

fn insert_into_postgres(url: &str, rows: usize) -> Vec<(i64, i64)> {
    let mut pg = pgtier_backend::connect(url).unwrap();
    (0..rows)
        .map(|n| {
            let mut txn = pg.transaction().unwrap();
            let n = i32::try_from(n).unwrap();
            let item: i32 =
                txn.query_one("INSERT INTO items (origin, n) VALUES ('pg', $1) RETURNING id", &[&n]).unwrap().get(0);
            let part: i64 = txn
                .query_one("INSERT INTO parts (item_id, qty) VALUES (currval('items_id_seq'), $1) RETURNING id", &[&n])
                .unwrap()
                .get(0);
            txn.commit().unwrap();
            (i64::from(item), part)
        })
        .collect()
}

fn rows_per_session() -> usize {
    std::env::var("PGTIER_GENKEYS_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(200)
}

#[test]
fn two_caches_and_postgres_draw_from_one_sequence() {
    let (url, mut pg) = database("two");
    let (seed_items, seed_parts) = postgres_rows(&mut pg);
    let nodes = [node(&url, "a", 7), node(&url, "b", 16)];
    let rows = rows_per_session();
    let started = Instant::now();
    let (mut by_session, postgres_ids) = std::thread::scope(|scope| {
        let mut sessions = Vec::new();
        for (k, node) in nodes.iter().enumerate() {
            for s in 0..2 {
                let mut conn = node.connect();
                let origin = format!("{}{s}", ["a", "b"][k]);
                sessions.push(scope.spawn(move || (k, origin.clone(), insert_through_cache(&mut conn, &origin, rows))));
            }
        }
        let postgres = scope.spawn(|| insert_into_postgres(&url, rows));
        (sessions.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>(), postgres.join().unwrap())
    });
    println!("{} sessions x {rows} rows in {:?}", by_session.len() + 1, started.elapsed());
    let mut items = HashSet::new();
    let mut parts = HashSet::new();
    for (_, origin, ids) in &by_session {
        for pair in ids.windows(2) {
            assert!(
                pair[0].0 < pair[1].0 && pair[0].1 < pair[1].1,
                "{origin}: values of one session rise with the sequence: {pair:?}"
            );
        }
    }
    for &(item, part) in by_session.iter().flat_map(|(_, _, ids)| ids).chain(&postgres_ids) {
        assert!(items.insert(item), "item id {item} handed out twice");
        assert!(parts.insert(part), "part id {part} handed out twice");
    }
    for node in &nodes {
        assert!(node.cache.wait_propagated(Duration::from_secs(120)), "write-through drains");
    }
    // PostgreSQL holds every row of every writer.
    let (pg_items, pg_parts) = postgres_rows(&mut pg);
    assert_eq!(pg_items.len(), seed_items.len() + items.len());
    assert_eq!(pg_parts.len(), seed_parts.len() + parts.len());
    // Each cache holds the seed and its own rows, equal to PostgreSQL's.
    by_session.sort_by_key(|(k, ..)| *k);
    for (k, node) in nodes.iter().enumerate() {
        let (cached_items, cached_parts) = cached_rows(&mut node.connect());
        let mut want_items = seed_items.clone();
        let mut want_parts = seed_parts.clone();
        for (_, origin, ids) in by_session.iter().filter(|(node, ..)| *node == k) {
            for (n, (item, part)) in ids.iter().enumerate() {
                want_items.insert(format!("{item}|{origin}|{n}"));
                want_parts.insert(format!("{part}|{item}|{n}"));
            }
        }
        assert_eq!(cached_items, want_items, "node {k}: items");
        assert_eq!(cached_parts, want_parts, "node {k}: parts");
        assert!(
            cached_items.is_subset(&pg_items) && cached_parts.is_subset(&pg_parts),
            "node {k}: PostgreSQL equals the cache"
        );
        let tally = node.cache.verify("items").unwrap();
        assert!(tally.is_clean(), "node {k}: VERIFY {tally:?}");
    }
}

fn error_of(conn: &mut Connection, sql: &str) -> pgtier_sql::SqlError {
    match conn.execute_sql(sql) {
        Ok(_) => panic!("{sql}: succeeded, an error was expected"),
        Err(e) => e,
    }
}

#[test]
fn outage_uses_the_reserved_block_then_fails_clearly() {
    let mut cluster =
        pgtier_backend::PrivateCluster::start(pgtier_backend::ClusterOptions::default()).expect("private PostgreSQL");
    let url = cluster.create_database("genkeys_outage").unwrap();
    let mut pg = pgtier_backend::connect(&url).unwrap();
    pg.batch_execute(SCHEMA).unwrap();
    drop(pg);
    let node = node(&url, "o", 5);
    let mut conn = node.connect();
    let insert = "INSERT INTO items (origin, n) VALUES ('o', 1) RETURNING id";
    // The first insert reserves 21..25 (the seed used 1..20).
    assert_eq!(int(&mut conn, insert), 21);
    assert_eq!(int(&mut conn, insert), 22);
    cluster.stop_fast().unwrap();
    for want in 23..=25 {
        assert_eq!(int(&mut conn, insert), want, "from the reserved block while PostgreSQL is down");
    }
    let before = int(&mut conn, "SELECT count(*) FROM items");
    for _ in 0..2 {
        // Twice: the second answer is the remembered failure, the same error.
        let e = error_of(&mut conn, insert);
        assert!(e.sqlstate.starts_with("08"), "{e:?}");
        assert!(e.message.contains("items_id_seq"), "{e:?}");
        assert!(e.hint.as_deref().is_some_and(|h| h.contains("sequence_block")), "{e:?}");
    }
    conn.execute_sql("BEGIN").unwrap();
    assert!(error_of(&mut conn, insert).sqlstate.starts_with("08"));
    assert_eq!(error_of(&mut conn, "SELECT 1").sqlstate, "25P02");
    conn.execute_sql("ROLLBACK").unwrap();
    assert_eq!(int(&mut conn, "SELECT count(*) FROM items"), before, "a failed insert leaves nothing");
    // A value the application supplies needs no sequence.
    assert_eq!(
        conn.execute_sql("INSERT INTO items (id, origin, n) VALUES (1000, 'explicit', 0)").unwrap().rows_affected,
        1
    );
    cluster.restart().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let resumed = loop {
        match conn.execute_sql(insert) {
            Ok(result) => break result.rows.unwrap().get(0).unwrap().text(0).unwrap().parse::<i64>().unwrap(),
            Err(e) if e.sqlstate.starts_with("08") || e.sqlstate.starts_with("57P") => {
                assert!(Instant::now() < deadline, "inserts did not resume after PostgreSQL came back: {e:?}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("{e:?}"),
        }
    };
    assert_eq!(resumed, 26, "the next block starts where the sequence stood: no value lost or invented");
    assert!(node.cache.wait_propagated(Duration::from_secs(60)), "write-through drains after the outage");
    let mut pg = pgtier_backend::connect(&url).unwrap();
    let (pg_items, _) = postgres_rows(&mut pg);
    let (cached_items, _) = cached_rows(&mut conn);
    assert_eq!(cached_items, pg_items);
    let ids: Vec<i64> = pg_items
        .iter()
        .map(|r| r.split('|').next().unwrap().parse().unwrap())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(ids, (1..=26).chain([1000]).collect::<Vec<_>>());
}

#[test]
fn session_functions_and_refusals() {
    let (url, mut pg) = database("fns");
    pg.batch_execute("CREATE SEQUENCE other_seq").unwrap();
    let node = node(&url, "f", 10);
    let mut conn = node.connect();
    assert_eq!(error_of(&mut conn, "SELECT currval('items_id_seq')").sqlstate, "55000");
    assert_eq!(error_of(&mut conn, "SELECT lastval()").sqlstate, "55000");
    // Any spelling PostgreSQL reads names the one sequence.
    assert_eq!(int(&mut conn, "SELECT nextval('items_id_seq')"), 21);
    assert_eq!(int(&mut conn, "SELECT currval('public.items_id_seq')"), 21);
    assert_eq!(int(&mut conn, "SELECT nextval('\"items_id_seq\"')"), 22);
    assert_eq!(int(&mut conn, "SELECT lastval()"), 22);
    assert_eq!(int(&mut conn, "INSERT INTO items (origin, n) VALUES ('x', 1) RETURNING id"), 23);
    assert_eq!(int(&mut conn, "SELECT currval('items_id_seq')"), 23);
    // Another session has its own currval, and draws from the same block.
    let mut other = node.connect();
    assert_eq!(error_of(&mut other, "SELECT currval('items_id_seq')").sqlstate, "55000");
    assert_eq!(int(&mut other, "SELECT nextval('items_id_seq')"), 24);
    let e = error_of(&mut conn, "SELECT setval('items_id_seq', 100)");
    assert_eq!(e.sqlstate, "0A000", "{e:?}");
    assert!(e.hint.is_some());
    // GENERATED ALWAYS: explicit values refused as PostgreSQL refuses them.
    assert_eq!(error_of(&mut conn, "INSERT INTO parts (id, item_id, qty) VALUES (500, 23, 1)").sqlstate, "428C9");
    assert_eq!(error_of(&mut conn, "UPDATE parts SET id = 7 WHERE id = 1").sqlstate, "428C9");
    assert_eq!(int(&mut conn, "INSERT INTO parts (id, item_id, qty) VALUES (DEFAULT, 23, 1) RETURNING id"), 21);
    assert_eq!(int(&mut conn, "INSERT INTO items (id, origin, n) VALUES (999, 'explicit', 0) RETURNING id"), 999);
    // The catalogs show the columns as PostgreSQL does.
    let text = |conn: &mut Connection, sql: &str| -> Vec<String> {
        let rows = conn.execute_sql(sql).unwrap().rows.unwrap();
        rows.iter()
            .map(|r| (0..r.len()).map(|k| r.text(k).unwrap_or_else(|| "NULL".into())).collect::<Vec<_>>().join("|"))
            .collect()
    };
    let columns = "SELECT table_name, column_name, column_default, is_identity, identity_generation FROM information_schema.columns \
                   WHERE column_name = 'id' ORDER BY table_name";
    assert_eq!(
        text(&mut conn, columns),
        ["items|id|nextval('items_id_seq'::regclass)|NO|NULL", "parts|id|NULL|YES|ALWAYS"]
    );
    assert_eq!(
        text(&mut conn, "SELECT attidentity FROM pg_attribute WHERE attrelid = 'parts'::regclass AND attname = 'id'"),
        ["a"]
    );
    assert_eq!(
        text(&mut conn, "SELECT pg_get_serial_sequence('items', 'id'), pg_get_serial_sequence('parts', 'id')"),
        ["public.items_id_seq|public.parts_id_seq"]
    );
    // A sequence no cached column uses is not pgtier's to draw from (the
    // server passes such a statement through to PostgreSQL).
    assert_eq!(error_of(&mut conn, "SELECT nextval('other_seq')").sqlstate, "42P01");
    assert!(node.cache.wait_propagated(Duration::from_secs(30)));
    let (pg_items, pg_parts) = postgres_rows(&mut pg);
    assert!(
        pg_items.contains("23|x|1") && pg_items.contains("999|explicit|0") && pg_parts.contains("21|23|1"),
        "{pg_items:?} {pg_parts:?}"
    );
    // PostgreSQL's own next value is past this node's block (21..30).
    let next: i64 = pg.query_one("SELECT nextval('items_id_seq')", &[]).unwrap().get(0);
    assert_eq!(next, 31);
    // Once the group is gone, so is the sequence (the cached plan re-plans).
    conn.execute_sql("DROP CACHE GROUP items").unwrap();
    assert_eq!(error_of(&mut conn, "SELECT nextval('items_id_seq')").sqlstate, "42P01");
}

/// SWT: the key drawn from the block goes to PostgreSQL inside the commit
/// (OVERRIDING SYSTEM VALUE for the GENERATED ALWAYS child), so PostgreSQL
/// has the row with that key when the INSERT returns. READONLY: refused.
#[test]
fn swt_and_readonly_groups() {
    let (url, mut pg) = database("swt");
    pg.batch_execute("CREATE TABLE notes (id int GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, body text)").unwrap();
    let node = open_node(&url, "s", 32);
    let cache = node.cache.clone();
    let mut conn = node.connect();
    conn.execute_sql("CREATE SWT CACHE GROUP items FROM items, parts").unwrap();
    conn.execute_sql("LOAD CACHE GROUP items").unwrap();
    conn.execute_sql("CREATE READONLY CACHE GROUP notes FROM notes AUTOREFRESH OFF").unwrap();
    assert!(cache.wait_swt_resolved(Duration::from_secs(30)));
    conn.execute_sql("BEGIN").unwrap();
    let item = int(&mut conn, "INSERT INTO items (origin, n) VALUES ('swt', 1) RETURNING id");
    let part = int(&mut conn, "INSERT INTO parts (item_id, qty) VALUES (currval('items_id_seq'), 2) RETURNING id");
    conn.execute_sql("COMMIT").unwrap();
    assert_eq!((item, part), (21, 21));
    let (pg_items, pg_parts) = postgres_rows(&mut pg);
    assert!(
        pg_items.contains("21|swt|1") && pg_parts.contains("21|21|2"),
        "in PostgreSQL at commit: {pg_items:?} {pg_parts:?}"
    );
    assert_eq!(error_of(&mut conn, "INSERT INTO notes (body) VALUES ('x')").sqlstate, "25006");
}

/// Not a gate (ignored): what drawing keys from PostgreSQL costs an insert,
/// as a ratio in one run. One session runs a prepared INSERT that leaves the
/// serial key to its default and one that supplies it, alternately in
/// rounds of one transaction each (so no commit waits for the disk and the
/// cost of the draw shows), with blocks of 32 (the default) and of 1,000. `cargo test -p
/// pgtier-sql --test generated_keys measure -- --ignored --nocapture`.
#[test]
#[ignore]
fn measure_default_keys_against_supplied_ones() {
    use pgtier_engine::Value;
    const ROWS: i64 = 10_000;
    const ROUNDS: u32 = 5;
    for block in [32, 1000] {
        let (url, _pg) = database(&format!("measure_{block}"));
        let node = node(&url, &format!("m{block}"), block);
        let mut conn = node.connect();
        let default_key = conn.prepare("INSERT INTO items (origin, n) VALUES ('d', $1)").unwrap();
        let supplied_key = conn.prepare("INSERT INTO items (id, origin, n) VALUES ($1, 's', $2)").unwrap();
        let mut supplied_id = 1_000_000_000i64;
        let (mut drawn, mut supplied) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..ROUNDS {
            let started = Instant::now();
            conn.execute_sql("BEGIN").unwrap();
            for n in 0..ROWS {
                conn.execute(&default_key, &[Value::Int4(i32::try_from(n).unwrap())]).unwrap();
            }
            conn.execute_sql("COMMIT").unwrap();
            drawn += started.elapsed();
            // Write-through's work on one side must not slow the other.
            assert!(node.cache.wait_propagated(Duration::from_secs(120)));
            let started = Instant::now();
            conn.execute_sql("BEGIN").unwrap();
            for n in 0..ROWS {
                supplied_id += 1;
                conn.execute(
                    &supplied_key,
                    &[Value::Int4(i32::try_from(supplied_id).unwrap()), Value::Int4(i32::try_from(n).unwrap())],
                )
                .unwrap();
            }
            conn.execute_sql("COMMIT").unwrap();
            supplied += started.elapsed();
            assert!(node.cache.wait_propagated(Duration::from_secs(120)));
        }
        let rate = |d: Duration| f64::from(ROUNDS) * ROWS as f64 / d.as_secs_f64();
        println!(
            "block {block}: key drawn {:.0} inserts/s, key supplied {:.0} inserts/s, supplied/drawn {:.2}",
            rate(drawn),
            rate(supplied),
            rate(supplied) / rate(drawn)
        );
    }
}
