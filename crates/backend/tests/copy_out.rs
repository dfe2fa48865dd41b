//! Binary COPY against a real PostgreSQL: decoded values equal PostgreSQL's
//! own text output for the same rows; broken streams give errors, not
//! panics; cancellation stops a COPY promptly.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::Read;
use std::time::{Duration, Instant};

use pgtier_backend::BackendError;
use pgtier_backend::catalog::{TableDef, import_tables};
use pgtier_backend::connect::connect;
use pgtier_backend::copy_out::{CopyFormatError, CopyReader, NumericError, Value, ValueKind, start_copy};
use pgtier_backend::harness::shared_cluster;
use pgtier_backend::snapshot::Cancel;
use postgres::{Client, SimpleQueryMessage};

/// Text output settings `Value`'s Display follows.
const SESSION: &str = "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, MDY'; SET extra_float_digits = 1; \
                       SET bytea_output = 'hex'";

const TYPED_DDL: &str = r#"
CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
CREATE TABLE typed (
    id int PRIMARY KEY, b bool, i2 int2, i4 int4, i8 int8, f4 float4, f8 float8, n numeric,
    n2 numeric(12,2), t text, vc varchar(10), bp char(5), nm name, by bytea, d date,
    ts timestamp, tstz timestamptz, u uuid, o oid, js json, jb jsonb, dom posint);
