//! `ALTER TABLE t SET ANALYTICS ON | OFF`, pgtier's own statement (no
//! PostgreSQL counterpart, so no differential test): the columnar copy is
//! built, shown by pgtier_analytics_tables and pgtier_column_compression,
//! kept current, dropped by OFF, DROP TABLE and a rewriting ALTER TABLE,
//! rebuilt when the database is opened again; every refusal has its
//! SQLSTATE.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use pgtier_engine::{CommitMode, Database, EngineConfig};
use pgtier_sql::Connection;

fn open(dir: &std::path::Path) -> Connection {
    let config = EngineConfig { commit_mode: CommitMode::Sync, background: false, ..EngineConfig::default() };
    Connection::new(Database::open(dir, config).unwrap())
}

fn one(conn: &mut Connection, sql: &str) -> String {
    let rows = conn.execute_sql(sql).unwrap().rows.unwrap();
    rows.get(0).map(|r| r.text(0).unwrap_or_else(|| "NULL".into())).unwrap_or_else(|| "(none)".into())
}

fn all(conn: &mut Connection, sql: &str) -> Vec<Vec<String>> {
    let rows = conn.execute_sql(sql).unwrap().rows.unwrap();
    (0..rows.len())
        .map(|i| {
            let r = rows.get(i).unwrap();
            (0..r.len()).map(|c| r.text(c).unwrap_or_else(|| "NULL".into())).collect()
        })
        .collect()
}

fn state_of(conn: &mut Connection, table: &str) -> String {
    one(conn, &format!("SELECT state FROM pgtier_analytics_tables WHERE \"table\" = '{table}'"))
}

