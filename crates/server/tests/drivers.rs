//! Real PostgreSQL clients against pgtier, differential against PostgreSQL:
//! psql (incl. `\d`), psycopg 3, pgJDBC, pgx and node-postgres each connect
//! with SCRAM-SHA-256, run prepared DML inside committed and rolled-back
//! transactions, read every supported type in text and binary form, and match
//! SQLSTATEs (23505, 42P01, 22012, 23502, 25P02, 42601). Each program prints a
//! normalized transcript; pgtier's must equal PostgreSQL's. One more, not
//! differential: SQLAlchemy over cached tables whose keys PostgreSQL
//! generates, on two pgtier nodes at once (`sqlalchemy_generated_keys_on_two_nodes`).
//! And Django 5.2's `migrate` and ORM CRUD (`django_migrate_and_crud`).
//!
//! The programs live in tests/drivers/ (README there); their toolchains and
//! packages come from scripts/ensure-clients.sh. A missing one fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::clients::{Client, assert_complete, assert_same};

/// Lines every transcript (PostgreSQL's first: it is the spec) must contain.
const SQLSTATES: [&str; 6] = ["23505", "42P01", "22012", "23502", "25P02", "42601"];

fn differential(client: Client, expected: &[&str]) {
    let mut expected_all: Vec<&str> = expected.to_vec();
    expected_all.extend(SQLSTATES);
    same_as_postgres(client, &expected_all);
}

/// PostgreSQL's transcript (with every `expected` line and exit 0) must
/// equal pgtier's.
fn same_as_postgres(client: Client, expected: &[&str]) {
    client.prepare();
    let postgres = support::start_postgres();
    let pg_transcript = client.run(&support::postgres_endpoint(&postgres));
    let mut expected_all: Vec<&str> = expected.to_vec();
    expected_all.push("exit: 0");
    assert_complete(client.name(), "PostgreSQL", &pg_transcript, &expected_all);

    let pgtier = support::start_pgtier("async");
    let tier_transcript = client.run(&pgtier.endpoint);
    pgtier.server.shutdown();
    assert_same(client.name(), &pg_transcript, &tier_transcript);
}

#[test]
fn psql() {
    differential(
        Client::Psql,
        &[
            "Table \"public.drv_psql_desc\"",
            "\"drv_psql_desc_pkey\" PRIMARY KEY, btree (id)",
            "\"drv_psql_desc_date\" btree (c_date, c_int2)",
            "c_numeric  | numeric(15,3)",
            "UPDATE 1",
            "DELETE 1",
            " after_rollback",
            "gset: 9223372036854775800 2024-02-29",
            "aborted block: 25P02",
            "done",
        ],
    );
}

#[test]
fn psycopg() {
    differential(
        Client::Python,
        &[
            "wrong password: rejected, says 'password authentication failed for user \"postgres\"': True",
            "after rollback: count=3",
            "update id=1: rowcount=1",
            "delete id=4: rowcount=1",
            "text row: int:1|int:32767|int:9223372036854775800|D123456789.125|0.2|",
            "binary row: int:1|int:32767|int:9223372036854775800|D123456789.125|0.20000000298023224|",
            "binary params: D12.35|",
            "aborted block binary: error 25P02",
            "after aborted block: ids=[1, 2, 3, 5]",
            "inner transaction: error 23505, status INTRANS",
            "failed inner: status INERROR",
            "after rollback to: status INTRANS",
            "after nested: \"outer\" ids=[1, 2, 3, 5, 8]",
            "done",
        ],
    );
}

/// SQLAlchemy 2's ORM on psycopg 3: create_all (the dialect's catalog
/// probes), batched INSERT ... RETURNING (insertmanyvalues), relationship
/// loading, joins, aggregates, bulk UPDATE/DELETE, cascades, begin_nested.
#[test]
fn sqlalchemy_orm() {
    same_as_postgres(
        Client::SqlAlchemy,
        &[
            "create_all again: ok",
            "ids: [1, 2, 3, 4, 5, 6]",
            "joinedload: c1:[]; c2:[1]; c3:[1, 2]; c4:[]; c5:[1]; c6:[1, 2]",
            "bulk update rowcount: 2",
            "after cascade delete: customers=5 orders=5 lines=7",
            "nested duplicate: 23505",
            "after nested: ['c1', 'c2', 'c3', 'c4', 'c6', 'inner', 'outer']",
            "fk violation: 23503",
            "division: 22012",
            "drop_all: ok",
            "done",
        ],
    );
}

