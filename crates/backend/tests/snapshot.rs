//! Parallel COPY streams from one exported snapshot see one state: rows
//! committed after the export are invisible to all of them.

#![allow(clippy::unwrap_used)]

use pgtier_backend::catalog::import_tables_in;
use pgtier_backend::connect::connect;
use pgtier_backend::copy_out::{ValueKind, copy_statement, start_copy};
use pgtier_backend::harness::shared_cluster;
use pgtier_backend::snapshot::{ExportedSnapshot, join_snapshot};
use postgres::GenericClient;

const STREAMS: i64 = 3;

/// Sum and count of `id` over the rows of `t` with `id % STREAMS = stream`.
fn stream_totals<C: GenericClient>(client: &mut C, stream: i64) -> (i64, u64) {
    let predicate = format!("id % {STREAMS} = {stream}");
    let statement = copy_statement("public", "t", &["id", "payload"], Some(&predicate));
    let mut reader = start_copy(client, &statement, "t", 2).unwrap();
    let mut sum = 0i64;
    while let Some(row) = reader.next_row().unwrap() {
        let id = ValueKind::Int8.decode(row.field(0).unwrap()).unwrap().to_string();
        sum += id.parse::<i64>().unwrap();
    }
    (sum, reader.rows())
}

#[test]
fn parallel_streams_read_one_snapshot() {
    let url = shared_cluster().unwrap().create_database("snapshot_parallel").unwrap();
    let mut setup = connect(&url).unwrap();
    setup
        .batch_execute(
            "CREATE TABLE t (id bigint PRIMARY KEY, payload text);
             INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 30000) g;",
        )
        .unwrap();
    let mut leader_client = connect(&url).unwrap();
    let mut snapshot = ExportedSnapshot::export(&mut leader_client).unwrap();
    let id = snapshot.id().to_owned();

    // Committed after the export: inserts, a delete and an update.
    setup
        .batch_execute(
            "INSERT INTO t SELECT g, 'late' FROM generate_series(30001, 40000) g;
             DELETE FROM t WHERE id <= 100;
             UPDATE t SET id = id + 1000000 WHERE id BETWEEN 101 AND 200;",
        )
        .unwrap();

    // Followers join (while the leader's transaction is still open) and
    // stream in parallel threads; the leader streams its own share.
    let followers: Vec<_> = (1..STREAMS)
        .map(|stream| {
            let url = url.clone();
            let id = id.clone();
            std::thread::spawn(move || {
                let mut client = connect(&url).unwrap();
                let mut transaction = join_snapshot(&mut client, &id).unwrap();
                let totals = stream_totals(&mut transaction, stream);
                transaction.commit().unwrap();
                totals
            })
        })
        .collect();
    let tables = import_tables_in(snapshot.transaction(), &["t"]).unwrap();
    assert_eq!(tables[0].columns.len(), 2);
    let mut totals = vec![stream_totals(snapshot.transaction(), 0)];
    totals.extend(followers.into_iter().map(|follower| follower.join().unwrap()));
    snapshot.finish().unwrap();

    let rows: u64 = totals.iter().map(|(_, rows)| rows).sum();
    let sum: i64 = totals.iter().map(|(sum, _)| sum).sum();
    assert_eq!(rows, 30_000, "per stream: {totals:?}");
    assert_eq!(sum, 30_000 * 30_001 / 2);
    assert!(totals.iter().all(|(_, rows)| *rows == 10_000), "{totals:?}");

    // Outside the snapshot the changes are there.
    let now: i64 = setup.query_one("SELECT count(*) FROM t", &[]).unwrap().get(0);
    assert_eq!(now, 39_900);
}

#[test]
fn joining_a_bad_or_finished_snapshot_fails() {
    let url = shared_cluster().unwrap().create_database("snapshot_errors").unwrap();
    let mut leader = connect(&url).unwrap();
    let mut follower = connect(&url).unwrap();
    let error = join_snapshot(&mut follower, "x'; DROP TABLE t; --").err().unwrap();
    assert_eq!(error.sqlstate(), "22023", "{error}");
    let snapshot = ExportedSnapshot::export(&mut leader).unwrap();
    let id = snapshot.id().to_owned();
    snapshot.finish().unwrap();
    // An exported snapshot lives only as long as the leader's transaction.
    let error = join_snapshot(&mut follower, &id).err().unwrap();
    assert_eq!(error.sqlstate(), "22023", "{error}");
    assert!(error.to_string().contains("invalid snapshot identifier"), "{error}");
}
