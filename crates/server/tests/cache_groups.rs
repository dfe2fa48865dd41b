//! Cache groups through the server against the private PostgreSQL with a
//! small TATP: CREATE/LOAD in the simple and the extended protocol and in
//! psql, every cached table compared with PostgreSQL's rows for the same
//! predicate, the pgtier_cache_* views, errors with SQLSTATE and hint,
//! DROP (and the plans that used its tables), cancel of a LOAD (whole
//! instances only), UNLOAD/REFRESH round trips, PostgreSQL down, and the
//! embedded `sql::Connection` path.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{TestServer, text_rows};

const SUBSCRIBERS: u32 = 2_000;

/// The tables of the group, root first, with their primary keys (the dump order).
const TABLES: [(&str, &str); 4] = [
    ("subscriber", "s_id"),
    ("access_info", "s_id, ai_type"),
    ("special_facility", "s_id, sf_type"),
    ("call_forwarding", "s_id, sf_type, start_time"),
];

const CREATE_TATP: &str =
    "CREATE READONLY CACHE GROUP tatp FROM subscriber, access_info, special_facility, call_forwarding";

fn code(e: &postgres::Error) -> String {
    e.code().map(|c| c.code().to_owned()).unwrap_or_else(|| format!("no SQLSTATE: {e}"))
}

fn hint(e: &postgres::Error) -> String {
    e.as_db_error().and_then(|d| d.hint()).unwrap_or("").to_owned()
}

/// Subscribers with 1-4 access_info rows, 0-3 special facilities (none for
/// every 7th) with 0-3 call_forwarding rows each; some NULLs and padded chars.
fn populate(subscribers: u32) -> String {
    format!(
        "INSERT INTO subscriber (s_id, sub_nbr, bit_1, hex_1, byte2_1, msc_location, vlr_location)
           SELECT g, lpad(g::text, 15, '0'), g % 2, g % 16, g % 256, g * 7, CASE WHEN g % 3 = 0 THEN NULL ELSE g * 13 END
           FROM generate_series(1, {subscribers}) g;
         INSERT INTO access_info SELECT s, t, s % 256, t * 3, 'a' || t, CASE WHEN s % 5 = 0 THEN NULL ELSE 'bb' END
           FROM generate_series(1, {subscribers}) s, generate_series(1, 4) t WHERE t <= s % 4 + 1;
         INSERT INTO special_facility SELECT s, t, (s + t) % 2, t, s % 100, 'x'
           FROM generate_series(1, {subscribers}) s, generate_series(1, 4) t WHERE t <= s % 4 AND s % 7 <> 0;
         INSERT INTO call_forwarding SELECT s_id, sf_type, st, st + 8, 'n' || s_id
           FROM special_facility, (VALUES (0), (8), (16)) v(st) WHERE st / 8 < (s_id + sf_type) % 4;
         CREATE TABLE nokey (a int, b text);
         INSERT INTO nokey VALUES (1, 'x');
         ANALYZE;"
    )
}

/// A database with TATP on the private PostgreSQL (its URL and a client on
/// it) and a pgtier server whose [backend] is that database.
fn setup(name: &str, subscribers: u32) -> (TestServer, postgres::Client, String) {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("cg_{name}_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&url).unwrap();
    pg.batch_execute(&pgtier_bench::tatp::schema::create_tables(true)).unwrap();
    pg.batch_execute(&populate(subscribers)).unwrap();
    let srv = common::start_with(&format!("[backend]\nurl = {url:?}\n[cache]\nmemory_budget = \"256MB\"\n"));
    (srv, pg, url)
}

/// Every cached table equals PostgreSQL's rows of the instances whose
/// subscriber matches `predicate` (ordered text dumps).
fn assert_same_as_postgres(tier: &mut postgres::Client, pg: &mut postgres::Client, predicate: &str) {
    for (table, key) in TABLES {
        let cached = text_rows(tier, &format!("SELECT * FROM {table} ORDER BY {key}"));
        let expected = text_rows(
            pg,
            &format!(
                "SELECT * FROM {table} WHERE s_id IN (SELECT s_id FROM subscriber WHERE {predicate}) ORDER BY {key}"
            ),
        );
        assert!(!expected.is_empty() || predicate == "false", "{table}: nothing to compare for {predicate}");
        assert_eq!(cached.len(), expected.len(), "{table} rows for {predicate}");
        assert_eq!(cached, expected, "{table} for {predicate}");
    }
}

fn count(c: &mut postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).unwrap().get(0)
}

/// Each cached subscriber has exactly PostgreSQL's children: no half instance.
fn assert_whole_instances(tier: &mut postgres::Client, pg: &mut postgres::Client) {
    for (table, _) in &TABLES[1..] {
        let per_root = |c: &mut postgres::Client, sql: &str| -> HashMap<i32, i64> {
            c.query(sql, &[]).unwrap().iter().map(|r| (r.get(0), r.get(1))).collect()
        };
        let cached = per_root(tier, &format!("SELECT s_id, count(*) FROM {table} GROUP BY s_id"));
        let roots: Vec<i32> =
            tier.query("SELECT s_id FROM subscriber", &[]).unwrap().iter().map(|r| r.get(0)).collect();
        let expected = per_root(pg, &format!("SELECT s_id, count(*) FROM {table} GROUP BY s_id"));
        assert!(cached.keys().all(|s| roots.contains(s)), "{table}: a row without its subscriber");
        for s in &roots {
            assert_eq!(cached.get(s), expected.get(s), "{table} rows of subscriber {s}");
        }
    }
}