INSERT INTO typed VALUES
 (1, true, -32768, -2147483648, -9223372036854775808, 1.5, 0.1, 0, 0, '', '', '', '', '\x', '2000-01-01',
  '2000-01-01 00:00:00', '2000-01-01 00:00:00+00', '00000000-0000-0000-0000-000000000000', 0, '{}', '{}', NULL),
 (2, false, 32767, 2147483647, 9223372036854775807, '-0', 1e100, -0.001, -12345.67, 'héllo ✓ "q" \ back',
  'abc', 'ab', 'Name', '\x00ff10', '0044-03-15 BC', '0044-03-15 12:30:00.5 BC', '2024-06-01 12:00:00.123+02',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 4294967295, '{"a": [1, "x"]}', '{"b": [1, 2], "a": null}', 7),
 (3, NULL, 0, 0, 0, 'NaN', 'NaN', 'NaN', NULL, NULL, NULL, NULL, NULL, NULL, 'infinity', 'infinity', 'infinity',
  NULL, NULL, NULL, NULL, NULL),
 (4, true, -1, -1, -1, 'Infinity', 'Infinity', 'Infinity', 9999999999.99, 'x', 'y', 'zzzzz', 'n', '\x7f',
  '-infinity', '-infinity', '-infinity', NULL, 1, 'null', '"s"', NULL),
 (5, false, 1, 1, 1, '-Infinity', '-Infinity', '-Infinity', 0.01, ' lead', 'trail ', ' ', 'x', '\x',
  '4713-01-01 BC', '4713-01-01 00:00:00 BC', '0100-02-28 23:59:59.999999+00 BC', NULL, 2, '1', '1', NULL),
 (6, NULL, NULL, NULL, NULL, 1e-10, 5e-324, 123456789.123456789, -0.5, NULL, NULL, NULL, NULL, NULL,
  '5874897-12-31', '294276-12-31 23:59:59.999999', '1999-12-31 23:59:59.999999+00', NULL, NULL, NULL, NULL, NULL),
 (7, NULL, NULL, NULL, NULL, 3.4028235e38, 1.7976931348623157e308, 1e-30, NULL, NULL, NULL, NULL, NULL, NULL,
  '2024-02-29', '1970-01-01 00:00:00.000001', '2038-01-19 03:14:08+00', NULL, NULL, NULL, NULL, NULL),
 (8, NULL, NULL, NULL, NULL, 1.17549435e-38, -123456789012345.6, -99999999999999999999999.99, NULL, NULL,
  NULL, NULL, NULL, NULL, '1999-12-31', '1900-02-28 10:00:00', NULL, NULL, NULL, NULL, NULL, NULL),
 (9, NULL, NULL, NULL, NULL, 0.1, 1234567890123456, 100000000, NULL, NULL, NULL, NULL, NULL, NULL,
  '0001-01-01', '0001-01-01 00:00:00 BC', NULL, NULL, NULL, NULL, NULL, NULL),
 (10, NULL, NULL, NULL, NULL, 1e6, 1e15, 0.00010, NULL, NULL, NULL, NULL, NULL, NULL,
  '1600-03-01', '2000-02-29 12:00:00', NULL, NULL, NULL, NULL, NULL, NULL),
 (11, NULL, NULL, NULL, NULL, 999999, 0.0001, 1e40, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
CREATE TABLE randomized (
    id int PRIMARY KEY, n numeric, n6 numeric(20,6), f8 float8, f4 float4, d date, ts timestamp, tstz timestamptz,
    f4_int float4, f8_int float8);
INSERT INTO randomized
SELECT g,
       ((random() - 0.5) * 10 ^ (random() * 40 - 20))::numeric,
       ((random() - 0.5) * 1e13)::numeric(20,6),
       (random() - 0.5) * 10 ^ (random() * 600 - 300),
       ((random() - 0.5) * 10 ^ (random() * 70 - 35))::float4,
       date '2000-01-01' + ((random() - 0.5) * 4000000)::int,
       timestamp '2000-01-01' + (random() - 0.5) * interval '2000000 days',
       timestamptz '2000-01-01 00:00:00+00' + (random() - 0.5) * interval '2000000 days',
       -- Large integral values: where shortest forms land on rounding boundaries.
       (random() * 4e9)::float4,
       round(random() * 1e25)::float8
FROM generate_series(1, 3000) g;
INSERT INTO randomized (id, f4, f8) VALUES (-1, 16777217, 1e23), (-2, 3e-45, 9007199254740993), (-3, 33554436, 2e22);
"#;

fn database(name: &str, ddl: &str) -> (Client, String) {
    let url = shared_cluster().unwrap().create_database(name).unwrap();
    let mut client = connect(&url).unwrap();
    client.batch_execute(ddl).unwrap();
    client.batch_execute(SESSION).unwrap();
    (client, url)
}

/// Each row's fields as PostgreSQL's text output, keyed by the first column.
fn text_rows(client: &mut Client, table: &TableDef) -> HashMap<String, Vec<Option<String>>> {
    let columns: Vec<String> = table.columns.iter().map(|column| format!("\"{}\"", column.name)).collect();
    let sql = format!("SELECT {} FROM {}", columns.join(", "), table.name);
    let mut rows = HashMap::new();
    for message in client.simple_query(&sql).unwrap() {
        if let SimpleQueryMessage::Row(row) = message {
            let fields: Vec<Option<String>> = (0..row.len()).map(|index| row.get(index).map(str::to_owned)).collect();
            rows.insert(fields[0].clone().unwrap(), fields);
        }
    }
    rows
}

/// Decodes every row of `table` from binary COPY and checks it against the text output.
fn assert_copy_matches_text(client: &mut Client, table: &TableDef) -> u64 {
    let expected = text_rows(client, table);
    let kinds: Vec<ValueKind> = table.columns.iter().map(|column| column.value_kind().unwrap()).collect();
    let statement = table.copy_statement(None);
    let mut reader = start_copy(client, &statement, &table.name.to_string(), kinds.len()).unwrap();
    while let Some(row) = reader.next_row().unwrap() {
        let mut decoded = Vec::with_capacity(kinds.len());
        for (index, kind) in kinds.iter().enumerate() {
            decoded.push(row.field(index).map(|bytes| kind.decode(bytes).unwrap()));
        }
        let key = decoded[0].unwrap().to_string();
        let text = &expected[&key];
        for (index, value) in decoded.iter().enumerate() {
            let column = &table.columns[index].name;
            assert_eq!(value.map(|value| value.to_string()), text[index], "row {key}, column {column}");
            if let Some(Value::Numeric(numeric)) = value {
                check_numeric_parts(numeric, text[index].as_deref().unwrap());
            }
        }
    }
    assert_eq!(reader.rows(), expected.len() as u64);
    reader.rows()
}

/// `to_i128` gives the same digits as the text, or says why it cannot.
fn check_numeric_parts(numeric: &pgtier_backend::copy_out::Numeric<'_>, text: &str) {
    match numeric.to_i128() {
        Ok((mantissa, scale)) => {
            let digits = text.replace(['.', '-'], "");
            let digits = digits.trim_start_matches('0');
            let shown = mantissa.unsigned_abs().to_string();
            assert_eq!(shown.trim_start_matches('0'), digits, "{text}");
            assert_eq!(mantissa < 0, text.starts_with('-'), "{text}");
            let fraction = text.split_once('.').map_or(0, |(_, fraction)| fraction.len());
            assert_eq!(usize::from(scale), fraction, "{text}");
        }
        Err(NumericError::NaN) => assert_eq!(text, "NaN"),
        Err(NumericError::Infinity) => assert!(text.ends_with("Infinity"), "{text}"),
        Err(NumericError::Overflow) => {
            assert!(text.replace(['.', '-'], "").trim_start_matches('0').len() >= 39, "{text}")
        }
    }
}

#[test]
fn decoded_values_equal_postgres_text_output() {
    let (mut client, _) = database("copy_differential", TYPED_DDL);
    let tables = import_tables(&mut client, &["typed", "randomized"]).unwrap();
    assert_eq!(assert_copy_matches_text(&mut client, &tables[0]), 11);
    assert_eq!(assert_copy_matches_text(&mut client, &tables[1]), 3003);
}

#[test]
fn predicate_and_column_subset() {
    let (mut client, _) = database("copy_predicate", TYPED_DDL);
    let statement = pgtier_backend::copy_out::copy_statement("public", "typed", &["id", "t"], Some("id % 2 = 0"));
    let mut reader = start_copy(&mut client, &statement, "typed", 2).unwrap();
    let mut ids = Vec::new();
    while let Some(row) = reader.next_row().unwrap() {
        ids.push(ValueKind::Int4.decode(row.field(0).unwrap()).unwrap().to_string());
    }
    drop(reader);
    ids.sort();
    assert_eq!(ids, ["10", "2", "4", "6", "8"]);
    // A wrong expected column count is a format error, not a misread.
    let statement = pgtier_backend::copy_out::copy_statement("public", "typed", &["id", "t"], None);
    let error = start_copy(&mut client, &statement, "typed", 3).unwrap().next_row().unwrap_err();
    assert!(matches!(error, BackendError::CopyFormat { error: CopyFormatError::FieldCount { .. }, .. }), "{error}");
    // PostgreSQL's errors come back with their SQLSTATE.
    let bad = pgtier_backend::copy_out::copy_statement("public", "typed", &["id"], Some("nope = 1"));
    let error = start_copy(&mut client, &bad, "typed", 1).err().unwrap();
    assert_eq!(error.sqlstate(), "42703", "{error}");
}

/// A source that hands out at most `chunk` bytes per read, to hit every
/// buffer boundary.
struct Trickle<'a> {
    bytes: &'a [u8],
    chunk: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let count = self.chunk.min(buf.len()).min(self.bytes.len());
        buf[..count].copy_from_slice(&self.bytes[..count]);
        self.bytes = &self.bytes[count..];
        Ok(count)
    }
}

