//! Passthrough against a real PostgreSQL: a table only PostgreSQL has is
//! read (and in mode "all" written) through pgtier with the simple and the
//! extended protocol, and the answers equal PostgreSQL's own; writes are
//! refused in mode "reads", inside a transaction block they commit or roll
//! back with it, DDL never passes, a table pgtier holds is
//! always answered by pgtier, a backend that is down gives a clear error
//! without harming the session, and mode "off" keeps 42P01.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{TestServer, binary_rows, text_rows};

const REMOTE_DDL: &str = "CREATE TABLE remote_t (id int PRIMARY KEY, name text, amount numeric(10,2), at timestamp)";
const REMOTE_ROWS: &str = "INSERT INTO remote_t VALUES (1, 'one', 1.50, '2024-01-02 03:04:05'), (2, 'two', NULL, NULL), (3, 'thr''ee', -7.25, '1999-12-31 23:59:59.5')";

fn code(e: &postgres::Error) -> String {
    e.code().map(|c| c.code().to_owned()).unwrap_or_else(|| format!("no SQLSTATE: {e}"))
}

/// A database on the private PostgreSQL with `remote_t`, its URL, a client
/// on it, and a pgtier server passing through to it in `mode`.
fn setup(name: &str, mode: &str) -> (TestServer, postgres::Client, String) {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("pt_{name}_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&url).unwrap();
    pg.batch_execute(&format!("{REMOTE_DDL}; {REMOTE_ROWS}")).unwrap();
    let srv =
        common::start_with(&format!("[backend]\nurl = {url:?}\npool_size = 2\n[passthrough]\nmode = \"{mode}\"\n"));
    (srv, pg, url)
}

#[test]
fn reads_match_postgres_in_both_protocols() {
    let (srv, mut pg, _) = setup("reads", "reads");
    let mut tier = srv.client();
    let q = "SELECT * FROM remote_t ORDER BY id";
    // Simple protocol: text rows.
    let expected = text_rows(&mut pg, q);
    assert_eq!(expected.len(), 3);
    assert_eq!(text_rows(&mut tier, q), expected);
    // Extended protocol: binary rows, types and names from PostgreSQL.
    assert_eq!(binary_rows(&mut tier, q), binary_rows(&mut pg, q));
    let st = tier.prepare(q).unwrap();
    let names: Vec<_> = st.columns().iter().map(|c| (c.name().to_owned(), c.type_().oid())).collect();
    let pg_st = pg.prepare(q).unwrap();
    let pg_names: Vec<_> = pg_st.columns().iter().map(|c| (c.name().to_owned(), c.type_().oid())).collect();
    assert_eq!(names, pg_names);
    assert_eq!(names[2].1, 1700, "numeric, PostgreSQL's type");
    // Parameters (binary) and their types come from PostgreSQL.
    let rows = tier
        .query("SELECT name FROM remote_t WHERE id = $1 OR amount < $2", &[&2i32, &rust_decimal_free_numeric()])
        .unwrap();
    let got: Vec<Option<String>> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(got.len(), 2);
    let rows = tier.query("SELECT name FROM remote_t WHERE id = $1", &[&3i32]).unwrap();
    assert_eq!(rows[0].get::<_, String>(0), "thr'ee");
    // Row limits (portals fetched in pieces) behave as locally.
    let mut txn_free = srv.client();
    let rows: Vec<i32> = txn_free.query(q, &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(rows, vec![1, 2, 3]);
    // psql, simple protocol, text.
    let out = common::psql(&srv, "SELECT id, name, amount FROM remote_t ORDER BY id;\n", &["-A", "-t"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1|one|1.50\n2|two|\n3|thr'ee|-7.25\n");
    // PostgreSQL's errors come back with their SQLSTATE.
    let e = tier.simple_query("SELECT id / 0 FROM remote_t").unwrap_err();
    assert_eq!(code(&e), "22012");
    let e = tier.query("SELECT nosuch FROM remote_t", &[]).unwrap_err();
    assert_eq!(code(&e), "42703");
    // The session still works.
    assert_eq!(text_rows(&mut tier, "SELECT count(*) FROM remote_t"), vec![vec![Some("3".to_owned())]]);
}

/// -7 as a numeric parameter without a decimal crate: PostgreSQL's binary
/// numeric (ndigits 1, weight 0, sign negative, dscale 0, digit 7).
fn rust_decimal_free_numeric() -> common::Raw {
    common::Raw(vec![0, 1, 0, 0, 0x40, 0, 0, 0, 0, 7])
}

#[test]
fn reads_mode_refuses_writes_and_ddl_never_passes() {
    let (srv, mut pg, _) = setup("refuse", "reads");
    let mut tier = srv.client();
    for sql in [
        "INSERT INTO remote_t VALUES (9, 'x', 0, NULL)",
        "UPDATE remote_t SET name = 'x'",
        "DELETE FROM remote_t",
        "SELECT * FROM remote_t FOR UPDATE",
        "MERGE INTO remote_t t USING (VALUES (1)) AS s(id) ON t.id = s.id WHEN MATCHED THEN DELETE",
    ] {
        let e = tier.simple_query(sql).unwrap_err();
        assert_eq!(code(&e), "25006", "{sql}: {e}");
        let e = tier.execute(sql, &[]).unwrap_err();
        assert_eq!(code(&e), "25006", "{sql}: {e}");
    }
    for sql in [
        "DROP TABLE remote_t",
        "ALTER TABLE remote_t ADD COLUMN extra int",
        "TRUNCATE remote_t",
        "CREATE INDEX remote_i ON remote_t (name)",
    ] {
        let e = tier.simple_query(sql).unwrap_err();
        assert_eq!(code(&e), "0A000", "{sql}: {e}");
        let db = e.as_db_error().unwrap();
        // ALTER TABLE and TRUNCATE pgtier refuses before looking the table up.
        assert!(
            db.message().contains("DDL is not passed through") || db.message().ends_with("is not supported"),
            "{sql}: {db:?}"
        );
    }
    // PostgreSQL is untouched.
    assert_eq!(
        text_rows(&mut pg, "SELECT count(*) FROM information_schema.columns WHERE table_name = 'remote_t'"),
        vec![vec![Some("4".to_owned())]]
    );
    assert_eq!(
        text_rows(&mut pg, "SELECT count(*) FROM pg_indexes WHERE tablename = 'remote_t'"),
        vec![vec![Some("1".to_owned())]]
    );
    assert_eq!(text_rows(&mut pg, "SELECT count(*) FROM remote_t"), vec![vec![Some("3".to_owned())]]);
    // A volatile function that writes is refused by PostgreSQL itself (the
    // pooled connections are read-only in this mode).
    pg.batch_execute("CREATE SEQUENCE remote_s").unwrap();
    let e = tier.simple_query("SELECT nextval('remote_s') FROM remote_t").unwrap_err();
    assert_eq!(code(&e), "25006", "{e}");
}

#[test]
fn all_mode_writes_reach_postgres() {
    let (srv, mut pg, _) = setup("all", "all");
    let mut tier = srv.client();
    assert_eq!(tier.execute("INSERT INTO remote_t VALUES ($1, $2, 2.5, NULL)", &[&10i32, &"ten"]).unwrap(), 1);
    let msgs = tier.simple_query("UPDATE remote_t SET name = upper(name) WHERE id <= 2").unwrap();
    assert!(matches!(msgs.last(), Some(postgres::SimpleQueryMessage::CommandComplete(2))));
    assert_eq!(tier.execute("DELETE FROM remote_t WHERE id = 3", &[]).unwrap(), 1);
    // MERGE is a write like the others (it was refused as "other").
    let merge = "MERGE INTO remote_t t USING (VALUES (2, 'two again'), (11, 'eleven')) AS s(id, name) ON t.id = s.id \
                 WHEN MATCHED THEN UPDATE SET name = s.name WHEN NOT MATCHED THEN INSERT (id, name) VALUES (s.id, s.name)";
    assert_eq!(tier.execute(merge, &[]).unwrap(), 2);
    assert_eq!(
        text_rows(&mut pg, "SELECT id, name FROM remote_t ORDER BY id"),
        vec![
            vec![Some("1".into()), Some("ONE".into())],
            vec![Some("2".into()), Some("two again".into())],
            vec![Some("10".into()), Some("ten".into())],
            vec![Some("11".into()), Some("eleven".into())],
        ]
    );
    // PostgreSQL's constraint errors come back as they are.
    let e = tier.execute("INSERT INTO remote_t VALUES (1, 'dup', 0, NULL)", &[]).unwrap_err();
    assert_eq!(code(&e), "23505");
    assert_eq!(e.as_db_error().unwrap().constraint(), Some("remote_t_pkey"));
    // DDL is refused in this mode too.
    let e = tier.simple_query("DROP TABLE remote_t").unwrap_err();
    assert_eq!(code(&e), "0A000");
    // A sequence no cached column draws from is PostgreSQL's: nextval passes
    // through, and currval answers in the block whose connection drew it.
    pg.batch_execute("CREATE SEQUENCE remote_s").unwrap();
    let mut block = tier.transaction().unwrap();
    assert_eq!(block.query_one("SELECT nextval('remote_s')", &[]).unwrap().get::<_, i64>(0), 1);
    assert_eq!(block.query_one("SELECT currval('remote_s')", &[]).unwrap().get::<_, i64>(0), 1);
    block.commit().unwrap();
    assert_eq!(pg.query_one("SELECT nextval('remote_s')", &[]).unwrap().get::<_, i64>(0), 2);
}

fn count(client: &mut postgres::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).unwrap().get(0)
}

/// Inside a transaction block, passthrough statements run in one
/// PostgreSQL transaction that commits or rolls back with pgtier's block:
/// PostgreSQL's part first, so its failing COMMIT undoes pgtier's part too.
#[test]
fn passthrough_in_a_block_commits_and_rolls_back_with_it() {
    let (srv, mut pg, _) = setup("block", "all");
    pg.batch_execute("CREATE TABLE remote_d (id int, CONSTRAINT remote_d_u UNIQUE (id) DEFERRABLE INITIALLY DEFERRED); INSERT INTO remote_d VALUES (1)").unwrap();
    let mut tier = srv.client();
    tier.batch_execute("CREATE TABLE loc (id int PRIMARY KEY, v text)").unwrap();
    let local =
        |tier: &mut postgres::Client, id: i32| count(tier, &format!("SELECT count(*) FROM loc WHERE id = {id}"));
    let remote =
        |pg: &mut postgres::Client, id: i32| count(pg, &format!("SELECT count(*) FROM remote_t WHERE id = {id}"));

    // Commit: both parts land; until then PostgreSQL's part is invisible to
    // others and visible to the block itself.
    let mut txn = tier.transaction().unwrap();
    txn.execute("INSERT INTO remote_t VALUES ($1, 'twenty', 0, NULL)", &[&20i32]).unwrap();
    txn.execute("INSERT INTO loc VALUES (1, 'x')", &[]).unwrap();
    assert_eq!(remote(&mut pg, 20), 0, "uncommitted passthrough write visible outside the block");
    let name: String = txn.query_one("SELECT name FROM remote_t WHERE id = $1", &[&20i32]).unwrap().get(0);
    assert_eq!(name, "twenty");
    txn.commit().unwrap();
    assert_eq!((remote(&mut pg, 20), local(&mut tier, 1)), (1, 1));

    // Rollback: neither part lands.
    let mut txn = tier.transaction().unwrap();
    txn.execute("INSERT INTO remote_t VALUES (21, 'x', 0, NULL)", &[]).unwrap();
    txn.execute("INSERT INTO loc VALUES (2, 'x')", &[]).unwrap();
    txn.rollback().unwrap();
    assert_eq!((remote(&mut pg, 21), local(&mut tier, 2)), (0, 0));

    // PostgreSQL's COMMIT fails (a deferred unique check): pgtier's part is
    // rolled back too, the error is PostgreSQL's, the session goes on.
    let mut txn = tier.transaction().unwrap();
    txn.execute("INSERT INTO remote_d VALUES (1)", &[]).unwrap();
    txn.execute("INSERT INTO loc VALUES (3, 'x')", &[]).unwrap();
    let e = txn.commit().unwrap_err();
    assert_eq!(code(&e), "23505", "{e}");
    assert_eq!(local(&mut tier, 3), 0, "pgtier committed although PostgreSQL's part failed");
    assert_eq!(count(&mut pg, "SELECT count(*) FROM remote_d"), 1);

    // A multi-statement Query is one block as well.
    tier.simple_query("BEGIN; INSERT INTO remote_t VALUES (22, 'x', 0, NULL); INSERT INTO loc VALUES (4, 'x'); COMMIT")
        .unwrap();
    assert_eq!((remote(&mut pg, 22), local(&mut tier, 4)), (1, 1));

    // A failing passthrough statement fails the block (25P02 after it).
    let mut txn = tier.transaction().unwrap();
    txn.execute("INSERT INTO loc VALUES (5, 'x')", &[]).unwrap();
    assert_eq!(code(&txn.execute("INSERT INTO remote_t VALUES (1, 'dup', 0, NULL)", &[]).unwrap_err()), "23505");
    assert_eq!(code(&txn.execute("INSERT INTO loc VALUES (6, 'x')", &[]).unwrap_err()), "25P02");
    txn.rollback().unwrap();
    assert_eq!(local(&mut tier, 5), 0);

    // A client gone mid-block: PostgreSQL's part is rolled back and the
    // connection goes back to the pool (2 connections; a leak would make
    // the blocks below wait 5 s and fail with 53300).
    let mut gone = srv.client();
    gone.batch_execute("BEGIN; INSERT INTO remote_t VALUES (23, 'x', 0, NULL)").unwrap();
    drop(gone);
    for id in 30..34 {
        let mut txn = tier.transaction().unwrap();
        txn.execute("INSERT INTO remote_t VALUES ($1, 'x', 0, NULL)", &[&id]).unwrap();
        txn.commit().unwrap();
    }
    assert_eq!(remote(&mut pg, 23), 0, "the gone client's passthrough write was committed");
    assert_eq!(count(&mut pg, "SELECT count(*) FROM remote_t WHERE id >= 30"), 4);
}

/// A block holds one backend connection, and its extended-protocol Parses
/// use it too: with a pool of one, a block of several distinct passthrough
/// statements must not wait for a second connection (53300 after 5 s).
#[test]
fn a_block_needs_one_backend_connection() {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("pt_one_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&url).unwrap();
    pg.batch_execute(&format!("{REMOTE_DDL}; {REMOTE_ROWS}")).unwrap();
    let srv = common::start_with(&format!("[backend]\nurl = {url:?}\npool_size = 1\n[passthrough]\nmode = \"all\"\n"));
    let mut tier = srv.client();
    let started = std::time::Instant::now();
    let mut txn = tier.transaction().unwrap();
    txn.execute("INSERT INTO remote_t VALUES ($1, 'a', 0, NULL)", &[&40i32]).unwrap();
    assert_eq!(txn.query("SELECT id FROM remote_t WHERE id >= $1", &[&40i32]).unwrap().len(), 1);
    txn.execute("UPDATE remote_t SET name = $1 WHERE id = $2", &[&"b", &40i32]).unwrap();
    txn.commit().unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(4), "the block waited for the pool");
    assert_eq!(text_rows(&mut pg, "SELECT name FROM remote_t WHERE id = 40"), vec![vec![Some("b".to_owned())]]);
}

#[test]
fn a_table_pgtier_holds_is_never_passed_through() {
    let (srv, mut pg, _) = setup("held", "all");
    pg.batch_execute("CREATE TABLE dup (id int PRIMARY KEY, v text); INSERT INTO dup VALUES (1, 'postgres')").unwrap();
    let mut tier = srv.client();
    tier.batch_execute(
        "CREATE TABLE dup (id int PRIMARY KEY, v text); INSERT INTO dup VALUES (1, 'pgtier'), (2, 'pgtier')",
    )
    .unwrap();
    assert_eq!(
        text_rows(&mut tier, "SELECT v FROM dup ORDER BY id"),
        vec![vec![Some("pgtier".into())], vec![Some("pgtier".into())]]
    );
    let rows = tier.query("SELECT v FROM dup WHERE id = $1", &[&1i32]).unwrap();
    assert_eq!(rows[0].get::<_, String>(0), "pgtier");
    tier.execute("UPDATE dup SET v = 'changed'", &[]).unwrap();
    assert_eq!(text_rows(&mut pg, "SELECT v FROM dup"), vec![vec![Some("postgres".into())]]);
    // A statement naming both a held table and an unknown one is refused,
    // not sent (PostgreSQL would answer with its own copy of dup).
    let e = tier.simple_query("SELECT * FROM dup JOIN remote_t USING (id)").unwrap_err();
    assert_eq!(code(&e), "0A000", "{e}");
    assert!(e.as_db_error().unwrap().message().contains("\"dup\""), "{e}");
}

#[test]
fn backend_down_is_a_clear_error_and_the_session_goes_on() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let srv = common::start_with(&format!(
        "[backend]\nurl = \"postgresql://someone:secret-pw@127.0.0.1:{port}/db?connect_timeout=2\"\n[passthrough]\nmode = \"reads\"\n"
    ));
    let mut tier = srv.client();
    for _ in 0..3 {
        let e = tier.simple_query("SELECT * FROM remote_t").unwrap_err();
        assert_eq!(code(&e), "08001", "{e}");
        let msg = e.as_db_error().unwrap().message().to_owned();
        assert!(msg.contains(&format!("127.0.0.1:{port}")), "{msg}");
        assert!(!msg.contains("secret-pw"), "password leaked: {msg}");
        let e = tier.query("SELECT * FROM remote_t WHERE id = $1", &[&1i32]).unwrap_err();
        assert_eq!(code(&e), "08001", "{e}");
    }
    tier.batch_execute("CREATE TABLE here (id int PRIMARY KEY); INSERT INTO here VALUES (1)").unwrap();
    assert_eq!(text_rows(&mut tier, "SELECT id FROM here"), vec![vec![Some("1".into())]]);
}

#[test]
fn a_backend_restart_drops_the_pooled_connection_and_recovers() {
    let (srv, pg, url) = setup("restart", "reads");
    drop(pg);
    let mut tier = srv.client();
    assert_eq!(text_rows(&mut tier, "SELECT count(*) FROM remote_t"), vec![vec![Some("3".to_owned())]]);
    // Kill the pooled backend connection from PostgreSQL's side. Only this
    // test's database: the cluster is shared with the tests running beside
    // this one, whose pooled connections carry the same application name.
    let mut admin = pgtier_backend::connect(&url).unwrap();
    admin
        .batch_execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = 'pgtier-passthrough' AND datname = current_database()",
        )
        .unwrap();
    let e = tier.simple_query("SELECT count(*) FROM remote_t").unwrap_err();
    assert!(["08006", "57P01"].contains(&code(&e).as_str()), "{e}");
    // The next statement gets a fresh connection.
    assert_eq!(text_rows(&mut tier, "SELECT count(*) FROM remote_t"), vec![vec![Some("3".to_owned())]]);
}

#[test]
fn off_keeps_undefined_table() {
    let srv = common::start();
    let mut tier = srv.client();
    let e = tier.simple_query("SELECT * FROM remote_t").unwrap_err();
    assert_eq!(code(&e), "42P01");
    let e = tier.query("SELECT * FROM remote_t", &[]).unwrap_err();
    assert_eq!(code(&e), "42P01");
}

/// The extended protocol as drivers other than `postgres` use it: a text
/// parameter, one result column in text and one in binary (PostgreSQL
/// produces both), and Execute with a row limit (PortalSuspended).
#[test]
fn extended_protocol_text_and_binary_formats_and_row_limits() {
    use common::{cstr, message, startup_packet};
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("pt_raw_{}", std::process::id())).unwrap();
    pgtier_backend::connect(&url).unwrap().batch_execute(&format!("{REMOTE_DDL}; {REMOTE_ROWS}")).unwrap();
    let srv = common::start_with(&format!(
        "[backend]\nurl = {url:?}\n[passthrough]\nmode = \"reads\"\n[auth]\nmethod = \"trust\"\n"
    ));
    let parse = |sql: &str| {
        let mut b = cstr("");
        b.extend(cstr(sql));
        b.extend(0i16.to_be_bytes());
        message(b'P', &b)
    };
    // Bind "" to "", one text parameter "1", results: text, binary.
    let mut bind = cstr("");
    bind.extend(cstr(""));
    bind.extend(1i16.to_be_bytes());
    bind.extend(0i16.to_be_bytes());
    bind.extend(1i16.to_be_bytes());
    bind.extend(1i32.to_be_bytes());
    bind.push(b'1');
    bind.extend(2i16.to_be_bytes());
    bind.extend(0i16.to_be_bytes());
    bind.extend(1i16.to_be_bytes());
    let execute = |max_rows: i32| {
        let mut b = cstr("");
        b.extend(max_rows.to_be_bytes());
        message(b'E', &b)
    };
    let describe_portal = message(b'D', &[b'P', 0]);
    let sync = message(b'S', &[]);
    let mut bind_all = cstr("");
    bind_all.extend(cstr(""));
    bind_all.extend([0u8; 6]);
    let mut bytes = startup_packet(common::USER);
    for m in [
        parse("SELECT amount, id FROM remote_t WHERE id = $1"),
        message(b'B', &bind),
        describe_portal.clone(),
        execute(0),
        sync.clone(),
        parse("SELECT id FROM remote_t ORDER BY id"),
        message(b'B', &bind_all),
        execute(2),
        execute(2),
        sync,
        message(b'X', &[]),
    ] {
        bytes.extend(m);
    }
    let reply = common::exchange(&srv, &bytes);
    assert!(common::sqlstates(&reply).is_empty(), "{:?}", common::sqlstates(&reply));
    let mut msgs = Vec::new();
    let mut i = 0;
    while i + 5 <= reply.len() {
        let len = i32::from_be_bytes(reply[i + 1..i + 5].try_into().unwrap()) as usize;
        msgs.push((reply[i], reply[i + 5..i + 1 + len].to_vec()));
        i += 1 + len;
    }
    let after_auth: Vec<u8> = msgs.iter().map(|m| m.0).skip_while(|&t| t != b'Z').skip(1).collect();
    assert_eq!(String::from_utf8_lossy(&after_auth), "12TDCZ12DDsDCZ");
    // RowDescription: numeric (1700) in text, int4 (23) in binary.
    let row_desc = &msgs.iter().find(|m| m.0 == b'T').unwrap().1;
    assert_eq!(&row_desc[..2], &2i16.to_be_bytes());
    let first = msgs.iter().find(|m| m.0 == b'D').unwrap();
    let mut expected = 2i16.to_be_bytes().to_vec();
    expected.extend(4i32.to_be_bytes());
    expected.extend(b"1.50");
    expected.extend(4i32.to_be_bytes());
    expected.extend(1i32.to_be_bytes());
    assert_eq!(first.1, expected);
    let tags: Vec<String> = msgs
        .iter()
        .filter(|m| m.0 == b'C')
        .map(|m| String::from_utf8_lossy(&m.1).trim_end_matches('\0').to_owned())
        .collect();
    assert_eq!(tags, vec!["SELECT 1", "SELECT 3"]);
}

