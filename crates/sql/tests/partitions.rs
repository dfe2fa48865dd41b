//! Partitioned tables are catalog state kept in the partitioned table's
//! engine annotation (catalog/partitions.rs): the partitions, their bounds
//! and the routing survive a restart (WAL replay and a checkpoint), roll
//! back with their transaction, and a concurrent session sees a new
//! partition only once it commits. What they answer is
//! tests/slt/92_partitions.slt, against PostgreSQL.
#![allow(clippy::unwrap_used)]

use pgtier_engine::{CommitMode, Database, EngineConfig};
use pgtier_sql::Connection;

fn open(dir: &std::path::Path) -> Connection {
    let config = EngineConfig { commit_mode: CommitMode::Sync, background: false, ..EngineConfig::default() };
    Connection::new(Database::open(dir, config).unwrap())
}

fn one(conn: &mut Connection, sql: &str) -> String {
    let rows = conn.execute_sql(sql).unwrap().rows.unwrap();
    rows.get(0).unwrap().text(0).unwrap()
}

#[test]
fn partitions_survive_a_restart_and_roll_back() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut conn = open(dir.path());
        conn.execute_sql("CREATE TABLE m (id int, k int, PRIMARY KEY (id, k)) PARTITION BY RANGE (k)").unwrap();
        conn.execute_sql("CREATE TABLE m1 PARTITION OF m FOR VALUES FROM (0) TO (10)").unwrap();
        conn.execute_sql("CREATE TABLE m2 PARTITION OF m FOR VALUES FROM (10) TO (20)").unwrap();
        conn.execute_sql("INSERT INTO m VALUES (1, 5), (2, 15)").unwrap();
        // Made, and dropped, inside transactions that roll back.
        conn.execute_sql("BEGIN").unwrap();
        conn.execute_sql("CREATE TABLE m3 PARTITION OF m FOR VALUES FROM (20) TO (30)").unwrap();
        conn.execute_sql("INSERT INTO m VALUES (3, 25)").unwrap();
        conn.execute_sql("ROLLBACK").unwrap();
        conn.execute_sql("BEGIN").unwrap();
        conn.execute_sql("DROP TABLE m2").unwrap();
        conn.execute_sql("ROLLBACK").unwrap();
        assert_eq!(conn.execute_sql("INSERT INTO m VALUES (3, 25)").unwrap_err().sqlstate, "23514");
        assert_eq!(one(&mut conn, "SELECT count(*) FROM m"), "2");
    }
    let mut conn = open(dir.path());
    assert_eq!(one(&mut conn, "SELECT sum(id) FROM m"), "3");
    assert_eq!(one(&mut conn, "SELECT id FROM m2"), "2");
    conn.execute_sql("INSERT INTO m VALUES (4, 19)").unwrap();
    assert_eq!(one(&mut conn, "SELECT count(*) FROM m2"), "2");
    assert_eq!(conn.execute_sql("INSERT INTO m1 VALUES (5, 10)").unwrap_err().sqlstate, "23514");
    assert_eq!(
        conn.execute_sql("CREATE TABLE mx PARTITION OF m FOR VALUES FROM (5) TO (12)").unwrap_err().sqlstate,
        "42P17"
    );
    conn.database().checkpoint().unwrap();
    conn.execute_sql("DROP TABLE m1").unwrap();
    drop(conn);
    let mut conn = open(dir.path());
    assert_eq!(one(&mut conn, "SELECT count(*) FROM m"), "2");
    assert_eq!(conn.execute_sql("INSERT INTO m VALUES (6, 1)").unwrap_err().sqlstate, "23514");
    conn.execute_sql("DROP TABLE m").unwrap();
    drop(conn);
    let mut conn = open(dir.path());
    assert_eq!(conn.execute_sql("SELECT * FROM m2").unwrap_err().sqlstate, "42P01");
}

#[test]
fn a_prepared_insert_routes_to_a_partition_made_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(dir.path());
    conn.execute_sql("CREATE TABLE l (a int, b text) PARTITION BY LIST (a)").unwrap();
    conn.execute_sql("CREATE TABLE l1 PARTITION OF l FOR VALUES IN (1)").unwrap();
    conn.execute_sql("CREATE TABLE ld PARTITION OF l DEFAULT").unwrap();
    let ins = conn.prepare("INSERT INTO l VALUES ($1, 'x')").unwrap();
    let def = conn.prepare("INSERT INTO ld VALUES ($1, 'x')").unwrap();
    conn.execute(&ins, &[pgtier_engine::Value::Int4(2)]).unwrap();
    conn.execute_sql("DELETE FROM l").unwrap();
    conn.execute_sql("CREATE TABLE l2 PARTITION OF l FOR VALUES IN (2)").unwrap();
    conn.execute(&ins, &[pgtier_engine::Value::Int4(2)]).unwrap();
    assert_eq!(one(&mut conn, "SELECT count(*) FROM l2"), "1");
    // The default partition's constraint changed with its new sibling.
    assert_eq!(conn.execute(&def, &[pgtier_engine::Value::Int4(2)]).unwrap_err().sqlstate, "23514");
    conn.execute(&def, &[pgtier_engine::Value::Int4(3)]).unwrap();
    assert_eq!(one(&mut conn, "SELECT count(*) FROM l"), "2");
}

/// What pgtier cannot do exactly over a partition whose columns are in
/// another order, or one with triggers, it refuses (0A000).
#[test]
fn reordered_partitions_refuse_what_they_cannot_answer() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(dir.path());
    conn.execute_sql("CREATE TABLE p (a int, b text) PARTITION BY LIST (a)").unwrap();
    conn.execute_sql("CREATE TABLE p1 (b text, a int)").unwrap();
    conn.execute_sql("ALTER TABLE p ATTACH PARTITION p1 FOR VALUES IN (1)").unwrap();
    conn.execute_sql("INSERT INTO p VALUES (1, 'x')").unwrap();
    assert_eq!(one(&mut conn, "SELECT b || a FROM p1"), "x1");
    let err = conn.execute_sql("UPDATE p SET b = 'y' RETURNING *").unwrap_err();
    assert_eq!(err.sqlstate, "0A000");
    conn.execute_sql("CREATE TABLE d (b text, a int)").unwrap();
    conn.execute_sql("ALTER TABLE p ATTACH PARTITION d DEFAULT").unwrap();
    assert_eq!(conn.execute_sql("CREATE TABLE p2 PARTITION OF p FOR VALUES IN (2)").unwrap_err().sqlstate, "0A000");
    conn.execute_sql("CREATE TABLE t (b text, a int)").unwrap();
    conn.execute_sql("CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$").unwrap();
    conn.execute_sql("CREATE TRIGGER tt BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION f()").unwrap();
    assert_eq!(conn.execute_sql("ALTER TABLE p ATTACH PARTITION t FOR VALUES IN (3)").unwrap_err().sqlstate, "0A000");
}
