//! PostgreSQL's own pgbench against pgtier (and first against PostgreSQL, which
//! proves the test itself), with `-M prepared` and `-M extended`:
//! - the built-in TPC-B-like workload on the four pgbench tables, created here
//!   with their primary keys up front (pgbench's own `-i` adds them with ALTER
//!   TABLE, and loads with TRUNCATE + COPY): no failed transaction, and afterwards
//!   sum(abalance) = sum(bbalance) = sum(tbalance) = sum(history.delta), one
//!   history row per processed transaction;
//! - the project's TATP scripts (bench/pgbench/run.sh) on a small TATP
//!   population: no failed transaction.

mod support;

use std::process::Command;

use support::clients::{Endpoint, pg_program, repo_root};

/// pgbench's scale 1: 1 branch, 10 tellers, 100 000 accounts.
const ACCOUNTS: i32 = 100_000;
const TELLERS: i32 = 10;
/// Rows per INSERT statement while loading.
const LOAD_BATCH_ROWS: i32 = 1_000;
const TPCB_SECONDS: &str = "5";
const TATP_SUBSCRIBERS: i32 = 1_000;
const TATP_SECONDS: &str = "3";

fn connect(endpoint: &Endpoint) -> postgres::Client {
    let config = format!(
        "host={} port={} user={} password={} dbname={} connect_timeout=10",
        endpoint.host, endpoint.port, endpoint.user, endpoint.password, endpoint.dbname
    );
    postgres::Client::connect(&config, postgres::NoTls)
        .unwrap_or_else(|error| panic!("connect to {}:{}: {error}", endpoint.host, endpoint.port))
}

fn batch(client: &mut postgres::Client, server: &str, sql: &str) {
    if let Err(error) = client.batch_execute(sql) {
        let short: String = sql.chars().take(300).collect();
        let message = error
            .as_db_error()
            .map_or_else(|| error.to_string(), |db| format!("{} {}", db.code().code(), db.message()));
        panic!("{server}: {message}\nstatement: {short}");
    }
}

/// Inserts `rows` (each a parenthesized tuple) in batches.
fn load(client: &mut postgres::Client, server: &str, table: &str, rows: impl Iterator<Item = String>) {
    let mut rows = rows.peekable();
    while rows.peek().is_some() {
        let chunk: Vec<String> = rows.by_ref().take(LOAD_BATCH_ROWS as usize).collect();
        batch(client, server, &format!("INSERT INTO {table} VALUES {}", chunk.join(",")));
    }
}

/// Runs pgbench (with PGPASSWORD from the environment, never on the command
/// line) and returns its output; fails the test on a non-zero exit.
fn run_pgbench(server: &str, endpoint: &Endpoint, args: &[&str]) -> String {
    let mut command = Command::new(pg_program("pgbench"));
    endpoint.apply(&mut command);
    command.args(args);
    run(server, command, "pgbench")
}

fn run(server: &str, mut command: Command, what: &str) -> String {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("cannot start {what}: {error} ({})", support::clients::ENSURE_HINT));
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{what} against {server} failed ({}):\n{text}", output.status);
    text
}