/// Reads and decodes a whole stream; Ok(rows) or the first error.
fn drain(bytes: &[u8], chunk: usize, kinds: &[ValueKind]) -> Result<u64, BackendError> {
    let mut reader = CopyReader::new(Trickle { bytes, chunk }, "test", kinds.len());
    while let Some(row) = reader.next_row()? {
        for (index, kind) in kinds.iter().enumerate() {
            if let Some(field) = row.field(index)
                && let Ok(value) = kind.decode(field)
            {
                // Formatting must not panic on any decodable value either.
                let _ = value.to_string();
                if let Value::Numeric(numeric) = value {
                    let _ = numeric.to_i128();
                }
            }
        }
    }
    Ok(reader.rows())
}

fn raw_copy(client: &mut Client, table: &TableDef) -> Vec<u8> {
    let mut bytes = Vec::new();
    client.copy_out(table.copy_statement(None).as_str()).unwrap().read_to_end(&mut bytes).unwrap();
    bytes
}

#[test]
fn truncated_and_corrupted_streams_are_errors_not_panics() {
    let (mut client, _) = database("copy_fuzz", TYPED_DDL);
    let table = import_tables(&mut client, &["typed"]).unwrap().remove(0);
    let kinds: Vec<ValueKind> = table.columns.iter().map(|column| column.value_kind().unwrap()).collect();
    let stream = raw_copy(&mut client, &table);
    for chunk in [1, 3, 7, 4096] {
        assert_eq!(drain(&stream, chunk, &kinds).unwrap(), 11);
    }
    for length in 0..stream.len() {
        let error = drain(&stream[..length], 5, &kinds).unwrap_err();
        assert_eq!(error.sqlstate(), "22P04", "prefix {length}: {error}");
    }
    let mut extended = stream.clone();
    extended.push(0);
    assert!(matches!(
        drain(&extended, 64, &kinds).unwrap_err(),
        BackendError::CopyFormat { error: CopyFormatError::TrailingData, .. }
    ));
    // Deterministic xorshift corruption of 1-3 bytes at a time, and
    // insertions of huge field lengths that must not be allocated up front.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..20_000 {
        let mut corrupt = stream.clone();
        for _ in 0..=next() % 3 {
            let at = (next() % corrupt.len() as u64) as usize;
            corrupt[at] = next() as u8;
        }
        let _ = drain(&corrupt, 1 + (next() % 64) as usize, &kinds);
    }
    let mut huge = stream[..19].to_vec();
    huge.extend_from_slice(&1i16.to_be_bytes());
    huge.extend_from_slice(&0x7fff_fff0i32.to_be_bytes());
    huge.extend_from_slice(&[0; 100]);
    assert!(drain(&huge, 4096, &[ValueKind::Bytea]).is_err());
    for (bytes, expected) in [
        (b"PGCOPX\n\xff\r\n\0\0\0\0\0\0\0\0\0\xff\xff".to_vec(), CopyFormatError::BadSignature),
        (b"PGCOPY\n\xff\r\n\0\0\x01\0\0\0\0\0\0\xff\xff".to_vec(), CopyFormatError::UnsupportedFlags(1 << 16)),
    ] {
        let error = drain(&bytes, 64, &[]).unwrap_err();
        assert!(matches!(&error, BackendError::CopyFormat { error, .. } if *error == expected), "{error}");
    }
    let mut negative = stream[..19].to_vec();
    negative.extend_from_slice(&1i16.to_be_bytes());
    negative.extend_from_slice(&(-2i32).to_be_bytes());
    let error = drain(&negative, 64, &[ValueKind::Int4]).unwrap_err();
    assert!(matches!(error, BackendError::CopyFormat { error: CopyFormatError::FieldLength { length: -2, .. }, .. }));
}