/// Django's `migrate` of auth, admin, contenttypes and sessions (18
/// migrations: `_like` indexes with `varchar_pattern_ops`, ALTER COLUMN TYPE
/// of indexed columns, DEFERRABLE INITIALLY DEFERRED foreign keys), then CRUD
/// through the ORM, each into an empty database; a child row written before
/// its parent, and an orphan that fails only at COMMIT (deferred keys).
#[test]
fn django_migrate_and_crud() {
    same_as_postgres(
        Client::Django,
        &[
            "migrate | Applying auth.0001_initial... OK",
            "migrate | Applying sessions.0001_initial... OK",
            "auth_user indexes | ['auth_user_pkey', 'auth_user_username_6821ab7c_like', 'auth_user_username_key']",
            "duplicate username | IntegrityError | 23505",
            "deferred fk | True | True",
            "orphan insert | accepted until commit",
            "orphan commit | IntegrityError | 23503",
            "startswith | ['alice']",
            "log entry | bob | 1 | user | alice",
            "session | alice | [1, 2, 3] | 1",
            "updated | True | Builder",
            "session deleted | False",
            "users | ['alice']",
        ],
    );
}

#[test]
fn pgjdbc() {
    differential(
        Client::Java,
        &[
            "wrong password: error 28P01",
            "after rollback: count=3",
            "text row 2: Integer:1|Integer:32767|Long:9223372036854775800|BigDecimal:123456789.125|Float:0.2|",
            "binary row 2: Integer:1|Integer:32767|Long:9223372036854775800|BigDecimal:123456789.125|Float:0.2|",
            "binary aborted block: error 25P02",
            "binary after aborted block: ids=[1, 2, 3, 5]",
            "getPrimaryKeys: drv_java_keys id seq=1 name=drv_java_keys_pkey",
            "getIndexInfo: drv_java_keys_v_g unique=true pos=2 column=g type=3 asc=A",
            "getBestRowIdentifier: id int4 type=4",
            "drop table: ok",
            "done",
        ],
    );
}

/// pgJDBC's type paths (TypePaths.java) in a JVM whose zone is
/// Europe/Berlin: pgJDBC sends that zone at startup and writes java.sql
/// dates and timestamps with its offsets.
#[test]
fn pgjdbc_berlin() {
    same_as_postgres(
        Client::JavaBerlin,
        &[
            "text types: session zone Europe/Berlin",
            "text types batch rewritten: 3 rows",
            "binary types batch: 3 rows",
            "done",
        ],
    );
}

#[test]
fn pgx() {
    differential(
        Client::Go,
        &[
            "wrong password: error 28P01",
            "after rollback: count=int64:3",
            "binary columns: id:23/size=4/mod=-1/fmt=1",
            "binary row: int32:1|int16:32767|int64:9223372036854775800|numeric:123456789.125|float32:0.2|",
            "text columns: id:23/size=4/mod=-1/fmt=0",
            "text row: int32:1|int16:32767|int64:9223372036854775800|numeric:123456789.125|float32:0.2|",
            "text aborted block: error 25P02",
            "load types: pg_catalog._int4 oid=1007",
            "load types: _numeric oid=1231",
            "done",
        ],
    );
}

#[test]
fn node_postgres() {
    differential(
        Client::Node,
        &[
            "wrong password: error 28P01",
            "after rollback: count=3",
            "text raw row: \"1\"|\"32767\"|\"9223372036854775800\"|\"123456789.125\"|\"0.2\"|",
            "binary columns: id:23/size=4/mod=-1/fmt=binary",
            "binary row: int4:1|",
            "aborted block extended: error 25P02",
            "done",
        ],
    );
}

