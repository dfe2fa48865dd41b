//! Deep and wide statements: each either gets an answer or PostgreSQL's
//! 54001 "stack depth limit exceeded", never a crash. A stack overflow
//! aborts the whole process (it is not a panic), so every shape runs in a
//! child process (this test binary re-run with `DEPTH_SHAPE` set) on a
//! thread with the server's session stack, and the parent asserts on the
//! child's exit status and what it printed.
#![allow(clippy::unwrap_used)]

use pgtier_engine::{CommitMode, Database, EngineConfig};
use pgtier_sql::Connection;

/// The server's session and event-loop thread stack (crates/server).
const SESSION_STACK_BYTES: usize = 32 << 20;

fn chain(n: usize, term: &str, op: &str) -> String {
    let mut s = String::with_capacity(n * (term.len() + op.len() + 2));
    for i in 0..n {
        if i > 0 {
            s.push_str(op);
        }
        s.push_str(term);
    }
    s
}

fn nest(n: usize, open: &str, inner: &str, close: &str) -> String {
    format!("{}{inner}{}", open.repeat(n), close.repeat(n))
}

/// What a shape may get: an answer; an answer or 54001; any answer or
/// error (PostgreSQL itself refuses the syntax), but no crash.
#[derive(Clone, Copy, PartialEq)]
enum Expect {
    Answer,
    AnswerOr54001,
    NoCrash,
}
use Expect::{Answer, AnswerOr54001, NoCrash};

/// (name, statement, expectation). PostgreSQL 15 (2 MB max_stack_depth)
/// answers chains of `+` and `||` of 3,000 terms and gives 54001 at
/// 10,000; answers AND / OR chains of any length (it flattens them);
/// answers 1,000 levels of nesting and gives 42601 "memory exhausted" (its
/// parser's stack) at 10,000; rejects `a < b = c` (42601).
fn shapes() -> Vec<(String, String, Expect)> {
    let mut v = Vec::new();
    for n in [100, 1_000, 3_000, 10_000, 100_000] {
        let must = if n <= 1_000 { Answer } else { AnswerOr54001 };
        v.push((format!("plus_{n}"), format!("SELECT {}", chain(n, "1", " + ")), must));
        v.push((format!("concat_{n}"), format!("SELECT {}", chain(n, "'a'", " || ")), must));
        v.push((format!("and_{n}"), format!("SELECT {}", chain(n, "true", " AND ")), must));
        v.push((format!("or_{n}"), format!("SELECT {}", chain(n, "false", " OR ")), must));
        v.push((format!("cmp_{n}"), format!("SELECT {}", chain(n, "1 < 2", " = ")), NoCrash));
        v.push((format!("where_{n}"), format!("SELECT 1 WHERE {}", chain(n, "1 = 1", " AND ")), must));
    }
    for n in [10, 40, 1_000, 100_000] {
        let must = if n <= 10 { Answer } else { AnswerOr54001 };
        v.push((format!("parens_{n}"), format!("SELECT {}", nest(n, "(", "1", ")")), must));
        v.push((format!("abs_{n}"), format!("SELECT {}", nest(n, "abs(", "1", ")")), must));
        // Known gap: past sqlparser's 50 levels, CASE and NOT hit its
        // recursion limit inside a `maybe_parse` that swallows it, so the
        // error is 42703 / 42601 rather than 54001 (no crash either way).
        let swallowed = if n <= 40 { must } else { NoCrash };
        v.push((format!("case_{n}"), format!("SELECT {}", nest(n, "CASE WHEN true THEN ", "1", " END")), swallowed));
        v.push((format!("not_{n}"), format!("SELECT {}true", "NOT ".repeat(n)), swallowed));
        v.push((format!("minus_{n}"), format!("SELECT {}1", "- ".repeat(n)), must));
        v.push((format!("subquery_{n}"), format!("SELECT {}", nest(n, "(SELECT ", "1", ")")), must));
        // Nested ARRAY[ parsed in time exponential in the depth (60 levels:
        // minutes) and, past the parser, doubled its quoting per level;
        // multidimensional arrays are 0A000 in pgtier.
        v.push((format!("array_{n}"), format!("SELECT {}", nest(n, "ARRAY[", "1", "]")), NoCrash));
        // A syntax error inside nested CASEs made sqlparser backtrack for
        // minutes at 60 levels.
        v.push((
            format!("broken_case_{n}"),
            format!("SELECT {}", nest(n, "CASE WHEN true THEN ", "1 +", " END")),
            NoCrash,
        ));
    }
    let list = (0..200_000).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    v.push(("in_list_200000".to_owned(), format!("SELECT 199999 IN ({list})"), Answer));
    v.push((
        "values_200000".to_owned(),
        format!(
            "SELECT count(*) FROM (VALUES ({})) v",
            (0..200_000).map(|i| i.to_string()).collect::<Vec<_>>().join("),(")
        ),
        Answer,
    ));
    v
}

/// Runs one shape (in the child) and prints `OK` or `ERR <sqlstate>`.
fn run_shape(sql: &str, prepare: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { commit_mode: CommitMode::Async, background: false, ..EngineConfig::default() };
    let mut conn = Connection::new(Database::open(dir.path(), config).unwrap());
    let r = if prepare { conn.prepare(sql).map(|_| ()) } else { conn.execute_sql(sql).map(|_| ()) };
    match r {
        Ok(()) => "OK".to_owned(),
        Err(e) => format!("ERR {} {}", e.sqlstate, e.message),
    }
}

#[test]
#[ignore = "the child process of a test in this file (run by it with --ignored)"]
fn depth_child() {
    let Ok(name) = std::env::var("DEPTH_SHAPE") else { return };
    let prepare = std::env::var("DEPTH_PREPARE").is_ok();
    let (_, sql, _) = shapes().into_iter().find(|(n, _, _)| *n == name).unwrap();
    let out = std::thread::Builder::new()
        .stack_size(SESSION_STACK_BYTES)
        .spawn(move || run_shape(&sql, prepare))
        .unwrap()
        .join()
        .unwrap();
    println!("DEPTH_RESULT {out}");
}

#[test]
fn deep_and_wide_statements_answer_or_54001() {
    if std::env::var("DEPTH_SHAPE").is_ok() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let mut failures = Vec::new();
    for (name, _, must) in shapes() {
        for prepare in [false, true] {
            let mut cmd = std::process::Command::new(&exe);
            cmd.args(["--exact", "depth_child", "--ignored", "--nocapture", "--test-threads=1"])
                .env("DEPTH_SHAPE", &name);
            if prepare {
                cmd.env("DEPTH_PREPARE", "1");
            }
            let out = cmd.output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            let result =
                stdout.lines().find_map(|l| l.split_once("DEPTH_RESULT ").map(|(_, r)| r)).unwrap_or("").to_owned();
            let via = if prepare { "prepare" } else { "execute_sql" };
            eprintln!(
                "{name} ({via}): {}",
                if out.status.success() { result.clone() } else { format!("CRASH {}", out.status) }
            );
            let ok = out.status.success()
                && match must {
                    Answer => result == "OK",
                    AnswerOr54001 => result == "OK" || result.starts_with("ERR 54001 stack depth limit exceeded"),
                    NoCrash => !result.is_empty(),
                };
            if !ok {
                failures.push(format!(
                    "{name} ({via}): status {} result {result:?} stderr {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
