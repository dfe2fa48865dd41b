//! define_group against a real PostgreSQL: the TATP group's engine tables,
//! and each refusal with its SQLSTATE and hint.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::OnceLock;

use common::{cache_dump, tatp_spec, tatp_url};
use pgtier_backend::connect::connect;
use pgtier_cache::{CacheError, GroupSpec, LoadOptions, create_group_tables, define_group, load_group};
use pgtier_engine::{DataType, FkAction};
use pgtier_engine::{Database, EngineConfig};

/// Tables that break the rules, created once (concurrent CREATE IF NOT EXISTS can collide).
fn url_with_extra_tables() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(create_extra_tables).clone()
}

fn create_extra_tables() -> String {
    let url = tatp_url();
    let mut client = connect(&url).unwrap();
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS no_pk (s_id integer REFERENCES subscriber, note text);
             CREATE TABLE IF NOT EXISTS unrelated (id integer PRIMARY KEY);
             CREATE TABLE IF NOT EXISTS with_point (id integer PRIMARY KEY, s_id integer REFERENCES subscriber, location point);
             CREATE TABLE IF NOT EXISTS with_numeric (id integer PRIMARY KEY, s_id integer REFERENCES subscriber, amount numeric);
             INSERT INTO with_numeric SELECT g, g, (g * 1.25 - 37) / 7 FROM generate_series(1, 50) g;
             INSERT INTO with_numeric VALUES (51, 51, 12345678901234567890.123456789012345), (52, 52, -0.000000000000000000000000000001), (53, 53, NULL), (54, 54, 100.500);
             CREATE TABLE IF NOT EXISTS with_big_numeric (id integer PRIMARY KEY, s_id integer REFERENCES subscriber, amount numeric,
                 wide numeric(60, 5), coarse numeric(5, -2), tiny numeric(3, 5));
             INSERT INTO with_big_numeric VALUES (1, 1, 1.5, 1.5, 1.5, 0.001), (2, 2, 1e50 + 0.5, -1e50 - 0.000005, 12345, -0.00999),
                 (3, 3, 'NaN', 'NaN', 'NaN', 'NaN'), (4, 4, 'Infinity', NULL, NULL, NULL), (5, 5, '-Infinity', 0, -149, 0),
                 (6, 6, -12345678901234567890123456789012345678901234567890.123456789, 123456789012345678901234567890123456789012345678901234.5, 9999949, 0.00001),
                 (7, 7, 0.000000000000000000000000000000000000000000000000000000000000000000001, 1e-5, 0, 0);
             CREATE TABLE IF NOT EXISTS two_parents (id integer PRIMARY KEY, s_id integer REFERENCES subscriber,
                 s_id2 integer, ai smallint, FOREIGN KEY (s_id2, ai) REFERENCES access_info);
             CREATE TABLE IF NOT EXISTS typed (id integer PRIMARY KEY, s_id integer NOT NULL REFERENCES subscriber ON DELETE CASCADE,
                 n numeric(12,2), f real, d double precision, b boolean, t text, v varchar, y bytea, day date,
                 ts timestamp, tz timestamptz);
             INSERT INTO typed SELECT g, g, g * 1.25 - 1000, g / 3.0, -g / 7.0, g % 2 = 0, 'line ' || g, repeat('v', g % 5),
                 decode(md5(g::text), 'hex'), date '2024-02-28' + g, timestamp '1999-12-31 23:59:59.5' + g * interval '1 hour 1.25 second',
                 timestamptz '2020-01-01 00:00:00+00' - g * interval '1 day 7 minutes'
               FROM generate_series(1, 300) g;
             INSERT INTO typed (id, s_id) VALUES (301, 301);
             INSERT INTO typed (id, s_id, day, ts, tz) VALUES (302, 302, 'infinity', '-infinity', 'infinity'), (303, 303, '-infinity', 'infinity', '-infinity');
             CREATE TABLE IF NOT EXISTS with_uuid (id uuid PRIMARY KEY, s_id integer NOT NULL REFERENCES subscriber, other uuid UNIQUE, note text,
                 at time(3), ts timestamp(1), span interval);
             CREATE TABLE IF NOT EXISTS with_interval_fields (id integer PRIMARY KEY, s_id integer REFERENCES subscriber, d interval(2));
             INSERT INTO with_uuid SELECT md5(g::text)::uuid, g, CASE WHEN g % 3 = 0 THEN NULL ELSE md5('o' || g)::uuid END, 'n' || g,
                 time '00:00' + g * interval '5 minutes 1.2345 seconds', timestamp '1999-12-31 23:00' + g * interval '17 seconds',
                 CASE WHEN g % 5 = 0 THEN NULL ELSE (g - 100) * interval '1 mon 1 day 00:00:01.5' END
               FROM generate_series(1, 250) g ON CONFLICT DO NOTHING;
             CREATE TABLE IF NOT EXISTS with_arrays (id integer PRIMARY KEY, s_id integer NOT NULL REFERENCES subscriber, ints int4[],
                 bigs int8[], names text[], tags varchar(8)[], days date[], amounts numeric(8,2)[], flags bool[], ids uuid[], spans interval[]);
             INSERT INTO with_arrays SELECT g, g, CASE WHEN g % 7 = 0 THEN NULL ELSE ARRAY[g, -g, NULL] END, ARRAY[g::bigint * 1000000000000],
                 CASE WHEN g % 4 = 0 THEN '{}' ELSE ARRAY['n' || g, 'with space', '', 'NULL', NULL, 'q' || chr(34) || g || chr(92)] END,
                 ARRAY[repeat('t', g % 9)], ARRAY[date '2024-02-28' + g], ARRAY[g * 1.25, NULL], ARRAY[g % 2 = 0],
                 ARRAY[md5(g::text)::uuid], ARRAY[g * interval '1 day 00:00:01.5']
               FROM generate_series(1, 120) g ON CONFLICT DO NOTHING;
             CREATE TABLE IF NOT EXISTS with_json (id integer PRIMARY KEY, s_id integer NOT NULL REFERENCES subscriber, j json, b jsonb UNIQUE);
             INSERT INTO with_json SELECT g, g, CASE WHEN g % 4 = 0 THEN NULL ELSE format('{\"n\" : %s,  \"s\": \"v\\u00e9%s\", \"a\": [1.50, 1e2]}', g, g)::json END,
                 CASE WHEN g % 5 = 0 THEN NULL ELSE format('{\"n\": %s, \"n\": %s.0, \"list\": [%s, \"x\", null, true], \"e\": {}}', g, g, g * 1.25)::jsonb END
               FROM generate_series(1, 120) g ON CONFLICT DO NOTHING;
             CREATE SCHEMA IF NOT EXISTS other;
             CREATE TABLE IF NOT EXISTS other.t (id integer PRIMARY KEY);",
        )
        .unwrap();
    url
}

