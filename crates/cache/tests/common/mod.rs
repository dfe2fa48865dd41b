//! TATP in a private PostgreSQL, a group over its four tables, and dumps of
//! both sides to compare.
#![allow(clippy::unwrap_used, dead_code)]

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use pgtier_backend::BackendConfig;
use pgtier_backend::connect::connect;
use pgtier_backend::harness::shared_cluster;
use pgtier_cache::{
    Aging, Cache, CacheConfig, CacheGroup, CreateGroup, GroupKind, GroupSpec, create_group_tables, define_group,
};
use pgtier_engine::{Database, EngineConfig};
use postgres::Client;

pub const SUBSCRIBERS: u32 = 20_000;

/// The TATP schema with its keys, as the benchmark kit creates it for a
/// keyed target: one definition of the tables for every test and bench.
pub fn tatp_ddl() -> String {
    pgtier_bench::tatp::schema::create_tables(true)
}

/// Subscribers with 1-4 access_info rows, 0-3 special facilities (none for
/// every 7th) with 0-3 call_forwarding rows each; some NULLs.
fn populate() -> String {
    format!(
        "INSERT INTO subscriber (s_id, sub_nbr, bit_1, hex_1, byte2_1, msc_location, vlr_location)
           SELECT g, lpad(g::text, 15, '0'), g % 2, g % 16, g % 256, g * 7, CASE WHEN g % 3 = 0 THEN NULL ELSE g * 13 END
           FROM generate_series(1, {SUBSCRIBERS}) g;
         INSERT INTO access_info SELECT s, t, s % 256, t * 3, 'a' || t, CASE WHEN s % 5 = 0 THEN NULL ELSE 'bb' END
           FROM generate_series(1, {SUBSCRIBERS}) s, generate_series(1, 4) t WHERE t <= s % 4 + 1;
         INSERT INTO special_facility SELECT s, t, (s + t) % 2, t, s % 100, 'x'
           FROM generate_series(1, {SUBSCRIBERS}) s, generate_series(1, 4) t WHERE t <= s % 4 AND s % 7 <> 0;
         INSERT INTO call_forwarding SELECT s_id, sf_type, st, st + 8, 'n' || s_id
           FROM special_facility, (VALUES (0), (8), (16)) v(st) WHERE st / 8 < (s_id + sf_type) % 4;
         ANALYZE;"
    )
}

/// The URL of a database holding TATP (created once per test binary).
pub fn tatp_url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| fresh_tatp("cache_tatp")).clone()
}

/// A new database `name` holding TATP, for a test that changes PostgreSQL's rows.
pub fn fresh_tatp(name: &str) -> String {
    let url = shared_cluster().unwrap().create_database(name).unwrap();
    populate_tatp(&url);
    url
}

/// Creates and fills the TATP tables in the database at `url`.
pub fn populate_tatp(url: &str) {
    let mut client = connect(url).unwrap();
    client.batch_execute(&tatp_ddl()).unwrap();
    client.batch_execute(&populate()).unwrap();
}

pub fn tatp_spec() -> GroupSpec {
    GroupSpec {
        name: "tatp".into(),
        root: "subscriber".into(),
        children: vec!["access_info".into(), "special_facility".into(), "call_forwarding".into()],
        kind: GroupKind::ReadOnly,
    }
}

/// A fresh engine with the TATP group's tables created.
pub fn engine_with_group(dir: &std::path::Path, url: &str) -> (Database, CacheGroup) {
    let db = Database::open(dir, EngineConfig::default()).unwrap();
    let group = define_group(&mut connect(url).unwrap(), &tatp_spec()).unwrap();
    create_group_tables(&db, &group).unwrap();
    (db, group)
}

/// Every row of `table` in the cache, as PostgreSQL's text output joined by '|', sorted.
pub fn cache_dump(db: &Database, table: &str) -> Vec<String> {
    let id = db.catalog().table_by_name(table).unwrap().id;
    let mut t = db.begin().unwrap();
    let mut lines = Vec::new();
    t.scan_table(id, |row| {
        lines.push(row.values().iter().map(ToString::to_string).collect::<Vec<_>>().join("|"));
        Ok(true)
    })
    .unwrap();
    t.commit().unwrap();
    lines.sort();
    lines
}

