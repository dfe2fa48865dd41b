//! Streaming reader of PostgreSQL's binary COPY format.
//!
//! [`CopyReader`] pulls bytes from any [`Read`] (the `postgres` client's
//! COPY stream, or a byte slice in tests) into one reusable buffer and hands
//! out one row at a time as borrowed field slices. The buffer only grows when
//! a single row is larger than it, so a load allocates nothing per row or per
//! field. Malformed or truncated input is an error, never a panic.
//!
//! Format (PostgreSQL docs, "COPY ... Binary Format"): an 11-byte signature,
//! a 32-bit flags word, a 32-bit header-extension length and that many bytes;
//! then tuples, each a 16-bit field count and per field a 32-bit length (-1 =
//! NULL) and that many bytes; then a 16-bit -1 trailer. All integers are in
//! network byte order.

mod decode;
mod text;

use std::io::{ErrorKind, Read};

pub use decode::{ARRAY_TYPES, Array, DecodeError, Numeric, NumericError, NumericSign, Value, ValueKind};
pub use text::{write_date, write_float4, write_float8, write_timestamp};

use crate::backend_error::BackendError;
use crate::snapshot::Cancel;

/// The signature every binary COPY stream starts with.
pub const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";
/// Bytes read ahead from the source; one row larger than this grows the buffer.
const BUFFER_BYTES_INITIAL: usize = 256 * 1024;
/// A row larger than this is refused (PostgreSQL's own field limit is 1 GiB).
const ROW_BYTES_MAX: usize = 1 << 31;
/// Flags bit 16: OIDs included (pre-PostgreSQL 12 `WITH OIDS`); we never ask for them.
const FLAG_HAS_OIDS: u32 = 1 << 16;
/// Flags bits 0-15 are critical: a reader must refuse a stream that sets one it does not know.
const FLAGS_CRITICAL_MASK: u32 = 0xffff;

/// What is wrong with a binary COPY stream.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CopyFormatError {
    #[error("missing binary COPY signature")]
    BadSignature,
    #[error("unsupported binary COPY flags {0:#010x}")]
    UnsupportedFlags(u32),
    #[error("stream ended inside {0}")]
    Truncated(&'static str),
    #[error("row {row} has {found} fields, expected {expected}")]
    FieldCount { row: u64, found: i16, expected: usize },
    #[error("row {row}: invalid field length {length}")]
    FieldLength { row: u64, length: i32 },
    #[error("row {row} is larger than {ROW_BYTES_MAX} bytes")]
    RowTooLarge { row: u64 },
    #[error("data after the end-of-data marker")]
    TrailingData,
    #[error("header extension of {0} bytes")]
    ExtensionTooLarge(usize),
}

/// Where a field of the current row lies in the buffer; `length < 0` is NULL.
#[derive(Clone, Copy, Debug)]
struct FieldSpan {
    offset: u32,
    length: i32,
}

/// One decoded row, borrowing the reader's buffer until the next call to
/// [`CopyReader::next_row`].
#[derive(Clone, Copy, Debug)]
pub struct CopyRow<'a> {
    bytes: &'a [u8],
    fields: &'a [FieldSpan],
}

impl<'a> CopyRow<'a> {
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The raw bytes of field `index` (None = NULL). Panics if `index >= len()`,
    /// like slice indexing; the field count itself was checked against the
    /// expected column count when the row was read.
    pub fn field(&self, index: usize) -> Option<&'a [u8]> {
        let span = self.fields[index];
        let length = usize::try_from(span.length).ok()?;
        let start = span.offset as usize;
        Some(&self.bytes[start..start + length])
    }
}

