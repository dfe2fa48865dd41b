//! The logical replication client against a private PostgreSQL: slots with
//! exported snapshots, every pgoutput change kind decoded and compared with
//! what PostgreSQL stored, keepalives and status updates moving the slot,
//! errors with PostgreSQL's SQLSTATEs, and the decoder fed corrupted real
//! messages.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::time::{Duration, Instant};

use pgtier_backend::connect::connect;
use pgtier_backend::harness::{ClusterOptions, PrivateCluster, shared_cluster};
use pgtier_backend::replication::{
    PgLsn, Relation, ReplicationConnection, ReplicationEvent, ReplicationStream, TupleValue, decode_pgoutput,
};
use pgtier_backend::{BackendConfig, ConnectParams};

const WAIT: Duration = Duration::from_secs(30);

fn params(url: &str) -> ConnectParams {
    BackendConfig { url: Some(url.to_owned()), ..BackendConfig::default() }.resolve().unwrap()
}

fn text(value: &str) -> TupleValue {
    TupleValue::Text(value.to_owned())
}

/// Events of the next transaction, Begin to Commit; Relation and Type
/// messages go to `relations`, keepalives are skipped.
fn next_transaction(stream: &mut ReplicationStream, relations: &mut HashMap<u32, Relation>) -> Vec<ReplicationEvent> {
    let deadline = Instant::now() + WAIT;
    let mut events = Vec::new();
    while Instant::now() < deadline {
        let Some(event) = stream.next_event(Duration::from_millis(500)).unwrap() else { continue };
        match event {
            ReplicationEvent::Relation(relation) => {
                relations.insert(relation.oid, relation);
            }
            ReplicationEvent::Keepalive { .. } | ReplicationEvent::Type { .. } => {}
            ReplicationEvent::Commit { .. } => {
                events.push(event);
                return events;
            }
            event => events.push(event),
        }
    }
    panic!("no complete transaction within {WAIT:?}; got {events:?}");
}

/// Debug text with long values cut, so a failure stays readable.
fn shown(events: &[ReplicationEvent]) -> String {
    let text = format!("{events:?}");
    let mut out = String::new();
    for (index, piece) in text.split('"').enumerate() {
        if index > 0 {
            out.push('"');
        }
        match piece.char_indices().nth(60) {
            Some((cut, _)) => out.push_str(&format!("{}…({} bytes)", &piece[..cut], piece.len())),
            None => out.push_str(piece),
        }
    }
    out
}

fn assert_events(actual: Vec<ReplicationEvent>, expected: &[ReplicationEvent]) {
    assert!(actual == expected, "got {}\nexpected {}", shown(&actual), shown(expected));
}

/// The changes of the transaction, after checking its Begin and Commit agree.
fn changes(events: Vec<ReplicationEvent>) -> Vec<ReplicationEvent> {
    let (Some(ReplicationEvent::Begin { final_lsn, commit_time_us: begin_time, .. }), Some(commit)) =
        (events.first().cloned(), events.last().cloned())
    else {
        panic!("not a transaction: {events:?}");
    };
    let ReplicationEvent::Commit { commit_lsn, end_lsn, commit_time_us } = commit else {
        panic!("no commit: {events:?}");
    };
    assert_eq!(final_lsn, commit_lsn);
    assert!(end_lsn > commit_lsn);
    assert_eq!(begin_time, commit_time_us);
    events[1..events.len() - 1].to_vec()
}

fn oid(client: &mut postgres::Client, table: &str) -> u32 {
    client.query_one(&format!("SELECT '{table}'::regclass::oid"), &[]).unwrap().get(0)
}

/// Every column of the table's rows (ordered by the first column) as PostgreSQL's text output.
fn rows_as_text(client: &mut postgres::Client, table: &str) -> Vec<Vec<TupleValue>> {
    let mut rows = Vec::new();
    for message in client.simple_query(&format!("SELECT * FROM {table} ORDER BY 1")).unwrap() {
        if let postgres::SimpleQueryMessage::Row(row) = message {
            rows.push((0..row.len()).map(|i| row.get(i).map_or(TupleValue::Null, text)).collect());
        }
    }
    rows
}