#[test]
fn decoders_reject_bad_field_bytes() {
    assert!(ValueKind::Int4.decode(&[0, 0, 1]).is_err());
    assert!(ValueKind::Bool.decode(&[2]).is_err());
    assert!(ValueKind::Text.decode(&[0xff, 0xfe]).is_err());
    assert!(ValueKind::Jsonb.decode(b"\x02{}").is_err());
    assert!(ValueKind::Uuid.decode(&[0; 15]).is_err());
    let numeric = |ndigits: i16, weight: i16, sign: u16, dscale: u16, digits: &[i16]| {
        let mut bytes = Vec::new();
        for word in [ndigits as u16, weight as u16, sign, dscale] {
            bytes.extend_from_slice(&word.to_be_bytes());
        }
        digits.iter().for_each(|digit| bytes.extend_from_slice(&digit.to_be_bytes()));
        bytes
    };
    assert!(ValueKind::Numeric.decode(&numeric(1, 0, 0, 0, &[10_000])).is_err(), "digit out of range");
    assert!(ValueKind::Numeric.decode(&numeric(2, 0, 0, 0, &[1])).is_err(), "missing digit");
    assert!(ValueKind::Numeric.decode(&numeric(0, 0, 0x1234, 0, &[])).is_err(), "bad sign");
    assert!(ValueKind::Numeric.decode(&numeric(1, 0, 0xC000, 0, &[1])).is_err(), "NaN with digits");
    let bytes = numeric(1, 9, 0, 2, &[1]);
    let Value::Numeric(big) = ValueKind::Numeric.decode(&bytes).unwrap() else { panic!("not a numeric") };
    assert_eq!(big.to_i128(), Ok((10i128.pow(38), 2)), "10^36 at scale 2 fits i128");
    let bytes = numeric(1, 9, 0, 0, &[1000]);
    let Value::Numeric(too_big) = ValueKind::Numeric.decode(&bytes).unwrap() else { panic!("not a numeric") };
    assert_eq!(too_big.to_i128(), Err(NumericError::Overflow));
}

