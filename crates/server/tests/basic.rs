//! Simple and extended query protocol through the `postgres` crate.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

#[test]
fn simple_and_extended_round_trip() {
    let srv = common::start();
    let mut c = srv.client();
    c.batch_execute("CREATE TABLE t (id int PRIMARY KEY, name text, score numeric(10,2)); INSERT INTO t VALUES (1, 'a', 1.5), (2, 'b', NULL)").unwrap();
    let rows = c.simple_query("SELECT id, name FROM t ORDER BY id").unwrap();
    let texts: Vec<String> = rows
        .iter()
        .filter_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => Some(format!("{}:{}", r.get(0).unwrap(), r.get(1).unwrap())),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["1:a", "2:b"]);
    let stmt = c.prepare("SELECT name FROM t WHERE id = $1").unwrap();
    let row = c.query_one(&stmt, &[&2i32]).unwrap();
    assert_eq!(row.get::<_, String>(0), "b");
    let n = c.execute("UPDATE t SET name = $1 WHERE id = $2", &[&"z", &1i32]).unwrap();
    assert_eq!(n, 1);
    let row = c.query_one("SELECT name, id FROM t WHERE id = 1", &[]).unwrap();
    assert_eq!(row.get::<_, String>(0), "z");
    assert_eq!(row.get::<_, i32>(1), 1);
}

#[test]
fn errors_carry_sqlstate_and_aborted_block() {
    let srv = common::start();
    let mut c = srv.client();
    c.batch_execute("CREATE TABLE u (id int PRIMARY KEY)").unwrap();
    c.batch_execute("INSERT INTO u VALUES (1)").unwrap();
    let e = c.batch_execute("INSERT INTO u VALUES (1)").unwrap_err();
    assert_eq!(e.code().unwrap().code(), "23505");
    let mut tx = c.transaction().unwrap();
    let e = tx.execute("SELECT * FROM nope", &[]).unwrap_err();
    assert_eq!(e.code().unwrap().code(), "42P01");
    let e = tx.execute("SELECT 1", &[]).unwrap_err();
    assert_eq!(e.code().unwrap().code(), "25P02");
    tx.rollback().unwrap();
    assert_eq!(c.query_one("SELECT count(*) FROM u", &[]).unwrap().get::<_, i64>(0), 1);
}

#[test]
fn error_position_and_notices_as_postgres_sends_them() {
    let srv = common::start();
    let mut c = srv.client();
    let mut pg = common::postgres("basic_position");
    for sql in ["SELECT * FROM nope", "SELECT nope FROM (VALUES (1)) v", "SELEC 1"] {
        let a = c.batch_execute(sql).unwrap_err();
        let b = pg.batch_execute(sql).unwrap_err();
        let (a, b) = (a.as_db_error().unwrap(), b.as_db_error().unwrap());
        assert_eq!(a.code(), b.code(), "{sql}");
        if a.code().code() != "0A000" {
            assert_eq!(a.position(), b.position(), "{sql}");
        }
    }
    let out = common::psql(&srv, "DROP TABLE IF EXISTS nope;\nBEGIN;\nBEGIN;\nCOMMIT;\n", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("NOTICE:  table \"nope\" does not exist, skipping"), "{stderr}");
    assert!(stderr.contains("WARNING:  there is already a transaction in progress"), "{stderr}");
}

#[test]
fn portal_row_limit_suspends_and_resumes() {
    let srv = common::start();
    let mut c = srv.client();
    c.batch_execute("CREATE TABLE r (id int PRIMARY KEY)").unwrap();
    c.batch_execute("INSERT INTO r SELECT * FROM (VALUES (1), (2), (3), (4), (5)) v").unwrap_or_else(|_| {
        for i in 1..=5 {
            c.execute("INSERT INTO r VALUES ($1)", &[&i]).unwrap();
        }
    });
    let mut tx = c.transaction().unwrap();
    let portal = tx.bind("SELECT id FROM r ORDER BY id", &[]).unwrap();
    let first: Vec<i32> = tx.query_portal(&portal, 2).unwrap().iter().map(|r| r.get(0)).collect();
    let second: Vec<i32> = tx.query_portal(&portal, 2).unwrap().iter().map(|r| r.get(0)).collect();
    let rest: Vec<i32> = tx.query_portal(&portal, 0).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!((first, second, rest), (vec![1, 2], vec![3, 4], vec![5]));
}

