//! Differential corpus: every `tests/slt/*.slt` file runs against a private
//! PostgreSQL (fresh database per file) and against pgtier embedded (fresh
//! engine directory per file). PostgreSQL must produce what the file says
//! (that validates the corpus), and so must pgtier.
//!
//! Format (a subset of sqllogictest):
//!   statement ok | statement count N | statement error <SQLSTATE or message text>
//!   query <column letters> [rowsort|nosort]  ... `----`  expected rows
//! A row is its values joined by single spaces; NULL is `NULL`, the empty
//! string `(empty)`. `rowsort` compares rows sorted (for queries without
//! ORDER BY). `colnames`: the first expected line is the result's column
//! names, joined by single spaces (clients read rows by them).
//! `SLT_COMPLETE=1` rewrites the expected parts from PostgreSQL.
//! `#!since-pg N` on a line before a record: PostgreSQL answers so from
//! `server_version_num` N on (a fix pgtier follows); an older PostgreSQL
//! is not asked (counted as "not asked"), pgtier still must answer so.
//!
//! Cached tables: in a file whose name contains `_cached_`, pgtier's
//! connection has a cache attached whose backend is a second database of
//! the same PostgreSQL. Two more records: `setup` runs on the PostgreSQL
//! oracle and on that backend (the tables pgtier caches, and their rows;
//! on a connection of its own, so the session the records compare has no
//! state from it: no currval),
//! `pgtier ok` on pgtier only (CREATE / LOAD CACHE GROUP); both must
//! succeed. Every other record runs on the oracle and on pgtier, which
//! answers from its cache groups.
//!
//! `SLT_ANALYTICS=1` (a build with the `analytics` feature): every query
//! record also checks the columnar path. pgtier's session runs with
//! `pgtier.analytics = on`, and before each query outside a transaction
//! block every table without a columnar copy gets one (`ALTER TABLE ...
//! SET ANALYTICS ON`; tables it refuses stay on the row path), so each
//! SELECT the translation takes runs on DataFusion and must still equal
//! PostgreSQL's answer. The run prints how many took the columnar path.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use pgtier_engine::{CommitMode, Database, EngineConfig};
use pgtier_sql::Connection;

#[derive(Clone, Debug)]
enum Expect {
    Ok,
    Count(u64),
    Error(String),
    Rows {
        sort: bool,
        names: bool,
        rows: Vec<String>,
    },
    /// On the oracle and on pgtier's backend (a `_cached_` file).
    Setup,
    /// On pgtier only (a `_cached_` file).
    PgtierOnly,
}

#[derive(Clone, Debug)]
struct Record {
    line: usize,
    /// The comment lines before the record, kept by `SLT_COMPLETE`.
    comments: String,
    header: String,
    sql: String,
    expect: Expect,
    /// `#!since-pg N` before the record: PostgreSQL answers as the record
    /// says from `server_version_num` N on (pgtier follows that release);
    /// an older oracle is not asked, pgtier still is.
    since_pg: Option<u32>,
}

#[derive(Debug, PartialEq)]
enum Outcome {
    Ok { count: u64, names: Vec<String>, rows: Option<Vec<String>> },
    Error { sqlstate: String, message: String },
}

fn parse(text: &str) -> Vec<Record> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut comments = String::new();
    let mut since_pg = None;
    while i < lines.len() {
        let l = lines[i].trim_end();
        if let Some(version) = l.strip_prefix("#!since-pg ") {
            since_pg = Some(version.trim().parse().expect("#!since-pg takes a server_version_num"));
        }
        if l.starts_with('#') {
            comments.push_str(l);
            comments.push('\n');
        }
        if l.is_empty() || l.starts_with('#') {
            i += 1;
            continue;
        }
        let header = l.to_owned();
        let line = i + 1;
        i += 1;
        let mut sql = Vec::new();
        while i < lines.len() && !lines[i].trim().is_empty() && lines[i].trim_end() != "----" {
            sql.push(lines[i]);
            i += 1;
        }
        let mut words = header.split_whitespace();
        let expect = match (words.next(), words.next()) {
            (Some("statement"), Some("ok")) => Expect::Ok,
            (Some("statement"), Some("count")) => {
                Expect::Count(words.next().and_then(|n| n.parse().ok()).expect("statement count N"))
            }
            (Some("statement"), Some("error")) => {
                Expect::Error(header.splitn(3, ' ').nth(2).unwrap_or("").trim().to_owned())
            }
            (Some("setup"), None) => Expect::Setup,
            (Some("pgtier"), Some("ok")) => Expect::PgtierOnly,
            (Some("query"), Some(_)) => {
                let sort = header.split_whitespace().any(|w| w == "rowsort");
                let names = header.split_whitespace().any(|w| w == "colnames");
                let mut rows = Vec::new();
                if i < lines.len() && lines[i].trim_end() == "----" {
                    i += 1;
                    while i < lines.len() && !lines[i].trim().is_empty() {
                        rows.push(lines[i].trim_end().to_owned());
                        i += 1;
                    }
                }
                Expect::Rows { sort, names, rows }
            }
            _ => panic!("line {line}: unknown record header {header:?}"),
        };
        out.push(Record {
            line,
            comments: std::mem::take(&mut comments),
            header,
            sql: sql.join("\n"),
            expect,
            since_pg: since_pg.take(),
        });
    }
    out
}