#[test]
fn create_load_compare_views_errors_and_drop() {
    let (srv, mut pg, _) = setup("main", SUBSCRIBERS);
    let mut tier = srv.client();
    // Simple protocol: CREATE, then LOAD with its instance count.
    tier.batch_execute(CREATE_TATP).unwrap();
    let messages = tier.simple_query("LOAD CACHE GROUP tatp WHERE s_id <= 100").unwrap();
    assert!(matches!(messages.last(), Some(postgres::SimpleQueryMessage::CommandComplete(100))), "{messages:?}");
    assert_same_as_postgres(&mut tier, &mut pg, "s_id <= 100");
    // Extended protocol (Parse/Bind/Execute, as JDBC and psycopg send it).
    assert_eq!(
        tier.execute("LOAD CACHE GROUP tatp WHERE s_id > 100 AND s_id <= 250 AND sub_nbr <> 'it''s' PARALLEL 2", &[])
            .unwrap(),
        150
    );
    assert_same_as_postgres(&mut tier, &mut pg, "s_id <= 250");
    let prepared = tier.prepare("LOAD CACHE GROUP tatp WHERE s_id <= 300").unwrap();
    assert!(prepared.params().is_empty() && prepared.columns().is_empty());
    assert_eq!(tier.execute(&prepared, &[]).unwrap(), 50, "instances already cached are left alone");
    assert_same_as_postgres(&mut tier, &mut pg, "s_id <= 300");

    // psql: the command tag and the NOTICE with rows per table and speed.
    let out = common::psql(&srv, "LOAD CACHE GROUP tatp WHERE s_id <= 320;\n", &["-v", "QUIET=0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("LOAD CACHE GROUP 20"), "{stdout}");
    assert!(
        stderr.contains("NOTICE:  loaded 20 instances (subscriber 20, access_info ") && stderr.contains("rows/s"),
        "{stderr}"
    );
    assert_same_as_postgres(&mut tier, &mut pg, "s_id <= 320");

    // The views: one group, its four tables with PostgreSQL's row counts, stats.
    let groups = text_rows(
        &mut tier,
        "SELECT name, kind, dynamic, root_table, root_predicate, aging, keep FROM pgtier_cache_groups",
    );
    let group_row: Vec<Option<String>> = ["tatp", "READONLY", "f", "subscriber"]
        .iter()
        .map(|s| Some((*s).to_owned()))
        .chain([None, Some("OFF".into()), Some("f".into())])
        .collect();
    assert_eq!(groups, vec![group_row]);
    for (table, _) in TABLES {
        let cached = count(&mut tier, &format!("SELECT \"rows\" FROM pgtier_cache_tables WHERE \"table\" = '{table}'"));
        let expected = count(&mut pg, &format!("SELECT count(*) FROM {table} WHERE s_id <= 320"));
        assert_eq!(cached, expected, "pgtier_cache_tables.rows of {table}");
    }
    let parent = text_rows(
        &mut tier,
        "SELECT t.\"table\", t.parent FROM pgtier_cache_tables t JOIN pgtier_cache_groups g ON g.name = t.\"group\" ORDER BY 1",
    );
    assert!(parent.contains(&vec![Some("call_forwarding".into()), Some("special_facility".into())]), "{parent:?}");
    assert!(parent.contains(&vec![Some("subscriber".into()), None]), "{parent:?}");
    assert_eq!(count(&mut tier, "SELECT instances FROM pgtier_cache_stats WHERE \"group\" = 'tatp'"), 320);
    assert_eq!(count(&mut tier, "SELECT loaded_instances FROM pgtier_cache_stats"), 320);

    // Errors carry PostgreSQL's SQLSTATE and a hint; the session goes on.
    let e = tier.batch_execute("CREATE READONLY CACHE GROUP nk FROM nokey").unwrap_err();
    assert_eq!(code(&e), "42P16", "{e}");
    assert!(hint(&e).contains("primary key"), "{e:?}");
    let e = tier.batch_execute("LOAD CACHE GROUP nosuch").unwrap_err();
    assert_eq!(code(&e), "42704", "{e}");
    let e =
        tier.execute("CREATE READONLY CACHE GROUP g2 FROM subscriber, access_info WHERE ai_type = 1", &[]).unwrap_err();
    assert_eq!(code(&e), "42P17", "{e}");
    assert!(!hint(&e).is_empty(), "{e:?}");
    let e = tier.batch_execute("LOAD CACHE GROUP tatp WHERE").unwrap_err();
    assert_eq!(code(&e), "42601", "{e}");
    let e = tier.batch_execute("LOAD CACHE GROUP tatp WHERE nosuch > 1").unwrap_err();
    assert_eq!(code(&e), "42703", "PostgreSQL's error for the predicate: {e}");
    // Inside a block, and among other statements: 25001, as VACUUM.
    let mut txn = tier.transaction().unwrap();
    let e = txn.batch_execute("LOAD CACHE GROUP tatp").unwrap_err();
    assert_eq!(code(&e), "25001", "{e}");
    assert_eq!(e.as_db_error().unwrap().message(), "LOAD CACHE GROUP cannot run inside a transaction block");
    txn.rollback().unwrap();
    let e = tier.batch_execute("SELECT 1; LOAD CACHE GROUP tatp").unwrap_err();
    assert_eq!(code(&e), "25001", "{e}");
    assert_same_as_postgres(&mut tier, &mut pg, "s_id <= 320");

    // A READONLY group's tables refuse application writes, with the cache's hint.
    let e = tier.batch_execute("UPDATE subscriber SET msc_location = 0 WHERE s_id = 1").unwrap_err();
    assert_eq!(code(&e), "25006", "{e}");
    assert!(!hint(&e).is_empty(), "{e:?}");
    // DROP CACHE GROUP: its tables go, plans that used them fail as for DROP TABLE.
    let plan = tier.prepare("SELECT count(*) FROM subscriber").unwrap();
    assert_eq!(tier.query_one(&plan, &[]).unwrap().get::<_, i64>(0), 320);
    tier.batch_execute("DROP CACHE GROUP tatp").unwrap();
    let e = tier.query_one(&plan, &[]).unwrap_err();
    assert_eq!(code(&e), "42P01", "{e}");
    assert_eq!(code(&tier.batch_execute("SELECT * FROM access_info").unwrap_err()), "42P01");
    assert_eq!(count(&mut tier, "SELECT count(*) FROM pgtier_cache_groups"), 0);
    assert_eq!(code(&tier.batch_execute("DROP CACHE GROUP tatp").unwrap_err()), "42704");
    tier.batch_execute("DROP CACHE GROUP IF EXISTS tatp").unwrap();
    // PostgreSQL is untouched, and the group can be defined again.
    assert_eq!(count(&mut pg, "SELECT count(*) FROM subscriber"), i64::from(SUBSCRIBERS));
    tier.batch_execute(CREATE_TATP).unwrap();
    assert_eq!(tier.execute("LOAD CACHE GROUP tatp WHERE s_id % 97 = 0", &[]).unwrap(), u64::from(SUBSCRIBERS / 97));
    assert_same_as_postgres(&mut tier, &mut pg, "s_id % 97 = 0");
}

#[test]
fn unload_and_refresh_round_trips() {
    let (srv, mut pg, _) = setup("rt", SUBSCRIBERS);
    let mut tier = srv.client();
    // Without autorefresh: PostgreSQL changes behind the cache's back and
    // REFRESH is what is tested; autorefresh would apply the same changes
    // late and, by its rule for groups that are not DYNAMIC (a changed root
    // belongs to the group), bring s_id <= 20 back after the final UNLOAD.
    tier.batch_execute(&format!("{CREATE_TATP} AUTOREFRESH OFF")).unwrap();
    assert_eq!(tier.execute("LOAD CACHE GROUP tatp WHERE s_id <= 400", &[]).unwrap(), 400);
    // UNLOAD WHERE, evaluated on the cache; PostgreSQL untouched.
    assert_eq!(tier.execute("UNLOAD CACHE GROUP tatp WHERE s_id > 300 OR s_id % 10 = 0", &[]).unwrap(), 130);
    assert_same_as_postgres(&mut tier, &mut pg, "s_id <= 300 AND s_id % 10 <> 0");
    assert_eq!(count(&mut pg, "SELECT count(*) FROM subscriber"), i64::from(SUBSCRIBERS));
    // REFRESH after PostgreSQL changed: changed rows, a deleted instance, a new child.
    pg.batch_execute(
        "UPDATE subscriber SET msc_location = -1 WHERE s_id <= 20;
         UPDATE access_info SET data3 = 'zz' WHERE s_id = 21;
         DELETE FROM call_forwarding WHERE s_id = 33; DELETE FROM special_facility WHERE s_id = 33;
         DELETE FROM access_info WHERE s_id = 33; DELETE FROM subscriber WHERE s_id = 33;
         INSERT INTO access_info VALUES (22, 4, 1, 1, 'new', 'new') ON CONFLICT DO NOTHING",
    )
    .unwrap();
    // On a group that is not DYNAMIC, REFRESH WHERE reloads every instance
    // PostgreSQL has for the predicate (TimesTen's rule): the unloaded
    // multiples of 10 up to 50 come back, subscriber 33 goes.
    let messages = tier.simple_query("REFRESH CACHE GROUP tatp WHERE s_id <= 50").unwrap();
    assert!(matches!(messages.last(), Some(postgres::SimpleQueryMessage::CommandComplete(49))), "{messages:?}");
    assert_same_as_postgres(&mut tier, &mut pg, "(s_id <= 300 AND s_id % 10 <> 0) OR s_id <= 50");
    assert_eq!(count(&mut tier, "SELECT msc_location FROM subscriber WHERE s_id = 7"), -1);
    assert_eq!(count(&mut tier, "SELECT count(*) FROM subscriber WHERE s_id = 33"), 0);
    // REFRESH without WHERE: the whole group, as PostgreSQL has it now.
    pg.batch_execute("UPDATE subscriber SET vlr_location = 7 WHERE s_id BETWEEN 100 AND 150").unwrap();
    tier.batch_execute("REFRESH CACHE GROUP tatp").unwrap();
    assert_same_as_postgres(&mut tier, &mut pg, "true");
    // UNLOAD without WHERE: all of it.
    tier.batch_execute("UNLOAD CACHE GROUP tatp").unwrap();
    assert_same_as_postgres(&mut tier, &mut pg, "false");
    assert_eq!(count(&mut pg, "SELECT count(*) FROM subscriber"), i64::from(SUBSCRIBERS) - 1);
}

/// A CancelRequest during a LOAD: 57014, and the instances committed before
/// it are whole. `prompt`: also within seconds of the cancel.
fn cancel_a_load(name: &str, prompt: bool) {
    let (srv, mut pg, _) = setup(name, 3_000);
    let mut tier = srv.client();
    tier.batch_execute(CREATE_TATP).unwrap();
    // About 2 ms a root row on every stream: the load runs for seconds.
    let token = tier.cancel_token();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        token.cancel_query(postgres::NoTls).unwrap();
    });
    let started = std::time::Instant::now();
    let e = tier.batch_execute("LOAD CACHE GROUP tatp WHERE pg_sleep(0.002)::text = ''").unwrap_err();
    canceller.join().unwrap();
    assert_eq!(code(&e), "57014", "{e}");
    if prompt {
        assert!(started.elapsed() < Duration::from_secs(5), "the cancel took {:?}", started.elapsed());
    }
    assert_whole_instances(&mut tier, &mut pg);
    // The session and the group go on.
    let cached = count(&mut tier, "SELECT count(*) FROM subscriber");
    let loaded = tier.execute("LOAD CACHE GROUP tatp WHERE s_id <= 3000", &[]).unwrap();
    assert_eq!(i64::try_from(loaded).unwrap() + cached, 3000);
    assert_same_as_postgres(&mut tier, &mut pg, "s_id <= 3000");
}

