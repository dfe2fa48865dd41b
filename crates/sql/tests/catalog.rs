//! psql's own catalog queries, differential: the exact SQL psql 15 sends for
//! `\d`, `\dt`, `\di`, `\dn`, `\l` and `\d <table>` (captured with `psql -E`
//! into tests/psql/*.sql) runs on a private PostgreSQL 15 and on pgtier over
//! the same schema; the results must be equal except for OIDs, which differ
//! by design (the first column of the name lookup is masked, and each side
//! gets its own table OID substituted).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pgtier_engine::{CommitMode, Database, EngineConfig};
use pgtier_sql::Connection;

const SCHEMA: &[&str] = &[
    "CREATE TABLE p (id int PRIMARY KEY, name varchar(20) NOT NULL UNIQUE, v numeric(10,2) DEFAULT 1.5, note text DEFAULT 'x', n bigint DEFAULT -3)",
    // The FK columns lead a UNIQUE constraint, so pgtier needs no index of its own for them.
    "CREATE TABLE c (id int PRIMARY KEY, pid int REFERENCES p(id), t text, d timestamp, b boolean DEFAULT true, ch char(3) DEFAULT 'ab', UNIQUE (pid, id))",
    "CREATE INDEX c_t_idx ON c (t, d)",
    "CREATE TABLE \"Mixed Case\" (\"Key\" int PRIMARY KEY, r real, f float8 DEFAULT 2.5, dt date DEFAULT '2020-01-02', by bytea)",
];

type Rows = Vec<Vec<Option<String>>>;

fn pg_rows(client: &mut postgres::Client, sql: &str) -> Result<Rows, String> {
    let msgs = client.simple_query(sql).map_err(|e| e.as_db_error().map_or(e.to_string(), |d| format!("{}: {}", d.code().code(), d.message())))?;
    Ok(msgs
        .into_iter()
        .filter_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => Some((0..r.len()).map(|k| r.get(k).map(str::to_owned)).collect()),
            _ => None,
        })
        .collect())
}

fn tier_rows(conn: &mut Connection, sql: &str) -> Result<Rows, String> {
    let res = conn.execute_sql(sql).map_err(|e| format!("{}: {}", e.sqlstate, e.message))?;
    Ok(res.rows.map(|rows| rows.iter().map(|r| (0..r.len()).map(|k| r.text(k)).collect()).collect()).unwrap_or_default())
}

fn queries(file: &str) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/psql").join(file);
    let text = std::fs::read_to_string(path).unwrap();
    text.split("-- end\n").map(|q| q.lines().filter(|l| !l.starts_with("-- ")).collect::<Vec<_>>().join("\n")).filter(|q| !q.trim().is_empty()).collect()
}

struct Both {
    pg: postgres::Client,
    tier: Connection,
    failures: Vec<String>,
}

impl Both {
    fn new(name: &str) -> (Both, tempfile::TempDir) {
        let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
        let url = cluster.create_database(&format!("{name}_{}", std::process::id())).unwrap();
        let pg = pgtier_backend::connect(&url).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let config = EngineConfig { commit_mode: CommitMode::Async, background: false, ..EngineConfig::default() };
        let db = Database::open(dir.path(), config).unwrap();
        let mut tier = Connection::new(db);
        // The test database's name and user, as the server would report them.
        let user = pg_rows(&mut { pgtier_backend::connect(&url).unwrap() }, "SELECT current_user, current_database()").unwrap();
        tier.set_identity(user[0][0].as_deref().unwrap(), user[0][1].as_deref().unwrap());
        (Both { pg, tier, failures: Vec::new() }, dir)
    }

    fn setup(&mut self, sql: &str) {
        pg_rows(&mut self.pg, sql).unwrap();
        tier_rows(&mut self.tier, sql).unwrap();
    }

    /// Runs `pg_sql` on PostgreSQL and `tier_sql` on pgtier; records a difference.
    fn compare(&mut self, what: &str, pg_sql: &str, tier_sql: &str, mask: &[usize]) -> Option<(Rows, Rows)> {
        let mut pg = pg_rows(&mut self.pg, pg_sql);
        let mut tier = tier_rows(&mut self.tier, tier_sql);
        for rows in [&mut pg, &mut tier].into_iter().flatten() {
            for r in rows.iter_mut() {
                for &m in mask {
                    if let Some(c) = r.get_mut(m) {
                        *c = Some("<oid>".into());
                    }
                }
            }
        }
        let unmasked = (pg_rows(&mut self.pg, pg_sql), tier_rows(&mut self.tier, tier_sql));
        if pg != tier {
            self.failures.push(format!("{what}\n  {tier_sql}\n  PostgreSQL: {pg:?}\n  pgtier:     {tier:?}"));
            return None;
        }
        match unmasked {
            (Ok(a), Ok(b)) => Some((a, b)),
            _ => None,
        }
    }
}

#[test]
fn psql_describe_queries_match_postgresql() {
    let (mut both, _dir) = Both::new("catalog_psql");
    for s in SCHEMA {
        both.setup(s);
    }
    for (file, names) in [
        ("describe_table.sql", &["c", "p", "Mixed Case"][..]),
        ("describe_table_verbose.sql", &["c", "p", "Mixed Case"][..]),
        ("describe_index.sql", &["c_pkey", "c_t_idx", "p_name_key"][..]),
    ] {
        let describe = queries(file);
        assert!(describe.len() >= 4, "{file}: {} queries", describe.len());
        for name in names {
            // The first query finds the relation's OID by name; each side then
            // describes its own OID.
            let lookup = describe[0].replace("{name}", name);
            let Some((pg, tier)) = both.compare(&format!("{file} {name}: lookup"), &lookup, &lookup, &[0]) else { continue };
            let (Some(Some(pg_oid)), Some(Some(tier_oid))) = (pg.first().map(|r| r[0].clone()), tier.first().map(|r| r[0].clone())) else {
                both.failures.push(format!("{file} {name}: not found"));
                continue;
            };
            for (k, q) in describe.iter().enumerate().skip(1) {
                both.compare(&format!("{file} {name}: query {k}"), &q.replace("{oid}", &pg_oid), &q.replace("{oid}", &tier_oid), &[]);
            }
        }
    }
    let list = queries("list.sql");
    // \d, \dt, \di, \dn, \du, \df compare as they are; \l lists other databases on PostgreSQL.
    for (k, q) in list.iter().enumerate() {
        if k != 4 {
            both.compare(&format!("list query {k}"), q, q, &[]);
        }
    }
    let l = tier_rows(&mut both.tier, &list[4]);
    assert!(l.as_ref().is_ok_and(|rows| rows.len() == 1), "\\l on pgtier: {l:?}");
    for f in &both.failures {
        println!("{f}\n");
    }
    assert!(both.failures.is_empty(), "{} psql queries differ", both.failures.len());
}

#[test]
fn driver_metadata_queries_match_postgresql() {
    let (mut both, _dir) = Both::new("catalog_drivers");
    for s in SCHEMA {
        both.setup(s);
    }
    let driver = queries("drivers.sql");
    assert!(driver.len() >= 14, "drivers.sql: {} queries", driver.len());
    for (k, q) in driver.iter().enumerate() {
        both.compare(&format!("driver query {k}"), q, q, &[]);
    }
    for f in &both.failures {
        println!("{f}\n");
    }
    assert!(both.failures.is_empty(), "{} driver queries differ", both.failures.len());
}