/// The tables of the ORM keys test, made in PostgreSQL: a serial root, a
/// GENERATED ALWAYS child, a BY DEFAULT grandchild (the AWT group `shop`),
/// and an audit table no group holds (passthrough); a few seed customers.
const SHOP: &str = "
    CREATE TABLE shop_customer (id serial PRIMARY KEY, node text NOT NULL, name varchar(40) NOT NULL UNIQUE, email varchar(80));
    CREATE TABLE shop_order (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        customer_id int NOT NULL REFERENCES shop_customer, placed timestamp NOT NULL, note text);
    CREATE TABLE shop_line (id int GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        order_id bigint NOT NULL REFERENCES shop_order, sku varchar(16) NOT NULL, qty int NOT NULL, price numeric(10,2) NOT NULL);
    CREATE TABLE shop_audit (id bigserial PRIMARY KEY, node text NOT NULL, what text NOT NULL);
    INSERT INTO shop_customer (node, name) SELECT 'seed', 'seed-' || g FROM generate_series(1, 5) g;
    INSERT INTO shop_order (customer_id, placed) SELECT id, timestamp '2024-01-01' FROM shop_customer;
    INSERT INTO shop_line (order_id, sku, qty, price) SELECT id, 'SEED', 1, 1.50 FROM shop_order;";

/// PostgreSQL's own writer beside the ORM: a customer, an order and a line
/// per transaction, keys by the column defaults, until `stop`.
fn postgres_writer(url: &str, stop: &std::sync::atomic::AtomicBool) -> u64 {
    let mut pg = pgtier_backend::connect(url).unwrap();
    let mut written = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        pg.batch_execute(&format!(
            "BEGIN;
             INSERT INTO shop_customer (node, name) VALUES ('pg', 'pg-{written}');
             INSERT INTO shop_order (customer_id, placed, note) VALUES (currval('shop_customer_id_seq'), timestamp '2024-03-01', 'pg');
             INSERT INTO shop_line (order_id, sku, qty, price) VALUES (currval('shop_order_id_seq'), 'PG', 2, 3.25);
             COMMIT;"
        ))
        .unwrap();
        written += 1;
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    written
}

/// Rows of the three cached tables, ordered by key, as text lines: on a
/// pgtier node all its cached rows; on PostgreSQL those of the customers
/// whose `node` is one of `nodes`.
fn shop_rows(client: &mut postgres::Client, nodes: Option<&[&str]>) -> Vec<String> {
    let filter = |alias: &str| nodes.map_or(String::new(), |n| format!(" AND {alias}.node IN ('{}')", n.join("', '")));
    let queries = [
        format!("SELECT c.* FROM shop_customer c WHERE true{} ORDER BY c.id", filter("c")),
        format!(
            "SELECT o.* FROM shop_order o JOIN shop_customer c ON c.id = o.customer_id WHERE true{} ORDER BY o.id",
            filter("c")
        ),
        format!(
            "SELECT l.* FROM shop_line l JOIN shop_order o ON o.id = l.order_id JOIN shop_customer c ON c.id = o.customer_id WHERE true{} ORDER BY l.id",
            filter("c")
        ),
    ];
    let mut lines = Vec::new();
    for (table, sql) in ["customer", "order", "line"].iter().zip(queries) {
        for message in client.simple_query(&sql).unwrap() {
            if let postgres::SimpleQueryMessage::Row(row) = message {
                let values: Vec<&str> = (0..row.len()).map(|i| row.get(i).unwrap_or("NULL")).collect();
                lines.push(format!("{table}: {}", values.join("|")));
            }
        }
    }
    lines
}

fn count(client: &mut postgres::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).unwrap().get(0)
}

