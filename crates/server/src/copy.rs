//! COPY ... FROM STDIN and COPY ... TO STDOUT in PostgreSQL's text, csv and
//! binary formats.
//!
//! COPY FROM runs inside one transaction (the client's block, or one of its
//! own): rows are inserted through a prepared INSERT as their CopyData
//! arrives, so casts, defaults and every constraint apply exactly as for
//! INSERT, and a bad row fails the whole COPY with nothing left behind.
//! COPY TO runs the query (or `SELECT cols FROM table`) and sends one
//! CopyData per row, as PostgreSQL does.

use std::sync::atomic::Ordering;

use bytes::{Buf, BufMut, BytesMut};
use pgtier_engine::{DataType, Value};
use pgtier_sql::session::TransactionStatus;
use pgtier_sql::{PreparedStatement, SqlError};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::PgWireFrontendMessage as F;
use pgwire::messages::copy::{CopyInResponse, CopyOutResponse};
use sqlparser::ast::{CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource, CopyTarget, Statement};

use crate::session::Session;
use crate::types::{self, Origin};
use crate::wire::ReadError;

const BINARY_SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";
/// Rows between checks of the cancel flag.
const CANCEL_CHECK_ROWS: u64 = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Csv,
    Binary,
}

/// A COPY statement, reduced to what the protocol needs.
#[derive(Debug)]
pub struct CopySpec {
    from: bool,
    table: Option<String>,
    columns: Vec<String>,
    query: Option<String>,
    format: Format,
    delimiter: u8,
    null: String,
    header: bool,
    quote: u8,
    escape: u8,
}

fn bad_option(m: impl Into<String>) -> SqlError {
    SqlError::new("22023", m)
}

fn ascii(c: char, what: &str) -> Result<u8, SqlError> {
    u8::try_from(c)
        .ok()
        .filter(u8::is_ascii)
        .ok_or_else(|| bad_option(format!("COPY {what} must be a single one-byte character")))
}

impl CopySpec {
    pub fn from_statement(ast: &Statement) -> Result<CopySpec, SqlError> {
        let Statement::Copy { source, to, target, options, legacy_options, .. } = ast else {
            return Err(SqlError::new("XX000", "not a COPY statement"));
        };
        match (to, target) {
            (false, CopyTarget::Stdin) | (true, CopyTarget::Stdout) => {}
            _ => return Err(SqlError::unsupported("COPY to or from a file or program")),
        }
        let (table, columns, query) = match source {
            CopySource::Table { table_name, columns } => {
                (Some(table_name.to_string()), columns.iter().map(ToString::to_string).collect(), None)
            }
            CopySource::Query(q) => {
                if !to {
                    return Err(SqlError::syntax("COPY FROM does not take a query"));
                }
                (None, Vec::new(), Some(q.to_string()))
            }
        };
        let mut spec = CopySpec {
            from: !to,
            table,
            columns,
            query,
            format: Format::Text,
            delimiter: b'\t',
            null: "\\N".to_owned(),
            header: false,
            quote: b'"',
            escape: b'"',
        };
        let mut delimiter = None;
        let mut null = None;
        let mut escape = None;
        for o in options {
            match o {
                CopyOption::Format(f) => {
                    spec.format = match f.value.to_ascii_lowercase().as_str() {
                        "text" => Format::Text,
                        "csv" => Format::Csv,
                        "binary" => Format::Binary,
                        other => return Err(bad_option(format!("COPY format \"{other}\" not recognized"))),
                    }
                }
                CopyOption::Delimiter(c) => delimiter = Some(ascii(*c, "delimiter")?),
                CopyOption::Null(s) => null = Some(s.clone()),
                CopyOption::Header(h) => spec.header = *h,
                CopyOption::Quote(c) => spec.quote = ascii(*c, "quote")?,
                CopyOption::Escape(c) => escape = Some(ascii(*c, "escape")?),
                CopyOption::Freeze(_) | CopyOption::Encoding(_) => {}
                other => return Err(SqlError::unsupported(format!("COPY option {other}"))),
            }
        }
        for o in legacy_options {
            match o {
                CopyLegacyOption::Binary => spec.format = Format::Binary,
                CopyLegacyOption::Delimiter(c) => delimiter = Some(ascii(*c, "delimiter")?),
                CopyLegacyOption::Null(s) => null = Some(s.clone()),
                CopyLegacyOption::Csv(csv) => {
                    spec.format = Format::Csv;
                    for c in csv {
                        match c {
                            CopyLegacyCsvOption::Header => spec.header = true,
                            CopyLegacyCsvOption::Quote(q) => spec.quote = ascii(*q, "quote")?,
                            CopyLegacyCsvOption::Escape(e) => escape = Some(ascii(*e, "escape")?),
                            other => return Err(SqlError::unsupported(format!("COPY option {other}"))),
                        }
                    }
                }
                other => return Err(SqlError::unsupported(format!("COPY option {other}"))),
            }
        }
        if spec.format == Format::Csv {
            spec.delimiter = b',';
            spec.null = String::new();
        }
        if let Some(d) = delimiter {
            spec.delimiter = d;
        }
        if let Some(n) = null {
            spec.null = n;
        }
        spec.escape = escape.unwrap_or(spec.quote);
        if spec.format == Format::Binary && (delimiter.is_some() || spec.header) {
            return Err(bad_option("cannot specify DELIMITER or HEADER in BINARY mode"));
        }
        if matches!(spec.delimiter, b'\r' | b'\n' | b'\\') && spec.format == Format::Text {
            return Err(bad_option("COPY delimiter cannot be newline, carriage return or backslash"));
        }
        Ok(spec)
    }