/// The rows of `table` (`format` keeps char(n)'s padding, unlike a cast to text) whose subscriber matches `predicate`, formatted like [`cache_dump`].
pub fn postgres_dump(client: &mut Client, group: &CacheGroup, table: &str, predicate: &str) -> Vec<String> {
    let source = &group.tables.iter().find(|t| t.def.name == table).unwrap().source;
    // The engine prints a float4 through f64 (its Display serves error
    // details), so real columns are compared as their exact double value.
    let expression = |c: &pgtier_backend::catalog::ColumnDef| {
        if c.type_name == "real" { format!("{}::float8", c.name) } else { c.name.clone() }
    };
    let columns: Vec<String> = source
        .columns
        .iter()
        .map(|c| format!("CASE WHEN {0} IS NULL THEN 'null' ELSE format('%s', {0}) END", expression(c)))
        .collect();
    let sql = format!(
        "SELECT concat_ws('|', {}) FROM {table} WHERE s_id IN (SELECT s_id FROM subscriber WHERE {predicate})",
        columns.join(", ")
    );
    let mut lines: Vec<String> = client.query(&sql, &[]).unwrap().iter().map(|row| row.get(0)).collect();
    lines.sort();
    lines
}

pub const TABLES: [&str; 4] = ["subscriber", "access_info", "special_facility", "call_forwarding"];

/// Every cached row's instance is whole: its subscriber is cached, and every
/// cached subscriber has exactly PostgreSQL's children.
pub fn check_whole_instances(db: &Database, url: &str) {
    let key = |line: &String| line.split('|').next().unwrap().parse::<i32>().unwrap();
    let subscribers: HashSet<i32> = cache_dump(db, "subscriber").iter().map(key).collect();
    let mut client = connect(url).unwrap();
    for table in &TABLES[1..] {
        let mut cached: HashMap<i32, usize> = HashMap::new();
        for line in cache_dump(db, table) {
            *cached.entry(key(&line)).or_default() += 1;
        }
        assert!(cached.keys().all(|s| subscribers.contains(s)), "{table} row without its subscriber");
        let expected: HashMap<i32, usize> = client
            .query(&format!("SELECT s_id, count(*) FROM {table} GROUP BY s_id"), &[])
            .unwrap()
            .iter()
            .map(|row| (row.get::<_, i32>(0), row.get::<_, i64>(1) as usize))
            .collect();
        for s in &subscribers {
            assert_eq!(cached.get(s), expected.get(s), "{table} rows of subscriber {s}");
        }
    }
    // call_forwarding rows have their special_facility.
    let facilities: HashSet<String> =
        cache_dump(db, "special_facility").iter().map(|l| l.split('|').take(2).collect::<Vec<_>>().join("|")).collect();
    for line in cache_dump(db, "call_forwarding") {
        assert!(facilities.contains(&line.split('|').take(2).collect::<Vec<_>>().join("|")), "{line}");
    }
}

/// `CREATE [DYNAMIC] <kind> CACHE GROUP name FROM subscriber, access_info,
/// special_facility, call_forwarding` (aging LRU when dynamic, else off);
/// tests change fields with `..tatp_group(...)`.
pub fn tatp_group(name: &str, kind: GroupKind, dynamic: bool) -> CreateGroup {
    CreateGroup {
        name: name.into(),
        kind,
        dynamic,
        root: "subscriber".into(),
        root_predicate: None,
        children: TABLES[1..].iter().map(|t| (*t).to_owned()).collect(),
        aging: if dynamic { Aging::Lru } else { Aging::Off },
        keep: false,
        memory_budget: None,
        // Tests of other things load and refresh by hand; autorefresh has its own tests.
        autorefresh: false,
        flash: pgtier_cache::FlashPolicy::Default,
    }
}

/// A cache over the engine in `dir` with the backend at `url`, default
/// settings but its node name ([`node_of`]).
pub fn open_cache(dir: &std::path::Path, url: &str) -> std::sync::Arc<Cache> {
    open_cache_with(dir, url, CacheConfig::default())
}

/// A cache over the engine in `dir` with `config`, its node name [`node_of`] `dir`.
pub fn open_cache_with(dir: &std::path::Path, url: &str, mut config: CacheConfig) -> std::sync::Arc<Cache> {
    let db = open_when_free(dir);
    let params = BackendConfig { url: Some(url.to_owned()), ..BackendConfig::default() }.resolve().unwrap();
    config.awt.node = node_of(dir);
    Cache::open(db, Some(params), config).unwrap()
}