/// The ORM application over cached tables whose keys PostgreSQL
/// generates: SQLAlchemy 2 on psycopg 3 (python/orm_keys.py) against two
/// pgtier servers with different `awt_node`s over one private PostgreSQL,
/// both with the AWT group `shop_customer (serial) -> shop_order (GENERATED
/// ALWAYS) -> shop_line (BY DEFAULT)` and the passthrough table
/// `shop_audit`, while PostgreSQL's own writer inserts into the same tables.
/// No key collides (both programs finish, no write-through transaction is
/// refused, the writer never fails), and after write-through drains
/// PostgreSQL equals each cache (VERIFY, and the rows of its customers) and
/// holds what each program counted. `ORM_KEYS_ROUNDS` (default 4) rounds
/// per program.
#[test]
fn sqlalchemy_generated_keys_on_two_nodes() {
    let client = Client::SqlAlchemyKeys;
    client.prepare();
    let postgres = support::start_postgres();
    let url = postgres.create_database("shop").unwrap();
    let mut pg = pgtier_backend::connect(&url).unwrap();
    pg.batch_execute(SHOP).unwrap();
    let nodes: Vec<(&str, support::Pgtier)> = ["a", "b"]
        .into_iter()
        .map(|node| {
            let sections = format!("[backend]\nurl = {url:?}\n[passthrough]\nmode = \"all\"\n[cache]\nawt_node = \"{node}\"\nsequence_block = 8\n");
            let server = support::start_pgtier_with("async", &sections);
            let mut tier = server.endpoint.client();
            tier.batch_execute("CREATE AWT CACHE GROUP shop FROM shop_customer, shop_order, shop_line").unwrap();
            tier.batch_execute("LOAD CACHE GROUP shop").unwrap();
            (node, server)
        })
        .collect();
    let rounds = std::env::var("ORM_KEYS_ROUNDS").unwrap_or_else(|_| "4".into());
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (transcripts, written) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| postgres_writer(&url, &stop));
        let programs: Vec<_> = nodes
            .iter()
            .map(|(node, server)| {
                let rounds = rounds.as_str();
                scope.spawn(move || {
                    client.run_env(&server.endpoint, &[("ORM_KEYS_NODE", node), ("ORM_KEYS_ROUNDS", rounds)])
                })
            })
            .collect();
        let transcripts: Vec<_> = programs.into_iter().map(|p| p.join().unwrap()).collect();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (transcripts, writer.join().unwrap())
    });
    for ((node, _), transcript) in nodes.iter().zip(&transcripts) {
        support::clients::assert_complete(
            &format!("{} on node {node}", client.name()),
            "pgtier",
            transcript,
            &["currval matches: True, lastval matches: True", "done", "exit: 0"],
        );
    }
    for ((node, _), transcript) in nodes.iter().zip(&transcripts) {
        println!("node {node}:\n{}", transcript.text);
    }
    println!("PostgreSQL's writer: {written} customers");
    assert!(written > 0, "PostgreSQL's writer wrote while the programs ran");
    for (node, server) in &nodes {
        let mut tier = server.endpoint.client();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while let Err(e) = tier.batch_execute("VERIFY CACHE GROUP shop") {
            let why = e
                .as_db_error()
                .map_or_else(|| e.to_string(), |db| format!("{} {}", db.message(), db.detail().unwrap_or_default()));
            assert!(
                std::time::Instant::now() < deadline,
                "node {node}: PostgreSQL still differs from the cache after 60 s: {why}"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        assert_eq!(
            shop_rows(&mut tier, None),
            shop_rows(&mut pg, Some(&[node, "seed"])),
            "node {node}: the cache and PostgreSQL"
        );
    }
    assert_eq!(
        count(&mut pg, "SELECT count(*) FROM pgtier.awt_errors"),
        0,
        "write-through transactions PostgreSQL refused"
    );
    assert_eq!(count(&mut pg, "SELECT count(*) FROM shop_customer WHERE node = 'pg'"), i64::try_from(written).unwrap());
    for ((node, _), transcript) in nodes.iter().zip(&transcripts) {
        let mine = format!("c.node = '{node}'");
        let counts = format!(
            "final: customers={} orders={} lines={} audits={}",
            count(&mut pg, &format!("SELECT count(*) FROM shop_customer c WHERE {mine}")),
            count(
                &mut pg,
                &format!("SELECT count(*) FROM shop_order o JOIN shop_customer c ON c.id = o.customer_id WHERE {mine}")
            ),
            count(
                &mut pg,
                &format!(
                    "SELECT count(*) FROM shop_line l JOIN shop_order o ON o.id = l.order_id JOIN shop_customer c ON c.id = o.customer_id WHERE {mine}"
                )
            ),
            count(&mut pg, &format!("SELECT count(*) FROM shop_audit WHERE node = '{node}'")),
        );
        assert!(
            transcript.text.contains(&counts),
            "node {node}: PostgreSQL holds what the program counted ({counts}):\n{}",
            transcript.text
        );
    }
    for (_, server) in nodes {
        server.server.shutdown();
    }
}
