//! SWT write-through against a real PostgreSQL with TATP: a transaction on
//! an SWT group is in PostgreSQL when its commit returns (nothing to wait
//! for); PostgreSQL's refusal (a CHECK constraint only PostgreSQL has) rolls
//! the cache transaction back with PostgreSQL's SQLSTATE and message; a row
//! changed behind pgtier's back refuses the commit and is reloaded.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::fresh_tatp;
use pgtier_backend::connect::connect;
use pgtier_cache::{GroupKind, LoadOptions};
use pgtier_engine::Value;
use postgres::Client;

fn vlr(client: &mut Client, s_id: i32) -> i32 {
    client.query_one("SELECT vlr_location::int4 FROM subscriber WHERE s_id = $1", &[&s_id]).unwrap().get(0)
}

#[test]
fn swt_commits_in_postgres_first_and_its_refusals_roll_back() {
    let url = fresh_tatp("swt_basic");
    let mut client = connect(&url).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = common::open_cache(dir.path(), &url);
    cache.create_group(&common::tatp_group("swt", GroupKind::Swt, false)).unwrap();
    cache.load("swt", &LoadOptions::default()).unwrap();
    let db = cache.database().clone();
    let catalog = db.catalog();
    let subscriber = catalog.table_by_name("subscriber").unwrap().clone();
    let forwarding = catalog.table_by_name("call_forwarding").unwrap().clone();
    let special = catalog.table_by_name("special_facility").unwrap().clone();
    let vlr_column = subscriber.column_index("vlr_location").unwrap();

    // Committed means in PostgreSQL: read at once on another connection.
    for s in 1..=20 {
        let mut txn = db.begin().unwrap();
        txn.update(subscriber.id, &[Value::Int4(s)], &[(vlr_column, Value::Int8(i64::from(1000 + s)))]).unwrap();
        txn.commit().unwrap();
        assert_eq!(vlr(&mut client, s), 1000 + s);
    }
    // Inserts and deletes, several tables and instances in one transaction.
    let mut facilities = Vec::new();
    let mut txn = db.begin().unwrap();
    for s in [3, 7] {
        txn.scan_prefix(special.primary_index, &[Value::Int4(s)], |row| {
            facilities.push((s, row.get(1).to_owned_value()));
            Ok(true)
        })
        .unwrap();
    }
    assert!(!facilities.is_empty());
    for (s, sf_type) in &facilities {
        let key = [Value::Int4(*s), sf_type.clone(), Value::Int2(16)];
        if !txn.delete(forwarding.id, &key).unwrap() {
            txn.insert(
                forwarding.id,
                &[Value::Int4(*s), sf_type.clone(), Value::Int2(16), Value::Int2(20), Value::Text("swt".into())],
            )
            .unwrap();
        }
    }
    txn.commit().unwrap();
    common::assert_tables_equal(cache.database(), &mut client, "true");
    let status = cache.swt_status().unwrap();
    assert_eq!(status.commits.load(std::sync::atomic::Ordering::Relaxed), 21);

    // A constraint only PostgreSQL has: the commit fails with its SQLSTATE and
    // message, and the cache keeps the old row.
    // Adding it changes the table's definition: commits are refused (55000)
    // until the change is accepted, which the cache allows since the columns
    // it holds are the same.
    client
        .batch_execute("ALTER TABLE subscriber ADD CONSTRAINT vlr_not_negative CHECK (vlr_location >= 0) NOT VALID")
        .unwrap();
    let failing = || {
        let mut txn = db.begin().unwrap();
        txn.update(subscriber.id, &[Value::Int4(5)], &[(vlr_column, Value::Int4(-1))]).unwrap();
        txn.update(subscriber.id, &[Value::Int4(6)], &[(vlr_column, Value::Int4(66))]).unwrap();
        txn.commit().unwrap_err()
    };
    let error = failing();
    assert_eq!(error.sqlstate(), "55000", "{error}");
    assert!(error.to_string().contains("subscriber"), "{error}");
    assert!(cache.swt_status().unwrap().drifted.lock().contains_key("swt"));
    assert_eq!(cache.accept_definition("swt").unwrap(), vec!["public.subscriber".to_owned()]);
    assert!(cache.swt_status().unwrap().drifted.lock().is_empty());
    let error = failing();
    assert_eq!(error.sqlstate(), "23514", "{error}");
    assert!(error.to_string().contains("vlr_not_negative"), "{error}");
    let mut txn = db.begin().unwrap();
    assert_eq!(
        txn.get_with(subscriber.id, &[Value::Int4(5)], |row| row.values()[vlr_column].clone()).unwrap(),
        Some(Value::Int8(1005))
    );
    assert_eq!(
        txn.get_with(subscriber.id, &[Value::Int4(6)], |row| row.values()[vlr_column].clone()).unwrap(),
        Some(Value::Int8(1006))
    );
    txn.commit().unwrap();
    assert_eq!(vlr(&mut client, 6), 1006, "nothing of a refused transaction reaches PostgreSQL");
    common::assert_tables_equal(cache.database(), &mut client, "true");
    // Put back, the definition is the group's own again: accepted again.
    client.batch_execute("ALTER TABLE subscriber DROP CONSTRAINT vlr_not_negative").unwrap();
    assert_eq!(failing().sqlstate(), "55000");
    assert_eq!(cache.accept_definition("swt").unwrap(), vec!["public.subscriber".to_owned()]);

    // A row deleted in PostgreSQL behind pgtier's back: the update changes no
    // row there, the commit fails, and the instance is reloaded from PostgreSQL.
    client.batch_execute("DELETE FROM call_forwarding WHERE s_id = 9; DELETE FROM special_facility WHERE s_id = 9; DELETE FROM access_info WHERE s_id = 9; DELETE FROM subscriber WHERE s_id = 9").unwrap();
    let mut txn = db.begin().unwrap();
    txn.update(subscriber.id, &[Value::Int4(9)], &[(vlr_column, Value::Int4(99))]).unwrap();
    let error = txn.commit().unwrap_err();
    assert_eq!(error.sqlstate(), "P0002", "{error}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while status.repairs.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        assert!(Instant::now() < deadline, "the diverged instance was not reloaded: {:?}", status.last_error.lock());
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut txn = db.begin().unwrap();
    assert!(
        txn.get_with(subscriber.id, &[Value::Int4(9)], |_| ()).unwrap().is_none(),
        "the instance PostgreSQL no longer has left the cache"
    );
    txn.commit().unwrap();
    common::assert_tables_equal(cache.database(), &mut client, "true");

    // The log PostgreSQL keeps for crash resolution is pruned once the cache's commits are durable.
    for i in 0..300 {
        let mut txn = db.begin().unwrap();
        txn.update(subscriber.id, &[Value::Int4(1 + i % 50)], &[(vlr_column, Value::Int8(i64::from(i)))]).unwrap();
        txn.commit().unwrap();
    }
    let logged: i64 = client.query_one("SELECT count(*) FROM pgtier.swt_log", &[]).unwrap().get(0);
    assert!((1..200).contains(&logged), "{logged} log rows after 321 commits");
    common::assert_tables_equal(cache.database(), &mut client, "true");

    // Reopened: the counters agree, commits go on.
    drop((cache, db, catalog));
    let cache = common::open_cache(dir.path(), &url);
    let db = cache.database().clone();
    let mut txn = db.begin().unwrap();
    txn.update(subscriber.id, &[Value::Int4(1)], &[(vlr_column, Value::Int4(4242))]).unwrap();
    txn.commit().unwrap();
    assert_eq!(vlr(&mut client, 1), 4242);
    common::assert_tables_equal(cache.database(), &mut client, "true");
}