#[test]
fn cancel_stops_a_running_copy() {
    let (mut client, url) = database(
        "copy_cancel",
        "CREATE TABLE big AS SELECT g AS id, md5(g::text) AS t FROM generate_series(1, 200000) g",
    );
    // Flag between rows: the reader stops at its next row.
    let cancel = Cancel::new();
    cancel.register(client.cancel_token());
    {
        let statement = pgtier_backend::copy_out::copy_statement("public", "big", &["id", "t"], None);
        let mut reader = start_copy(&mut client, &statement, "big", 2).unwrap().with_cancel(cancel.clone());
        for _ in 0..1000 {
            reader.next_row().unwrap().unwrap();
        }
        assert_eq!(cancel.cancel(), 0);
        assert!(matches!(reader.next_row(), Err(BackendError::Cancelled)));
    }
    assert_usable(&mut client);

    // A COPY that waits on the server is stopped by the cancel request.
    let mut slow = connect(&url).unwrap();
    let cancel = Cancel::new();
    cancel.register(slow.cancel_token());
    let canceller = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            cancel.cancel()
        })
    };
    let started = Instant::now();
    let statement = "COPY (SELECT pg_sleep(60), id FROM big) TO STDOUT (FORMAT binary)";
    let mut reader = start_copy(&mut slow, statement, "slow", 2).unwrap().with_cancel(cancel);
    let error = loop {
        match reader.next_row() {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("slow COPY finished"),
            Err(error) => break error,
        }
    };
    assert!(matches!(error, BackendError::Cancelled), "{error}");
    assert_eq!(error.sqlstate(), "57014");
    assert!(started.elapsed() < Duration::from_secs(10), "cancel took {:?}", started.elapsed());
    assert_eq!(canceller.join().unwrap(), 0);
    drop(reader);
    assert_usable(&mut slow);
    // Registering after the cancel cancels at once (nothing runs here; no error).
    let late = Cancel::new();
    late.cancel();
    late.register(slow.cancel_token());
    assert!(late.is_cancelled());
}

/// The connection works again once the cancelled COPY is dropped. A cancel
/// request that reaches the server late may still hit the next statement
/// (PostgreSQL's cancel is asynchronous), so one 57014 is tolerated.
fn assert_usable(client: &mut Client) {
    for attempt in 0..2 {
        match client.query_one("SELECT 1", &[]) {
            Ok(row) => {
                assert_eq!(row.get::<_, i32>(0), 1);
                return;
            }
            Err(error) if attempt == 0 && error.code().is_some_and(|code| code.code() == "57014") => {}
            Err(error) => panic!("connection unusable after cancel: {error}"),
        }
    }
}

#[test]
fn rows_larger_than_the_buffer() {
    let (mut client, _) = database(
        "copy_large_rows",
        "CREATE TABLE wide (id int, body text, blob bytea);
         INSERT INTO wide SELECT g, repeat(chr(64 + g), g * 300000), decode(repeat('ab', g * 200000), 'hex')
         FROM generate_series(1, 5) g;",
    );
    let statement = pgtier_backend::copy_out::copy_statement("public", "wide", &["id", "body", "blob"], None);
    let mut reader = start_copy(&mut client, &statement, "wide", 3).unwrap();
    let mut seen = 0;
    while let Some(row) = reader.next_row().unwrap() {
        let Value::Int4(id) = ValueKind::Int4.decode(row.field(0).unwrap()).unwrap() else { panic!("not an int4") };
        let Value::Text(body) = ValueKind::Text.decode(row.field(1).unwrap()).unwrap() else { panic!("not text") };
        assert_eq!(body.len(), id as usize * 300_000);
        assert!(body.bytes().all(|byte| byte == 64 + id as u8));
        assert_eq!(row.field(2).unwrap().len(), id as usize * 200_000);
        seen += 1;
    }
    assert_eq!(seen, 5);
}

#[test]
fn statement_timeout_is_not_reported_as_a_cancel() {
    let url = shared_cluster().unwrap().create_database("snapshot_timeout").unwrap();
    let mut client = connect(&url).unwrap();
    client.batch_execute("SET statement_timeout = '100ms'").unwrap();
    let statement = "COPY (SELECT pg_sleep(10)) TO STDOUT (FORMAT binary)";
    let error = match start_copy(&mut client, statement, "sleep", 1) {
        Err(error) => error,
        Ok(mut reader) => reader.next_row().err().unwrap(),
    };
    assert_eq!(error.sqlstate(), "57014");
    assert!(!matches!(error, BackendError::Cancelled), "{error}");
    assert!(error.to_string().contains("statement timeout"), "{error}");
}