    fn format_code(&self) -> i16 {
        i16::from(self.format == Format::Binary)
    }
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn bad_copy_data(m: impl Into<String>) -> SqlError {
    SqlError::new("22P04", m)
}

/// Turns the COPY data stream into rows of fields. Fields are written,
/// unescaped, into `row` with their end offsets in `ends` (None = NULL).
struct RowParser {
    buf: BytesMut,
    header_pending: bool,
    binary_header_seen: bool,
    done: bool,
    row: Vec<u8>,
    ends: Vec<Option<usize>>,
    line: u64,
}

impl RowParser {
    fn new(spec: &CopySpec) -> RowParser {
        RowParser {
            buf: BytesMut::new(),
            header_pending: spec.header,
            binary_header_seen: false,
            done: false,
            row: Vec::new(),
            ends: Vec::new(),
            line: 0,
        }
    }

    /// The next complete row; `last`: no more data will come, so a final
    /// line without newline counts.
    fn next(&mut self, spec: &CopySpec, last: bool) -> Result<bool, SqlError> {
        loop {
            if self.done {
                return Ok(false);
            }
            let got = match spec.format {
                Format::Binary => return self.next_binary(last),
                Format::Text => self.next_line(spec, last)?,
                Format::Csv => self.next_csv(spec, last)?,
            };
            if !got {
                return Ok(false);
            }
            self.line += 1;
            if self.header_pending {
                self.header_pending = false;
                continue;
            }
            return Ok(true);
        }
    }

    fn field_end(&mut self, null: bool) {
        self.ends.push(if null { None } else { Some(self.row.len()) });
    }

