//! Cache-group statements in a session without PostgreSQL: recognised
//! before sqlparser, refused where PostgreSQL refuses VACUUM, and the
//! pgtier_cache_* views. Loading against PostgreSQL is tested end to end in
//! crates/server/tests/cache_groups.rs.
#![allow(clippy::unwrap_used)]

use pgtier_cache::{Cache, CacheConfig};
use pgtier_engine::{Database, EngineConfig};
use pgtier_sql::Connection;

fn connection(dir: &std::path::Path) -> Connection {
    Connection::new(Database::open(dir, EngineConfig::default()).unwrap())
}

#[test]
fn without_a_cache_statements_fail_with_08001_and_views_are_empty() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = connection(dir.path());
    let e = conn.execute_sql("LOAD CACHE GROUP g").unwrap_err();
    assert_eq!(e.sqlstate, "08001", "{e:?}");
    assert!(e.hint.as_deref().unwrap_or("").contains("[backend]"), "{e:?}");
    for view in ["pgtier_cache_groups", "pgtier_cache_tables", "pgtier_cache_stats", "pgtier_cache_propagation"] {
        let r = conn.execute_sql(&format!("SELECT * FROM {view}")).unwrap();
        assert_eq!(r.rows.unwrap().len(), 0, "{view}");
    }
}

#[test]
fn a_cache_without_backend_answers_08001_and_the_rules_hold() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = connection(dir.path());
    let cache = Cache::open(conn.database().clone(), None, CacheConfig::default()).unwrap();
    conn.attach_cache(cache);
    let e = conn.execute_sql("CREATE READONLY CACHE GROUP g FROM subscriber").unwrap_err();
    assert_eq!(e.sqlstate, "08001", "{e:?}");
    assert_eq!(conn.execute_sql("LOAD CACHE GROUP nosuch").unwrap_err().sqlstate, "42704");
    assert_eq!(conn.execute_sql("LOAD CACHE GROUP g WHERE (").unwrap_err().sqlstate, "42601");
    let e = conn.execute_sql("CREATE READONLY CACHE GROUP g FROM a, b WHERE x = 1").unwrap_err();
    assert_eq!(e.sqlstate, "42P17");
    // Ordinary statements starting with the same verbs still work.
    conn.execute_sql("CREATE TABLE t (id int PRIMARY KEY)").unwrap();
    conn.execute_sql("DROP TABLE t").unwrap();
    // Not inside a block, and not among other statements.
    conn.execute_sql("BEGIN").unwrap();
    let e = conn.execute_sql("REFRESH CACHE GROUP g").unwrap_err();
    assert_eq!(
        (e.sqlstate, e.message.as_str()),
        ("25001", "REFRESH CACHE GROUP cannot run inside a transaction block")
    );
    assert_eq!(conn.execute_sql("SELECT 1").unwrap_err().sqlstate, "25P02", "the error aborted the block");
    conn.execute_sql("ROLLBACK").unwrap();
    let e = conn.execute_sql("SELECT 1; DROP CACHE GROUP g").unwrap_err();
    assert_eq!((e.sqlstate, e.message.as_str()), ("25001", "DROP CACHE GROUP cannot run inside a transaction block"));
    conn.execute_sql("DROP CACHE GROUP IF EXISTS g").unwrap();
    let notices = conn.take_notices();
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].message, "cache group \"g\" does not exist, skipping");
    // The views answer WHERE, ORDER BY and joins like any relation.
    let r = conn
        .execute_sql(
            "SELECT g.name, t.\"table\", s.instances FROM pgtier_cache_groups g JOIN pgtier_cache_tables t ON t.\"group\" = g.name \
             JOIN pgtier_cache_stats s ON s.\"group\" = g.name WHERE s.instances >= 0 ORDER BY 1, 2",
        )
        .unwrap();
    assert_eq!(r.rows.unwrap().columns().len(), 3);
    let r = conn
        .execute_sql(
            "SELECT miss_latency_avg_us, memory_budget, root_predicate FROM pgtier_cache_stats, pgtier_cache_groups",
        )
        .unwrap();
    assert!(r.rows.unwrap().is_empty());
    let r = conn.execute_sql("SELECT lag_ms, last_error FROM pgtier_cache_propagation WHERE NOT connected").unwrap();
    assert!(r.rows.unwrap().is_empty(), "no AWT group: no propagation row");
    // The catalogs describe them as psql's \d reads them.
    let r = conn
        .execute_sql(
            "SELECT a.attname, a.atttypid FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
             WHERE c.relname = 'pgtier_cache_stats' AND a.attnum > 0 ORDER BY a.attnum",
        )
        .unwrap()
        .rows
        .unwrap();
    let columns: Vec<(String, String)> = r.iter().map(|row| (row.text(0).unwrap(), row.text(1).unwrap())).collect();
    assert_eq!(columns.len(), 14, "{columns:?}");
    assert_eq!(columns[0], ("group".to_owned(), "25".to_owned()));
    assert_eq!(columns[10], ("miss_latency_avg_us".to_owned(), "701".to_owned()));
    // Preparing one through the embedded API says how to run it instead.
    assert_eq!(conn.prepare("LOAD CACHE GROUP g").unwrap_err().sqlstate, "0A000");
}

#[test]
fn backend_login_failures_keep_their_sqlstate_with_a_hint() {
    use pgtier_backend::ConnectError;
    let wrong_password = pgtier_cache::CacheError::Connect(ConnectError::AuthenticationFailed {
        url: "postgresql://app@db/app".into(),
        user: "app".into(),
        sqlstate: "28P01".into(),
        message: "password authentication failed for user \"app\"".into(),
    });
    let e = pgtier_sql::SqlError::from(wrong_password);
    assert_eq!(e.sqlstate, "28P01");
    assert!(e.hint.as_deref().unwrap_or("").contains("password_file"), "{e:?}");
    let down = pgtier_cache::CacheError::Connect(ConnectError::Unreachable {
        url: "postgresql://app@db/app".into(),
        reason: "refused".into(),
    });
    let e = pgtier_sql::SqlError::from(down);
    assert_eq!(e.sqlstate, "08001");
    assert!(e.hint.as_deref().unwrap_or("").contains("[backend] url"), "{e:?}");
}