#[test]
fn streams_every_change_kind_from_an_exported_snapshot() {
    let url = shared_cluster().unwrap().create_database("repl_changes").unwrap();
    let mut client = connect(&url).unwrap();
    let columns: Vec<String> = (1..=40).map(|i| format!("c{i} {}", if i % 2 == 0 { "text" } else { "int" })).collect();
    client
        .batch_execute(&format!(
            "CREATE TABLE t (id int PRIMARY KEY, v text);
             CREATE TABLE f (id int, v text);
             ALTER TABLE f REPLICA IDENTITY FULL;
             CREATE TABLE big (id int PRIMARY KEY, note text, body text);
             CREATE TABLE wide (id int PRIMARY KEY, {});
             CREATE TABLE unpublished (id int);
             CREATE PUBLICATION p FOR TABLE t, f, big, wide;
             INSERT INTO t VALUES (1, 'before');",
            columns.join(", ")
        ))
        .unwrap();
    let t = oid(&mut client, "t");
    let f = oid(&mut client, "f");

    let mut connection = ReplicationConnection::connect(&params(&url)).unwrap();
    let slot = connection.create_logical_slot("changes", false, true).unwrap();
    assert_eq!(slot.name, "changes");
    let snapshot = slot.snapshot.clone().unwrap();
    client.batch_execute("INSERT INTO t VALUES (2, 'after')").unwrap();

    // The snapshot is the database as of the slot's consistent point.
    let mut reader = connect(&url).unwrap();
    let mut transaction =
        reader.build_transaction().isolation_level(postgres::IsolationLevel::RepeatableRead).start().unwrap();
    transaction.batch_execute(&format!("SET TRANSACTION SNAPSHOT '{snapshot}'")).unwrap();
    let seen: Vec<i32> =
        transaction.query("SELECT id FROM t ORDER BY id", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(seen, [1]);
    transaction.commit().unwrap();

    let system = connection.simple_query("IDENTIFY_SYSTEM").unwrap();
    assert_eq!(system.len(), 1);
    let position: PgLsn = system[0][2].as_deref().unwrap().parse().unwrap();
    assert!(position >= slot.consistent_point, "{position} < {}", slot.consistent_point);
    assert_eq!(system[0][3].as_deref(), Some("repl_changes"));

    let long_body: String =
        (0..2000).map(|i| format!("{:x}", (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))).collect();
    let wide_values: Vec<String> = (1..=40)
        .map(|i| {
            if i % 3 == 0 {
                "NULL".to_owned()
            } else if i % 2 == 0 {
                format!("'v{i} ünï'")
            } else {
                i.to_string()
            }
        })
        .collect();
    // One call per transaction: a multi-statement simple query is one transaction.
    let statements = [
        "BEGIN;
         UPDATE t SET v = 'é ☃ 日本 ''q''' WHERE id = 2;
         UPDATE t SET id = 3 WHERE id = 2;
         DELETE FROM t WHERE id = 1;
         COMMIT;"
            .to_owned(),
        "INSERT INTO unpublished VALUES (1)".to_owned(),
        "BEGIN; INSERT INTO f VALUES (1, NULL); UPDATE f SET v = 'x'; DELETE FROM f; COMMIT;".to_owned(),
        format!("INSERT INTO big VALUES (1, NULL, '{long_body}')"),
        "UPDATE big SET note = 'n'".to_owned(),
        format!("INSERT INTO wide VALUES (1, {})", wide_values.join(", ")),
        "TRUNCATE f RESTART IDENTITY".to_owned(),
        "SELECT pg_logical_emit_message(true, 'pgtier', 'hello\\000'::bytea)".to_owned(),
    ];
    for sql in statements {
        client.batch_execute(&sql).unwrap();
    }
    let mut origin_client = connect(&url).unwrap();
    origin_client
        .batch_execute(
            "SELECT pg_replication_origin_create('pgtier_origin');
             SELECT pg_replication_origin_session_setup('pgtier_origin');
             INSERT INTO t VALUES (10, 'from origin');",
        )
        .unwrap();

    let mut stream = connection.start_logical("changes", PgLsn(0), &["p".to_owned()]).unwrap();
    let mut relations = HashMap::new();
    assert_events(
        changes(next_transaction(&mut stream, &mut relations)),
        &[ReplicationEvent::Insert { relation: t, new: vec![text("2"), text("after")] }],
    );
    let relation = &relations[&t];
    assert_eq!((relation.schema.as_str(), relation.name.as_str(), relation.replica_identity), ("public", "t", b'd'));
    let names: Vec<(&str, u32, bool)> =
        relation.columns.iter().map(|c| (c.name.as_str(), c.type_oid, c.part_of_key)).collect();
    assert_eq!(names, [("id", 23, true), ("v", 25, false)]);

    let unicode = text("é ☃ 日本 'q'");
    assert_events(
        changes(next_transaction(&mut stream, &mut relations)),
        &[
            ReplicationEvent::Update { relation: t, old: None, new: vec![text("2"), unicode.clone()] },
            ReplicationEvent::Update {
                relation: t,
                old: Some(vec![text("2"), TupleValue::Null]),
                new: vec![text("3"), unicode.clone()],
            },
            ReplicationEvent::Delete { relation: t, old: vec![text("1"), TupleValue::Null] },
        ],
    );

    assert_events(
        changes(next_transaction(&mut stream, &mut relations)),
        &[
            ReplicationEvent::Insert { relation: f, new: vec![text("1"), TupleValue::Null] },
            ReplicationEvent::Update {
                relation: f,
                old: Some(vec![text("1"), TupleValue::Null]),
                new: vec![text("1"), text("x")],
            },
            ReplicationEvent::Delete { relation: f, old: vec![text("1"), text("x")] },
        ],
    );
    assert_eq!(relations[&f].replica_identity, b'f');
    assert!(relations[&f].columns.iter().all(|c| c.part_of_key));

    let big = oid(&mut client, "big");
    let stored = rows_as_text(&mut client, "big");
    assert_events(
        changes(next_transaction(&mut stream, &mut relations)),
        &[ReplicationEvent::Insert { relation: big, new: vec![text("1"), TupleValue::Null, text(&long_body)] }],
    );
    assert_events(
        changes(next_transaction(&mut stream, &mut relations)),
        &[ReplicationEvent::Update {
            relation: big,
            old: None,
            new: vec![text("1"), text("n"), TupleValue::UnchangedToast],
        }],
    );
    assert_eq!(stored, [vec![text("1"), text("n"), text(&long_body)]]);

    let wide = oid(&mut client, "wide");
    let stored = rows_as_text(&mut client, "wide");
    assert_eq!(stored[0].iter().filter(|v| **v == TupleValue::Null).count(), 13);
    assert_events(
        changes(next_transaction(&mut stream, &mut relations)),
        &[ReplicationEvent::Insert { relation: wide, new: stored[0].clone() }],
    );
    assert_eq!(relations[&wide].columns.len(), 41);

    assert_events(
        changes(next_transaction(&mut stream, &mut relations)),
        &[ReplicationEvent::Truncate { relations: vec![f], cascade: false, restart_identity: true }],
    );
    assert_events(
        changes(next_transaction(&mut stream, &mut relations)),
        &[ReplicationEvent::Message { transactional: true, prefix: "pgtier".to_owned(), content: b"hello\0".to_vec() }],
    );

    let with_origin = changes(next_transaction(&mut stream, &mut relations));
    let [ReplicationEvent::Origin { name, .. }, insert] = with_origin.as_slice() else {
        panic!("no origin: {with_origin:?}");
    };
    assert_eq!(name, "pgtier_origin");
    assert_eq!(insert, &ReplicationEvent::Insert { relation: t, new: vec![text("10"), text("from origin")] });
    assert!(stream.last_received() > slot.consistent_point);

    stream.close().unwrap();
    client.batch_execute("SELECT pg_drop_replication_slot('changes')").unwrap();
}

fn confirmed_flush(client: &mut postgres::Client, slot: &str) -> PgLsn {
    let lsn: String = client
        .query_one("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", &[&slot])
        .unwrap()
        .get(0);
    lsn.parse().unwrap()
}

/// The next keepalive whose wal_end is past `after`, answering none.
fn keepalive_after(stream: &mut ReplicationStream, after: PgLsn) -> PgLsn {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if let Some(ReplicationEvent::Keepalive { wal_end, .. }) =
            stream.next_event(Duration::from_millis(500)).unwrap()
            && wal_end > after
        {
            return wal_end;
        }
    }
    panic!("no keepalive past {after} within {WAIT:?}");
}