    fn next_line(&mut self, spec: &CopySpec, last: bool) -> Result<bool, SqlError> {
        let Some(len) = self.buf.iter().position(|&b| b == b'\n').or(if last && !self.buf.is_empty() {
            Some(self.buf.len())
        } else {
            None
        }) else {
            return Ok(false);
        };
        let mut line = self.buf.split_to(len);
        if self.buf.has_remaining() {
            self.buf.advance(1);
        }
        if line.last() == Some(&b'\r') {
            line.truncate(line.len() - 1);
        }
        if &line[..] == b"\\." {
            self.done = true;
            return Ok(false);
        }
        self.row.clear();
        self.ends.clear();
        let null = spec.null.as_bytes();
        let mut field_start = 0;
        let mut i = 0;
        let mut raw_start = 0;
        while i <= line.len() {
            if i == line.len() || line[i] == spec.delimiter {
                let raw = &line[raw_start..i];
                if raw == null {
                    self.row.truncate(field_start);
                    self.field_end(true);
                } else {
                    self.field_end(false);
                }
                field_start = self.row.len();
                raw_start = i + 1;
                i += 1;
                continue;
            }
            let b = line[i];
            if b != b'\\' || i + 1 >= line.len() {
                self.row.push(b);
                i += 1;
                continue;
            }
            let c = line[i + 1];
            i += 2;
            match c {
                b'b' => self.row.push(8),
                b'f' => self.row.push(12),
                b'n' => self.row.push(b'\n'),
                b'r' => self.row.push(b'\r'),
                b't' => self.row.push(b'\t'),
                b'v' => self.row.push(11),
                b'0'..=b'7' => {
                    let mut v = u32::from(c - b'0');
                    for _ in 0..2 {
                        match line.get(i) {
                            Some(&d @ b'0'..=b'7') => {
                                v = v * 8 + u32::from(d - b'0');
                                i += 1;
                            }
                            _ => break,
                        }
                    }
                    self.row.push((v & 0xff) as u8);
                }
                b'x' if line.get(i).is_some_and(u8::is_ascii_hexdigit) => {
                    let mut v = 0u32;
                    for _ in 0..2 {
                        match line.get(i).and_then(|d| char::from(*d).to_digit(16)) {
                            Some(d) => {
                                v = v * 16 + d;
                                i += 1;
                            }
                            None => break,
                        }
                    }
                    self.row.push((v & 0xff) as u8);
                }
                other => self.row.push(other),
            }
        }
        Ok(true)
    }

    fn next_csv(&mut self, spec: &CopySpec, last: bool) -> Result<bool, SqlError> {
        // Find the record's end: a newline outside quotes.
        let mut in_quote = false;
        let mut end = None;
        let mut i = 0;
        while i < self.buf.len() {
            let b = self.buf[i];
            if in_quote {
                if b == spec.escape
                    && spec.escape != spec.quote
                    && self.buf.get(i + 1).is_some_and(|&n| n == spec.quote || n == spec.escape)
                {
                    i += 2;
                    continue;
                }
                if b == spec.quote {
                    in_quote = false;
                }
            } else if b == spec.quote {
                in_quote = true;
            } else if b == b'\n' {
                end = Some(i);
                break;
            }
            i += 1;
        }
        let len = match end {
            Some(e) => e,
            None if last && !self.buf.is_empty() => {
                if in_quote {
                    return Err(bad_copy_data("unterminated CSV quoted field"));
                }
                self.buf.len()
            }
            None => return Ok(false),
        };
        let mut rec = self.buf.split_to(len);
        if self.buf.has_remaining() {
            self.buf.advance(1);
        }
        if rec.last() == Some(&b'\r') {
            rec.truncate(rec.len() - 1);
        }
        if &rec[..] == b"\\." {
            self.done = true;
            return Ok(false);
        }
        self.row.clear();
        self.ends.clear();
        let null = spec.null.as_bytes();
        let mut i = 0;
        loop {
            let start = self.row.len();
            let raw_start = i;
            let mut quoted = false;
            while i < rec.len() && rec[i] != spec.delimiter {
                if rec[i] == spec.quote {
                    quoted = true;
                    i += 1;
                    while i < rec.len() {
                        let b = rec[i];
                        if b == spec.escape
                            && spec.escape != spec.quote
                            && rec.get(i + 1).is_some_and(|&n| n == spec.quote || n == spec.escape)
                        {
                            self.row.push(rec[i + 1]);
                            i += 2;
                        } else if b == spec.quote && spec.escape == spec.quote && rec.get(i + 1) == Some(&spec.quote) {
                            self.row.push(spec.quote);
                            i += 2;
                        } else if b == spec.quote {
                            i += 1;
                            break;
                        } else {
                            self.row.push(b);
                            i += 1;
                        }
                    }
                } else {
                    self.row.push(rec[i]);
                    i += 1;
                }
            }
            let is_null = !quoted && &rec[raw_start..i] == null;
            if is_null {
                self.row.truncate(start);
            }
            self.field_end(is_null);
            if i >= rec.len() {
                break;
            }
            i += 1; // delimiter
        }
        Ok(true)
    }

