//! Node partitions (issue 35 item 5): three `pgtier serve` processes over
//! one private PostgreSQL, TATP's subscriber group partitioned by s_id
//! ranges (`ALTER CACHE GROUP ... PARTITION BY RANGE`). Each node loads only
//! its range; routed reads answer as PostgreSQL does; a key, a write or a
//! transaction that leaves the node's range is refused (0AP01) naming the
//! owner; a scan the node cannot answer exactly is refused (0A000); a node
//! killed with kill -9 takes only its range away; after write-through
//! drains PostgreSQL equals the union of the three caches.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use postgres::{Client, NoTls, SimpleQueryMessage};

/// Subscribers per node; node i owns s_id in [i*PER+1, (i+1)*PER+1).
const PER: i32 = 200;
const NODES: [&str; 3] = ["n1", "n2", "n3"];

struct Served {
    child: Child,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        // SAFETY: signals our own child process.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

fn serve(config: &std::path::Path) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pgtier"))
        .args(["serve", "--config"])
        .arg(config)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("pgtier serve ended before listening").unwrap();
        if let Some(rest) = line.strip_prefix("pgtier: listening on ") {
            break rest.split(' ').next().unwrap().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines.by_ref() {});
    Served { child, addr }
}

fn connect(addr: &str) -> Client {
    Client::connect(&format!("postgresql://app@{addr}/app?connect_timeout=5"), NoTls).unwrap()
}

/// The SQLSTATE, message and hint of a statement that must fail.
fn refused(client: &mut Client, sql: &str) -> (String, String, String) {
    let error = client.batch_execute(sql).expect_err(sql);
    let db = error.as_db_error().unwrap_or_else(|| panic!("{sql}: {error}"));
    (db.code().code().to_owned(), db.message().to_owned(), db.hint().unwrap_or_default().to_owned())
}

/// Every row of the four tables for subscriber `s_id`, as text, in key order.
fn instance(client: &mut Client, s_id: i32) -> Vec<String> {
    let mut lines = Vec::new();
    for (table, order) in [
        ("subscriber", "s_id"),
        ("access_info", "ai_type"),
        ("special_facility", "sf_type"),
        ("call_forwarding", "sf_type, start_time"),
    ] {
        let sql = format!("SELECT * FROM {table} WHERE s_id = {s_id} ORDER BY {order}");
        for message in client.simple_query(&sql).unwrap() {
            if let SimpleQueryMessage::Row(row) = message {
                let values: Vec<&str> = (0..row.len()).map(|i| row.get(i).unwrap_or("NULL")).collect();
                lines.push(format!("{table}: {}", values.join("|")));
            }
        }
    }
    lines
}

fn owner(s_id: i32) -> usize {
    usize::try_from((s_id - 1) / PER).unwrap()
}

/// Waits until the node's write-through has nothing left to propagate and
/// its cache verifies against PostgreSQL.
fn drained(client: &mut Client) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let backlog: i64 = client
            .query_one("SELECT coalesce(sum(backlog_bytes), 0)::int8 FROM pgtier_cache_propagation", &[])
            .map_or(1, |r| r.get(0));
        if backlog == 0 && client.batch_execute("VERIFY CACHE GROUP tatp").is_ok() {
            return;
        }
        assert!(Instant::now() < deadline, "write-through did not drain");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// TATP's tables holding subscribers `lo..=hi`.
fn populate(pg: &mut Client, lo: i32, hi: i32) {
    pg.batch_execute(&pgtier_bench::tatp::schema::create_tables(true)).unwrap();
    pg.batch_execute(&format!(
        "INSERT INTO subscriber (s_id, sub_nbr, bit_1, msc_location, vlr_location)
             SELECT g, lpad(g::text, 15, '0'), g % 2, g * 7, g * 11 FROM generate_series({lo}, {hi}) g;
         INSERT INTO access_info (s_id, ai_type, data1, data3) SELECT g, t, g % 255, 'abc' FROM generate_series({lo}, {hi}) g, generate_series(1, 2) t;
         INSERT INTO special_facility (s_id, sf_type, is_active, data_b) SELECT g, t, 1, 'xyz' FROM generate_series({lo}, {hi}) g, generate_series(1, 2) t;
         INSERT INTO call_forwarding (s_id, sf_type, start_time, end_time, numberx)
             SELECT g, 1, 8, 16, lpad(g::text, 15, '0') FROM generate_series({lo}, {hi}) g;"
    ))
    .unwrap();
}