#[test]
fn acknowledged_keepalives_advance_an_idle_slot() {
    let url = shared_cluster().unwrap().create_database("repl_keepalive").unwrap();
    let mut client = connect(&url).unwrap();
    client
        .batch_execute("CREATE TABLE t (id int); CREATE TABLE other (id int); CREATE PUBLICATION p FOR TABLE t")
        .unwrap();
    let mut connection = ReplicationConnection::connect(&params(&url)).unwrap();
    let slot = connection.create_logical_slot("idle", false, false).unwrap();
    assert_eq!(slot.snapshot, None);
    let mut stream = connection.start_logical("idle", PgLsn(0), &["p".to_owned()]).unwrap();
    let first = keepalive_after(&mut stream, PgLsn(0));
    stream.send_status(first, first, first).unwrap();

    // WAL that decodes to nothing for this publication.
    client.batch_execute("INSERT INTO other SELECT generate_series(1, 1000)").unwrap();
    let start = confirmed_flush(&mut client, "idle");
    let wal_end = keepalive_after(&mut stream, first.max(start));
    stream.send_status(wal_end, wal_end, wal_end).unwrap();
    let deadline = Instant::now() + WAIT;
    while confirmed_flush(&mut client, "idle") < wal_end {
        assert!(Instant::now() < deadline, "confirmed_flush_lsn stayed below {wal_end}");
        stream.next_event(Duration::from_millis(100)).unwrap();
    }
    assert!(wal_end > start);
    assert!(stream.last_received() <= wal_end);

    // Idle: next_event returns None at its timeout. Other tests' WAL makes
    // the walsender send keepalives, so quiet may take until they finish.
    let mut waited = None;
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        let began = Instant::now();
        match stream.next_event(Duration::from_millis(300)).unwrap() {
            None => {
                waited = Some(began.elapsed());
                break;
            }
            Some(event) => assert!(matches!(event, ReplicationEvent::Keepalive { .. }), "{event:?}"),
        }
    }
    let waited = waited.expect("the stream never went quiet");
    assert!(waited >= Duration::from_millis(290) && waited < Duration::from_secs(2), "{waited:?}");

    stream.close().unwrap();
    client.batch_execute("SELECT pg_drop_replication_slot('idle')").unwrap();
}