fn cell(v: Option<&str>) -> String {
    match v {
        None => "NULL".to_owned(),
        Some("") => "(empty)".to_owned(),
        Some(s) => s.to_owned(),
    }
}

fn run_pg(client: &mut postgres::Client, sql: &str) -> Outcome {
    match client.simple_query(sql) {
        Ok(msgs) => {
            let mut rows: Option<Vec<String>> = None;
            let mut count = 0;
            let mut names = Vec::new();
            for m in msgs {
                match m {
                    postgres::SimpleQueryMessage::Row(r) => {
                        let line: Vec<String> = (0..r.len()).map(|k| cell(r.get(k))).collect();
                        rows.get_or_insert_with(Vec::new).push(line.join(" "));
                    }
                    postgres::SimpleQueryMessage::RowDescription(cols) => {
                        names = cols.iter().map(|c| c.name().to_owned()).collect();
                        rows.get_or_insert_with(Vec::new);
                    }
                    postgres::SimpleQueryMessage::CommandComplete(n) => count = n,
                    _ => {}
                }
            }
            Outcome::Ok { count, names, rows }
        }
        Err(e) => match e.as_db_error() {
            Some(db) => Outcome::Error { sqlstate: db.code().code().to_owned(), message: db.message().to_owned() },
            None => Outcome::Error { sqlstate: "?????".into(), message: e.to_string() },
        },
    }
}

fn run_pgtier(conn: &mut Connection, sql: &str) -> Outcome {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| conn.execute_sql(sql)));
    match r {
        Ok(Ok(res)) => {
            let names = res
                .rows
                .as_ref()
                .map(|rows| rows.columns().iter().map(|c| c.name.clone()).collect())
                .unwrap_or_default();
            let rows = res.rows.map(|rows| {
                rows.iter()
                    .map(|row| (0..row.len()).map(|k| cell(row.text(k).as_deref())).collect::<Vec<_>>().join(" "))
                    .collect()
            });
            Outcome::Ok { count: res.rows_affected, names, rows }
        }
        Ok(Err(e)) => Outcome::Error { sqlstate: e.sqlstate.to_owned(), message: e.message },
        Err(_) => Outcome::Error { sqlstate: "PANIC".into(), message: "pgtier panicked".into() },
    }
}

/// None if `got` satisfies `expect`, else what differs.
fn check(expect: &Expect, got: &Outcome) -> Option<String> {
    match (expect, got) {
        (Expect::Ok, Outcome::Ok { .. }) => None,
        (Expect::Count(n), Outcome::Ok { count, .. }) if n == count => None,
        (Expect::Error(pat), Outcome::Error { sqlstate, message })
            if pat.is_empty() || pat == sqlstate || message.contains(pat.as_str()) =>
        {
            None
        }
        (Expect::Rows { sort, names, rows }, Outcome::Ok { rows: Some(got), names: got_names, .. }) => {
            // Trailing blanks (char(n) padding) are not significant in a row line.
            let trim = |v: &[String]| v.iter().map(|r| r.trim_end().to_owned()).collect::<Vec<_>>();
            let header = usize::from(*names && !rows.is_empty());
            let (mut want, mut have) = (trim(&rows[header..]), trim(got));
            if *sort {
                want.sort();
                have.sort();
            }
            if *names {
                want.insert(0, rows.first().cloned().unwrap_or_default());
                have.insert(0, got_names.join(" "));
            }
            if want == have { None } else { Some(format!("expected rows {want:?}\n      got {have:?}")) }
        }
        (_, Outcome::Error { sqlstate, message }) => Some(format!("error {sqlstate}: {message}")),
        (_, other) => Some(format!("got {other:?}")),
    }
}

