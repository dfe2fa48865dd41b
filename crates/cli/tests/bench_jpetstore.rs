//! `pgtier bench jpetstore` end to end against a private PostgreSQL at a
//! tiny scale: every side runs, the answers check clean, and PostgreSQL
//! holds exactly the orders the run says it committed (counted here, on a
//! connection of our own, not taken from the run's own check). Bad
//! arguments: one line, exit status 2.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use serde_json::Value;

#[test]
fn sweep_all_sides_and_check_the_orders() {
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let url = cluster.url();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r/jpetstore.json");
    let work = dir.path().join("work");
    let out = Command::new(env!("CARGO_BIN_EXE_pgtier"))
        .args(["bench", "jpetstore", "--url", &url, "--populate", "--scale", "3"])
        .args(["--search-range", "20,100", "--threads", "1,2", "--memory-budget", "25%"])
        .args(["--duration", "0.5", "--ramp-up", "0.3", "--ramp-down", "0.1", "--warmup", "0.5", "--seed", "7"])
        .args(["--work-dir", work.to_str().unwrap(), "--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    for expected in [
        "Population: scale 3: 3 categories, 75 products, 300 items",
        "BROWSE 40 %, SEARCH 40 %, UPDATE_CART 10 %, PLACE_ORDER 10 %",
        "== pgtier-flash, search range 100 %, 2 threads:",
        "throughput (txn/s; pgtier with write-through caught up), 2 threads",
        "crossover, 1 threads:",
        "pgtier-flash, search range 20 %: warm-up",
        "answers: clean",
    ] {
        assert!(stdout.contains(expected), "missing {expected:?} in:\n{stdout}");
    }

    let result: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let points = result["points"].as_array().unwrap();
    assert_eq!(points.len(), 3 * 2 * 2, "sides x ranges x threads");
    for side in ["postgresql", "pgtier", "pgtier-flash"] {
        assert_eq!(points.iter().filter(|p| p["side"] == side).count(), 4, "{side}");
    }
    for p in points {
        let at = format!("{} {} % {} threads", p["side"], p["search_range_percent"], p["threads"]);
        assert!(p["txn_per_s"].as_f64().unwrap() > 0.0, "{at}");
        assert_eq!(p["unexpected_errors"], 0, "{at}: {}", p["errors"]);
        for t in p["transactions"].as_array().unwrap() {
            // Every lookup found its row: a cache that answered "absent"
            // for an item only PostgreSQL or flash held would show here.
            assert_eq!(t["found"], t["executed"], "{at}: {t}");
        }
        if p["side"] != "postgresql" {
            assert!(p["cache"]["budget_bytes"].as_u64().unwrap() > 0, "{at}");
            // The rate the tables compare: write-through caught up after
            // the window, so never above the window's own.
            let caught_up = p["caught_up_txn_per_s"].as_f64().unwrap();
            assert!(caught_up > 0.0 && caught_up <= p["txn_per_s"].as_f64().unwrap() + 1e-6, "{at}: {caught_up}");
            assert!(p["drain_s"].as_f64().unwrap() >= 0.0, "{at}");
        } else {
            assert!(p["caught_up_txn_per_s"].is_null(), "{at}");
        }
    }
    assert_eq!(result["checks"].as_array().unwrap().len(), 3 * 2);
    let mut committed = 0;
    for check in result["checks"].as_array().unwrap() {
        assert_eq!(check["clean"], true, "{check}");
        if check["side"] != "postgresql" {
            // verify saw each group, and the differential read every item of the range.
            let groups = check["groups"].as_array().unwrap();
            assert_eq!(groups.len(), 5, "{check}");
            let read = groups.iter().find(|g| g["group"] == "inventory read through the cache").unwrap();
            let items = if check["search_range_percent"] == 100 { 300 } else { 60 };
            assert_eq!(read["compared"], items, "{check}");
        }
        committed += check["orders_committed"].as_u64().unwrap();
    }
    assert!(committed > 0);
    // The population has no orders: every order PostgreSQL holds now is
    // one the run committed, through pgtier's write-through or directly.
    let mut client = pgtier_backend::connect::connect(&url).unwrap();
    let orders: i64 = client.query_one("SELECT count(*) FROM orders", &[]).unwrap().get(0);
    let lines: i64 = client.query_one("SELECT count(*) FROM lineitem", &[]).unwrap().get(0);
    assert_eq!(orders as u64, committed, "orders in PostgreSQL vs committed by the run");
    let sum_lines: u64 =
        result["checks"].as_array().unwrap().iter().map(|c| c["lines_committed"].as_u64().unwrap()).sum();
    assert_eq!(lines as u64, sum_lines);
    // Each side dropped its replication origins.
    let origins: i64 = client
        .query_one("SELECT count(*) FROM pg_replication_origin WHERE roname LIKE 'pgtier_jp%'", &[])
        .unwrap()
        .get(0);
    assert_eq!(origins, 0);
}

#[test]
fn wire_mode_with_flash() {
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let url = cluster.url();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("wire.json");
    let out = Command::new(env!("CARGO_BIN_EXE_pgtier"))
        .args(["bench", "jpetstore", "--url", &url, "--populate", "--scale", "2", "--wire"])
        .args(["--sides", "pgtier-flash", "--search-range", "100", "--threads", "2"])
        .args(["--duration", "0.5", "--ramp-up", "0.2", "--ramp-down", "0.1", "--warmup", "0"])
        .args(["--work-dir", dir.path().join("work").to_str().unwrap(), "--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("pgtier sides: wire mode"), "{stdout}");
    let result: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(result["pgtier_mode"], "wire");
    let point = &result["points"][0];
    assert!(point["txn_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(point["unexpected_errors"], 0, "{}", point["errors"]);
    let check = &result["checks"][0];
    assert_eq!(check["clean"], true, "{check}");
    let mut client = pgtier_backend::connect::connect(&url).unwrap();
    let orders: i64 = client.query_one("SELECT count(*) FROM orders", &[]).unwrap().get(0);
    assert_eq!(orders as u64, check["orders_committed"].as_u64().unwrap());
}

/// Runs `pgtier bench jpetstore ARGS`, asserting a usage error: exit 2 and
/// one line on stderr; returns the line.
fn usage_error(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_pgtier"))
        .args(["bench", "jpetstore", "--url", "postgres://postgres@127.0.0.1:1/postgres"])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{args:?}: {stderr}");
    assert!(lines[0].starts_with("pgtier: error: "), "{stderr}");
    lines[0].to_owned()
}

#[test]
fn bad_arguments_are_usage_errors() {
    let line = usage_error(&["--search-range", "10,0"]);
    assert!(line.contains("--search-range") && line.contains("'0' is not a percentage from 1 to 100"), "{line}");
    let line = usage_error(&["--threads", "1,x"]);
    assert!(line.contains("--threads") && line.contains("'x' is not a whole number"), "{line}");
    let line = usage_error(&["--sides", "postgresql,oracle"]);
    assert!(line.contains("'oracle' is not a side"), "{line}");
    let line = usage_error(&["--memory-budget", "0"]);
    assert!(line.contains("--memory-budget"), "{line}");
    let line = usage_error(&["--duration", "0"]);
    assert!(line.contains("--duration"), "{line}");
    let line = usage_error(&["--populate", "--scale", "0"]);
    assert!(line.contains("--scale"), "{line}");
    let line = usage_error(&["--rate", "0.5"]);
    assert!(line.contains("at least 1 transaction/s"), "{line}");
}