/// The number after `prefix` on pgbench's report line starting with it.
fn report_number(output: &str, prefix: &str) -> u64 {
    let line = output
        .lines()
        .find(|line| line.starts_with(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line in pgbench's report:\n{output}"));
    let digits: String = line[prefix.len()..].trim_start().chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or_else(|_| panic!("no number in `{line}`"))
}

fn assert_no_failures(server: &str, output: &str) -> u64 {
    let processed = report_number(output, "number of transactions actually processed:");
    let failed = report_number(output, "number of failed transactions:");
    assert!(processed > 0 && failed == 0, "{server}: {processed} transactions processed, {failed} failed:\n{output}");
    assert!(!output.contains("ERROR"), "{server}: pgbench reported errors:\n{output}");
    processed
}

fn sum(client: &mut postgres::Client, server: &str, sql: &str) -> i64 {
    let row = client.query_one(sql, &[]).unwrap_or_else(|error| panic!("{server}: {sql}: {error}"));
    row.get::<_, Option<i64>>(0).unwrap_or(0)
}

fn tpcb_like(server: &str, endpoint: &Endpoint) {
    let mut client = connect(endpoint);
    // pgbench -i's tables, with keys up front (pgbench adds them later with
    // ALTER TABLE). pgbench_history keeps pgbench's own definition: no key (its
    // INSERT names only tid, bid, aid, delta, mtime).
    batch(
        &mut client,
        server,
        "CREATE TABLE pgbench_branches (bid integer NOT NULL PRIMARY KEY, bbalance integer, filler char(88));
         CREATE TABLE pgbench_tellers (tid integer NOT NULL PRIMARY KEY, bid integer, tbalance integer, filler char(84));
         CREATE TABLE pgbench_accounts (aid integer NOT NULL PRIMARY KEY, bid integer, abalance integer, filler char(84));
         CREATE TABLE pgbench_history (tid integer, bid integer, aid integer, delta integer, mtime timestamp,
             filler char(22));",
    );
    load(&mut client, server, "pgbench_branches", std::iter::once("(1, 0, NULL)".to_owned()));
    load(&mut client, server, "pgbench_tellers", (1..=TELLERS).map(|tid| format!("({tid}, 1, 0, NULL)")));
    load(&mut client, server, "pgbench_accounts", (1..=ACCOUNTS).map(|aid| format!("({aid}, 1, 0, '')")));

    let mut processed_total = 0;
    for mode in ["prepared", "extended"] {
        let output = run_pgbench(
            server,
            endpoint,
            &["-n", "-c", "4", "-j", "2", "-T", TPCB_SECONDS, "-M", mode, "--failures-detailed", "--verbose-errors"],
        );
        processed_total += assert_no_failures(&format!("{server} -M {mode}"), &output);
        let accounts = sum(&mut client, server, "SELECT sum(abalance) FROM pgbench_accounts");
        let tellers = sum(&mut client, server, "SELECT sum(tbalance) FROM pgbench_tellers");
        let branches = sum(&mut client, server, "SELECT sum(bbalance) FROM pgbench_branches");
        let history = sum(&mut client, server, "SELECT sum(delta) FROM pgbench_history");
        let history_rows = sum(&mut client, server, "SELECT count(*) FROM pgbench_history");
        assert!(
            accounts == tellers && tellers == branches && branches == history,
            "{server} after -M {mode}: balances disagree: accounts {accounts}, tellers {tellers}, branches {branches}, history {history}"
        );
        assert_eq!(
            u64::try_from(history_rows).unwrap_or(0),
            processed_total,
            "{server} after -M {mode}: history rows vs transactions pgbench processed"
        );
        eprintln!(
            "{server} tpcb-like -M {mode}: {processed_total} transactions so far, balances consistent ({accounts})"
        );
    }
}

/// A small TATP population by the spec's shape (1-4 access_info and
/// special_facility rows per subscriber, 0-3 call_forwarding rows per
/// facility), deterministic so both servers get the same data.
fn tatp(server: &str, endpoint: &Endpoint) {
    let mut client = connect(endpoint);
    batch(&mut client, server, &pgtier_bench::tatp::schema::create_tables(true));
    let n = TATP_SUBSCRIBERS;
    load(
        &mut client,
        server,
        "subscriber",
        (1..=n).map(|s| {
            let small = |k: i32, m: i32| (s * 31 + k * 17) % m;
            let bits: Vec<String> = (1..=10).map(|k| small(k, 2).to_string()).collect();
            let hexes: Vec<String> = (1..=10).map(|k| small(k, 16).to_string()).collect();
            let bytes: Vec<String> = (1..=10).map(|k| small(k, 256).to_string()).collect();
            format!(
                "({s}, '{s:015}', {}, {}, {}, {}, {})",
                bits.join(", "),
                hexes.join(", "),
                bytes.join(", "),
                i64::from(s) * 4_000_003 % 4_294_967_295 + 1,
                i64::from(s) * 7_000_001 % 4_294_967_295 + 1
            )
        }),
    );
    let types = |s: i32, salt: i32| 1..=((s * 7 + salt) % 4 + 1);
    load(
        &mut client,
        server,
        "access_info",
        (1..=n).flat_map(|s| types(s, 1).map(move |t| format!("({s}, {t}, {}, {}, 'ABC', 'ABCDE')", s % 256, t * 3))),
    );
    load(
        &mut client,
        server,
        "special_facility",
        (1..=n).flat_map(|s| {
            types(s, 2).map(move |t| format!("({s}, {t}, {}, 0, {}, 'VWXYZ')", i32::from((s + t) % 7 != 0), s % 256))
        }),
    );
    load(
        &mut client,
        server,
        "call_forwarding",
        (1..=n).flat_map(|s| {
            types(s, 2).flat_map(move |t| {
                let count = ((s + t) % 4) as usize;
                [0, 8, 16][..count.min(3)]
                    .iter()
                    .map(move |start| {
                        format!("({s}, {t}, {start}, {}, '{:015}')", start + 1 + (s + t) % 8, s * 1000 + t)
                    })
                    .collect::<Vec<_>>()
            })
        }),
    );

    let run_sh = repo_root().join("bench/pgbench/run.sh");
    let url = format!("postgresql://{}@{}:{}/{}", endpoint.user, endpoint.host, endpoint.port, endpoint.dbname);
    for mode in ["prepared", "extended"] {
        let mut command = Command::new("bash");
        endpoint.apply(&mut command);
        command
            .arg(&run_sh)
            .args([url.as_str(), &n.to_string(), "2", TATP_SECONDS])
            .env("PGBENCH", pg_program("pgbench"))
            .env("PGBENCH_MODE", mode);
        let output = run(&format!("{server} -M {mode}"), command, "bench/pgbench/run.sh");
        let processed = assert_no_failures(&format!("{server} TATP -M {mode}"), &output);
        assert!(output.contains(&format!("query mode: {mode}")), "{server}: pgbench ran another mode:\n{output}");
        eprintln!("{server} TATP scripts -M {mode}: {processed} transactions, none failed");
    }
}

#[test]
fn pgbench_tpcb_like_builtin() {
    let postgres = support::start_postgres();
    tpcb_like("PostgreSQL", &support::postgres_endpoint(&postgres));
    let pgtier = support::start_pgtier("async");
    tpcb_like("pgtier", &pgtier.endpoint);
    pgtier.server.shutdown();
}

#[test]
fn pgbench_tatp_scripts() {
    let postgres = support::start_postgres();
    tatp("PostgreSQL", &support::postgres_endpoint(&postgres));
    let pgtier = support::start_pgtier("async");
    tatp("pgtier", &pgtier.endpoint);
    pgtier.server.shutdown();
}