#[test]
fn sql_level_prepare_execute_deallocate() {
    let srv = common::start();
    let mut c = srv.client();
    let script = "CREATE TABLE pe (id int PRIMARY KEY, v text);\n\
        PREPARE ins (int, text) AS INSERT INTO pe VALUES ($1, $2);\n\
        EXECUTE ins(1, 'one');\n\
        EXECUTE ins(1 + 1, upper('two'));\n\
        PREPARE get AS SELECT v FROM pe WHERE id = $1;\n\
        EXECUTE get(2);\n\
        DEALLOCATE get;\n\
        DEALLOCATE ALL;\n";
    let out = common::psql(&srv, script, &["-At"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "TWO\n");
    let e = c.batch_execute("EXECUTE ins(3, 'x')").unwrap_err();
    assert_eq!(e.code().unwrap().code(), "26000");
    assert_eq!(c.query_one("SELECT count(*) FROM pe", &[]).unwrap().get::<_, i64>(0), 2);
}

/// A trust server's raw session: `msgs` after the startup packet, then
/// Terminate; returns the reply bytes.
fn raw(srv: &common::TestServer, msgs: &[Vec<u8>]) -> Vec<u8> {
    use common::{message, startup_packet};
    let mut bytes = startup_packet("alice");
    for m in msgs {
        bytes.extend_from_slice(m);
    }
    bytes.extend_from_slice(&message(b'X', &[]));
    common::exchange(srv, &bytes)
}

#[test]
fn executes_before_sync_are_one_implicit_transaction() {
    use common::{cstr, message, sqlstates};
    let srv = common::start_with("[auth]\nmethod = \"trust\"\n");
    let insert = |id: &str| {
        let bind = [
            cstr(""),
            cstr("ins"),
            vec![0, 0, 0, 1],
            (id.len() as i32).to_be_bytes().to_vec(),
            id.as_bytes().to_vec(),
            vec![0, 0],
        ]
        .concat();
        [message(b'B', &bind), message(b'E', &[cstr(""), vec![0, 0, 0, 0]].concat())].concat()
    };
    let parse = message(b'P', &[cstr("ins"), cstr("INSERT INTO b VALUES ($1)"), vec![0, 0]].concat());
    raw(&srv, &[message(b'Q', &cstr("CREATE TABLE b (id int PRIMARY KEY)"))]);
    // A batch whose third statement fails leaves nothing (PostgreSQL's
    // implicit transaction).
    let reply = raw(
        &srv,
        &[
            parse.clone(),
            insert("1"),
            insert("2"),
            insert("1"),
            insert("3"),
            message(b'S', &[]),
            message(b'Q', &cstr("SELECT count(*) FROM b")),
        ],
    );
    assert_eq!(sqlstates(&reply), ["23505"]);
    let mut c = postgres::Config::new();
    c.host("127.0.0.1").port(srv.addr.port()).user("alice").dbname("pgtier");
    let mut c = c.connect(postgres::NoTls).unwrap();
    assert_eq!(c.query_one("SELECT count(*) FROM b", &[]).unwrap().get::<_, i64>(0), 0);
    // A good batch commits at Sync, all of it.
    raw(&srv, &[parse, insert("1"), insert("2"), insert("3"), message(b'S', &[])]);
    assert_eq!(c.query_one("SELECT count(*) FROM b", &[]).unwrap().get::<_, i64>(0), 3);
}

/// The CommandComplete tags in a backend byte stream.
fn command_tags(stream: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 5 <= stream.len() {
        let len = i32::from_be_bytes(stream[i + 1..i + 5].try_into().unwrap()) as usize;
        if len < 4 || i + 1 + len > stream.len() {
            break;
        }
        if stream[i] == b'C' {
            out.push(String::from_utf8_lossy(&stream[i + 5..i + len]).into_owned());
        }
        i += 1 + len;
    }
    out
}

/// MERGE's tag is `MERGE n` (rows inserted, updated and deleted), as
/// PostgreSQL 15 sends it, and UPDATE ... FROM / DELETE ... USING keep
/// theirs; the counts match PostgreSQL's over the extended protocol too.
#[test]
fn merge_and_joined_dml_command_tags() {
    use common::{cstr, message};
    let setup = "CREATE TABLE mt (id int PRIMARY KEY, v int); CREATE TABLE ms (id int, v int); \
                 INSERT INTO mt VALUES (1, 1), (2, 2); INSERT INTO ms VALUES (1, 10), (3, 30)";
    let statements = [
        "MERGE INTO mt USING ms ON mt.id = ms.id WHEN MATCHED THEN UPDATE SET v = ms.v WHEN NOT MATCHED THEN INSERT VALUES (ms.id, ms.v)",
        "MERGE INTO mt USING ms ON mt.id = ms.id WHEN MATCHED AND ms.v > 10 THEN DELETE WHEN MATCHED THEN DO NOTHING",
        "UPDATE mt SET v = ms.v + 1 FROM ms WHERE ms.id = mt.id",
        "DELETE FROM mt USING ms WHERE ms.id = mt.id AND ms.v = 10",
    ];
    let srv = common::start_with("[auth]\nmethod = \"trust\"\n");
    let mut msgs = vec![message(b'Q', &cstr(setup))];
    msgs.extend(statements.iter().map(|s| message(b'Q', &cstr(s))));
    let tags = command_tags(&raw(&srv, &msgs));
    assert_eq!(tags[tags.len() - 4..], ["MERGE 2", "MERGE 1", "UPDATE 1", "DELETE 1"]);

    let mut pg = common::postgres("merge_tags");
    let mut tier = postgres::Config::new();
    tier.host("127.0.0.1").port(srv.addr.port()).user("alice").dbname("pgtier");
    let mut tier = tier.connect(postgres::NoTls).unwrap();
    for c in [&mut pg, &mut tier] {
        c.batch_execute("DROP TABLE IF EXISTS mt; DROP TABLE IF EXISTS ms").unwrap();
        c.batch_execute(setup).unwrap();
    }
    let merge = "MERGE INTO mt USING (SELECT $1::int AS id, $2::int AS v) s ON mt.id = s.id \
                 WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)";
    for (id, v) in [(1, 5), (7, 70), (7, 71)] {
        let want = pg.execute(merge, &[&id, &v]).unwrap();
        assert_eq!(tier.execute(merge, &[&id, &v]).unwrap(), want);
    }
    let rows = |c: &mut postgres::Client| common::text_rows(c, "SELECT id, v FROM mt ORDER BY id");
    assert_eq!(rows(&mut tier), rows(&mut pg));
}