/// `pgtier serve` configs for the three nodes, node i over `backends[i]`.
fn node_configs(dir: &std::path::Path, backends: &[String]) -> Vec<std::path::PathBuf> {
    NODES
        .iter()
        .zip(backends)
        .map(|(node, backend)| {
            let config = dir.join(format!("{node}.toml"));
            std::fs::write(
                &config,
                format!(
                    "listen = \"127.0.0.1:0\"\ndata_dir = \"{node}\"\ncommit_mode = \"sync\"\n[auth]\nmethod = \"trust\"\n\
                     [backend]\nurl = {backend:?}\n[cache]\nawt_node = \"{node}\"\nawt_batch_delay_ms = 0\n"
                ),
            )
            .unwrap();
            config
        })
        .collect()
}

/// The partition map over the nodes' addresses, declared through `client`
/// (stored in that node's PostgreSQL).
fn declare_map(client: &mut Client, addr: &[String]) {
    client
        .batch_execute(&format!(
            "ALTER CACHE GROUP tatp PARTITION BY RANGE (s_id) NODES (n1 '{}' TO {}, n2 '{}' TO {}, n3 '{}')",
            addr[0],
            PER + 1,
            addr[1],
            2 * PER + 1,
            addr[2]
        ))
        .unwrap();
}

/// Creates and loads the group on `client`'s node: only its range.
fn create_and_load(client: &mut Client) {
    client
        .batch_execute(
            "CREATE DYNAMIC AWT CACHE GROUP tatp FROM subscriber, access_info, special_facility, call_forwarding",
        )
        .unwrap();
    let loaded = client.execute("LOAD CACHE GROUP tatp", &[]).unwrap();
    assert_eq!(loaded, u64::try_from(PER).unwrap());
}