fn define(url: &str, root: &str, children: &[&str]) -> Result<pgtier_cache::CacheGroup, CacheError> {
    let spec =
        GroupSpec { root: root.into(), children: children.iter().map(|c| (*c).to_owned()).collect(), ..tatp_spec() };
    define_group(&mut connect(url).unwrap(), &spec)
}

#[track_caller]
fn refused(url: &str, root: &str, children: &[&str], sqlstate: &str, words: &[&str]) {
    let error = define(url, root, children).unwrap_err();
    assert_eq!(error.sqlstate(), sqlstate, "{error}");
    let message = error.to_string();
    for word in words {
        assert!(message.contains(word), "{message:?} lacks {word:?}");
    }
    if sqlstate != "42P01" {
        assert!(error.hint().is_some(), "{error}");
    }
}

#[test]
fn tatp_group_becomes_engine_tables() {
    let url = tatp_url();
    // Children in any order: parents come first in the definition.
    let group = define(&url, "subscriber", &["call_forwarding", "access_info", "special_facility"]).unwrap();
    let names: Vec<&str> = group.tables.iter().map(|t| t.def.name.as_str()).collect();
    assert_eq!(names, ["subscriber", "access_info", "special_facility", "call_forwarding"]);
    let root = group.root();
    assert_eq!(root.def.primary_key, ["s_id"]);
    assert_eq!(root.def.unique, [(Some("subscriber_sub_nbr_key".to_owned()), vec!["sub_nbr".to_owned()])]);
    assert_eq!(root.types[1], DataType::Varchar(15));
    let cf = &group.tables[3];
    assert_eq!(cf.def.primary_key, ["s_id", "sf_type", "start_time"]);
    assert_eq!(cf.def.foreign_keys.len(), 1);
    assert_eq!(cf.def.foreign_keys[0].parent_table, "special_facility");
    assert_eq!(cf.def.foreign_keys[0].columns, ["s_id", "sf_type"]);
    assert_eq!(group.chain(3), [3, 2, 0]);
    assert_eq!(group.tables[1].types[4], DataType::Char(3));
}