    fn next_binary(&mut self, last: bool) -> Result<bool, SqlError> {
        if !self.binary_header_seen {
            if self.buf.len() < 19 {
                return if last { Err(bad_copy_data("COPY file signature not recognized")) } else { Ok(false) };
            }
            if &self.buf[..11] != BINARY_SIGNATURE {
                return Err(bad_copy_data("COPY file signature not recognized"));
            }
            let ext = u32::from_be_bytes([self.buf[15], self.buf[16], self.buf[17], self.buf[18]]) as usize;
            if self.buf.len() < 19 + ext {
                return if last { Err(bad_copy_data("invalid COPY file header (wrong length)")) } else { Ok(false) };
            }
            self.buf.advance(19 + ext);
            self.binary_header_seen = true;
        }
        // The end of the data where a tuple would start ends it, with or
        // without the -1 trailer, as PostgreSQL's CopyReadBinaryTupleHeader
        // takes it (pgx's CopyFrom sends no trailer).
        if self.buf.is_empty() && last {
            self.done = true;
            return Ok(false);
        }
        if self.buf.len() < 2 {
            return if last { Err(bad_copy_data("unexpected EOF in COPY data")) } else { Ok(false) };
        }
        let count = i16::from_be_bytes([self.buf[0], self.buf[1]]);
        if count == -1 {
            self.done = true;
            return Ok(false);
        }
        let count = usize::try_from(count).map_err(|_| bad_copy_data(format!("row field count is {count}")))?;
        // Check the whole tuple is here before consuming it.
        let mut at = 2;
        for _ in 0..count {
            if self.buf.len() < at + 4 {
                return if last { Err(bad_copy_data("unexpected EOF in COPY data")) } else { Ok(false) };
            }
            let len = i32::from_be_bytes([self.buf[at], self.buf[at + 1], self.buf[at + 2], self.buf[at + 3]]);
            at += 4;
            if len > 0 {
                at += usize::try_from(len).unwrap_or(0);
            } else if len < -1 {
                return Err(bad_copy_data(format!("invalid field size {len}")));
            }
        }
        if self.buf.len() < at {
            return if last { Err(bad_copy_data("unexpected EOF in COPY data")) } else { Ok(false) };
        }
        self.row.clear();
        self.ends.clear();
        self.buf.advance(2);
        for _ in 0..count {
            let len = self.buf.get_i32();
            if len < 0 {
                self.field_end(true);
            } else {
                let n = usize::try_from(len).unwrap_or(0);
                self.row.extend_from_slice(&self.buf[..n]);
                self.buf.advance(n);
                self.field_end(false);
            }
        }
        self.line += 1;
        Ok(true)
    }