enum Parsed {
    Row {
        consumed: usize,
    },
    Trailer,
    /// At least this many bytes (from the row start) are needed.
    NeedBytes(usize, &'static str),
}

/// Incremental binary COPY decoder over `source`.
pub struct CopyReader<R> {
    source: R,
    /// Names the stream in errors (e.g. the table).
    what: String,
    expected_fields: usize,
    buffer: Vec<u8>,
    /// `buffer[start..end]` is read but not yet consumed.
    start: usize,
    end: usize,
    /// Spans of the row last returned, reused from row to row.
    fields: Vec<FieldSpan>,
    header_read: bool,
    finished: bool,
    rows: u64,
    bytes: u64,
    cancel: Option<Cancel>,
}

impl<R: Read> CopyReader<R> {
    /// `expected_fields` is the number of columns the COPY selects; every row
    /// must have exactly that many.
    pub fn new(source: R, what: impl Into<String>, expected_fields: usize) -> CopyReader<R> {
        CopyReader {
            source,
            what: what.into(),
            expected_fields,
            buffer: vec![0; BUFFER_BYTES_INITIAL],
            start: 0,
            end: 0,
            fields: Vec::with_capacity(expected_fields),
            header_read: false,
            finished: false,
            rows: 0,
            bytes: 0,
            cancel: None,
        }
    }

    /// Checked before every row: once cancelled, [`Self::next_row`] returns
    /// [`BackendError::Cancelled`].
    pub fn with_cancel(mut self, cancel: Cancel) -> CopyReader<R> {
        self.cancel = Some(cancel);
        self
    }

    /// Rows returned so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Bytes read from the source so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn what(&self) -> &str {
        &self.what
    }

    /// The next row, or None after the end-of-data marker (the source must
    /// end there). After an error the stream position is unspecified: drop
    /// the reader (and, for a live COPY, let the connection finish or close).
    pub fn next_row(&mut self) -> Result<Option<CopyRow<'_>>, BackendError> {
        if self.finished {
            return Ok(None);
        }
        if let Some(cancel) = &self.cancel
            && cancel.is_cancelled()
        {
            return Err(BackendError::Cancelled);
        }
        if !self.header_read {
            self.read_header()?;
        }
        loop {
            match parse_row(&self.buffer[self.start..self.end], self.expected_fields, self.rows, &mut self.fields)
                .map_err(|error| self.format_error(error))?
            {
                Parsed::Row { consumed } => {
                    let row_start = self.start;
                    self.start += consumed;
                    self.rows += 1;
                    return Ok(Some(CopyRow {
                        bytes: &self.buffer[row_start..row_start + consumed],
                        fields: &self.fields,
                    }));
                }
                Parsed::Trailer => {
                    self.start += 2;
                    self.finish()?;
                    return Ok(None);
                }
                Parsed::NeedBytes(needed, inside) => {
                    if needed > ROW_BYTES_MAX {
                        return Err(self.format_error(CopyFormatError::RowTooLarge { row: self.rows + 1 }));
                    }
                    self.fill(needed, inside)?;
                }
            }
        }
    }

    fn read_header(&mut self) -> Result<(), BackendError> {
        const FIXED: usize = SIGNATURE.len() + 8;
        self.fill(FIXED, "the header")?;
        let header = &self.buffer[self.start..self.start + FIXED];
        if &header[..SIGNATURE.len()] != SIGNATURE {
            return Err(self.format_error(CopyFormatError::BadSignature));
        }
        let flags = be_u32(&header[11..15]);
        if flags & (FLAG_HAS_OIDS | FLAGS_CRITICAL_MASK) != 0 {
            return Err(self.format_error(CopyFormatError::UnsupportedFlags(flags)));
        }
        let extension = be_u32(&header[15..19]) as usize;
        if extension > ROW_BYTES_MAX {
            return Err(self.format_error(CopyFormatError::ExtensionTooLarge(extension)));
        }
        self.fill(FIXED + extension, "the header extension")?;
        self.start += FIXED + extension;
        self.header_read = true;
        Ok(())
    }

    /// After the trailer the source must end.
    fn finish(&mut self) -> Result<(), BackendError> {
        self.finished = true;
        if self.start < self.end {
            return Err(self.format_error(CopyFormatError::TrailingData));
        }
        let mut probe = [0u8; 64];
        loop {
            match self.source.read(&mut probe) {
                Ok(0) => return Ok(()),
                Ok(_) => return Err(self.format_error(CopyFormatError::TrailingData)),
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(BackendError::from_io(&self.what, &error)),
            }
        }
    }

    /// Reads until `buffer[start..]` holds at least `needed` bytes, moving the
    /// unconsumed tail to the front or growing the buffer when it must.
    fn fill(&mut self, needed: usize, inside: &'static str) -> Result<(), BackendError> {
        if self.end - self.start >= needed {
            return Ok(());
        }
        if self.start + needed > self.buffer.len() {
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let needed_end = self.start + needed;
        while self.end < needed_end {
            if self.end == self.buffer.len() {
                // Grow with the data that actually arrives, not with the
                // length a (possibly corrupt) field claims.
                let grown = (self.buffer.len() * 2).min(needed_end);
                self.buffer.resize(grown, 0);
            }
            match self.source.read(&mut self.buffer[self.end..]) {
                Ok(0) => return Err(self.format_error(CopyFormatError::Truncated(inside))),
                Ok(read) => {
                    self.end += read;
                    self.bytes += read as u64;
                }
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(BackendError::from_io(&self.what, &error)),
            }
        }
        Ok(())
    }

    fn format_error(&self, error: CopyFormatError) -> BackendError {
        BackendError::CopyFormat { what: self.what.clone(), error }
    }
}

