//! Result rows on the wire: DataRow messages encoded straight from the
//! executor's result buffer (text or binary per column, no row copied on
//! the way), and RowDescription.

use bytes::BytesMut;
use pgtier_engine::DataType;
use pgtier_sql::Column;
use pgtier_sql::session::ResultRows;
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::data::{FieldDescription, RowDescription};

use crate::types;

/// DataRows for `rows`, with per-column formats and types.
pub fn encode_rows(
    out: &mut BytesMut,
    rows: ResultRows<'_>,
    formats: &[i16],
    col_types: &[Option<DataType>],
    scratch: &mut String,
    ends: Option<&mut Vec<usize>>,
) {
    use bytes::BufMut;
    let width = rows.width;
    let mut ends = ends;
    for r in 0..rows.rows {
        out.put_u8(b'D');
        let at = out.len();
        out.put_i32(0);
        out.put_i16(i16::try_from(width).unwrap_or(i16::MAX));
        let row = rows.values.get(r * width..(r + 1) * width).unwrap_or(&[]);
        for (c, v) in row.iter().enumerate() {
            if v.is_null() {
                out.put_i32(-1);
                continue;
            }
            let len_at = out.len();
            out.put_i32(0);
            if formats.get(c).copied().unwrap_or(0) == 1 {
                types::encode_binary(v, col_types.get(c).copied().flatten(), out);
            } else {
                types::encode_text(v, out, scratch);
            }
            let len = i32::try_from(out.len() - len_at - 4).unwrap_or(i32::MAX);
            out[len_at..len_at + 4].copy_from_slice(&len.to_be_bytes());
        }
        let len = i32::try_from(out.len() - at).unwrap_or(i32::MAX);
        out[at..at + 4].copy_from_slice(&len.to_be_bytes());
        if let Some(e) = ends.as_deref_mut() {
            e.push(out.len());
        }
    }
}

/// RowDescription of `columns`, each with its result format (0 text, 1
/// binary; missing: text).
pub fn row_description(columns: &[Column], formats: &[i16]) -> PgWireBackendMessage {
    let fields = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (oid, size, modifier) = match c.ty {
                Some(t) => (types::oid(t), types::type_size(t), types::type_modifier(t)),
                None => (types::TEXT, -1, -1),
            };
            FieldDescription::new(c.name.clone(), 0, 0, oid, size, modifier, formats.get(i).copied().unwrap_or(0))
        })
        .collect();
    PgWireBackendMessage::RowDescription(RowDescription::new(fields))
}