fn drop_slot_eventually(client: &mut postgres::Client, slot: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        match client.batch_execute(&format!("SELECT pg_drop_replication_slot('{slot}')")) {
            Ok(()) => return,
            Err(error) if Instant::now() < deadline => {
                assert_eq!(error.code().map(|c| c.code()), Some("55006"), "{error}");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(error) => panic!("{error}"),
        }
    }
}

#[test]
fn server_errors_keep_their_sqlstate() {
    let cluster = shared_cluster().unwrap();
    let url = cluster.create_database("repl_errors").unwrap();
    let mut client = connect(&url).unwrap();
    client.batch_execute("CREATE TABLE t (id int PRIMARY KEY); CREATE PUBLICATION p FOR TABLE t").unwrap();

    let mut connection = ReplicationConnection::connect(&params(&url)).unwrap();
    let error = connection.simple_query("SELECT 1/0").unwrap_err();
    assert_eq!(error.sqlstate(), "22012", "{error}");
    assert_eq!(connection.simple_query("SELECT 1, NULL").unwrap(), [vec![Some("1".to_owned()), None]]);
    assert_eq!(connection.create_logical_slot("Bad-Name", true, false).unwrap_err().sqlstate(), "42602");
    connection.create_logical_slot("busy", false, false).unwrap();
    let error = connection.create_logical_slot("busy", false, false).unwrap_err();
    assert_eq!(error.sqlstate(), "42710", "{error}");

    let missing = ReplicationConnection::connect(&params(&url)).unwrap();
    let error = missing.start_logical("nosuchslot", PgLsn(0), &["p".to_owned()]).err().unwrap();
    assert_eq!(error.sqlstate(), "42704", "{error}");

    let stream = connection.start_logical("busy", PgLsn(0), &["p".to_owned()]).unwrap();
    let pid = stream.backend_pid();
    let active: Option<i32> =
        client.query_one("SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'busy'", &[]).unwrap().get(0);
    assert_eq!(active, Some(pid));

    // A second consumer, and dropping the slot in use, are refused.
    let second = ReplicationConnection::connect(&params(&url)).unwrap();
    let error = second.start_logical("busy", PgLsn(0), &["p".to_owned()]).err().unwrap();
    assert_eq!(error.sqlstate(), "55006", "{error}");
    assert!(error.to_string().contains(&format!("is active for PID {pid}")), "{error}");
    let error = client.batch_execute("SELECT pg_drop_replication_slot('busy')").unwrap_err();
    assert_eq!(error.code().unwrap().code(), "55006");

    // Closed, the slot is free again.
    stream.close().unwrap();
    drop_slot_eventually(&mut client, "busy");

    // A walsender terminated while streaming: the error carries its SQLSTATE.
    let mut connection = ReplicationConnection::connect(&params(&url)).unwrap();
    connection.create_logical_slot("killed", false, false).unwrap();
    let mut stream = connection.start_logical("killed", PgLsn(0), &["p".to_owned()]).unwrap();
    client.execute("SELECT pg_terminate_backend($1)", &[&stream.backend_pid()]).unwrap();
    let deadline = Instant::now() + WAIT;
    let error = loop {
        match stream.next_event(Duration::from_millis(200)) {
            Err(error) => break error,
            Ok(_) => assert!(Instant::now() < deadline, "the stream outlived its walsender"),
        }
    };
    assert!(["57P01", "08006"].contains(&error.sqlstate()), "{error}");
    drop_slot_eventually(&mut client, "killed");

    // The Unix socket works as well as TCP.
    let socket_url =
        format!("postgresql://postgres@/repl_errors?host={}&port={}", cluster.socket_dir().display(), cluster.port());
    let mut local = ReplicationConnection::connect(&params(&socket_url)).unwrap();
    assert_eq!(local.simple_query("SHOW wal_level").unwrap(), [vec![Some("logical".to_owned())]]);
}

