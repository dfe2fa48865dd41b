//! Savepoints through the wire protocol, against PostgreSQL: the extended
//! protocol as pgJDBC's autosave uses it (SAVEPOINT before a statement,
//! ROLLBACK TO after its error, in the aborted block), rust-postgres'
//! nested transactions, and the ReadyForQuery status going E and back to T.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

/// One outcome per step: rows as text, or the error's SQLSTATE.
fn script(c: &mut postgres::Client) -> Vec<String> {
    let mut out = Vec::new();
    let step = |out: &mut Vec<String>,
                c: &mut postgres::Client,
                sql: &str,
                params: &[&(dyn postgres::types::ToSql + Sync)]| {
        let line = match c.query(sql, params) {
            Ok(rows) => rows
                .iter()
                .map(|r| {
                    (0..r.len())
                        .map(|i| r.get::<_, Option<i32>>(i).map_or("NULL".into(), |v| v.to_string()))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .collect::<Vec<_>>()
                .join(";"),
            Err(e) => format!("error {}", e.code().map_or("none", |c| c.code())),
        };
        out.push(format!("{sql} -> {line}"));
    };
    step(&mut out, c, "CREATE TABLE sv (id int PRIMARY KEY, v int)", &[]);
    step(&mut out, c, "SAVEPOINT outside", &[]);
    step(&mut out, c, "BEGIN", &[]);
    step(&mut out, c, "INSERT INTO sv VALUES ($1, $2)", &[&1i32, &10i32]);
    // pgJDBC autosave: a savepoint before each statement, rolled back to
    // after a failure, released after a success.
    step(&mut out, c, "SAVEPOINT PGJDBC_AUTOSAVE", &[]);
    step(&mut out, c, "UPDATE sv SET v = $1 WHERE id = $2", &[&11i32, &1i32]);
    step(&mut out, c, "INSERT INTO sv VALUES ($1, $2)", &[&1i32, &12i32]);
    step(&mut out, c, "SELECT id, v FROM sv", &[]);
    step(&mut out, c, "ROLLBACK TO SAVEPOINT PGJDBC_AUTOSAVE", &[]);
    step(&mut out, c, "SELECT id, v FROM sv", &[]);
    step(&mut out, c, "SAVEPOINT PGJDBC_AUTOSAVE", &[]);
    step(&mut out, c, "INSERT INTO sv VALUES ($1, $2)", &[&2i32, &20i32]);
    step(&mut out, c, "RELEASE SAVEPOINT PGJDBC_AUTOSAVE", &[]);
    step(&mut out, c, "COMMIT", &[]);
    step(&mut out, c, "SELECT id, v FROM sv ORDER BY id", &[]);
    // Unknown names: the block fails; in it ROLLBACK TO still looks the name up.
    step(&mut out, c, "BEGIN", &[]);
    step(&mut out, c, "RELEASE SAVEPOINT nope", &[]);
    step(&mut out, c, "ROLLBACK TO SAVEPOINT nope", &[]);
    step(&mut out, c, "SAVEPOINT nope", &[]);
    step(&mut out, c, "ROLLBACK", &[]);
    // rust-postgres' nested transactions (SAVEPOINT sp_N underneath).
    {
        let mut tx = c.transaction().unwrap();
        tx.execute("UPDATE sv SET v = v + 1", &[]).unwrap();
        {
            let mut inner = tx.transaction().unwrap();
            inner.execute("DELETE FROM sv WHERE id = 2", &[]).unwrap();
            let e = inner.execute("INSERT INTO sv VALUES (1, 0)", &[]).unwrap_err();
            out.push(format!("nested insert: {:?}", e.code().map(|c| c.code())));
        } // dropped: rolled back to its savepoint
        {
            let mut inner = tx.transaction().unwrap();
            inner.execute("INSERT INTO sv VALUES (3, 30)", &[]).unwrap();
            inner.commit().unwrap(); // RELEASE
        }
        tx.commit().unwrap();
    }
    step(&mut out, c, "SELECT id, v FROM sv ORDER BY id", &[]);
    out
}

#[test]
fn extended_protocol_and_nested_transactions_match_postgres() {
    let mut pg = common::postgres("savepoints");
    let expected = script(&mut pg);
    // The script says what it checks; PostgreSQL must agree with it.
    for line in [
        "SAVEPOINT outside -> error 25P01",
        "INSERT INTO sv VALUES ($1, $2) -> error 23505",
        "SELECT id, v FROM sv -> error 25P02",
        "SELECT id, v FROM sv ORDER BY id -> 1,10;2,20",
        "RELEASE SAVEPOINT nope -> error 3B001",
        "ROLLBACK TO SAVEPOINT nope -> error 3B001",
        "SAVEPOINT nope -> error 25P02",
        "SELECT id, v FROM sv ORDER BY id -> 1,11;2,21;3,30",
        "nested insert: Some(\"23505\")",
    ] {
        assert!(expected.iter().any(|l| l == line), "PostgreSQL's transcript lacks {line:?}: {expected:#?}");
    }
    let srv = common::start();
    let mut tier = srv.client();
    assert_eq!(script(&mut tier), expected);
}

/// ReadyForQuery: T in the block, E after an error, T again after ROLLBACK
/// TO, I after COMMIT.
#[test]
fn ready_for_query_status_follows_rollback_to() {
    use common::{cstr, message, startup_packet};
    let srv = common::start_with("[auth]\nmethod = \"trust\"\n");
    let mut bytes = startup_packet("alice");
    for sql in ["BEGIN", "SAVEPOINT a", "SELECT 1 / 0", "SELECT 1", "ROLLBACK TO a", "SELECT 1", "COMMIT"] {
        bytes.extend_from_slice(&message(b'Q', &cstr(sql)));
    }
    bytes.extend_from_slice(&message(b'X', &[]));
    let reply = common::exchange(&srv, &bytes);
    let mut statuses = String::new();
    let mut i = 0;
    while i + 5 <= reply.len() {
        let len = i32::from_be_bytes(reply[i + 1..i + 5].try_into().unwrap()) as usize;
        if reply[i] == b'Z' {
            statuses.push(reply[i + 5] as char);
        }
        i += 1 + len;
    }
    // The first I answers the startup.
    assert_eq!(statuses, "ITTEETTI");
}

/// Cursors over the wire: DECLARE and FETCH as simple queries, MOVE over
/// the extended protocol (no rows), and a FETCH over the extended protocol
/// refused with 0A000 (its columns are not known at Describe) rather than
/// rows the client was told would not come.
#[test]
fn cursors_over_the_simple_protocol_and_fetch_refused_over_the_extended_one() {
    let srv = common::start();
    let mut c = srv.client();
    let text = |m: Vec<postgres::SimpleQueryMessage>| -> Vec<String> {
        m.iter()
            .filter_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
                _ => None,
            })
            .collect()
    };
    c.batch_execute("BEGIN; DECLARE c SCROLL CURSOR FOR SELECT g FROM generate_series(1, 5) g").unwrap();
    assert_eq!(text(c.simple_query("FETCH 2 FROM c").unwrap()), ["1", "2"]);
    let e = c.query("FETCH 1 FROM c", &[]).unwrap_err();
    assert_eq!(e.code().map(|s| s.code()), Some("0A000"), "{e}");
    c.batch_execute("ROLLBACK").unwrap();
    c.batch_execute("BEGIN; DECLARE c SCROLL CURSOR FOR SELECT g FROM generate_series(1, 5) g").unwrap();
    assert_eq!(text(c.simple_query("FETCH 2 FROM c").unwrap()), ["1", "2"]);
    c.execute("MOVE 1 IN c", &[]).unwrap();
    assert_eq!(text(c.simple_query("FETCH BACKWARD ALL FROM c").unwrap()), ["2", "1"]);
    c.batch_execute("COMMIT").unwrap();
}