#[test]
fn every_supported_type_maps() {
    let url = url_with_extra_tables();
    let group = define(&url, "subscriber", &["typed"]).unwrap();
    let typed = &group.tables[1];
    assert_eq!(
        typed.types,
        [
            DataType::Int4,
            DataType::Int4,
            DataType::Numeric { precision: 12, scale: 2 },
            DataType::Float4,
            DataType::Float8,
            DataType::Bool,
            DataType::Text,
            DataType::Text,
            DataType::Bytea,
            DataType::Date,
            DataType::Timestamp(None),
            DataType::TimestampTz(None),
        ]
    );
    assert!(!typed.def.columns[1].nullable);
    assert_eq!(typed.def.foreign_keys[0].on_delete, FkAction::Cascade);
}

#[test]
fn refusals_carry_sqlstate_and_hint() {
    let url = url_with_extra_tables();
    refused(&url, "subscriber", &["no_pk"], "42P16", &["no_pk", "primary key"]);
    refused(&url, "no_pk", &[], "42P16", &["no_pk"]);
    refused(&url, "subscriber", &["unrelated"], "42830", &["unrelated", "foreign key"]);
    // call_forwarding's parent special_facility is not in the group.
    refused(&url, "subscriber", &["call_forwarding"], "42830", &["call_forwarding"]);
    refused(&url, "subscriber", &["access_info", "two_parents"], "42830", &["two_parents", "more than one"]);
    refused(&url, "subscriber", &["with_point"], "0A000", &["location", "point"]);
    refused(&url, "subscriber", &["with_interval_fields"], "0A000", &["d", "interval"]);
    refused(&url, "subscriber", &["access_info", "public.access_info"], "42712", &["access_info"]);
    refused(&url, "subscriber", &["other.t"], "0A000", &["other.t", "public"]);
    refused(&url, "subscriber", &["missing"], "42P01", &["missing"]);
    // A root whose children lead elsewhere: access_info as root, subscriber below it.
    refused(&url, "access_info", &["subscriber"], "42830", &["subscriber"]);
}