/// Parses one tuple (or the trailer) at the start of `bytes` into `fields`.
fn parse_row(
    bytes: &[u8],
    expected_fields: usize,
    rows_before: u64,
    fields: &mut Vec<FieldSpan>,
) -> Result<Parsed, CopyFormatError> {
    if bytes.len() < 2 {
        return Ok(Parsed::NeedBytes(2, "a row header"));
    }
    let count = i16::from_be_bytes([bytes[0], bytes[1]]);
    if count == -1 {
        return Ok(Parsed::Trailer);
    }
    let row = rows_before + 1;
    if usize::try_from(count).ok() != Some(expected_fields) {
        return Err(CopyFormatError::FieldCount { row, found: count, expected: expected_fields });
    }
    fields.clear();
    let mut position = 2usize;
    for _ in 0..expected_fields {
        if bytes.len() < position + 4 {
            return Ok(Parsed::NeedBytes(position + 4, "a field length"));
        }
        let length =
            i32::from_be_bytes([bytes[position], bytes[position + 1], bytes[position + 2], bytes[position + 3]]);
        position += 4;
        let offset = u32::try_from(position).map_err(|_| CopyFormatError::RowTooLarge { row })?;
        match length {
            -1 => {}
            0.. => {
                let end = position + length as usize;
                if bytes.len() < end {
                    return Ok(Parsed::NeedBytes(end, "a field"));
                }
                position = end;
            }
            _ => return Err(CopyFormatError::FieldLength { row, length }),
        }
        fields.push(FieldSpan { offset, length });
    }
    Ok(Parsed::Row { consumed: position })
}

fn be_u32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

/// `"name"` quoted as an SQL identifier (doubling embedded quotes).
pub fn quote_identifier(name: &str) -> String {
    let mut quoted = String::with_capacity(name.len() + 2);
    quoted.push('"');
    for character in name.chars() {
        if character == '"' {
            quoted.push('"');
        }
        quoted.push(character);
    }
    quoted.push('"');
    quoted
}

/// The COPY statement that streams `columns` of `schema.table` in binary,
/// optionally only rows matching `predicate` (SQL text, used as given).
pub fn copy_statement(schema: &str, table: &str, columns: &[&str], predicate: Option<&str>) -> String {
    let table = format!("{}.{}", quote_identifier(schema), quote_identifier(table));
    let columns: Vec<String> = columns.iter().map(|column| quote_identifier(column)).collect();
    let columns = columns.join(", ");
    match predicate {
        Some(predicate) => {
            format!("COPY (SELECT {columns} FROM {table} WHERE ({predicate})) TO STDOUT (FORMAT binary)")
        }
        None => format!("COPY {table} ({columns}) TO STDOUT (FORMAT binary)"),
    }
}

/// Starts `COPY ... TO STDOUT (FORMAT binary)` on `client` (a `Client` or a
/// `Transaction`, e.g. one joined to an exported snapshot) and returns a
/// reader over it. `what` names the stream in errors.
pub fn start_copy<'c, C: postgres::GenericClient>(
    client: &'c mut C,
    statement: &str,
    what: &str,
    expected_fields: usize,
) -> Result<CopyReader<postgres::CopyOutReader<'c>>, BackendError> {
    let source =
        client.copy_out(statement).map_err(|error| BackendError::from_postgres(format!("COPY of {what}"), &error))?;
    Ok(CopyReader::new(source, what, expected_fields))
}
