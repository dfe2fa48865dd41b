//! Sessions with different TimeZone and DateStyle served by one event-loop
//! thread (`event_loops = 1`) and by a thread each: every session reads
//! (COPY text, literals) and writes (DataRow text) values in its own zone
//! and style, whatever the other session on its thread set. Differential:
//! the same interleaving against the private PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;

fn rows(c: &mut postgres::Client, sql: &str) -> Vec<String> {
    common::text_rows(c, sql)
        .into_iter()
        .map(|r| r.into_iter().map(|v| v.unwrap_or_else(|| "NULL".into())).collect::<Vec<_>>().join("|"))
        .collect()
}

fn copy_in(c: &mut postgres::Client, data: &str) {
    let mut w = c.copy_in("COPY tzs FROM STDIN").unwrap();
    w.write_all(data.as_bytes()).unwrap();
    w.finish().unwrap();
}

/// Two sessions, interleaved message by message; what each one saw.
fn transcript(a: &mut postgres::Client, b: &mut postgres::Client) -> Vec<String> {
    let mut out = Vec::new();
    a.batch_execute("SET TIME ZONE 'America/New_York'; SET DateStyle = 'SQL, DMY'").unwrap();
    b.batch_execute("SET TIME ZONE 'Asia/Kolkata'").unwrap();
    a.batch_execute("CREATE TABLE tzs (id int PRIMARY KEY, at timestamptz, d date)").unwrap();
    for round in 0..3 {
        copy_in(a, &format!("{}\t2024-07-01 12:0{round}\t01/02/2024\n", 10 * round + 1));
        copy_in(b, &format!("{}\t2024-07-01 12:0{round}\t2024-02-01\n", 10 * round + 2));
        a.batch_execute(&format!("INSERT INTO tzs VALUES ({}, '2024-03-10 02:30', '31/12/2024')", 10 * round + 3))
            .unwrap();
        b.batch_execute(&format!("INSERT INTO tzs VALUES ({}, '2024-03-10 02:30', '2024-12-31')", 10 * round + 4))
            .unwrap();
        for (name, c) in [("a", &mut *a), ("b", &mut *b)] {
            for row in rows(
                c,
                &format!(
                    "SELECT id, at, d, at::date, extract(hour FROM at) FROM tzs WHERE id / 10 = {round} ORDER BY id"
                ),
            ) {
                out.push(format!("{name} round {round}: {row}"));
            }
        }
    }
    for (name, c) in [("a", &mut *a), ("b", &mut *b)] {
        let at: Vec<std::time::SystemTime> =
            c.query("SELECT at FROM tzs ORDER BY id", &[]).unwrap().iter().map(|r| r.get(0)).collect();
        out.push(format!("{name} binary: {at:?}"));
    }
    out
}

fn pgtier_transcript(event_loops: usize) -> Vec<String> {
    let srv = common::start_with(&format!("event_loops = {event_loops}\n[auth]\nmethod = \"trust\"\n"));
    let connect = || {
        let mut c = srv.config();
        c.password("");
        c.connect(postgres::NoTls).unwrap()
    };
    let (mut a, mut b) = (connect(), connect());
    transcript(&mut a, &mut b)
}

#[test]
fn sessions_sharing_a_thread_keep_their_own_zone_and_style() {
    let cluster = pgtier_backend::shared_cluster().expect("private PostgreSQL");
    let url = cluster.create_database(&format!("time_zones_{}", std::process::id())).unwrap();
    let mut a = pgtier_backend::connect(&url).unwrap();
    let mut b = pgtier_backend::connect(&url).unwrap();
    let expected = transcript(&mut a, &mut b);
    assert!(expected.iter().any(|l| l.starts_with("a round 0: 1|01/07/2024 12:00:00 EDT|01/02/2024")), "{expected:#?}");
    assert!(
        expected.iter().any(|l| l.starts_with("b round 0: 2|2024-07-01 12:00:00+05:30|2024-02-01")),
        "{expected:#?}"
    );
    assert_eq!(pgtier_transcript(1), expected, "one event loop");
    assert_eq!(pgtier_transcript(0), expected, "a thread per session");
}

/// Reads backend messages up to ReadyForQuery; the text of every DataRow
/// field, and the SQLSTATE of any ErrorResponse.
fn until_ready(s: &mut std::net::TcpStream) -> Vec<String> {
    use std::io::Read;
    let mut out = Vec::new();
    loop {
        let mut head = [0u8; 5];
        s.read_exact(&mut head).unwrap();
        let len = i32::from_be_bytes(head[1..5].try_into().unwrap()) as usize - 4;
        let mut body = vec![0u8; len];
        s.read_exact(&mut body).unwrap();
        match head[0] {
            b'Z' => return out,
            b'D' => {
                let mut i = 2;
                while i + 4 <= body.len() {
                    let n = i32::from_be_bytes(body[i..i + 4].try_into().unwrap());
                    i += 4;
                    if n >= 0 {
                        out.push(String::from_utf8_lossy(&body[i..i + n as usize]).into_owned());
                        i += n as usize;
                    }
                }
            }
            b'E' => out.push(format!("error {:?}", common::sqlstates(&[&head[..], &body[..]].concat()))),
            _ => {}
        }
    }
}

/// A Bind's text parameter is read in its session's zone even when another
/// session ran on the same loop thread between that session's Parse and
/// its Bind (no statement of its own runs before the Bind is decoded).
#[test]
fn a_bind_parameter_is_read_in_its_sessions_zone() {
    let mut oracle = common::postgres("bind_zone");
    oracle.batch_execute("SET TIME ZONE 'America/New_York'").unwrap();
    let expected = rows(&mut oracle, "SELECT '2024-07-01 12:00'::timestamptz::text");

    let srv = common::start_with("event_loops = 1\n[auth]\nmethod = \"trust\"\n");
    let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(common::TIMEOUT)).unwrap();
    s.write_all(&common::startup_packet("postgres")).unwrap();
    until_ready(&mut s);
    s.write_all(&common::message(b'Q', &common::cstr("SET TIME ZONE 'America/New_York'"))).unwrap();
    until_ready(&mut s);
    let mut parse = common::cstr("s");
    parse.extend(common::cstr("SELECT $1::timestamptz::text"));
    parse.extend(0i16.to_be_bytes());
    let mut bytes = common::message(b'P', &parse);
    bytes.extend(common::message(b'S', &[]));
    s.write_all(&bytes).unwrap();
    until_ready(&mut s);

    let mut other = srv.config();
    other.password("");
    let mut other = other.connect(postgres::NoTls).unwrap();
    other.batch_execute("SET TIME ZONE 'Asia/Kolkata'").unwrap();
    assert_eq!(rows(&mut other, "SELECT '2024-07-01 12:00'::timestamptz::text"), ["2024-07-01 12:00:00+05:30"]);

    let value = b"2024-07-01 12:00";
    let mut bind = common::cstr("");
    bind.extend(common::cstr("s"));
    bind.extend(1i16.to_be_bytes());
    bind.extend(0i16.to_be_bytes());
    bind.extend(1i16.to_be_bytes());
    bind.extend((value.len() as i32).to_be_bytes());
    bind.extend(value);
    bind.extend(0i16.to_be_bytes());
    let mut execute = common::cstr("");
    execute.extend(0i32.to_be_bytes());
    let mut bytes = common::message(b'B', &bind);
    bytes.extend(common::message(b'E', &execute));
    bytes.extend(common::message(b'S', &[]));
    s.write_all(&bytes).unwrap();
    assert_eq!(until_ready(&mut s), expected);
}