/// Waits until `sql` answers `want` (the copy merges its delta within a
/// second; a rebuild runs on its own thread).
fn wait_for(conn: &mut Connection, sql: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = one(conn, sql);
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{sql}: {got}, not {want}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn error(conn: &mut Connection, sql: &str) -> (String, String) {
    let e = conn.execute_sql(sql).unwrap_err();
    (e.sqlstate.to_owned(), e.message)
}

#[test]
fn a_copy_is_built_shown_kept_current_dropped_and_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(dir.path());
    conn.execute_sql("CREATE TABLE li (id int PRIMARY KEY, qty numeric(12,2), mode text, note text, shipped date)")
        .unwrap();
    conn.execute_sql(
        "INSERT INTO li SELECT g, g % 50, CASE g % 3 WHEN 0 THEN 'AIR' WHEN 1 THEN 'RAIL' ELSE 'SHIP' END, \
         'note ' || g, DATE '2024-01-01' + g % 365 FROM generate_series(1, 20000) g",
    )
    .unwrap();
    conn.execute_sql("CREATE SCHEMA s").unwrap();
    conn.execute_sql("CREATE TABLE s.k (a bigint, b text)").unwrap();
    conn.execute_sql("INSERT INTO s.k SELECT g, 'x' FROM generate_series(1, 100) g").unwrap();
    assert_eq!(one(&mut conn, "SELECT count(*) FROM pgtier_analytics_tables"), "0");

    let on = conn.execute_sql("ALTER TABLE li SET ANALYTICS ON").unwrap();
    assert_eq!(on.tag, "ALTER TABLE");
    let notices = conn.take_notices();
    assert!(notices.iter().any(|n| n.message.contains("20000 rows copied")), "{notices:?}");
    conn.execute_sql("ALTER TABLE IF EXISTS s.k SET ANALYTICS ON").unwrap();

    let rows = all(
        &mut conn,
        "SELECT schema, \"table\", state, error, rows, chunks >= 1, delta_rows FROM pgtier_analytics_tables ORDER BY 2",
    );
    assert_eq!(
        rows,
        vec![
            vec!["s", "k", "ready", "NULL", "100", "t", "0"],
            vec!["public", "li", "ready", "NULL", "20000", "t", "0"],
        ],
    );
    assert_eq!(
        one(&mut conn, "SELECT rows = (SELECT count(*) FROM li) FROM pgtier_analytics_tables WHERE \"table\" = 'li'"),
        "t"
    );

    // Per column and one total per table (column NULL), ratios above 0.
    let columns = all(
        &mut conn,
        "SELECT \"column\", encoding, rows, plain_bytes > 0, columnar_bytes > 0, ratio > 0 \
         FROM pgtier_column_compression WHERE \"table\" = 'li' ORDER BY \"column\" NULLS LAST",
    );
    let names: Vec<&str> = columns.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(names, ["id", "mode", "note", "qty", "shipped", "NULL"]);
    assert!(columns.iter().all(|r| r[2] == "20000" && r[3] == "t" && r[4] == "t" && r[5] == "t"), "{columns:?}");
    assert_eq!(columns[1][1], "dictionary", "three modes");
    assert_eq!(columns[5][1], "mixed");
    assert_eq!(
        one(
            &mut conn,
            "SELECT arrow_type FROM pgtier_column_compression WHERE \"table\" = 'li' AND \"column\" = 'qty'"
        ),
        "Decimal128(12, 2)"
    );
    // The total is the sum of the columns.
    assert_eq!(
        one(
            &mut conn,
            "SELECT sum(plain_bytes) FILTER (WHERE \"column\" IS NULL) = sum(plain_bytes) FILTER (WHERE \"column\" IS NOT NULL) \
             FROM pgtier_column_compression WHERE \"table\" = 'li'"
        ),
        "t"
    );

    // Writes reach the copy: rows equal count(*) once merged.
    conn.execute_sql("INSERT INTO li SELECT g, 1, 'AIR', 'n', DATE '2024-06-01' FROM generate_series(20001, 21000) g")
        .unwrap();
    conn.execute_sql("DELETE FROM li WHERE id <= 500").unwrap();
    assert_eq!(one(&mut conn, "SELECT count(*) FROM li"), "20500");
    wait_for(&mut conn, "SELECT rows FROM pgtier_analytics_tables WHERE \"table\" = 'li'", "20500");
    wait_for(&mut conn, "SELECT delta_rows FROM pgtier_analytics_tables WHERE \"table\" = 'li'", "0");
    assert_eq!(
        one(&mut conn, "SELECT merges > 0 AND applied_lsn > 0 FROM pgtier_analytics_tables WHERE \"table\" = 'li'"),
        "t"
    );

    // A second session sees the same copies.
    let mut other = Connection::new(conn.database().clone());
    assert_eq!(one(&mut other, "SELECT count(*) FROM pgtier_analytics_tables"), "2");
    drop(other);

    // OFF removes it; ON again rebuilds it.
    conn.execute_sql("ALTER TABLE s.k SET ANALYTICS OFF").unwrap();
    assert_eq!(one(&mut conn, "SELECT string_agg(\"table\", ',') FROM pgtier_analytics_tables"), "li");
    assert_eq!(one(&mut conn, "SELECT count(*) FROM pgtier_column_compression WHERE \"table\" = 'k'"), "0");
    conn.execute_sql("ALTER TABLE s.k SET ANALYTICS OFF").unwrap();

    // Restart: the flag is in the catalog, the copy is rebuilt.
    let db = conn.database().clone();
    drop(conn);
    assert!(pgtier_sql::stop_analytics(&db));
    drop(db);
    let mut conn = open(dir.path());
    wait_for(&mut conn, "SELECT state FROM pgtier_analytics_tables WHERE \"table\" = 'li'", "ready");
    assert_eq!(one(&mut conn, "SELECT rows FROM pgtier_analytics_tables WHERE \"table\" = 'li'"), "20500");
    assert_eq!(one(&mut conn, "SELECT count(*) FROM pgtier_analytics_tables"), "1");

    // A rewriting ALTER TABLE ends the copy and the flag, with a NOTICE;
    // later statements go on.
    conn.execute_sql("ALTER TABLE li ADD COLUMN extra int").unwrap();
    let notices = conn.take_notices();
    assert!(notices.iter().any(|n| n.message.contains("analytics is off for relation \"li\"")), "{notices:?}");
    assert_eq!(one(&mut conn, "SELECT count(*) FROM pgtier_analytics_tables"), "0");
    conn.execute_sql("INSERT INTO li VALUES (1, 1, 'AIR', 'n', DATE '2024-01-01', 7)").unwrap();
    conn.execute_sql("ALTER TABLE li SET ANALYTICS ON").unwrap();
    assert_eq!(state_of(&mut conn, "li"), "ready");
    // DROP TABLE takes the flag; a new table of that name has none.
    conn.execute_sql("DROP TABLE li").unwrap();
    assert_eq!(one(&mut conn, "SELECT count(*) FROM pgtier_analytics_tables"), "0");
    conn.execute_sql("CREATE TABLE li (id int PRIMARY KEY)").unwrap();
    assert_eq!(one(&mut conn, "SELECT count(*) FROM pgtier_analytics_tables"), "0");
    let db = conn.database().clone();
    drop(conn);
    pgtier_sql::stop_analytics(&db);
}