#[test]
fn every_supported_type_loads_as_postgres_prints_it() {
    let url = url_with_extra_tables();
    let group = define(&url, "subscriber", &["typed"]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    create_group_tables(&db, &group).unwrap();
    let options = LoadOptions { predicate: Some("s_id <= 400".into()), parallel: 2, ..LoadOptions::default() };
    let report = load_group(&db, || connect(&url).map_err(|e| panic!("{e}")), &group, &options).unwrap();
    assert_eq!(report.rows[1], ("typed".to_owned(), 303));
    let mut client = connect(&url).unwrap();
    client.batch_execute("SET TimeZone = 'UTC'; SET extra_float_digits = 1").unwrap();
    let expected = common::postgres_dump(&mut client, &group, "typed", "s_id <= 400");
    let cached = cache_dump(&db, "typed");
    assert_eq!(cached.len(), expected.len());
    for (c, e) in cached.iter().zip(&expected) {
        assert_eq!(c, e);
    }
}

#[test]
fn uuid_time_and_interval_columns_cache_and_load_as_postgres_has_them() {
    let url = url_with_extra_tables();
    let group = define(&url, "subscriber", &["with_uuid"]).unwrap();
    let table = &group.tables[1];
    assert_eq!(
        table.types,
        [
            DataType::Uuid,
            DataType::Int4,
            DataType::Uuid,
            DataType::Text,
            DataType::Time(Some(3)),
            DataType::Timestamp(Some(1)),
            DataType::Interval
        ]
    );
    assert_eq!(table.def.primary_key, ["id"]);
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    create_group_tables(&db, &group).unwrap();
    let options = LoadOptions { predicate: Some("s_id <= 200".into()), parallel: 2, ..LoadOptions::default() };
    let report = load_group(&db, || connect(&url).map_err(|e| panic!("{e}")), &group, &options).unwrap();
    assert_eq!(report.rows[1], ("with_uuid".to_owned(), 200));
    let mut client = connect(&url).unwrap();
    let expected = common::postgres_dump(&mut client, &group, "with_uuid", "s_id <= 200");
    assert_eq!(expected.len(), 200);
    assert_eq!(cache_dump(&db, "with_uuid"), expected);
    // The uuid primary key finds each row PostgreSQL has under it.
    let id = db.catalog().table_by_name("with_uuid").unwrap().id;
    let mut t = db.begin().unwrap();
    let mut buf = pgtier_engine::RowBuf::new();
    let rows = client
        .query("SELECT replace(id::text, '-', ''), s_id FROM with_uuid WHERE s_id IN (7, 150, 201)", &[])
        .unwrap();
    assert_eq!(rows.len(), 3);
    for row in rows {
        let hex: String = row.get(0);
        let key: [u8; 16] = std::array::from_fn(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap());
        let s_id: i32 = row.get(1);
        // s_id 201 is outside the loaded predicate: not cached.
        assert_eq!(t.get(id, &[pgtier_engine::Value::Uuid(key)], &mut buf).unwrap(), s_id <= 200, "{hex}");
        if s_id <= 200 {
            assert_eq!(buf.get(1), pgtier_engine::ValueRef::Int4(s_id));
        }
    }
    t.commit().unwrap();
    db.verify().unwrap();
}

/// Unconstrained numeric columns cache with each value's own scale; a
/// value an i128 mantissa cannot hold stops the load with an error (never
/// a rounded value).
#[test]
fn numeric_loads_wide_values_nan_and_infinities_as_postgres_has_them() {
    let url = url_with_extra_tables();
    let group = define(&url, "subscriber", &["with_numeric"]).unwrap();
    assert_eq!(group.tables[1].types[2], pgtier_engine::NUMERIC_UNCONSTRAINED);
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    create_group_tables(&db, &group).unwrap();
    let options = LoadOptions { predicate: Some("s_id <= 100".into()), parallel: 2, ..LoadOptions::default() };
    let report = load_group(&db, || connect(&url).map_err(|e| panic!("{e}")), &group, &options).unwrap();
    assert_eq!(report.rows[1], ("with_numeric".to_owned(), 54));
    let mut client = connect(&url).unwrap();
    let expected = common::postgres_dump(&mut client, &group, "with_numeric", "s_id <= 100");
    assert_eq!(cache_dump(&db, "with_numeric"), expected);

    // 50-digit values, NaN, the infinities and PostgreSQL 15's typmods
    // (precision past 38, negative scale, scale past precision).
    let big = define(&url, "subscriber", &["with_big_numeric"]).unwrap();
    assert_eq!(
        big.tables[1].types[3..],
        [
            DataType::Numeric { precision: 60, scale: 5 },
            DataType::Numeric { precision: 5, scale: -2 },
            DataType::Numeric { precision: 3, scale: 5 }
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    create_group_tables(&db, &big).unwrap();
    let report = load_group(&db, || connect(&url).map_err(|e| panic!("{e}")), &big, &options).unwrap();
    assert_eq!(report.rows[1], ("with_big_numeric".to_owned(), 7));
    let expected = common::postgres_dump(&mut client, &big, "with_big_numeric", "s_id <= 100");
    assert!(
        expected.iter().any(|row| row.contains("NaN")) && expected.iter().any(|row| row.contains("-Infinity")),
        "{expected:?}"
    );
    assert_eq!(cache_dump(&db, "with_big_numeric"), expected);
}

#[test]
fn json_and_jsonb_columns_cache_and_load_as_postgres_has_them() {
    let url = url_with_extra_tables();
    let group = define(&url, "subscriber", &["with_json"]).unwrap();
    let table = &group.tables[1];
    assert_eq!(table.types, [DataType::Int4, DataType::Int4, DataType::Json, DataType::Jsonb]);
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    create_group_tables(&db, &group).unwrap();
    let options = LoadOptions { predicate: Some("s_id <= 100".into()), parallel: 2, ..LoadOptions::default() };
    let report = load_group(&db, || connect(&url).map_err(|e| panic!("{e}")), &group, &options).unwrap();
    assert_eq!(report.rows[1], ("with_json".to_owned(), 100));
    let mut client = connect(&url).unwrap();
    // json as it was written, jsonb as jsonb_out prints it.
    let expected = common::postgres_dump(&mut client, &group, "with_json", "s_id <= 100");
    assert_eq!(expected.len(), 100);
    assert_eq!(cache_dump(&db, "with_json"), expected);
    // The jsonb UNIQUE index finds each value PostgreSQL has, by value.
    let id = db.catalog().table_by_name("with_json").unwrap().id;
    let index = db.catalog().indexes_of(id).into_iter().find(|i| i.unique && !i.primary).unwrap().id;
    let mut t = db.begin().unwrap();
    let rows = client.query("SELECT b::text, id FROM with_json WHERE id IN (1, 7, 101)", &[]).unwrap();
    assert_eq!(rows.len(), 3);
    for row in rows {
        let b: String = row.get(0);
        let id_value: i32 = row.get(1);
        // Written with another spelling of the same value: found all the same.
        let respelled = b.replacen("\"list\": [", "\"list\" : [ ", 1).replace(".25,", ".250,");
        let mut hits = Vec::new();
        t.scan_prefix(
            index,
            &[pgtier_engine::Value::Jsonb(pgtier_engine::json::canonical(&respelled).unwrap())],
            |r| {
                hits.push((r.get(0).to_owned_value(), r.get(3).to_owned_value()));
                Ok(true)
            },
        )
        .unwrap();
        let want = if id_value <= 100 {
            vec![(pgtier_engine::Value::Int4(id_value), pgtier_engine::Value::Jsonb(b.clone()))]
        } else {
            Vec::new()
        };
        assert_eq!(hits, want, "{b}");
    }
    t.commit().unwrap();
    db.verify().unwrap();
}

#[test]
fn array_columns_cache_and_load_as_postgres_has_them() {
    let url = url_with_extra_tables();
    let group = define(&url, "subscriber", &["with_arrays"]).unwrap();
    let table = &group.tables[1];
    let array = |e: DataType| DataType::Array(pgtier_engine::ElemType::of(e).unwrap());
    assert_eq!(
        table.types,
        [
            DataType::Int4,
            DataType::Int4,
            array(DataType::Int4),
            array(DataType::Int8),
            array(DataType::Text),
            array(DataType::Varchar(8)),
            array(DataType::Date),
            array(DataType::Numeric { precision: 8, scale: 2 }),
            array(DataType::Bool),
            array(DataType::Uuid),
            array(DataType::Interval),
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    create_group_tables(&db, &group).unwrap();
    let options = LoadOptions { predicate: Some("s_id <= 100".into()), parallel: 2, ..LoadOptions::default() };
    let report = load_group(&db, || connect(&url).map_err(|e| panic!("{e}")), &group, &options).unwrap();
    assert_eq!(report.rows[1], ("with_arrays".to_owned(), 100));
    let mut client = connect(&url).unwrap();
    let expected = common::postgres_dump(&mut client, &group, "with_arrays", "s_id <= 100");
    assert_eq!(expected.len(), 100);
    assert_eq!(cache_dump(&db, "with_arrays"), expected);
    db.verify().unwrap();
}