    /// The current row's fields as values of `types`.
    fn values(
        &self,
        spec: &CopySpec,
        types: &[DataType],
        names: &[String],
        out: &mut Vec<Value>,
    ) -> Result<(), SqlError> {
        if self.ends.len() > types.len() {
            return Err(match spec.format {
                Format::Binary => {
                    bad_copy_data(format!("row field count is {}, expected {}", self.ends.len(), types.len()))
                }
                _ => bad_copy_data("extra data after last expected column"),
            });
        }
        if self.ends.len() < types.len() {
            return Err(match spec.format {
                Format::Binary => {
                    bad_copy_data(format!("row field count is {}, expected {}", self.ends.len(), types.len()))
                }
                _ => bad_copy_data(format!(
                    "missing data for column \"{}\"",
                    names.get(self.ends.len()).map_or("?", String::as_str)
                )),
            });
        }
        out.clear();
        let mut start = 0;
        for (end, ty) in self.ends.iter().zip(types) {
            let Some(end) = *end else {
                out.push(Value::Null);
                continue;
            };
            let bytes = &self.row[start..end];
            start = end;
            out.push(if spec.format == Format::Binary {
                types::decode_binary(bytes, *ty, Origin::Copy)?
            } else {
                types::decode(bytes, true, 0, *ty, Origin::Copy)?
            });
        }
        Ok(())
    }
}

/// PostgreSQL's COPY text escaping of one value's text.
fn escape_text(text: &[u8], delimiter: u8, out: &mut BytesMut) {
    for &b in text {
        match b {
            b'\\' => out.put_slice(b"\\\\"),
            b'\n' => out.put_slice(b"\\n"),
            b'\r' => out.put_slice(b"\\r"),
            b'\t' => out.put_slice(b"\\t"),
            8 => out.put_slice(b"\\b"),
            12 => out.put_slice(b"\\f"),
            11 => out.put_slice(b"\\v"),
            d if d == delimiter => {
                out.put_u8(b'\\');
                out.put_u8(d);
            }
            _ => out.put_u8(b),
        }
    }
}

/// CSV quoting: quoted when it contains the delimiter, quote, CR/LF, or
/// would read back as NULL.
fn write_csv_field(text: &[u8], spec: &CopySpec, out: &mut BytesMut) {
    let needs = text.is_empty()
        || text == spec.null.as_bytes()
        || text.iter().any(|&b| b == spec.delimiter || b == spec.quote || b == b'\n' || b == b'\r')
        || text == b"\\.";
    if !needs {
        out.put_slice(text);
        return;
    }
    out.put_u8(spec.quote);
    for &b in text {
        if b == spec.quote || b == spec.escape {
            out.put_u8(spec.escape);
        }
        out.put_u8(b);
    }
    out.put_u8(spec.quote);
}

impl Session {
    /// Runs a COPY statement (simple or extended protocol).
    pub(crate) fn copy(&mut self, ast: &Statement, extended: bool) -> Result<(), SqlError> {
        let spec = CopySpec::from_statement(ast)?;
        if spec.from { self.copy_in(&spec, extended) } else { self.copy_out(&spec) }
    }

    /// Column names (quoted) and the INSERT that loads them.
    fn copy_target(&mut self, spec: &CopySpec) -> Result<(Vec<String>, PreparedStatement), SqlError> {
        let table = spec.table.as_deref().unwrap_or_default();
        let columns: Vec<String> = if spec.columns.is_empty() {
            let probe = self.conn.prepare_text(&format!("SELECT * FROM {table} LIMIT 0"))?;
            probe.result_columns().iter().map(|c| quote_ident(&c.name)).collect()
        } else {
            spec.columns.clone()
        };
        let placeholders: Vec<String> = (1..=columns.len()).map(|i| format!("${i}")).collect();
        let insert = self.conn.prepare_text(&format!(
            "INSERT INTO {table} ({}) VALUES ({})",
            columns.join(", "),
            placeholders.join(", ")
        ))?;
        Ok((columns, insert))
    }

    fn copy_in(&mut self, spec: &CopySpec, extended: bool) -> Result<(), SqlError> {
        let _ = extended;
        let (names, insert) = self.copy_target(spec)?;
        let col_types = insert.param_types();
        let implicit = self.conn.transaction_status() == TransactionStatus::Idle;
        if implicit {
            self.conn.begin()?;
        }
        let ncols = i16::try_from(names.len()).unwrap_or(i16::MAX);
        let code = spec.format_code();
        self.wire.send(PgWireBackendMessage::CopyInResponse(CopyInResponse::new(
            i8::from(code == 1),
            ncols,
            vec![code; names.len()],
        )));
        let result = match self.wire.flush() {
            Ok(()) => self.copy_in_rows(spec, &insert, &col_types, &names),
            Err(_) => Err(SqlError::new("08006", "connection lost during COPY")),
        };
        match result {
            Ok(n) => {
                if implicit {
                    self.conn.commit()?;
                }
                self.wire.command_complete(format_args!("COPY {n}"));
                Ok(())
            }
            Err(e) => {
                if implicit {
                    let _ = self.conn.rollback();
                }
                Err(e)
            }
        }
    }