#[test]
fn passwords_are_checked_and_never_shown() {
    let password = "s3cret pw";
    let cluster =
        PrivateCluster::start(ClusterOptions { password: Some(password.to_owned()), ..ClusterOptions::default() })
            .unwrap();
    let mut connection = ReplicationConnection::connect(&params(&cluster.url())).unwrap();
    let slot = connection.create_logical_slot("scram", true, true).unwrap();
    assert!(slot.snapshot.is_some());

    let port = cluster.port();
    let error =
        ReplicationConnection::connect(&params(&format!("postgres://postgres:wrongpass@127.0.0.1:{port}/postgres")))
            .err()
            .unwrap();
    assert_eq!(error.sqlstate(), "28P01", "{error}");
    assert!(!format!("{error} {error:?}").contains("wrongpass"), "{error:?}");
    let error = ReplicationConnection::connect(&params(&format!("postgres://postgres@127.0.0.1:{port}/postgres")))
        .err()
        .unwrap();
    assert_eq!(error.sqlstate(), "28P01", "{error}");
}

/// Real pgoutput messages (from `pg_logical_slot_peek_binary_changes`) decode;
/// every truncation is an error, and random corruption never panics.
#[test]
fn decoder_survives_corrupted_real_messages() {
    let url = shared_cluster().unwrap().create_database("repl_fuzz").unwrap();
    let mut client = connect(&url).unwrap();
    client
        .batch_execute(
            // The test cluster commits asynchronously; the SQL decoding
            // functions read only flushed WAL.
            "SET synchronous_commit = on;
             CREATE TYPE mood AS ENUM ('ok', 'meh');
             CREATE TABLE t (id int PRIMARY KEY, v text, n numeric, m mood);
             CREATE TABLE f (id int, v text);
             ALTER TABLE f REPLICA IDENTITY FULL;
             CREATE PUBLICATION p FOR TABLE t, f;",
        )
        .unwrap();
    client.batch_execute("SELECT pg_create_logical_replication_slot('fuzz', 'pgoutput')").unwrap();
    client
        .batch_execute(
            "INSERT INTO t VALUES (1, 'a', 1.5), (2, NULL, NULL);
             UPDATE t SET v = 'é' WHERE id = 1;
             UPDATE t SET id = 5 WHERE id = 2;
             DELETE FROM t WHERE id = 1;
             INSERT INTO f VALUES (1, 'x');
             UPDATE f SET v = 'y';
             DELETE FROM f;
             TRUNCATE t, f;
             SELECT pg_logical_emit_message(true, 'p', 'content');",
        )
        .unwrap();
    client.batch_execute("SELECT pg_replication_origin_create('fuzz_origin')").unwrap();
    client.batch_execute("SELECT pg_replication_origin_session_setup('fuzz_origin')").unwrap();
    client.batch_execute("INSERT INTO t VALUES (7, 'o', 7, 'meh')").unwrap();
    client.batch_execute("SELECT pg_replication_origin_session_reset()").unwrap();
    let messages: Vec<Vec<u8>> = client
        .query(
            "SELECT data FROM pg_logical_slot_peek_binary_changes('fuzz', NULL, NULL,
                 'proto_version', '1', 'publication_names', 'p', 'messages', 'true')",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(messages.len() >= 15, "{}", messages.len());
    let mut kinds = std::collections::BTreeSet::new();
    for message in &messages {
        decode_pgoutput(message).unwrap_or_else(|e| panic!("{e}: {message:?}"));
        kinds.insert(message[0]);
        for cut in 0..message.len() {
            assert!(decode_pgoutput(&message[..cut]).is_err(), "{message:?} cut at {cut}");
        }
    }
    assert_eq!(kinds.into_iter().collect::<Vec<u8>>(), b"BCDIMORTUY");

    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..20_000 {
        let mut bytes = messages[round % messages.len()].clone();
        for _ in 0..1 + random() % 4 {
            let at = (random() as usize) % bytes.len();
            bytes[at] = random() as u8;
        }
        let _ = decode_pgoutput(&bytes);
        let noise: Vec<u8> = (0..random() % 64).map(|_| random() as u8).collect();
        let _ = decode_pgoutput(&noise);
    }
    client.batch_execute("SELECT pg_drop_replication_slot('fuzz')").unwrap();
}

