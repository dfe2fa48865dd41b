//! Real PostgreSQL clients against pgtier, differential against PostgreSQL:
//! psql (incl. `\d`), psycopg 3, pgJDBC, pgx and node-postgres each connect
//! with SCRAM-SHA-256, run prepared DML inside committed and rolled-back
//! transactions, read every supported type in text and binary form, and match
//! SQLSTATEs (23505, 42P01, 22012, 23502, 25P02, 42601). Each program prints a
//! normalized transcript; pgtier's must equal PostgreSQL's.
//!
//! The programs live in tests/drivers/ (README there); their toolchains and
//! packages come from scripts/ensure-clients.sh. A missing one fails the test.

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