#[test]
fn cancel_stops_a_load_with_57014_and_whole_instances_only() {
    cancel_a_load("cancel", false);
}

/// A cancel stops the LOAD within seconds: no COPY starts after it, and one
/// that started while it went out is cancelled again (it would otherwise run
/// its sort to the end, ~20 s, before the reader sees the flag).
#[test]
fn cancel_stops_a_load_promptly() {
    cancel_a_load("cancel_prompt", true);
}

/// VERIFY reads PostgreSQL too: a CancelRequest stops it (57014) while its
/// read waits on PostgreSQL, and the session goes on.
#[test]
fn cancel_stops_a_verify_with_57014() {
    let (srv, _pg, url) = setup("cancel_verify", 300);
    let mut tier = srv.client();
    tier.batch_execute(CREATE_TATP).unwrap();
    tier.batch_execute("LOAD CACHE GROUP tatp").unwrap();
    // PostgreSQL holds VERIFY's first read behind a lock until the end.
    let mut locker = pgtier_backend::connect(&url).unwrap();
    locker.batch_execute("BEGIN; LOCK TABLE subscriber IN ACCESS EXCLUSIVE MODE").unwrap();
    let token = tier.cancel_token();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1000));
        token.cancel_query(postgres::NoTls).unwrap();
    });
    let started = std::time::Instant::now();
    let e = tier.batch_execute("VERIFY CACHE GROUP tatp").unwrap_err();
    canceller.join().unwrap();
    assert_eq!(code(&e), "57014", "{e}");
    assert!(started.elapsed() < Duration::from_secs(10), "the cancel took {:?}", started.elapsed());
    locker.batch_execute("ROLLBACK").unwrap();
    tier.batch_execute("VERIFY CACHE GROUP tatp").unwrap();
}