    fn copy_in_rows(
        &mut self,
        spec: &CopySpec,
        insert: &PreparedStatement,
        col_types: &[DataType],
        names: &[String],
    ) -> Result<u64, SqlError> {
        let mut parser = RowParser::new(spec);
        let mut values = Vec::with_capacity(col_types.len());
        let mut loaded = 0u64;
        loop {
            let msg = match self.wire.read_message() {
                Ok(m) => m,
                Err(ReadError::Closed | ReadError::WouldBlock) => {
                    self.closing = true;
                    return Err(SqlError::new("08006", "connection lost during COPY"));
                }
                Err(ReadError::Protocol(m)) => {
                    self.closing = true;
                    return Err(SqlError::new("08P01", m));
                }
            };
            let last = match msg {
                F::CopyData(d) => {
                    parser.buf.extend_from_slice(&d.data);
                    false
                }
                F::CopyDone(_) => true,
                F::CopyFail(f) => return Err(SqlError::new("57014", format!("COPY from stdin failed: {}", f.message))),
                // Drivers may send these without noticing the COPY.
                F::Flush(_) | F::Sync(_) => continue,
                _ => {
                    self.closing = true;
                    return Err(SqlError::new("08P01", "unexpected message type during COPY from stdin"));
                }
            };
            while parser.next(spec, last)? {
                // A field 'now' is the transaction's start, as in PostgreSQL.
                self.conn.with_transaction_clock(|| parser.values(spec, col_types, names, &mut values))?;
                self.conn.execute(insert, &values)?;
                loaded += 1;
                if loaded.is_multiple_of(CANCEL_CHECK_ROWS) && self.cancel.swap(false, Ordering::Relaxed) {
                    return Err(SqlError::canceled());
                }
            }
            if last {
                if spec.format == Format::Binary && !parser.done {
                    return Err(bad_copy_data("unexpected EOF in COPY data"));
                }
                return Ok(loaded);
            }
        }
    }

