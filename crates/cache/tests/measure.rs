//! Load speed (rows/s) of TATP at PARALLEL 1 and 2, run by hand in release:
//! `cargo test --release -p pgtier-cache --test measure -- --ignored --nocapture`
//! (`PGTIER_CACHE_MEASURE_SUBSCRIBERS`, default 1,000,000). PostgreSQL is a
//! private cluster with the benchmark settings, populated with TATP's
//! distribution (1-4 access_info and special_facility rows per subscriber,
//! 0-3 call_forwarding rows per special_facility).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Instant;

use common::{tatp_ddl, tatp_spec};
use pgtier_backend::connect::connect;
use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_cache::{LoadOptions, create_group_tables, define_group, load_group};
use pgtier_engine::{Database, EngineConfig};

#[test]
#[ignore = "minutes long; run by hand in release"]
fn measure_load_rows_per_second() {
    let subscribers: u64 = std::env::var("PGTIER_CACHE_MEASURE_SUBSCRIBERS").map_or(1_000_000, |v| v.parse().unwrap());
    let cluster = PrivateCluster::start(ClusterOptions::for_benchmark()).unwrap();
    let url = cluster.create_database("measure").unwrap();
    let mut client = connect(&url).unwrap();
    let started = Instant::now();
    client.batch_execute(&tatp_ddl()).unwrap();
    client
        .batch_execute(&format!(
            "INSERT INTO subscriber (s_id, sub_nbr, bit_1, bit_2, hex_1, hex_2, byte2_1, byte2_2, msc_location, vlr_location)
               SELECT g, lpad(g::text, 15, '0'), g % 2, (g / 2) % 2, g % 16, (g / 16) % 16, g % 256, (g / 256) % 256, g * 7, g * 13
               FROM generate_series(1, {subscribers}) g;
             INSERT INTO access_info SELECT s, t, s % 256, t * 3, 'abc', 'defgh'
               FROM generate_series(1, {subscribers}) s, generate_series(1, 4) t WHERE t <= (s * 7) % 4 + 1;
             INSERT INTO special_facility SELECT s, t, (s + t) % 2, t, s % 100, 'xyzzy'
               FROM generate_series(1, {subscribers}) s, generate_series(1, 4) t WHERE t <= (s * 3) % 4 + 1;
             INSERT INTO call_forwarding SELECT s_id, sf_type, st, st + 8, lpad(s_id::text, 15, '0')
               FROM special_facility, (VALUES (0), (8), (16)) v(st) WHERE st / 8 < (s_id + sf_type) % 4;"
        ))
        .unwrap();
    // Not in the batch above: VACUUM refuses to run inside its implicit transaction.
    client.batch_execute("VACUUM ANALYZE").unwrap();
    println!("populated {subscribers} subscribers in {:.1} s", started.elapsed().as_secs_f64());
    for parallel in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
        let group = define_group(&mut client, &tatp_spec()).unwrap();
        create_group_tables(&db, &group).unwrap();
        let options = LoadOptions { parallel, ..LoadOptions::default() };
        let report = load_group(&db, || connect(&url).map_err(|e| panic!("{e}")), &group, &options).unwrap();
        let rows: u64 = report.rows.iter().map(|(_, n)| n).sum();
        println!(
            "PARALLEL {parallel}: {} instances, {rows} rows ({:?}), {:.0} MB in {:.1} s = {:.0} rows/s",
            report.instances,
            report.rows,
            report.bytes as f64 / 1e6,
            report.seconds,
            rows as f64 / report.seconds
        );
        db.close().unwrap();
    }
}