/// md5 and cleartext logins, by lines put in front of the harness's pg_hba.conf.
#[test]
fn md5_and_cleartext_logins() {
    let cluster =
        PrivateCluster::start(ClusterOptions { password: Some("super pw".to_owned()), ..ClusterOptions::default() })
            .unwrap();
    let mut client = connect(&cluster.url()).unwrap();
    client
        .batch_execute(
            "SET password_encryption = 'md5';
             CREATE ROLE md5user LOGIN REPLICATION PASSWORD 'md5 pw';
             RESET password_encryption;
             CREATE ROLE clearuser LOGIN REPLICATION PASSWORD 'clear pw';",
        )
        .unwrap();
    let hba_path = cluster.data_dir().join("pg_hba.conf");
    let hba = std::fs::read_to_string(&hba_path).unwrap();
    let ours = "host all,replication md5user 127.0.0.1/32 md5\nhost all,replication clearuser 127.0.0.1/32 password\n";
    std::fs::write(&hba_path, format!("{ours}{hba}")).unwrap();
    client.batch_execute("SELECT pg_reload_conf()").unwrap();
    let methods: Vec<String> = client
        .query("SELECT auth_method FROM pg_hba_file_rules WHERE 'md5user' = ANY(user_name) OR 'clearuser' = ANY(user_name)", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(methods, ["md5", "password"]);

    let port = cluster.port();
    for (user, password) in [("md5user", "md5%20pw"), ("clearuser", "clear%20pw")] {
        let url = format!("postgres://{user}:{password}@127.0.0.1:{port}/postgres");
        let mut connection = ReplicationConnection::connect(&params(&url)).unwrap();
        let who = connection.simple_query("SELECT current_user").unwrap();
        assert_eq!(who, [vec![Some(user.to_owned())]]);
        let url = format!("postgres://{user}:nope@127.0.0.1:{port}/postgres");
        let error = ReplicationConnection::connect(&params(&url)).err().unwrap();
        assert_eq!(error.sqlstate(), "28P01", "{error}");
    }
}