fn completed(rec: &Record, got: &Outcome) -> String {
    let mut s = rec.comments.clone();
    match (&rec.expect, got) {
        (Expect::Count(_), Outcome::Ok { count, .. }) => {
            let _ = writeln!(s, "statement count {count}");
            let _ = writeln!(s, "{}", rec.sql);
        }
        (Expect::Rows { sort, names, .. }, Outcome::Ok { rows: Some(rows), names: got_names, .. }) => {
            let _ = writeln!(s, "{}", rec.header);
            let _ = writeln!(s, "{}", rec.sql);
            let _ = writeln!(s, "----");
            if *names {
                let _ = writeln!(s, "{}", got_names.join(" "));
            }
            let mut rows = rows.clone();
            if *sort {
                rows.sort();
            }
            for r in rows {
                let _ = writeln!(s, "{}", r.trim_end());
            }
        }
        (Expect::Error(p), Outcome::Error { sqlstate, .. }) if p.is_empty() => {
            let _ = writeln!(s, "statement error {sqlstate}");
            let _ = writeln!(s, "{}", rec.sql);
        }
        _ => return as_written(rec),
    }
    s
}

/// The record as its file has it, comments included.
fn as_written(rec: &Record) -> String {
    let mut s = rec.comments.clone();
    let _ = writeln!(s, "{}", rec.header);
    let _ = writeln!(s, "{}", rec.sql);
    if let Expect::Rows { rows, .. } = &rec.expect {
        let _ = writeln!(s, "----");
        for r in rows {
            let _ = writeln!(s, "{r}");
        }
    }
    s
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/slt")
}