/// PostgreSQL's part of a block would not follow a ROLLBACK TO: savepoints
/// in a block with passthrough statements, and passthrough statements
/// after a SAVEPOINT, are refused (0A000); the block fails as on any error.
#[test]
fn savepoints_and_passthrough_do_not_mix() {
    let (srv, _pg, _) = setup("savepoint", "all");
    let mut tier = srv.client();
    tier.batch_execute("CREATE TABLE loc (id int PRIMARY KEY)").unwrap();
    tier.batch_execute("BEGIN; INSERT INTO loc VALUES (1)").unwrap();
    assert_eq!(count(&mut tier, "SELECT count(*) FROM remote_t"), 3);
    let e = tier.simple_query("SAVEPOINT a").unwrap_err();
    assert_eq!(code(&e), "0A000", "{e}");
    tier.batch_execute("ROLLBACK").unwrap();

    tier.batch_execute("BEGIN; SAVEPOINT a; INSERT INTO loc VALUES (2)").unwrap();
    let e = tier.simple_query("SELECT count(*) FROM remote_t").unwrap_err();
    assert_eq!(code(&e), "0A000", "{e}");
    // The local part rolls back to the savepoint; without a passthrough
    // statement in the block, savepoints work.
    tier.batch_execute("ROLLBACK TO a; INSERT INTO loc VALUES (3); COMMIT").unwrap();
    assert_eq!(count(&mut tier, "SELECT count(*) FROM loc"), 1);
    assert_eq!(count(&mut tier, "SELECT count(*) FROM loc WHERE id = 3"), 1);
}
