//! `pgtier cache ...` against a `pgtier serve` whose [backend] is a small
//! TATP on the private PostgreSQL: every verb, its output, and an error's
//! exit status with SQLSTATE and hint.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        // SAFETY: signals our own child process.
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let _ = self.0.wait();
    }
}

fn serve(config: &std::path::Path) -> (Served, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pgtier"))
        .args(["serve", "--config"])
        .arg(config)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let addr = first
        .strip_prefix("pgtier: listening on ")
        .unwrap_or_else(|| panic!("{first}"))
        .split(' ')
        .next()
        .unwrap()
        .to_owned();
    std::thread::spawn(move || for _ in lines.by_ref() {});
    (Served(child), addr)
}

fn cache(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pgtier")).arg("cache").args(args).env("PGTIER_URL", url).output().unwrap()
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn every_verb_against_a_running_server() {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let backend = cluster.create_database(&format!("cli_cache_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&backend).unwrap();
    pg.batch_execute(&pgtier_bench::tatp::schema::create_tables(true)).unwrap();
    pg.batch_execute(
        "INSERT INTO subscriber (s_id, sub_nbr) SELECT g, lpad(g::text, 15, '0') FROM generate_series(1, 300) g;
         INSERT INTO access_info (s_id, ai_type, data3) SELECT g, 1, 'abc' FROM generate_series(1, 300) g;",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("pgtier.toml");
    let toml = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = \"data\"\n[auth]\nmethod = \"trust\"\n[backend]\nurl = {backend:?}\n[cache]\nload_parallel = 2\n"
    );
    std::fs::write(&config, toml).unwrap();
    let (_served, addr) = serve(&config);
    let url = format!("postgresql://app@{addr}/app");

    // Without autorefresh: the verify below changes PostgreSQL behind the
    // cache's back, and autorefresh would race it by applying the change.
    assert_eq!(
        ok(&cache(&url, &["create", "tatp", "--root", "subscriber", "--child", "access_info", "--no-autorefresh"])),
        "CREATE CACHE GROUP\n"
    );
    let out = cache(&url, &["load", "tatp", "--where", "s_id <= 120", "--parallel", "2"]);
    assert_eq!(ok(&out), "LOAD CACHE GROUP 120\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("NOTICE: loaded 120 instances (subscriber 120, access_info 120 rows)"), "{stderr}");
    // What the progress display polls (cache_cmd.rs show_progress), with a parameter.
    let mut tier = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let row =
        tier.query_one("SELECT instances, \"rows\" FROM pgtier_cache_stats WHERE \"group\" = $1", &[&"tatp"]).unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (120, 240));
    let list = ok(&cache(&url, &["list"]));
    assert!(list.contains("tatp") && list.contains("READONLY") && list.contains("access_info"), "{list}");
    let stats = ok(&cache(&url, &["stats", "tatp"]));
    assert!(stats.contains("instances") && stats.contains("120"), "{stats}");
    assert_eq!(ok(&cache(&url, &["unload", "tatp", "--where", "s_id > 100"])), "UNLOAD CACHE GROUP 20\n");
    assert_eq!(ok(&cache(&url, &["refresh", "tatp", "--where", "s_id <= 10"])), "REFRESH CACHE GROUP 10\n");
    assert_eq!(tier.query_one("SELECT count(*) FROM access_info", &[]).unwrap().get::<_, i64>(0), 100);

    let out = Command::new(env!("CARGO_BIN_EXE_pgtier")).arg("status").env("PGTIER_URL", &url).output().unwrap();
    let screen = ok(&out);
    assert!(
        screen.contains("not running")
            && screen.contains("Cache groups")
            && screen.contains("tatp")
            && screen.contains("READONLY"),
        "{screen}"
    );
    // With an AWT group, write-through runs and status shows it.
    pg.batch_execute("CREATE TABLE kv (k int PRIMARY KEY, v int); INSERT INTO kv VALUES (1, 1);").unwrap();
    ok(&cache(&url, &["create", "kv", "--kind", "awt", "--root", "kv"]));
    ok(&cache(&url, &["load", "kv"]));
    tier.batch_execute("UPDATE kv SET v = 2 WHERE k = 1").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while pg.query_one("SELECT v FROM kv WHERE k = 1", &[]).unwrap().get::<_, i32>(0) != 2 {
        assert!(std::time::Instant::now() < deadline, "the update never reached PostgreSQL");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = Command::new(env!("CARGO_BIN_EXE_pgtier")).arg("status").env("PGTIER_URL", &url).output().unwrap();
    let screen = ok(&out);
    assert!(screen.contains("lag_p99_ms") && screen.contains("AWT") && !screen.contains("not running"), "{screen}");
    ok(&cache(&url, &["drop", "kv"]));

    // verify: clean, then a change made in PostgreSQL behind the cache's back (exit 1, XX001, the difference named).
    assert_eq!(ok(&cache(&url, &["verify", "tatp"])), "VERIFY CACHE GROUP 100\n");
    pg.batch_execute("UPDATE access_info SET data3 = 'zzz' WHERE s_id = 7").unwrap();
    let out =
        Command::new(env!("CARGO_BIN_EXE_pgtier")).args(["verify", "tatp"]).env("PGTIER_URL", &url).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("SQLSTATE XX001")
            && stderr.contains("1 of 100 cached instances differ")
            && stderr.contains("access_info"),
        "{stderr}"
    );

    // Errors: exit 1, SQLSTATE and hint on stderr.
    let out = cache(&url, &["load", "nosuch"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cache group \"nosuch\" does not exist (SQLSTATE 42704)"), "{stderr}");
    let out = cache(&url, &["create", "bad", "--root", "subscriber", "--child", "access_info", "--memory", "lots"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("SQLSTATE 42601"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cache(&url, &["create", "nk", "--root", "access_info", "--child", "subscriber"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("HINT"), "{}", String::from_utf8_lossy(&out.stderr));

    assert_eq!(ok(&cache(&url, &["drop", "tatp"])), "DROP CACHE GROUP\n");
    assert_eq!(ok(&cache(&url, &["drop", "tatp", "--if-exists"])), "DROP CACHE GROUP\n");
    // Nothing listening: a clear connection error, exit 1.
    let out = cache("postgresql://app@127.0.0.1:1/app", &["list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("connecting to pgtier"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Sum and count of `kv` on a connection (to pgtier or to PostgreSQL).
fn kv_state(client: &mut postgres::Client) -> (i64, i64) {
    let row = client.query_one("SELECT coalesce(sum(v), 0)::int8, count(*) FROM kv", &[]).unwrap();
    (row.get(0), row.get(1))
}

/// Waits until PostgreSQL's `kv` equals pgtier's, row for row.
fn wait_equal(tier: &mut postgres::Client, pg: &mut postgres::Client, what: &str) {
    let rows = |c: &mut postgres::Client| -> Vec<(i32, i32)> {
        c.query("SELECT k, v FROM kv ORDER BY k", &[]).unwrap().iter().map(|r| (r.get(0), r.get(1))).collect()
    };
    let expected = rows(tier);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while rows(pg) != expected {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: PostgreSQL {:?} never reached the cache's {:?}",
            kv_state(pg),
            kv_state(tier)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Issue 30's first scenario as a user meets it: an AWT group written
/// through, the data directory lost, the same config started again. The
/// node's name is refused (55000, the hint naming the takeover) until
/// `pgtier cache takeover`; after it every commit reaches PostgreSQL.
#[test]
fn a_lost_data_directory_is_refused_until_taken_over() {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let backend = cluster.create_database(&format!("cli_takeover_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&backend).unwrap();
    pg.batch_execute("CREATE TABLE kv (k int PRIMARY KEY, v int NOT NULL); INSERT INTO kv SELECT g, 0 FROM generate_series(1, 100) g").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("pgtier.toml");
    let node = format!("takeover{}", std::process::id());
    let toml = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = \"data\"\n[auth]\nmethod = \"trust\"\n[backend]\nurl = {backend:?}\n[cache]\nawt_node = {node:?}\n"
    );
    std::fs::write(&config, toml).unwrap();
    let updates = |tier: &mut postgres::Client, count: i32| {
        for i in 0..count {
            tier.execute("UPDATE kv SET v = v + 1 WHERE k = $1", &[&(i % 100 + 1)]).unwrap();
        }
    };
    {
        let (_served, addr) = serve(&config);
        let url = format!("postgresql://app@{addr}/app");
        ok(&cache(&url, &["create", "kv", "--kind", "awt", "--root", "kv"]));
        ok(&cache(&url, &["load", "kv"]));
        let mut tier = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        updates(&mut tier, 3000);
        wait_equal(&mut tier, &mut pg, "the first directory's 3000 updates");
    }
    assert_eq!(kv_state(&mut pg), (3000, 100));
    // The disk is replaced: same config, an empty data directory.
    std::fs::remove_dir_all(dir.path().join("data")).unwrap();
    let (_served, addr) = serve(&config);
    let url = format!("postgresql://app@{addr}/app");
    let out = cache(&url, &["create", "kv", "--kind", "awt", "--root", "kv"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("belongs to another data directory")
            && stderr.contains("SQLSTATE 55000")
            && stderr.contains("pgtier cache takeover"),
        "{stderr}"
    );
    let mut tier = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    assert!(ok(&cache(&url, &["takeover"])).contains("TAKEOVER CACHE NODE"));
    ok(&cache(&url, &["create", "kv", "--kind", "awt", "--root", "kv"]));
    ok(&cache(&url, &["load", "kv"]));
    updates(&mut tier, 300);
    assert_eq!(kv_state(&mut tier), (3300, 100));
    wait_equal(&mut tier, &mut pg, "the new directory's 300 updates after the takeover");
    // The lost directory's progress rows stay for inspection, beside the new one's.
    let incarnations: i64 = pg
        .query_one("SELECT count(DISTINCT incarnation) FROM pgtier.awt_progress WHERE node = $1", &[&node])
        .unwrap()
        .get(0);
    assert_eq!(incarnations, 2);
}