#[test]
fn differential_corpus() {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    let only = std::env::var("SLT_ONLY").ok();
    let complete = std::env::var("SLT_COMPLETE").is_ok();
    let analytics = std::env::var("SLT_ANALYTICS").is_ok();
    let (mut columnar, mut fallbacks) = (0, 0);
    let (mut total, mut pg_ok, mut tier_ok, mut pg_too_old) = (0, 0, 0, 0);
    let mut pg_failures = Vec::new();
    let mut tier_failures = Vec::new();
    for (n, path) in files.iter().enumerate() {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        if only.as_ref().is_some_and(|o| !name.contains(o.as_str())) {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        let records = parse(&text);
        assert!(!records.is_empty(), "{name}.slt holds no record the runner understands");
        let oracle_url = cluster.create_database(&format!("slt_{n}_{}", std::process::id())).unwrap();
        let mut pg = pgtier_backend::connect(&oracle_url).unwrap();
        let pg_version: u32 =
            pg.query_one("SHOW server_version_num", &[]).unwrap().get::<_, String>(0).parse().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let config = EngineConfig { commit_mode: CommitMode::Async, background: false, ..EngineConfig::default() };
        let db = Database::open(dir.path(), config).unwrap();
        let mut conn = Connection::new(db.clone());
        let mut backend = None;
        if name.contains("_cached_") {
            let url = cluster.create_database(&format!("slt_{n}_backend_{}", std::process::id())).unwrap();
            let params =
                pgtier_backend::BackendConfig { url: Some(url.clone()), ..Default::default() }.resolve().unwrap();
            let awt = pgtier_cache::AwtConfig { node: format!("slt{n}"), ..pgtier_cache::AwtConfig::default() };
            let cache = pgtier_cache::Cache::open(
                db,
                Some(params),
                pgtier_cache::CacheConfig { awt, ..pgtier_cache::CacheConfig::default() },
            )
            .unwrap();
            conn.attach_cache(cache.clone());
            backend =
                Some((pgtier_backend::connect(&url).unwrap(), pgtier_backend::connect(&oracle_url).unwrap(), cache));
        }
        if analytics {
            conn.execute_sql("SET pgtier.analytics = on").unwrap();
        }
        let mut rewritten = String::new();
        for rec in &records {
            total += 1;
            if matches!(rec.expect, Expect::Setup | Expect::PgtierOnly) {
                let outcomes = match (&rec.expect, backend.as_mut()) {
                    (Expect::Setup, Some((client, oracle, _))) => {
                        vec![("PostgreSQL", run_pg(oracle, &rec.sql)), ("pgtier's backend", run_pg(client, &rec.sql))]
                    }
                    (Expect::PgtierOnly, Some(_)) => vec![("pgtier", run_pgtier(&mut conn, &rec.sql))],
                    _ => panic!("{name}.slt:{}: `{}` belongs in a `_cached_` file", rec.line, rec.header),
                };
                for (side, outcome) in outcomes {
                    assert!(
                        matches!(outcome, Outcome::Ok { .. }),
                        "{name}.slt:{} {side}: {}\n  {}\n  {outcome:?}",
                        rec.line,
                        rec.header,
                        rec.sql
                    );
                }
                (pg_ok, tier_ok) = (pg_ok + 1, tier_ok + 1);
                if complete {
                    rewritten.push_str(&completed(rec, &Outcome::Ok { count: 0, names: Vec::new(), rows: None }));
                    rewritten.push('\n');
                }
                continue;
            }
            let pg_out = run_pg(&mut pg, &rec.sql);
            let pg_too_old_here = rec.since_pg.is_some_and(|since| pg_version < since);
            if pg_too_old_here {
                // This PostgreSQL predates the behaviour the record holds.
                pg_too_old += 1;
                if complete {
                    rewritten.push_str(&as_written(rec));
                    rewritten.push('\n');
                }
            } else if complete {
                rewritten.push_str(&completed(rec, &pg_out));
                rewritten.push('\n');
            } else {
                match check(&rec.expect, &pg_out) {
                    None => pg_ok += 1,
                    Some(d) => pg_failures
                        .push(format!("{name}.slt:{} PostgreSQL: {}\n  {}\n  {d}", rec.line, rec.header, rec.sql)),
                }
            }
            if analytics && matches!(rec.expect, Expect::Rows { .. }) && !conn.in_transaction() {
                enable_analytics(&mut conn);
            }
            let tier_out = run_pgtier(&mut conn, &rec.sql);
            let want = if complete && !pg_too_old_here { None } else { Some(&rec.expect) };
            let verdict = match want {
                Some(e) => check(e, &tier_out),
                None => check(&expect_from(&rec.expect, &pg_out), &tier_out),
            };
            match verdict {
                None => tier_ok += 1,
                Some(d) => {
                    tier_failures.push(format!("{name}.slt:{} pgtier: {}\n  {}\n  {d}", rec.line, rec.header, rec.sql))
                }
            }
        }
        if complete {
            std::fs::write(path, rewritten.trim_end().to_owned() + "\n").unwrap();
        }
        if let Some((.., cache)) = backend {
            cache.shutdown();
        }
        if analytics {
            let (answered, fell_back) = conn.columnar_statements();
            if let Some(last) = conn.columnar_last_fallback() {
                println!("{name}.slt: {fell_back} analytic queries fell back; the last: {last}");
            }
            columnar += answered;
            fallbacks += fell_back;
            pgtier_sql::stop_analytics(conn.database());
        }
    }
    if analytics {
        println!(
            "slt analytics: {columnar} SELECTs answered by the columnar path, {fallbacks} fell back to the row path"
        );
    }
    println!(
        "slt: {total} records; PostgreSQL matches {pg_ok} ({pg_too_old} not asked: `#!since-pg` a newer release); pgtier matches {tier_ok}"
    );
    assert!(total > 0, "no record ran (SLT_ONLY={only:?} matches no file in {})", corpus_dir().display());
    for f in &pg_failures {
        println!("{f}");
    }
    for f in &tier_failures {
        println!("{f}");
    }
    assert!(pg_failures.is_empty(), "{} records disagree with PostgreSQL (the corpus is wrong)", pg_failures.len());
    assert!(tier_failures.is_empty(), "{} of {total} records differ on pgtier", tier_failures.len());
}

/// Gives every table of the session's database without a columnar copy
/// one (SLT_ANALYTICS); the refused ones (types without an Arrow form,
/// temporary or partitioned tables, other owners) stay without.
fn enable_analytics(conn: &mut Connection) {
    let list = "SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) FROM pg_tables \
                WHERE schemaname NOT IN ('pg_catalog', 'information_schema') \
                AND NOT EXISTS (SELECT 1 FROM pgtier_analytics_tables a \
                WHERE a.\"schema\" = schemaname AND a.\"table\" = tablename)";
    let res = match conn.execute_sql(list) {
        Ok(res) => res,
        Err(e) => panic!("listing the tables for SLT_ANALYTICS: {} {}", e.sqlstate, e.message),
    };
    let names: Vec<String> =
        res.rows.map(|rows| rows.iter().filter_map(|r| r.text(0).map(|t| t.to_string())).collect()).unwrap_or_default();
    for name in names {
        let _ = conn.execute_sql(&format!("ALTER TABLE {name} SET ANALYTICS ON"));
    }
}

/// In completion mode, pgtier is compared with what PostgreSQL just did.
fn expect_from(original: &Expect, pg: &Outcome) -> Expect {
    match (original, pg) {
        (Expect::Rows { sort, names, .. }, Outcome::Ok { rows: Some(rows), names: got_names, .. }) => {
            let header = names.then(|| got_names.join(" "));
            Expect::Rows { sort: *sort, names: *names, rows: header.into_iter().chain(rows.iter().cloned()).collect() }
        }
        (_, Outcome::Ok { count, .. }) if matches!(original, Expect::Count(_)) => Expect::Count(*count),
        (_, Outcome::Error { sqlstate, .. }) => Expect::Error(sqlstate.clone()),
        (e, _) => e.clone(),
    }
}