#[test]
fn refusals_have_their_sqlstates() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(dir.path());
    conn.execute_sql("CREATE TABLE t (id int PRIMARY KEY, n numeric, tags int[])").unwrap();
    conn.execute_sql("CREATE TABLE ok (id int PRIMARY KEY)").unwrap();
    conn.execute_sql("CREATE VIEW v AS SELECT id FROM ok").unwrap();
    conn.execute_sql("CREATE SEQUENCE q").unwrap();
    conn.execute_sql("CREATE TABLE p (k int, v int) PARTITION BY RANGE (k)").unwrap();
    conn.execute_sql("CREATE TEMP TABLE tmp (id int)").unwrap();

    // A type without an exact Arrow form: olap's 0A000 naming the column.
    let (state, message) = error(&mut conn, "ALTER TABLE t SET ANALYTICS ON");
    assert_eq!(state, "0A000");
    assert!(message.contains("\"n\""), "{message}");
    assert_eq!(one(&mut conn, "SELECT count(*) FROM pgtier_analytics_tables"), "0", "a failure leaves no flag");
    assert_eq!(error(&mut conn, "ALTER TABLE v SET ANALYTICS ON").0, "42809");
    assert_eq!(error(&mut conn, "ALTER TABLE q SET ANALYTICS ON").0, "42809");
    assert_eq!(error(&mut conn, "ALTER TABLE p SET ANALYTICS ON").0, "0A000");
    assert_eq!(error(&mut conn, "ALTER TABLE tmp SET ANALYTICS ON").0, "0A000");
    assert_eq!(error(&mut conn, "ALTER TABLE nope SET ANALYTICS ON").0, "42P01");
    assert_eq!(error(&mut conn, "ALTER TABLE ok SET ANALYTICS MAYBE").0, "42601");
    assert_eq!(error(&mut conn, "ALTER TABLE ok SET ANALYTICS").0, "42601");
    conn.execute_sql("ALTER TABLE IF EXISTS nope SET ANALYTICS ON").unwrap();
    let notices = conn.take_notices();
    assert!(notices.iter().any(|n| n.message.contains("does not exist, skipping")), "{notices:?}");

    // Inside a transaction block: 25001, and the block fails.
    conn.execute_sql("BEGIN").unwrap();
    assert_eq!(error(&mut conn, "ALTER TABLE ok SET ANALYTICS ON").0, "25001");
    assert_eq!(error(&mut conn, "SELECT 1").0, "25P02");
    conn.execute_sql("ROLLBACK").unwrap();

    // Not the owner: 42501.
    conn.execute_sql("CREATE ROLE reader").unwrap();
    conn.execute_sql("GRANT SELECT ON ok TO reader").unwrap();
    conn.execute_sql("SET ROLE reader").unwrap();
    assert_eq!(error(&mut conn, "ALTER TABLE ok SET ANALYTICS ON").0, "42501");
    conn.execute_sql("RESET ROLE").unwrap();
    assert_eq!(one(&mut conn, "SELECT count(*) FROM pgtier_analytics_tables"), "0");
    conn.execute_sql("ALTER TABLE ok SET ANALYTICS ON").unwrap();
    assert_eq!(state_of(&mut conn, "ok"), "ready");
    let db = conn.database().clone();
    drop(conn);
    pgtier_sql::stop_analytics(&db);
}
