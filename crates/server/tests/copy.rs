//! COPY FROM STDIN / TO STDOUT in text, csv and binary, against PostgreSQL:
//! the same data loaded into both must read back identically, and COPY TO
//! must produce PostgreSQL's exact bytes. A bad row fails the whole COPY
//! with PostgreSQL's SQLSTATE and leaves nothing behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;

use common::{copy_out, text_rows};

const DDL: &str = "CREATE TABLE c (id int PRIMARY KEY, name text, amount numeric(10,2), day date, ts timestamp, flag boolean, blob bytea, r real)";
const TEXT_DATA: &str = "1\tplain\t1.50\t2024-01-02\t2024-01-02 03:04:05\tt\t\\\\x00ff\t1.25\n\
2\ttab\\there\\nnewline \\\\ back\t-3\t2000-02-29\t2000-02-29 00:00:00.5\tf\t\\\\x\t-0\n\
3\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\n";
const CSV_DATA: &str = "id,name,amount,day,ts,flag,blob,r\n\
10,\"quoted, comma\",0.01,2024-12-31,2024-12-31 23:59:59,true,\\x01,3.5\n\
11,\"\",,1999-01-01,,false,,\n\
12,\"multi\nline \"\"q\"\"\",5,2020-02-02,2020-02-02 02:02:02,t,\\xabcdef,NaN\n";

fn copy_in(c: &mut impl postgres::GenericClient, sql: &str, data: &[u8]) -> Result<u64, postgres::Error> {
    let mut w = c.copy_in(sql)?;
    w.write_all(data).unwrap();
    w.finish()
}

#[test]
fn copy_formats_match_postgres() {
    let srv = common::start();
    let mut tier = srv.client();
    let mut pg = common::postgres("copy_formats");
    for c in [&mut tier, &mut pg] {
        c.batch_execute(DDL).unwrap();
        assert_eq!(copy_in(c, "COPY c FROM STDIN", TEXT_DATA.as_bytes()).unwrap(), 3);
        assert_eq!(
            copy_in(
                c,
                "COPY c (id, name, amount, day, ts, flag, blob, r) FROM STDIN WITH (FORMAT csv, HEADER true)",
                CSV_DATA.as_bytes()
            )
            .unwrap(),
            3
        );
    }
    let all = "SELECT * FROM c ORDER BY id";
    assert_eq!(text_rows(&mut tier, all), text_rows(&mut pg, all));
    for out in [
        "COPY c TO STDOUT",
        "COPY c TO STDOUT WITH (FORMAT csv, HEADER true)",
        "COPY (SELECT id, name, blob FROM c WHERE id > 1 ORDER BY id) TO STDOUT WITH (FORMAT csv)",
        "COPY (SELECT id, amount FROM c ORDER BY id) TO STDOUT (FORMAT binary)",
        "COPY (SELECT * FROM c ORDER BY id) TO STDOUT (FORMAT binary)",
        "COPY (SELECT * FROM c ORDER BY id) TO STDOUT WITH (DELIMITER '|', NULL 'nil')",
    ] {
        let (a, b) = (copy_out(&mut tier, out), copy_out(&mut pg, out));
        if out.contains("binary") {
            assert_eq!(a, b, "{out}");
            continue;
        }
        // A table's scan order is storage order on both sides (insertion
        // order on PostgreSQL, hash order on pgtier): compare the lines
        // (the header stays first).
        let lines = |bytes: &[u8]| {
            let text = String::from_utf8(bytes.to_vec()).unwrap();
            let mut records: Vec<String> = text.split_inclusive('\n').map(str::to_owned).collect();
            let first = if out.contains("HEADER") { records.remove(0) } else { String::new() };
            records.sort();
            (first, records)
        };
        assert_eq!(lines(&a), lines(&b), "{out}");
    }
    // Binary out of PostgreSQL is binary in for pgtier (the bench's path).
    let binary = copy_out(&mut pg, "COPY c TO STDOUT (FORMAT binary)");
    assert!(binary.starts_with(b"PGCOPY\n\xff\r\n\0"));
    tier.batch_execute("CREATE TABLE c2 (id int PRIMARY KEY, name text, amount numeric(10,2), day date, ts timestamp, flag boolean, blob bytea, r real)").unwrap();
    assert_eq!(copy_in(&mut tier, "COPY c2 FROM STDIN (FORMAT binary)", &binary).unwrap(), 6);
    assert_eq!(text_rows(&mut tier, "SELECT * FROM c2 ORDER BY id"), text_rows(&mut pg, all));
}

#[test]
fn a_bad_row_fails_the_whole_copy() {
    let srv = common::start();
    let mut tier = srv.client();
    let mut pg = common::postgres("copy_errors");
    for c in [&mut tier, &mut pg] {
        c.batch_execute("CREATE TABLE e (id int PRIMARY KEY, v int)").unwrap();
        c.batch_execute("INSERT INTO e VALUES (100, 0)").unwrap();
    }
    for (data, code) in [
        ("1\t1\n2\tnot-a-number\n", "22P02"),
        ("1\t1\n100\t2\n", "23505"),
        ("1\t1\n2\n", "22P04"),
        ("1\t1\t9\n", "22P04"),
        ("1\t99999999999\n", "22003"),
    ] {
        for (name, c) in [("pgtier", &mut tier), ("postgres", &mut pg)] {
            let e = match copy_in(c, "COPY e FROM STDIN", data.as_bytes()) {
                Ok(n) => panic!("{name}: {data:?} loaded {n} rows"),
                Err(e) => e,
            };
            assert_eq!(e.code().map(|c| c.code()), Some(code), "{name}: {data:?}: {e}");
            assert_eq!(
                text_rows(c, "SELECT count(*) FROM e"),
                vec![vec![Some("1".to_owned())]],
                "{name}: nothing left behind"
            );
        }
    }
    // Inside a transaction block the failure aborts the block.
    let mut tx = tier.transaction().unwrap();
    assert!(copy_in(&mut tx, "COPY e FROM STDIN", b"7\tx\n").is_err());
    assert_eq!(tx.execute("SELECT 1", &[]).unwrap_err().code().unwrap().code(), "25P02");
}

#[test]
fn copy_through_psql() {
    let srv = common::start();
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("in.csv");
    std::fs::write(&csv, "1,one\n2,two\n3,\"th,ree\"\n").unwrap();
    let script = format!(
        "CREATE TABLE p (id int PRIMARY KEY, name text);\n\\copy p FROM '{}' WITH (FORMAT csv)\nCOPY (SELECT * FROM p ORDER BY id) TO STDOUT WITH (FORMAT csv);\n",
        csv.display()
    );
    let out = common::psql(&srv, &script, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("1,one\n2,two\n3,\"th,ree\"\n"), "{stdout}");
}