    fn copy_out(&mut self, spec: &CopySpec) -> Result<(), SqlError> {
        let query = match (&spec.query, &spec.table) {
            (Some(q), _) => q.clone(),
            (None, Some(t)) if spec.columns.is_empty() => format!("SELECT * FROM {t}"),
            (None, Some(t)) => format!("SELECT {} FROM {t}", spec.columns.join(", ")),
            (None, None) => return Err(SqlError::syntax("COPY needs a table or a query")),
        };
        let ps = self.conn.prepare_text(&query)?;
        let columns = ps.result_columns();
        let types: Vec<Option<DataType>> = columns.iter().map(|c| c.ty).collect();
        let wire = &mut self.wire;
        let code = spec.format_code();
        let (tag, ()) = self.conn.execute_with(&ps, &[], |rows| {
            let ncols = i16::try_from(columns.len()).unwrap_or(i16::MAX);
            wire.send(PgWireBackendMessage::CopyOutResponse(CopyOutResponse::new(
                i8::from(code == 1),
                ncols,
                vec![code; columns.len()],
            )));
            let mut field = BytesMut::new();
            let mut scratch = String::new();
            if spec.format == Format::Binary {
                let at = wire.begin(b'd');
                wire.wbuf.put_slice(BINARY_SIGNATURE);
                wire.wbuf.put_i32(0);
                wire.wbuf.put_i32(0);
                wire.end(at);
            }
            if spec.header && spec.format != Format::Binary {
                let at = wire.begin(b'd');
                for (i, c) in columns.iter().enumerate() {
                    if i > 0 {
                        wire.wbuf.put_u8(spec.delimiter);
                    }
                    match spec.format {
                        Format::Csv => write_csv_field(c.name.as_bytes(), spec, &mut wire.wbuf),
                        _ => escape_text(c.name.as_bytes(), spec.delimiter, &mut wire.wbuf),
                    }
                }
                wire.wbuf.put_u8(b'\n');
                wire.end(at);
            }
            for r in 0..rows.rows {
                let row = rows.values.get(r * rows.width..(r + 1) * rows.width).unwrap_or(&[]);
                let at = wire.begin(b'd');
                if spec.format == Format::Binary {
                    wire.wbuf.put_i16(ncols);
                }
                for (i, v) in row.iter().enumerate() {
                    match spec.format {
                        Format::Binary => {
                            if v.is_null() {
                                wire.wbuf.put_i32(-1);
                                continue;
                            }
                            field.clear();
                            types::encode_binary(v, types.get(i).copied().flatten(), &mut field);
                            wire.wbuf.put_i32(i32::try_from(field.len()).unwrap_or(i32::MAX));
                            wire.wbuf.put_slice(&field);
                        }
                        Format::Text | Format::Csv => {
                            if i > 0 {
                                wire.wbuf.put_u8(spec.delimiter);
                            }
                            if v.is_null() {
                                wire.wbuf.put_slice(spec.null.as_bytes());
                                continue;
                            }
                            field.clear();
                            types::encode_text(v, &mut field, &mut scratch);
                            if spec.format == Format::Csv {
                                write_csv_field(&field, spec, &mut wire.wbuf);
                            } else {
                                escape_text(&field, spec.delimiter, &mut wire.wbuf);
                            }
                        }
                    }
                }
                if spec.format != Format::Binary {
                    wire.wbuf.put_u8(b'\n');
                }
                wire.end(at);
            }
            if spec.format == Format::Binary {
                let at = wire.begin(b'd');
                wire.wbuf.put_i16(-1);
                wire.end(at);
            }
            wire.copy_done();
        })?;
        self.wire.command_complete(format_args!("COPY {}", tag.rows()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::parser::Parser;

    fn spec(sql: &str) -> CopySpec {
        let stmt = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().pop().unwrap();
        CopySpec::from_statement(&stmt).unwrap()
    }

    fn rows(spec: &CopySpec, data: &[u8]) -> Vec<Vec<Option<String>>> {
        let mut p = RowParser::new(spec);
        p.buf.extend_from_slice(data);
        let mut out = Vec::new();
        while p.next(spec, true).unwrap() {
            let mut start = 0;
            out.push(
                p.ends
                    .iter()
                    .map(|e| {
                        e.map(|end| {
                            let s = String::from_utf8(p.row[start..end].to_vec()).unwrap();
                            start = end;
                            s
                        })
                    })
                    .collect(),
            );
        }
        out
    }

    #[test]
    fn options_forms() {
        assert_eq!(spec("COPY t (a, b) FROM STDIN (FORMAT binary)").format, Format::Binary);
        assert!(spec("COPY t FROM STDIN WITH (FORMAT csv, HEADER true)").header);
        assert_eq!(spec("COPY t TO STDOUT CSV HEADER").format, Format::Csv);
        assert_eq!(spec("COPY (SELECT 1) TO STDOUT").query.as_deref(), Some("SELECT 1"));
    }

    #[test]
    fn text_format_escapes_and_nulls() {
        let s = spec("COPY t FROM STDIN");
        let r = rows(&s, b"1\ta\\tb\t\\N\n2\t\\\\x\t\\101\n\\.\nignored\n");
        assert_eq!(
            r,
            vec![
                vec![Some("1".into()), Some("a\tb".into()), None],
                vec![Some("2".into()), Some("\\x".into()), Some("A".into())]
            ]
        );
    }

    #[test]
    fn csv_quotes_and_nulls() {
        let s = spec("COPY t FROM STDIN (FORMAT csv, HEADER)");
        let r = rows(&s, b"a,b,c\n1,\"x,\"\"y\"\"\nz\",\n2,\"\",last");
        assert_eq!(
            r,
            vec![
                vec![Some("1".into()), Some("x,\"y\"\nz".into()), None],
                vec![Some("2".into()), Some("".into()), Some("last".into())]
            ]
        );
    }
}
