//! Binary COPY decode speed on TATP-like tables, in rows/s: `subscriber`
//! (34 columns: int4, varchar(15), 30 smallints, 2 bigints; N rows) and
//! `call_forwarding` (5 narrow columns; 3.75 N rows, TATP's largest table):
//! - `memory`: framing + typed decode of every field from a byte buffer
//!   captured from PostgreSQL (the decoder alone);
//! - `server only`: PostgreSQL writing the same stream to /dev/null;
//! - `copy`: the same from a live `COPY ... TO STDOUT (FORMAT binary)` on a
//!   private cluster (client + decoder; PostgreSQL runs on the same cores).
//!
//! `cargo bench -p pgtier-backend --bench copy_decode -- [--rows N]`
//! (default 1,000,000). A human-run measurement, never a CI gate.

#![allow(clippy::unwrap_used)]

use std::hint::black_box;
use std::io::Read;
use std::time::Instant;

use pgtier_backend::catalog::import_tables;
use pgtier_backend::connect::connect;
use pgtier_backend::copy_out::{CopyReader, Value, ValueKind, start_copy};
use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use postgres::Client;

const SUBSCRIBER_DDL: &str = "
CREATE TABLE subscriber (
    s_id integer NOT NULL PRIMARY KEY, sub_nbr varchar(15) NOT NULL,
    bit_1 smallint, bit_2 smallint, bit_3 smallint, bit_4 smallint, bit_5 smallint,
    bit_6 smallint, bit_7 smallint, bit_8 smallint, bit_9 smallint, bit_10 smallint,
    hex_1 smallint, hex_2 smallint, hex_3 smallint, hex_4 smallint, hex_5 smallint,
    hex_6 smallint, hex_7 smallint, hex_8 smallint, hex_9 smallint, hex_10 smallint,
    byte2_1 smallint, byte2_2 smallint, byte2_3 smallint, byte2_4 smallint, byte2_5 smallint,
    byte2_6 smallint, byte2_7 smallint, byte2_8 smallint, byte2_9 smallint, byte2_10 smallint,
    msc_location bigint, vlr_location bigint)";

const CALL_FORWARDING_DDL: &str = "
CREATE TABLE call_forwarding (
    s_id integer NOT NULL, sf_type smallint NOT NULL, start_time smallint NOT NULL,
    end_time smallint, numberx varchar(15),
    PRIMARY KEY (s_id, sf_type, start_time))";

fn populate_call_forwarding(rows: u64) -> String {
    format!(
        "INSERT INTO call_forwarding
         SELECT g / 4, (g % 4 + 1)::smallint, ((g % 3) * 8)::smallint, ((g % 3) * 8 + 5)::smallint,
                lpad((g % 1000000)::text, 15, '0')
         FROM generate_series(0, {rows} - 1) g"
    )
}

fn populate_subscriber(rows: u64) -> String {
    let smallints: Vec<String> = (0..30).map(|column| format!("((g * {}) % 256)::smallint", column + 7)).collect();
    format!(
        "INSERT INTO subscriber SELECT g, lpad(g::text, 15, '0'), {}, g::bigint * 4093, g::bigint * 4099
         FROM generate_series(1, {rows}) g",
        smallints.join(", ")
    )
}

/// Decodes every field, folding the values into a checksum so nothing is optimised away.
fn decode_all<R: Read>(reader: &mut CopyReader<R>, kinds: &[ValueKind]) -> u64 {
    let mut checksum = 0u64;
    while let Some(row) = reader.next_row().unwrap() {
        for (index, kind) in kinds.iter().enumerate() {
            let Some(bytes) = row.field(index) else { continue };
            checksum = checksum.wrapping_add(match kind.decode(bytes).unwrap() {
                Value::Int2(value) => value as u64,
                Value::Int4(value) => value as u64,
                Value::Int8(value) => value as u64,
                Value::Text(text) => text.len() as u64,
                _ => 1,
            });
        }
    }
    black_box(checksum)
}

fn main() {
    let mut rows = 1_000_000u64;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--rows" {
            rows = args.next().and_then(|value| value.parse().ok()).expect("--rows N");
        }
    }
    let cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let mut client = connect(&cluster.url()).unwrap();
    client.batch_execute(SUBSCRIBER_DDL).unwrap();
    client.batch_execute(CALL_FORWARDING_DDL).unwrap();
    let started = Instant::now();
    client.batch_execute(&populate_subscriber(rows)).unwrap();
    // TATP has 1.5 call_forwarding rows per special_facility row, 2.5 of
    // those per subscriber: 3.75 per subscriber, the largest table.
    let forwarding_rows = rows * 15 / 4;
    client.batch_execute(&populate_call_forwarding(forwarding_rows)).unwrap();
    client.batch_execute("VACUUM ANALYZE").unwrap();
    eprintln!("populated {rows} + {forwarding_rows} rows in {:.1} s", started.elapsed().as_secs_f64());
    measure(&mut client, "subscriber");
    measure(&mut client, "call_forwarding");
}

fn measure(client: &mut Client, name: &str) {
    let table = import_tables(client, &[name]).unwrap().remove(0);
    let kinds: Vec<ValueKind> = table.columns.iter().map(|column| column.value_kind().unwrap()).collect();
    let statement = table.copy_statement(None);

    // PostgreSQL alone producing the same stream, for scale.
    let server_copy = statement.replace("TO STDOUT", "TO '/dev/null'");
    let started = Instant::now();
    let rows = client.execute(server_copy.as_str(), &[]).unwrap();
    let seconds = started.elapsed().as_secs_f64();
    println!("{name}: server only (COPY TO '/dev/null'): {seconds:.3} s, {:.0} rows/s", rows as f64 / seconds);

    let mut captured = Vec::new();
    client.copy_out(statement.as_str()).unwrap().read_to_end(&mut captured).unwrap();
    for round in 0..3 {
        let started = Instant::now();
        let mut reader = CopyReader::new(captured.as_slice(), name, kinds.len());
        decode_all(&mut reader, &kinds);
        let seconds = started.elapsed().as_secs_f64();
        println!(
            "{name}: memory round {round}: {} rows, {:.1} MB, {:.3} s, {:.0} rows/s",
            reader.rows(),
            captured.len() as f64 / 1e6,
            seconds,
            reader.rows() as f64 / seconds
        );
    }
    for round in 0..3 {
        let started = Instant::now();
        let mut reader = start_copy(client, &statement, name, kinds.len()).unwrap();
        decode_all(&mut reader, &kinds);
        let seconds = started.elapsed().as_secs_f64();
        println!(
            "{name}: copy round {round}: {} rows, {:.3} s, {:.0} rows/s",
            reader.rows(),
            seconds,
            reader.rows() as f64 / seconds
        );
    }
}