#[test]
fn three_nodes_over_one_postgres() {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let backend = cluster.create_database(&format!("partitions_{}", std::process::id())).unwrap();
    let mut pg = pgtier_backend::connect(&backend).unwrap();
    populate(&mut pg, 1, 3 * PER);
    let dir = tempfile::tempdir().unwrap();
    let configs = node_configs(dir.path(), &[backend.clone(), backend.clone(), backend.clone()]);
    let mut nodes: Vec<Served> = configs.iter().map(|c| serve(c)).collect();
    let mut clients: Vec<Client> = nodes.iter().map(|n| connect(&n.addr)).collect();
    let addr: Vec<String> = nodes.iter().map(|n| n.addr.clone()).collect();

    // Declared once, on any node; each node reads it when it creates the group.
    declare_map(&mut clients[0], &addr);
    let map: Vec<(String, Option<i64>, Option<i64>)> = pg
        .query("SELECT node, lo, hi FROM pgtier.node_partitions WHERE grp = 'tatp' ORDER BY node", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(map[1], ("n2".to_owned(), Some(i64::from(PER) + 1), Some(2 * i64::from(PER) + 1)));
    for client in &mut clients {
        // LOAD takes only this node's range.
        create_and_load(client);
    }

    // Routed reads equal PostgreSQL's.
    for s_id in [1, 77, PER, PER + 1, 2 * PER, 2 * PER + 1, 3 * PER] {
        assert_eq!(instance(&mut clients[owner(s_id)], s_id), instance(&mut pg, s_id), "s_id {s_id}");
    }
    let sub_nbr: i32 = clients[1]
        .query_one("SELECT s_id FROM subscriber WHERE sub_nbr = $1", &[&format!("{:015}", PER + 5)])
        .unwrap()
        .get(0);
    assert_eq!(sub_nbr, PER + 5, "a unique lookup that finds this node's row answers");

    // Another node's key: refused, naming the owner and its address.
    let other = 2 * PER + 10;
    for sql in [
        format!("SELECT * FROM subscriber WHERE s_id = {other}"),
        format!("SELECT * FROM special_facility WHERE s_id = {other}"),
        format!("UPDATE subscriber SET vlr_location = 1 WHERE s_id = {other}"),
        format!("DELETE FROM call_forwarding WHERE s_id = {other} AND sf_type = 1 AND start_time = 8"),
        format!("INSERT INTO call_forwarding VALUES ({other}, 2, 0, 8, 'x')"),
        format!("INSERT INTO subscriber (s_id, sub_nbr) VALUES ({}, 'new')", 3 * PER + 50),
    ] {
        let (code, message, hint) = refused(&mut clients[0], &sql);
        assert_eq!(code, "0AP01", "{sql}: {message}");
        assert!(message.contains("\"n3\"") && message.contains(&addr[2]), "{sql}: {message}");
        assert!(hint.contains(&addr[2]), "{sql}: {hint}");
    }
    // A statement the node cannot answer exactly from its range: refused.
    for sql in [
        "SELECT count(*) FROM subscriber",
        "SELECT * FROM access_info WHERE data1 = 5",
        "SELECT * FROM subscriber WHERE s_id BETWEEN 1 AND 10",
        "UPDATE subscriber SET bit_1 = 0 WHERE bit_1 = 1",
    ] {
        let (code, message, _) = refused(&mut clients[0], sql);
        assert_eq!(code, "0A000", "{sql}: {message}");
        assert!(message.contains("partitioned over pgtier nodes"), "{sql}: {message}");
    }
    // A unique key this node does not hold: PostgreSQL names its root key,
    // which is another node's.
    let (code, message, _) =
        refused(&mut clients[0], &format!("SELECT s_id FROM subscriber WHERE sub_nbr = '{:015}'", other));
    assert_eq!(code, "0AP01", "a unique lookup of another node's row: {message}");
    assert!(message.contains("\"n3\""), "{message}");
    // One PostgreSQL does not have either may be a row another node has
    // not written through yet: refused.
    let (code, _, _) = refused(&mut clients[0], "SELECT s_id FROM subscriber WHERE sub_nbr = 'nowhere'");
    assert_eq!(code, "0A000", "a unique lookup that finds nothing here may be another node's");

    // A transaction that leaves its partition: refused at that statement, and rolled back.
    clients[0].batch_execute("BEGIN; UPDATE subscriber SET vlr_location = 424242 WHERE s_id = 3").unwrap();
    let (code, _, _) =
        refused(&mut clients[0], &format!("UPDATE subscriber SET vlr_location = 424242 WHERE s_id = {}", PER + 3));
    assert_eq!(code, "0AP01");
    clients[0].batch_execute("ROLLBACK").unwrap();
    let kept: i64 = clients[0].query_one("SELECT vlr_location FROM subscriber WHERE s_id = 3", &[]).unwrap().get(0);
    assert_eq!(kept, 3 * 11);

    // Routed writes on every node: updates, new call forwardings, deletes.
    for s_id in 1..=3 * PER {
        let client = &mut clients[owner(s_id)];
        client
            .execute("UPDATE subscriber SET vlr_location = $1 WHERE s_id = $2", &[&i64::from(s_id * 3), &s_id])
            .unwrap();
        if s_id % 5 == 0 {
            client.execute("INSERT INTO call_forwarding VALUES ($1, 2, 16, 24, 'routed')", &[&s_id]).unwrap();
        }
        if s_id % 7 == 0 {
            client.execute("DELETE FROM call_forwarding WHERE s_id = $1 AND sf_type = 1", &[&s_id]).unwrap();
        }
    }
    let cleared = PER / 2;
    clients[0].execute("DELETE FROM call_forwarding WHERE s_id = $1", &[&cleared]).unwrap();

    // TATP routed by subscriber: every transaction to the node owning it
    // (PARTITIONS_TATP_SECONDS, default 1; PARTITIONS_TATP_THREADS, default 2).
    let seconds = std::env::var("PARTITIONS_TATP_SECONDS").unwrap_or_else(|_| "1".into());
    let threads = std::env::var("PARTITIONS_TATP_THREADS").unwrap_or_else(|_| "2".into());
    let out = Command::new(env!("CARGO_BIN_EXE_pgtier"))
        .args(["bench", "tatp", "--url", &format!("postgresql://app@{}/app", addr[0]), "--shard-map", &backend])
        .args(["--subscribers", &(3 * PER).to_string(), "--threads", &threads, "--duration", &seconds])
        .args(["--ramp-up", "0.2", "--ramp-down", "0.1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    println!("{stdout}");
    for node in ["node n1", "node n2", "node n3", &format!("== {threads} threads: MQTh")] {
        assert!(stdout.contains(node), "{node}: {stdout}");
    }

    // kill -9 of n2: only its range is unavailable.
    // SAFETY: signals our own child process.
    unsafe {
        libc::kill(nodes[1].child.id() as i32, libc::SIGKILL);
    }
    nodes[1].child.wait().unwrap();
    assert!(Client::connect(&format!("postgresql://app@{}/app?connect_timeout=2", addr[1]), NoTls).is_err());
    for (i, s_id) in [(0, 5), (2, 2 * PER + 5)] {
        let v: i64 =
            clients[i].query_one("SELECT msc_location FROM subscriber WHERE s_id = $1", &[&s_id]).unwrap().get(0);
        assert_eq!(v, i64::from(s_id * 7), "TATP leaves msc_location alone");
        clients[i].execute("UPDATE subscriber SET msc_location = 1 WHERE s_id = $1", &[&s_id]).unwrap();
    }
    let (code, _, hint) = refused(&mut clients[0], &format!("SELECT * FROM subscriber WHERE s_id = {}", PER + 5));
    assert_eq!((code.as_str(), hint.contains(&addr[1])), ("0AP01", true), "n1 still names n2 as the owner");

    // n2 restarts from its data directory and propagates what it committed.
    let restarted = serve(&configs[1]);
    clients[1] = connect(&restarted.addr);
    nodes[1] = restarted;
    for client in &mut clients {
        drained(client);
    }
    // PostgreSQL equals the union of the three caches, instance by instance.
    for s_id in 1..=3 * PER {
        let cached = instance(&mut clients[owner(s_id)], s_id);
        assert_eq!(cached, instance(&mut pg, s_id), "s_id {s_id}");
        assert!(!cached.is_empty());
    }
    let rows: i64 = pg.query_one("SELECT count(*) FROM call_forwarding WHERE numberx = 'routed'", &[]).unwrap().get(0);
    // TATP's DELETE_CALL_FORWARDING may have taken some of them since.
    assert!(rows > 0 && rows < i64::from(3 * PER / 5), "{rows} routed inserts in PostgreSQL");
    drop(clients);
    drop(nodes);
}

/// Issue 35 item 8's shape of Citus: three PostgreSQL clusters stand for
/// three workers, each holding one range of subscribers as plain tables
/// (its shard), each behind its own pgtier node. The map is declared on
/// every node (each stores it in its own PostgreSQL); routed TATP runs
/// over them; one cluster stopped with `-m immediate` takes only its
/// node's write-through away (the node goes on committing, the others
/// drain as before); back, every cluster equals its node's cache and holds
/// no row of another range.
#[test]
fn three_shards_each_behind_its_own_node() {
    let clusters: Vec<_> = (0..3)
        .map(|_| pgtier_backend::PrivateCluster::start(pgtier_backend::ClusterOptions::default()).unwrap())
        .collect();
    let mut clusters = clusters;
    let backends: Vec<String> = clusters.iter().map(|c| c.create_database("shard").unwrap()).collect();
    let mut shards: Vec<Client> = backends.iter().map(|b| pgtier_backend::connect(b).unwrap()).collect();
    for (i, shard) in shards.iter_mut().enumerate() {
        let lo = i32::try_from(i).unwrap() * PER + 1;
        populate(shard, lo, lo + PER - 1);
    }
    let dir = tempfile::tempdir().unwrap();
    let configs = node_configs(dir.path(), &backends);
    let nodes: Vec<Served> = configs.iter().map(|c| serve(c)).collect();
    let mut clients: Vec<Client> = nodes.iter().map(|n| connect(&n.addr)).collect();
    let addr: Vec<String> = nodes.iter().map(|n| n.addr.clone()).collect();
    for client in &mut clients {
        declare_map(client, &addr);
        create_and_load(client);
    }

    // Routed reads equal the owning shard's; another range is refused,
    // naming its node.
    for s_id in [1, PER, PER + 1, 2 * PER, 2 * PER + 1, 3 * PER] {
        let o = owner(s_id);
        assert_eq!(instance(&mut clients[o], s_id), instance(&mut shards[o], s_id), "s_id {s_id}");
    }
    let (code, message, _) = refused(&mut clients[0], &format!("SELECT * FROM subscriber WHERE s_id = {}", PER + 1));
    assert_eq!(code, "0AP01", "{message}");
    assert!(message.contains("\"n2\"") && message.contains(&addr[1]), "{message}");

    // Routed writes, then routed TATP (the map read from the first shard).
    for s_id in 1..=3 * PER {
        clients[owner(s_id)]
            .execute("UPDATE subscriber SET vlr_location = $1 WHERE s_id = $2", &[&i64::from(s_id * 5), &s_id])
            .unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_pgtier"))
        .args(["bench", "tatp", "--url", &format!("postgresql://app@{}/app", addr[0]), "--shard-map", &backends[0]])
        .args(["--subscribers", &(3 * PER).to_string(), "--threads", "2", "--duration", "1"])
        .args(["--ramp-up", "0.2", "--ramp-down", "0.1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    for node in ["node n1", "node n2", "node n3"] {
        assert!(stdout.contains(node), "{node}: {stdout}");
    }

    // The second shard's PostgreSQL stops hard: its node still commits
    // (write-through waits), the other two propagate as before.
    clusters[1].stop_immediate().unwrap();
    for s_id in [5, PER + 5, 2 * PER + 5] {
        clients[owner(s_id)].execute("UPDATE subscriber SET msc_location = -1 WHERE s_id = $1", &[&s_id]).unwrap();
    }
    for i in [0, 2] {
        drained(&mut clients[i]);
        let v: i64 = shards[i]
            .query_one("SELECT msc_location FROM subscriber WHERE s_id = $1", &[&(i32::try_from(i).unwrap() * PER + 5)])
            .unwrap()
            .get(0);
        assert_eq!(v, -1, "shard {i} got its node's write while another shard was down");
    }
    clusters[1].restart().unwrap();
    shards[1] = pgtier_backend::connect(&backends[1]).unwrap();
    for client in &mut clients {
        drained(client);
    }
    // Every shard equals its node's cache and holds only its range.
    for s_id in 1..=3 * PER {
        let o = owner(s_id);
        let cached = instance(&mut clients[o], s_id);
        assert!(!cached.is_empty());
        assert_eq!(cached, instance(&mut shards[o], s_id), "s_id {s_id}");
    }
    for (i, shard) in shards.iter_mut().enumerate() {
        let lo = i32::try_from(i).unwrap() * PER + 1;
        let outside: i64 = shard
            .query_one("SELECT count(*) FROM subscriber WHERE s_id NOT BETWEEN $1 AND $2", &[&lo, &(lo + PER - 1)])
            .unwrap()
            .get(0);
        assert_eq!(outside, 0, "shard {i} holds another range's subscribers");
    }
    drop(clients);
    drop(nodes);
}