#[test]
fn postgres_down_is_08001_with_a_hint_and_the_server_goes_on() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let srv = common::start_with(&format!(
        "[backend]\nurl = \"postgresql://someone:secret-pw@127.0.0.1:{port}/db?connect_timeout=2\"\n"
    ));
    let mut tier = srv.client();
    for _ in 0..2 {
        let e = tier.batch_execute(CREATE_TATP).unwrap_err();
        assert_eq!(code(&e), "08001", "{e}");
        assert!(!hint(&e).is_empty(), "{e:?}");
        assert!(!e.as_db_error().unwrap().message().contains("secret-pw"), "password leaked: {e}");
        let e = tier.execute(CREATE_TATP, &[]).unwrap_err();
        assert_eq!(code(&e), "08001", "{e}");
    }
    assert_eq!(count(&mut tier, "SELECT count(*) FROM pgtier_cache_groups"), 0);
    tier.batch_execute("CREATE TABLE here (id int PRIMARY KEY); INSERT INTO here VALUES (1)").unwrap();
    assert_eq!(text_rows(&mut srv.client(), "SELECT id FROM here"), vec![vec![Some("1".into())]]);
}

#[test]
fn the_embedded_connection_runs_cache_statements() {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("cg_embedded_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&url).unwrap();
    pg.batch_execute(&pgtier_bench::tatp::schema::create_tables(true)).unwrap();
    pg.batch_execute(&populate(500)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = pgtier_engine::Database::open(dir.path(), pgtier_engine::EngineConfig::default()).unwrap();
    let params = pgtier_backend::BackendConfig { url: Some(url), ..Default::default() }.resolve().unwrap();
    let cache = pgtier_cache::Cache::open(db.clone(), Some(params), pgtier_cache::CacheConfig::default()).unwrap();
    let mut conn = pgtier_sql::Connection::new(db);
    conn.attach_cache(cache);
    assert_eq!(conn.execute_sql(&format!("{CREATE_TATP};")).unwrap().tag, "CREATE CACHE GROUP");
    let loaded = conn.execute_sql("/* embedded */ LOAD CACHE GROUP tatp WHERE s_id BETWEEN 10 AND 59").unwrap();
    assert_eq!((loaded.tag.as_str(), loaded.rows_affected), ("LOAD CACHE GROUP 50", 50));
    let notices = conn.take_notices();
    assert!(notices.iter().any(|n| n.message.starts_with("loaded 50 instances")), "{notices:?}");
    for (table, _) in TABLES {
        let cached = conn
            .execute_sql(&format!("SELECT count(*) FROM {table}"))
            .unwrap()
            .rows
            .unwrap()
            .get(0)
            .unwrap()
            .text(0)
            .unwrap();
        let expected = count(&mut pg, &format!("SELECT count(*) FROM {table} WHERE s_id BETWEEN 10 AND 59"));
        assert_eq!(cached, expected.to_string(), "{table}");
    }
    let unloaded = conn.execute_sql("UNLOAD CACHE GROUP tatp WHERE s_id < 20").unwrap();
    assert_eq!(unloaded.tag, "UNLOAD CACHE GROUP 10");
    conn.execute_sql("BEGIN").unwrap();
    assert_eq!(conn.execute_sql("DROP CACHE GROUP tatp").unwrap_err().sqlstate, "25001");
    conn.execute_sql("ROLLBACK").unwrap();
    assert_eq!(conn.execute_sql("DROP CACHE GROUP tatp").unwrap().tag, "DROP CACHE GROUP");
    assert_eq!(conn.execute_sql("SELECT count(*) FROM subscriber").unwrap_err().sqlstate, "42P01");
}

/// A serial key of a cached AWT table comes from PostgreSQL's sequence, never
/// from a counter of pgtier's: an INSERT that leaves it to its default gets
/// the next value PostgreSQL gives (a block of `sequence_block` reserved at
/// once, so PostgreSQL's own next insert skips past it); one that supplies
/// it is written through as given.
#[test]
fn serial_keys_come_from_the_postgres_sequence() {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("cg_serial_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&url).unwrap();
    pg.batch_execute(
        "CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL); INSERT INTO items (name) VALUES ('a'), ('b');",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = pgtier_engine::Database::open(dir.path(), pgtier_engine::EngineConfig::default()).unwrap();
    let params = pgtier_backend::BackendConfig { url: Some(url), ..Default::default() }.resolve().unwrap();
    let config = pgtier_cache::CacheConfig { sequence_block: 10, ..pgtier_cache::CacheConfig::default() };
    let cache = pgtier_cache::Cache::open(db.clone(), Some(params), config).unwrap();
    let mut conn = pgtier_sql::Connection::new(db);
    conn.attach_cache(cache.clone());
    conn.execute_sql("CREATE AWT CACHE GROUP items FROM items").unwrap();
    conn.execute_sql("LOAD CACHE GROUP items").unwrap();
    let inserted = conn.execute_sql("INSERT INTO items (name) VALUES ('c') RETURNING id").unwrap();
    assert_eq!(inserted.rows.unwrap().get(0).unwrap().text(0).as_deref(), Some("3"));
    // PostgreSQL's own next value is past the block this cache reserved (3..12).
    let next: i32 = pg.query_one("SELECT nextval('items_id_seq')::int", &[]).unwrap().get(0);
    assert_eq!(next, 13);
    conn.execute_sql(&format!("INSERT INTO items (id, name) VALUES ({next}, 'd')")).unwrap();
    assert!(cache.wait_propagated(std::time::Duration::from_secs(30)));
    assert_eq!(count(&mut pg, "SELECT count(*) FROM items WHERE (id, name) IN ((3, 'c'), (13, 'd'))"), 2);
}

fn http(addr: std::net::SocketAddr, request: &str) -> String {
    use std::io::{Read, Write};
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    // The server may answer and close before a large request is all sent.
    let _ = tcp.write_all(request.as_bytes());
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = tcp.read(&mut buf) {
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&answer).into_owned()
}

/// `[metrics] listen`: GET /metrics has the engine's, the groups' and
/// write-through's figures in Prometheus' text format; other requests get
/// 404/405/431 and the endpoint goes on.
#[test]
fn metrics_endpoint_reports_groups_and_write_through() {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("cg_metrics_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&url).unwrap();
    pg.batch_execute(
        "CREATE TABLE kv (k int PRIMARY KEY, v int); INSERT INTO kv SELECT g, g FROM generate_series(1, 50) g;",
    )
    .unwrap();
    let srv = common::start_with(&format!("[backend]\nurl = {url:?}\n[metrics]\nlisten = \"127.0.0.1:0\"\n"));
    let metrics = srv.server.as_ref().unwrap().metrics_addr().expect("metrics address");
    let mut tier = srv.client();
    tier.batch_execute("CREATE AWT CACHE GROUP kv FROM kv").unwrap();
    tier.batch_execute("LOAD CACHE GROUP kv").unwrap();
    tier.batch_execute("UPDATE kv SET v = v + 1 WHERE k <= 10").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let body = loop {
        let answer = http(metrics, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        if answer.contains("pgtier_awt_applied_transactions_total 1\n") {
            break answer;
        }
        assert!(std::time::Instant::now() < deadline, "{answer}");
        std::thread::sleep(Duration::from_millis(50));
    };
    for line in [
        "pgtier_cache_instances{group=\"kv\"} 50",
        "# TYPE pgtier_awt_backlog_bytes gauge",
        "pgtier_awt_connected 1",
        "pgtier_engine_commits_total ",
    ] {
        assert!(body.contains(line), "{line} in {body}");
    }
    assert!(http(metrics, "GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(http(metrics, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    let huge = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
    assert!(http(metrics, &huge).starts_with("HTTP/1.1 431"));
    assert!(http(metrics, "GET /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200"));
}

/// SWT over the wire: an autocommit UPDATE and an explicit transaction are
/// in PostgreSQL when their command returns; PostgreSQL's refusal (a CHECK
/// only PostgreSQL has) comes back to the client with PostgreSQL's SQLSTATE,
/// message and constraint, the cache rolled back; the session goes on.
#[test]
fn swt_commits_through_postgres_and_returns_its_errors() {
    let (srv, mut pg, _url) = setup("swt", 200);
    let mut tier = srv.client();
    tier.batch_execute(
        "CREATE SWT CACHE GROUP swt FROM subscriber WHERE s_id <= 100, access_info, special_facility, call_forwarding",
    )
    .unwrap();
    tier.batch_execute("LOAD CACHE GROUP swt").unwrap();
    tier.execute("UPDATE subscriber SET vlr_location = 4242 WHERE s_id = 7", &[]).unwrap();
    assert_eq!(count(&mut pg, "SELECT vlr_location::bigint FROM subscriber WHERE s_id = 7"), 4242);
    tier.batch_execute("BEGIN; UPDATE subscriber SET msc_location = 1 WHERE s_id = 8; DELETE FROM call_forwarding WHERE s_id = 9; COMMIT").unwrap();
    assert_eq!(count(&mut pg, "SELECT msc_location::bigint FROM subscriber WHERE s_id = 8"), 1);
    assert_eq!(count(&mut pg, "SELECT count(*) FROM call_forwarding WHERE s_id = 9"), 0);
    assert_same_as_postgres(&mut tier, &mut pg, "s_id <= 100");

    // A constraint only PostgreSQL has. Adding it changed the table's
    // definition: commits are refused until the change is accepted (the
    // columns the cache holds are the same), then PostgreSQL's refusal
    // comes back with its SQLSTATE.
    pg.batch_execute("ALTER TABLE subscriber ADD CONSTRAINT msc_small CHECK (msc_location < 1000000) NOT VALID")
        .unwrap();
    let error = tier.execute("UPDATE subscriber SET msc_location = 5000000 WHERE s_id = 10", &[]).unwrap_err();
    assert_eq!(code(&error), "55000", "{error}");
    let drifted = tier
        .query_one("SELECT drifted_groups FROM pgtier_cache_swt", &[])
        .unwrap()
        .get::<_, Option<String>>(0)
        .unwrap_or_default();
    assert!(drifted.starts_with("swt: ") && drifted.contains("subscriber"), "{drifted}");
    tier.batch_execute("ALTER CACHE GROUP swt ACCEPT DEFINITION").unwrap();
    let error = tier.execute("UPDATE subscriber SET msc_location = 5000000 WHERE s_id = 10", &[]).unwrap_err();
    assert_eq!(code(&error), "23514", "{error}");
    assert!(error.as_db_error().unwrap().message().contains("msc_small"), "{error}");
    let mut txn = tier.transaction().unwrap();
    txn.execute("UPDATE subscriber SET msc_location = 2 WHERE s_id = 11", &[]).unwrap();
    txn.execute("UPDATE subscriber SET msc_location = 7000000 WHERE s_id = 12", &[]).unwrap();
    assert_eq!(code(&txn.commit().unwrap_err()), "23514");
    assert_eq!(
        count(&mut tier, "SELECT msc_location::bigint FROM subscriber WHERE s_id = 11"),
        11 * 7,
        "the refused transaction left nothing in the cache"
    );
    assert_eq!(
        count(&mut pg, "SELECT msc_location::bigint FROM subscriber WHERE s_id = 11"),
        11 * 7,
        "nor in PostgreSQL"
    );
    pg.batch_execute("ALTER TABLE subscriber DROP CONSTRAINT msc_small").unwrap();
    tier.batch_execute("ALTER CACHE GROUP swt ACCEPT DEFINITION").unwrap();
    tier.execute("UPDATE subscriber SET msc_location = 3 WHERE s_id = 11", &[]).unwrap();
    assert_same_as_postgres(&mut tier, &mut pg, "s_id <= 100");
    // The figures `pgtier status` shows.
    let row = tier.query_one("SELECT commits, refused, in_doubt_resolved FROM pgtier_cache_swt", &[]).unwrap();
    // (The commit refused for the changed definition never reached PostgreSQL.)
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1), row.get::<_, i64>(2)), (3, 2, 0));
}

/// The rows of `doc` where `predicate`, as text, ordered by id.
fn docs(c: &mut postgres::Client, predicate: &str) -> Vec<Vec<Option<String>>> {
    text_rows(c, &format!("SELECT id, region, body, length(body), n FROM doc WHERE {predicate} ORDER BY id"))
}

/// A READONLY group with a WHERE follows PostgreSQL through the server:
/// rows entering and leaving the WHERE, inserts outside it, TOASTed values
/// PostgreSQL does not resend (unchanged), one of them on a row entering.
#[test]
fn a_readonly_group_with_a_where_follows_postgres() {
    let (srv, mut pg, _) = setup("autorefresh", 10);
    pg.batch_execute(
        "CREATE TABLE doc (id int PRIMARY KEY, region int NOT NULL, body text, n int);
         INSERT INTO doc SELECT g, g % 4, CASE WHEN g % 10 = 0 THEN (SELECT string_agg(md5(g::text || x::text), '') FROM generate_series(1, 700) x) ELSE 'short ' || g END, 0
           FROM generate_series(1, 200) g;",
    )
    .unwrap();
    let mut tier = srv.client();
    tier.batch_execute("CREATE READONLY CACHE GROUP docs FROM doc WHERE region = 1").unwrap();
    tier.batch_execute("LOAD CACHE GROUP docs").unwrap();
    assert_eq!(docs(&mut tier, "true"), docs(&mut pg, "region = 1"));
    for change in [
        "UPDATE doc SET n = n + 1 WHERE id % 10 = 0 OR id = 1",
        "UPDATE doc SET region = 1 WHERE id IN (2, 3)",
        "UPDATE doc SET region = 2 WHERE id = 5",
        "INSERT INTO doc VALUES (1001, 1, 'new', 0), (1002, 3, 'other', 0)",
        "DELETE FROM doc WHERE id IN (9, 4)",
        "UPDATE doc SET region = 1 WHERE id = 20",
        "UPDATE doc SET body = body || 'x' WHERE id = 30",
    ] {
        pg.batch_execute(change).unwrap();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    // Each change above is one PostgreSQL transaction, applied as one.
    while docs(&mut tier, "true") != docs(&mut pg, "region = 1")
        || count(&mut tier, "SELECT applied_txns FROM pgtier_cache_autorefresh") < 7
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the cache did not catch up: {:?}",
            text_rows(&mut tier, "SELECT * FROM pgtier_cache_autorefresh")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The row that entered with an unchanged TOASTed body has it whole.
    assert_eq!(docs(&mut tier, "id = 20"), docs(&mut pg, "id = 20"));
    assert_eq!(docs(&mut tier, "id = 20")[0][3].as_deref(), Some("22400"));
    let view = text_rows(
        &mut tier,
        "SELECT \"group\", slot LIKE 'pgtier_pgtier_cg_autorefresh_%_docs', state, connected, applied_txns >= 7, skipped_changes >= 1, resnapshots, last_error FROM pgtier_cache_autorefresh",
    );
    let expected: Vec<Option<String>> =
        ["docs", "t", "streaming", "t", "t", "t", "0"].iter().map(|s| Some((*s).to_owned())).chain([None]).collect();
    assert_eq!(view, vec![expected]);
    // Applications write READONLY tables in PostgreSQL, not here.
    let e = tier.batch_execute("UPDATE doc SET n = 0").unwrap_err();
    assert_eq!(code(&e), "25006", "{e}");
    tier.batch_execute("DROP CACHE GROUP docs").unwrap();
    assert_eq!(
        count(
            &mut pg,
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'pgtier_pgtier_cg_autorefresh_%_docs'"
        ),
        0
    );
}

/// Waits until write-through has nothing left to send PostgreSQL.
fn drained(tier: &mut postgres::Client) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while count(tier, "SELECT coalesce(sum(backlog_bytes), 0)::int8 FROM pgtier_cache_propagation") != 0 {
        assert!(std::time::Instant::now() < deadline, "write-through did not drain");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A DYNAMIC group whose lookups by a UNIQUE key (TATP's sub_nbr, which
/// does not carry the root key) miss: PostgreSQL names the instance, it is
/// loaded whole, and reads and writes by that key answer as PostgreSQL
/// does (TATP's UPDATE_LOCATION updated nothing on a subscriber not in
/// memory before). Keys the cache changed or deleted and PostgreSQL does
/// not know yet answer from the cache's state.
#[test]
fn a_dynamic_group_loads_what_a_unique_key_names() {
    let (srv, mut pg, _url) = setup("unique", 300);
    let mut tier = srv.client();
    tier.batch_execute(
        "CREATE DYNAMIC AWT CACHE GROUP tatp FROM subscriber, access_info, special_facility, call_forwarding",
    )
    .unwrap();
    assert_eq!(count(&mut tier, "SELECT count(*) FROM subscriber"), 0);
    let nbr = |s: i32| format!("{s:015}");

    // Reads by sub_nbr, simple and extended protocol, present and absent.
    for s in [5, 77, 150, 301, 0] {
        let sql = format!("SELECT s_id, sub_nbr, vlr_location FROM subscriber WHERE sub_nbr = '{}'", nbr(s));
        assert_eq!(text_rows(&mut tier, &sql), text_rows(&mut pg, &sql), "{sql}");
    }
    let by_nbr = "SELECT s_id FROM subscriber WHERE sub_nbr = $1";
    for s in [12, 13, 299] {
        let got: Vec<i32> = tier.query(by_nbr, &[&nbr(s)]).unwrap().iter().map(|r| r.get(0)).collect();
        assert_eq!(got, [s], "s_id of sub_nbr {}", nbr(s));
    }
    // A value its column would not hold names no row, as in PostgreSQL.
    assert!(tier.query(by_nbr, &[&"0000000000000012"]).unwrap().is_empty());
    assert_eq!(count(&mut tier, "SELECT count(*) FROM subscriber"), 6);
    assert_whole_instances(&mut tier, &mut pg);

    // TATP's UPDATE_LOCATION on subscribers not in memory.
    let update = "UPDATE subscriber SET vlr_location = $1 WHERE sub_nbr = $2";
    for s in [40, 41, 250] {
        assert_eq!(tier.execute(update, &[&(i64::from(s) * 1000), &nbr(s)]).unwrap(), 1, "UPDATE_LOCATION {s}");
    }
    assert_eq!(tier.execute(update, &[&7i64, &nbr(999)]).unwrap(), 0);

    // The cache moves sub_nbr 60's number to subscriber 61 and deletes
    // subscriber 62; until PostgreSQL has both, a lookup answers the cache's state.
    tier.batch_execute(&format!(
        "BEGIN;
         UPDATE subscriber SET sub_nbr = 'moved' WHERE s_id = 60;
         UPDATE subscriber SET sub_nbr = '{}' WHERE s_id = 61;
         DELETE FROM call_forwarding WHERE s_id = 62;
         DELETE FROM special_facility WHERE s_id = 62;
         DELETE FROM access_info WHERE s_id = 62;
         DELETE FROM subscriber WHERE s_id = 62;
         COMMIT;",
        nbr(60)
    ))
    .unwrap();
    let ids = |tier: &mut postgres::Client, s: i32| -> Vec<i32> {
        tier.query(by_nbr, &[&nbr(s)]).unwrap().iter().map(|r| r.get(0)).collect()
    };
    assert_eq!(ids(&mut tier, 60), [61]);
    assert!(ids(&mut tier, 61).is_empty());
    assert!(ids(&mut tier, 62).is_empty());
    drained(&mut tier);
    // Evicted, every instance comes back by its number as PostgreSQL has it.
    tier.batch_execute("UNLOAD CACHE GROUP tatp").unwrap();
    assert_eq!(ids(&mut tier, 60), [61]);
    assert!(ids(&mut tier, 61).is_empty());
    assert!(ids(&mut tier, 62).is_empty());
    let updated = "SELECT s_id, vlr_location FROM subscriber WHERE s_id IN (40, 41, 250) ORDER BY s_id";
    assert_eq!(
        text_rows(&mut pg, updated),
        [["40", "40000"], ["41", "41000"], ["250", "250000"]].map(|r| r.map(|v| Some(v.to_owned())).to_vec())
    );
    // An INSERT that takes a key PostgreSQL holds for a subscriber not in
    // memory, and an UPDATE that takes another's number: 23505 on both
    // sides (the cache used to take them and PostgreSQL to refuse them at
    // write-through).
    for sql in [
        "INSERT INTO subscriber (s_id, sub_nbr) VALUES (120, 'fresh-120')".to_owned(),
        format!("INSERT INTO subscriber (s_id, sub_nbr) VALUES (100000, '{}')", nbr(121)),
        format!("UPDATE subscriber SET sub_nbr = '{}' WHERE s_id = 40", nbr(122)),
    ] {
        tier.batch_execute("UNLOAD CACHE GROUP tatp").unwrap();
        let mine = tier.batch_execute(&sql).unwrap_err();
        let theirs = pg.batch_execute(&sql).unwrap_err();
        assert_eq!(mine.code(), theirs.code(), "{sql}: {mine} / {theirs}");
        assert_eq!(mine.code(), Some(&postgres::error::SqlState::UNIQUE_VIOLATION), "{sql}");
    }
    drained(&mut tier);
    tier.batch_execute("VERIFY CACHE GROUP tatp").unwrap();
}
