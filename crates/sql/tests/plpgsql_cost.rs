//! What PL/pgSQL costs per call, side by side with PostgreSQL: a loop
//! summing 1..100000 in one call, and 10,000 rows inserted through a
//! BEFORE ROW trigger (the updated_at shape). Both sides must answer the
//! same; times are printed (`-- --nocapture`), never asserted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use pgtier_engine::{CommitMode, Database, EngineConfig};
use pgtier_sql::Connection;

const SETUP: &[&str] = &[
    "CREATE FUNCTION loop_sum(n int) RETURNS bigint LANGUAGE plpgsql AS $$
     DECLARE s bigint := 0;
     BEGIN FOR i IN 1..n LOOP s := s + i; END LOOP; RETURN s; END $$",
    "CREATE TABLE items (id int PRIMARY KEY, v text, updated_at timestamptz)",
    "CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN NEW.updated_at := now(); NEW.v := upper(NEW.v); RETURN NEW; END $$",
    "CREATE TRIGGER items_touch BEFORE INSERT OR UPDATE ON items FOR EACH ROW EXECUTE FUNCTION touch()",
];

const LOOP: &str = "SELECT loop_sum(100000)::text";

fn best(mut f: impl FnMut() -> String) -> (String, Duration) {
    let mut out = (String::new(), Duration::MAX);
    for _ in 0..3 {
        let start = Instant::now();
        let v = f();
        out = (v, out.1.min(start.elapsed()));
    }
    out
}

#[test]
fn plpgsql_loop_and_trigger_cost_against_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { commit_mode: CommitMode::Async, background: false, ..EngineConfig::default() };
    let mut conn = Connection::new(Database::open(dir.path(), config).unwrap());
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("plpgsql_cost_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&url).unwrap();
    for s in SETUP {
        conn.execute_sql(s).unwrap();
        pg.batch_execute(s).unwrap();
    }
    let (tier, tier_t) = best(|| {
        let rows = conn.execute_sql(LOOP).unwrap().rows.unwrap();
        rows.iter().next().unwrap().text(0).unwrap()
    });
    let (post, pg_t) = best(|| pg.query_one(LOOP, &[]).unwrap().get::<_, String>(0));
    assert_eq!(tier, post);
    println!("loop sum 1..100000 (one call): pgtier {tier_t:?}, PostgreSQL {pg_t:?}");
    let insert = "INSERT INTO items SELECT g, 'v' || g, NULL FROM generate_series(1, 10000) g";
    let (_, tier_t) = best(|| {
        conn.execute_sql("DELETE FROM items").unwrap();
        conn.execute_sql(insert).unwrap();
        String::new()
    });
    let (_, pg_t) = best(|| {
        pg.batch_execute("DELETE FROM items").unwrap();
        pg.batch_execute(insert).unwrap();
        String::new()
    });
    let check = "SELECT count(*)::text || ' ' || count(updated_at)::text || ' ' || max(v) FROM items";
    let rows = conn.execute_sql(check).unwrap().rows.unwrap();
    let tier = rows.iter().next().unwrap().text(0).unwrap();
    assert_eq!(tier, pg.query_one(check, &[]).unwrap().get::<_, String>(0));
    println!("INSERT 10,000 rows through a BEFORE ROW trigger: pgtier {tier_t:?}, PostgreSQL {pg_t:?}");
}