/// Opens the engine in `dir`, waiting (up to 30 s) while a cache dropped
/// just before still holds it: when a test drops its last handle while the
/// aging or write-through thread holds the cache for one round or
/// transaction, that thread drops it, and the directory's lock goes a
/// moment later (seen in CI under load as DirectoryInUse).
pub fn open_when_free(dir: &std::path::Path) -> Database {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match Database::open(dir, EngineConfig::default()) {
            Err(pgtier_engine::EngineError::DirectoryInUse { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            opened => return opened.unwrap(),
        }
    }
}

/// A node name of its own for the data directory `dir`: tests of one binary
/// share a database, and a node name belongs to one data directory there.
pub fn node_of(dir: &std::path::Path) -> String {
    let hash = dir
        .to_string_lossy()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("t{hash:016x}")
}

/// In a crash test's child process: a failed assertion on any thread (a
/// writer's wrong answer) ends the process at once, so the parent, which
/// checks the child is still running before its kill, fails the test. A
/// writer thread's panic would otherwise go unnoticed until the kill.
pub fn end_child_on_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::exit(101);
    }));
}

/// A number from the environment (a test's knob), or `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name}={v} is not a number")))
}

/// Drops the replication origins of `node`, gone for good: PostgreSQL
/// keeps an origin's slot (max_replication_slots, cluster-wide) until it is
/// dropped, so a test that opens many nodes on one cluster would otherwise
/// run out (53400). The node's sessions must be closed; PostgreSQL may
/// still be ending them (55006, "in use"): retried for a while.
pub fn drop_node_origins(client: &mut Client, node: &str) {
    let sql = format!(
        "SELECT pg_replication_origin_drop(roname) FROM pg_replication_origin WHERE roname LIKE 'pgtier\\_{node}\\_%'"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        match client.batch_execute(&sql) {
            Ok(()) => return,
            Err(error)
                if error.code() == Some(&postgres::error::SqlState::OBJECT_IN_USE)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(error) => panic!("dropping node {node}'s origins: {error}"),
        }
    }
}

/// The sum of `subscriber.msc_location` in the cache (the crash tests' counters).
pub fn msc_sum(db: &Database) -> i64 {
    let msc = db.catalog().table_by_name("subscriber").unwrap().column_index("msc_location").unwrap();
    cache_dump(db, "subscriber").iter().map(|line| line.split('|').nth(msc).unwrap().parse::<i64>().unwrap()).sum()
}

/// Every TATP table of the cache equals PostgreSQL's rows of the instances
/// whose subscriber matches `predicate` (ordered dumps).
pub fn assert_tables_equal(db: &Database, client: &mut Client, predicate: &str) {
    let group = define_group(client, &tatp_spec()).unwrap();
    for table in TABLES {
        let (cached, expected) = (cache_dump(db, table), postgres_dump(client, &group, table, predicate));
        if cached != expected {
            let only_cached: Vec<&String> =
                cached.iter().filter(|l| expected.binary_search(l).is_err()).take(5).collect();
            let only_postgres: Vec<&String> =
                expected.iter().filter(|l| cached.binary_search(l).is_err()).take(5).collect();
            panic!(
                "{table}: {} rows cached, {} in PostgreSQL; only cached (first 5): {only_cached:?}; only in PostgreSQL (first 5): {only_postgres:?}",
                cached.len(),
                expected.len()
            );
        }
    }
}

/// The sum of `subscriber.msc_location` in PostgreSQL over `predicate`.
pub fn postgres_msc_sum(client: &mut Client, predicate: &str) -> i64 {
    client
        .query_one(&format!("SELECT sum(msc_location)::bigint FROM subscriber WHERE {predicate}"), &[])
        .unwrap()
        .get(0)
}

/// A small flash tier in `dir` (32 MB of 1 MB regions) that admits every
/// eviction, so tests' counts are exact.
pub fn small_tier(dir: &std::path::Path) -> pgtier_cache::TierConfig {
    pgtier_cache::TierConfig {
        path: dir.join("flash.tier"),
        size: 32 << 20,
        region_size: 1 << 20,
        direct_io: pgtier_cache::DirectIo::Auto,
        mean_record_bytes: 256,
        admission: pgtier_cache::Admission::All,
    }
}
