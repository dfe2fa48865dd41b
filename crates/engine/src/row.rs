//! Compact row format.
//!
//! ```text
//! [flags u8][null bitmap: ceil(n/8)][fixed-width columns][var end offsets][var bytes]
//! ```
//! Fixed-width columns sit at precomputed offsets (little-endian, unaligned
//! reads). Variable-length columns (text, varchar, char, bytea) store an end
//! offset each (u16, or u32 when the row's flags say `WIDE`), relative to the
//! start of the var bytes; their bytes follow in column order. A NULL fixed
//! column keeps its (zeroed) slot; a NULL var column has zero length. A row's
//! length is computable from its bytes and the layout, so stored versions
//! need no length field.
//!
//! A numeric too wide for its fixed slot (or NaN, ±Infinity) sets the
//! `SIDE` flag: the end-offset array then has one more entry, ending a side
//! area after the var bytes that holds those values' [`NumericBig`]
//! encodings, and the slot holds a marker with their offset and length
//! (a mantissa no valid i128-form value has, see [`big_slot`]). Rows
//! without wide values are byte for byte what they were before.

use crate::codec::{Reader, Writer};
use crate::error::{EngineError, Result};
use crate::numeric_big::{NumericBig, NumericBigRef};
use crate::types::{ArrayRef, DataType, Interval, Numeric, Value, ValueRef};

const FLAG_WIDE: u8 = 1;
const FLAG_SIDE: u8 = 2;
const FLAG_STUB: u8 = 4;
/// Bytes after a stub's row part: its `ColdRef`.
const STUB_REF_BYTES: usize = 8;

/// Rows larger than this are refused (PostgreSQL's practical limit is far
/// larger through TOAST; an in-memory OLTP cache does not need it).
pub const ROW_BYTES_MAX: usize = 8 << 20;

#[derive(Debug, Clone)]
pub(crate) struct RowLayout {
    types: Vec<DataType>,
    /// Per column: byte offset for fixed columns, var ordinal for var columns.
    slots: Vec<u32>,
    /// Offset of the var end-offset array (= end of the fixed part).
    fixed_end: usize,
    nvar: usize,
}

impl RowLayout {
    pub(crate) fn new(types: &[DataType]) -> RowLayout {
        let null_bytes = types.len().div_ceil(8);
        let mut offset = 1 + null_bytes;
        let mut nvar = 0usize;
        let mut slots = Vec::with_capacity(types.len());
        for ty in types {
            match ty.fixed_width_bytes() {
                Some(width) => {
                    slots.push(u32::try_from(offset).unwrap_or(u32::MAX));
                    offset += width;
                }
                None => {
                    slots.push(u32::try_from(nvar).unwrap_or(u32::MAX));
                    nvar += 1;
                }
            }
        }
        RowLayout { types: types.to_vec(), slots, fixed_end: offset, nvar }
    }

    pub(crate) fn column_type(&self, col: usize) -> DataType {
        self.types[col]
    }

    fn offset_width(data: &[u8]) -> usize {
        if data[0] & FLAG_WIDE != 0 { 4 } else { 2 }
    }

    fn var_base(&self, width: usize, side: usize) -> usize {
        self.fixed_end + (self.nvar + side) * width
    }

    /// 1 when the row has a side area of wide numerics (one more end offset).
    fn side(flags: u8) -> usize {
        usize::from(flags & FLAG_SIDE != 0)
    }

    /// Whether the row holds a wide numeric (so it cannot be patched in place).
    pub(crate) fn has_side(&self, data: &[u8]) -> bool {
        Self::side(data[0]) == 1
    }

    fn var_end(&self, data: &[u8], width: usize, ordinal: usize) -> usize {
        let at = self.fixed_end + ordinal * width;
        if width == 2 {
            usize::from(u16::from_le_bytes([data[at], data[at + 1]]))
        } else {
            u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]) as usize
        }
    }

    /// Bytes of a row's header part (flags, bitmap, fixed columns, var
    /// offsets) given its first byte: enough to compute the row's length.
    pub(crate) fn header_len(&self, flags: u8) -> usize {
        self.var_base(if flags & FLAG_WIDE != 0 { 4 } else { 2 }, Self::side(flags))
    }

    /// Length of the row that starts `data` (which may be longer); a
    /// stub's counts its trailing reference.
    pub(crate) fn row_len(&self, data: &[u8]) -> usize {
        let trailer = if data[0] & FLAG_STUB != 0 { STUB_REF_BYTES } else { 0 };
        self.columns_len(data) + trailer
    }

    /// Length of the column part of the row that starts `data`.
    fn columns_len(&self, data: &[u8]) -> usize {
        let side = Self::side(data[0]);
        if self.nvar + side == 0 {
            return self.fixed_end;
        }
        let width = Self::offset_width(data);
        self.var_base(width, side) + self.var_end(data, width, self.nvar + side - 1)
    }

    /// Whether the stored row `data` is a stub (its image lives elsewhere).
    #[inline]
    pub(crate) fn is_stub(data: &[u8]) -> bool {
        data[0] & FLAG_STUB != 0
    }

    /// The reference a stub carries (its last 8 bytes).
    pub(crate) fn stub_ref(data: &[u8]) -> crate::cold::ColdRef {
        debug_assert!(Self::is_stub(data));
        crate::cold::ColdRef(u64::from_le_bytes(arr(&data[data.len() - STUB_REF_BYTES..])))
    }

    /// The stub of whole row `row`: the columns `kept` marks, the others
    /// NULL, then `cold`. Every stored row's reader that is not handed the
    /// row (keys, index entries, constraint probes) reads only kept columns.
    pub(crate) fn encode_stub(
        &self,
        row: &[u8],
        kept: &[bool],
        cold: crate::cold::ColdRef,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        debug_assert!(!Self::is_stub(row));
        let values: Vec<Value> = (0..self.types.len())
            .map(|col| if kept[col] { self.get(row, col).to_owned_value() } else { Value::Null })
            .collect();
        self.encode(&values, out)?;
        out[0] |= FLAG_STUB;
        out.extend_from_slice(&cold.0.to_le_bytes());
        debug_assert_eq!(self.row_len(out), out.len());
        Ok(())
    }

    pub(crate) fn is_null(&self, data: &[u8], col: usize) -> bool {
        data[1 + col / 8] & (1 << (col % 8)) != 0
    }

    /// Bytes of a var column (empty if NULL).
    fn var_bytes<'a>(&self, data: &'a [u8], col: usize) -> &'a [u8] {
        let width = Self::offset_width(data);
        let ordinal = self.slots[col] as usize;
        let start = if ordinal == 0 { 0 } else { self.var_end(data, width, ordinal - 1) };
        let end = self.var_end(data, width, ordinal);
        let base = self.var_base(width, Self::side(data[0]));
        &data[base + start..base + end]
    }

    pub(crate) fn get<'a>(&self, data: &'a [u8], col: usize) -> ValueRef<'a> {
        if self.is_null(data, col) {
            return ValueRef::Null;
        }
        let off = self.slots[col] as usize;
        let fixed = |n: usize| &data[off..off + n];
        match self.types[col] {
            DataType::Bool => ValueRef::Bool(data[off] != 0),
            DataType::Int2 => ValueRef::Int2(i16::from_le_bytes(arr(fixed(2)))),
            DataType::Int4 => ValueRef::Int4(i32::from_le_bytes(arr(fixed(4)))),
            DataType::Int8 => ValueRef::Int8(i64::from_le_bytes(arr(fixed(8)))),
            DataType::Date => ValueRef::Date(i32::from_le_bytes(arr(fixed(4)))),
            DataType::Timestamp(_) => ValueRef::Timestamp(i64::from_le_bytes(arr(fixed(8)))),
            DataType::TimestampTz(_) => ValueRef::TimestampTz(i64::from_le_bytes(arr(fixed(8)))),
            DataType::Time(_) => ValueRef::Time(i64::from_le_bytes(arr(fixed(8)))),
            DataType::TimeTz(_) => {
                let b = fixed(12);
                ValueRef::TimeTz(i64::from_le_bytes(arr(&b[..8])), i32::from_le_bytes(arr(&b[8..])))
            }
            DataType::Float4 => ValueRef::Float4(f32::from_le_bytes(arr(fixed(4)))),
            DataType::Float8 => ValueRef::Float8(f64::from_le_bytes(arr(fixed(8)))),
            DataType::Numeric { .. } if Self::side(data[0]) == 1 && big_slot(data, off, self.types[col]).is_some() => {
                let (start, len) = big_slot(data, off, self.types[col]).unwrap_or_default();
                let base = self.var_base(Self::offset_width(data), 1);
                // Written only by `encode` from a NumericBig.
                ValueRef::NumericBig(NumericBigRef::parse(&data[base + start..base + start + len]).unwrap_or(NAN_REF))
            }
            ty @ DataType::Numeric { .. } if ty.numeric_own_scale() => {
                ValueRef::Numeric(Numeric::new(i128::from_le_bytes(arr(fixed(16))), data[off + 16]))
            }
            // The 16-byte form only for 0 <= scale <= 38.
            DataType::Numeric { scale, .. } => {
                ValueRef::Numeric(Numeric::new(i128::from_le_bytes(arr(fixed(16))), u8::try_from(scale).unwrap_or(0)))
            }
            DataType::Uuid => ValueRef::Uuid(arr(fixed(16))),
            DataType::Interval => {
                let b: [u8; 16] = arr(fixed(16));
                ValueRef::Interval(Interval {
                    micros: i64::from_le_bytes(arr(&b[..8])),
                    days: i32::from_le_bytes(arr(&b[8..12])),
                    months: i32::from_le_bytes(arr(&b[12..])),
                })
            }
            DataType::Text | DataType::Varchar(_) | DataType::Char(_) => {
                // Written only from `&str` by `encode`, so always UTF-8.
                ValueRef::Text(std::str::from_utf8(self.var_bytes(data, col)).unwrap_or(""))
            }
            DataType::Bytea => ValueRef::Bytea(self.var_bytes(data, col)),
            DataType::Json => ValueRef::Json(std::str::from_utf8(self.var_bytes(data, col)).unwrap_or("")),
            DataType::Jsonb => ValueRef::Jsonb(std::str::from_utf8(self.var_bytes(data, col)).unwrap_or("")),
            DataType::Array(_) => ValueRef::Array(ArrayRef::Stored(self.var_bytes(data, col))),
        }
    }

    /// Encodes already-coerced values (one per column) into `out` (cleared).
    /// The caller checked types, NOT NULL and lengths (`types::coerce`).
    pub(crate) fn encode<V: std::borrow::Borrow<Value>>(&self, values: &[V], out: &mut Vec<u8>) -> Result<()> {
        assert_eq!(values.len(), self.types.len(), "row arity");
        out.clear();
        let var_total: usize = values
            .iter()
            .zip(&self.types)
            .filter(|(_, t)| t.fixed_width_bytes().is_none())
            .map(|(v, _)| var_len(v.borrow()))
            .sum();
        let side_total: usize = values
            .iter()
            .map(|v| if let Value::NumericBig(b) = v.borrow() { b.as_ref().as_bytes().len() } else { 0 })
            .sum();
        let side = usize::from(side_total > 0);
        let width = if var_total + side_total <= usize::from(u16::MAX) { 2 } else { 4 };
        let total = self.var_base(width, side) + var_total + side_total;
        if total > ROW_BYTES_MAX {
            return Err(EngineError::ProgramLimitExceeded {
                message: format!("row is too big: size {total}, maximum size {ROW_BYTES_MAX}"),
            });
        }
        out.resize(self.var_base(width, side), 0);
        out[0] = if width == 4 { FLAG_WIDE } else { 0 } | if side == 1 { FLAG_SIDE } else { 0 };
        let put_end = |out: &mut Vec<u8>, ordinal: usize, end: usize| {
            let at = self.fixed_end + ordinal * width;
            if width == 2 {
                out[at..at + 2].copy_from_slice(&u16::try_from(end).unwrap_or(u16::MAX).to_le_bytes());
            } else {
                out[at..at + 4].copy_from_slice(&u32::try_from(end).unwrap_or(u32::MAX).to_le_bytes());
            }
        };
        let mut var_end = 0usize;
        for (col, value) in values.iter().enumerate() {
            let value: &Value = value.borrow();
            if value.is_null() {
                out[1 + col / 8] |= 1 << (col % 8);
            }
            let slot = self.slots[col] as usize;
            if self.types[col].fixed_width_bytes().is_none() {
                let before = out.len();
                write_var(value, out);
                var_end += out.len() - before;
                put_end(out, slot, var_end);
                continue;
            }
            let slot_width = self.types[col].fixed_width_bytes().unwrap_or(0);
            write_fixed(&mut out[slot..slot + slot_width], value);
        }
        if side == 1 {
            for (col, value) in values.iter().enumerate() {
                if let Value::NumericBig(b) = value.borrow() {
                    let bytes = b.as_ref().as_bytes();
                    let slot = self.slots[col] as usize;
                    mark_big_slot(
                        &mut out[slot..slot + self.types[col].fixed_width_bytes().unwrap_or(16)],
                        var_end,
                        bytes.len(),
                    );
                    out.extend_from_slice(bytes);
                    var_end += bytes.len();
                }
            }
            put_end(out, self.nvar, var_end);
        }
        debug_assert_eq!(out.len(), total);
        debug_assert_eq!(self.row_len(out), total);
        Ok(())
    }

    pub(crate) fn is_fixed(&self, col: usize) -> bool {
        self.types[col].fixed_width_bytes().is_some()
    }

    /// Overwrites fixed-width column `col` of an encoded row in place with
    /// an already-coerced value (UPDATE fast path: no re-encoding).
    pub(crate) fn patch_fixed(&self, row: &mut [u8], col: usize, value: &Value) {
        assert!(self.is_fixed(col));
        let off = self.slots[col] as usize;
        let width = self.types[col].fixed_width_bytes().unwrap_or(0);
        row[off..off + width].fill(0);
        if value.is_null() {
            row[1 + col / 8] |= 1 << (col % 8);
        } else {
            row[1 + col / 8] &= !(1 << (col % 8));
            write_fixed(&mut row[off..off + width], value);
        }
    }

    /// Checks a row image read from disk or handed in: long enough for its
    /// layout, and whole (never a stub).
    pub(crate) fn validate_image(&self, data: &[u8]) -> Result<()> {
        if data.first().is_some_and(|&flags| flags & FLAG_STUB != 0) {
            return Err(EngineError::Corrupt("row image is a stub, not a whole row".into()));
        }
        self.validate_stored(data)
    }

    /// As `validate_image`, also taking a stub (a checkpoint's rows).
    pub(crate) fn validate_stored(&self, data: &[u8]) -> Result<()> {
        let bad = || EngineError::Corrupt("row image does not match its table layout".into());
        if data.len() < self.fixed_end {
            return Err(bad());
        }
        if data[0] & !(FLAG_WIDE | FLAG_SIDE | FLAG_STUB) != 0 {
            return Err(bad());
        }
        let data = if data[0] & FLAG_STUB != 0 {
            if data.len() < self.fixed_end + STUB_REF_BYTES {
                return Err(bad());
            }
            &data[..data.len() - STUB_REF_BYTES]
        } else {
            data
        };
        let width = Self::offset_width(data);
        let side = Self::side(data[0]);
        if data.len() < self.var_base(width, side) || self.columns_len(data) != data.len() {
            return Err(bad());
        }
        let mut prev = 0;
        for ordinal in 0..self.nvar + side {
            let end = self.var_end(data, width, ordinal);
            if end < prev {
                return Err(bad());
            }
            prev = end;
        }
        for col in 0..self.types.len() {
            if matches!(
                self.types[col],
                DataType::Text | DataType::Varchar(_) | DataType::Char(_) | DataType::Json | DataType::Jsonb
            ) && std::str::from_utf8(self.var_bytes(data, col)).is_err()
            {
                return Err(bad());
            }
            if matches!(self.types[col], DataType::Array(_))
                && !self.is_null(data, col)
                && crate::array::decode(self.var_bytes(data, col)).is_err()
            {
                return Err(bad());
            }
            if side == 1
                && !self.is_null(data, col)
                && let Some((start, len)) = big_slot(data, self.slots[col] as usize, self.types[col])
            {
                let base = self.var_base(width, 1);
                let side_start = if self.nvar == 0 { 0 } else { self.var_end(data, width, self.nvar - 1) };
                let ok = start >= side_start
                    && base + start + len <= data.len()
                    && NumericBigRef::parse(&data[base + start..base + start + len]).is_some();
                if !ok {
                    return Err(bad());
                }
            }
        }
        Ok(())
    }
}

/// NaN, for a side reference `validate_image` would have refused.
const NAN_REF: NumericBigRef<'static> = NumericBigRef::NAN;

/// The side-area offset and length a numeric slot at `off` points to, or
/// None for an i128-form value. The marker is a mantissa of i128::MIN plus
/// offset and length in the low 8 bytes: below -10^38, so no numeric(p,s)
/// value has it; unconstrained slots also need scale byte 0xFF.
fn big_slot(data: &[u8], off: usize, ty: DataType) -> Option<(usize, usize)> {
    if !matches!(ty, DataType::Numeric { .. }) {
        return None;
    }
    let width = ty.fixed_width_bytes()?;
    let slot = data.get(off..off + width)?;
    let marked = slot[15] == 0x80 && slot[8..15].iter().all(|&b| b == 0) && (width == 16 || slot[16] == 0xFF);
    marked.then(|| (u32::from_le_bytes(arr(&slot[..4])) as usize, u32::from_le_bytes(arr(&slot[4..8])) as usize))
}

fn mark_big_slot(slot: &mut [u8], start: usize, len: usize) {
    slot.fill(0);
    slot[..4].copy_from_slice(&u32::try_from(start).unwrap_or(u32::MAX).to_le_bytes());
    slot[4..8].copy_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes());
    slot[15] = 0x80;
    if slot.len() == 17 {
        slot[16] = 0xFF;
    }
}

fn arr<const N: usize>(s: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(s);
    out
}

fn var_len(v: &Value) -> usize {
    match v {
        Value::Text(s) | Value::Json(s) | Value::Jsonb(s) => s.len(),
        Value::Bytea(b) => b.len(),
        // Encoded twice per write (length, then bytes); arrays are never on the PK-lookup path.
        Value::Array(_) | Value::BoundedArray(_) => {
            let mut out = Vec::new();
            crate::array::encode_any(v, &mut out);
            out.len()
        }
        _ => 0,
    }
}

fn write_var(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Text(s) | Value::Json(s) | Value::Jsonb(s) => out.extend_from_slice(s.as_bytes()),
        Value::Bytea(b) => out.extend_from_slice(b),
        Value::Array(_) | Value::BoundedArray(_) => crate::array::encode_any(v, out),
        _ => {}
    }
}

/// Writes a fixed-width value into its slot (`out` is exactly the slot).
fn write_fixed(out: &mut [u8], value: &Value) {
    // Unconstrained numeric's slot has the value's scale after the mantissa.
    if let (Value::Numeric(n), 17) = (value, out.len()) {
        out[16] = n.scale;
    }
    let mut put = |bytes: &[u8]| out[..bytes.len()].copy_from_slice(bytes);
    match value {
        // A wide numeric's slot is marked by `encode` (mark_big_slot).
        Value::Null
        | Value::Text(_)
        | Value::Bytea(_)
        | Value::Json(_)
        | Value::Jsonb(_)
        | Value::Array(_)
        | Value::BoundedArray(_)
        | Value::NumericBig(_) => {}
        Value::Bool(v) => put(&[u8::from(*v)]),
        Value::Int2(v) => put(&v.to_le_bytes()),
        Value::Int4(v) | Value::Date(v) => put(&v.to_le_bytes()),
        Value::Int8(v) | Value::Timestamp(v) | Value::TimestampTz(v) | Value::Time(v) => put(&v.to_le_bytes()),
        Value::TimeTz(t, z) => {
            let mut b = [0u8; 12];
            b[..8].copy_from_slice(&t.to_le_bytes());
            b[8..].copy_from_slice(&z.to_le_bytes());
            put(&b)
        }
        Value::Float4(v) => put(&v.to_le_bytes()),
        Value::Float8(v) => put(&v.to_le_bytes()),
        Value::Numeric(n) => put(&n.mantissa.to_le_bytes()),
        Value::Uuid(u) => put(u),
        Value::Interval(v) => {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&v.micros.to_le_bytes());
            b[8..12].copy_from_slice(&v.days.to_le_bytes());
            b[12..].copy_from_slice(&v.months.to_le_bytes());
            put(&b);
        }
    }
}

/// Self-describing value encoding (column defaults in the catalog).
pub(crate) fn encode_value(w: &mut Writer<'_>, v: &Value) {
    match v {
        Value::Null => w.u8(0),
        Value::Bool(x) => {
            w.u8(1);
            w.bool(*x);
        }
        Value::Int2(x) => {
            w.u8(2);
            w.u16(x.cast_unsigned());
        }
        Value::Int4(x) => {
            w.u8(3);
            w.u32(x.cast_unsigned());
        }
        Value::Int8(x) => {
            w.u8(4);
            w.u64(x.cast_unsigned());
        }
        Value::Numeric(n) => {
            w.u8(5);
            w.bytes(&n.mantissa.to_le_bytes());
            w.u8(n.scale);
        }
        Value::Float4(x) => {
            w.u8(6);
            w.u32(x.to_bits());
        }
        Value::Float8(x) => {
            w.u8(7);
            w.u64(x.to_bits());
        }
        Value::Text(s) => {
            w.u8(8);
            w.str(s);
        }
        Value::Bytea(b) => {
            w.u8(9);
            w.bytes(b);
        }
        Value::Date(d) => {
            w.u8(10);
            w.u32(d.cast_unsigned());
        }
        Value::Timestamp(t) => {
            w.u8(11);
            w.u64(t.cast_unsigned());
        }
        Value::TimestampTz(t) => {
            w.u8(12);
            w.u64(t.cast_unsigned());
        }
        Value::Uuid(u) => {
            w.u8(13);
            w.bytes(u);
        }
        Value::Time(t) => {
            w.u8(14);
            w.u64(t.cast_unsigned());
        }
        Value::Interval(v) => {
            w.u8(15);
            w.u64(v.micros.cast_unsigned());
            w.u32(v.days.cast_unsigned());
            w.u32(v.months.cast_unsigned());
        }
        Value::Json(s) => {
            w.u8(16);
            w.str(s);
        }
        Value::Jsonb(s) => {
            w.u8(17);
            w.str(s);
        }
        Value::Array(_) | Value::BoundedArray(_) => {
            w.u8(18);
            let mut body = Vec::new();
            crate::array::encode_any(v, &mut body);
            w.bytes(&body);
        }
        Value::NumericBig(b) => {
            w.u8(19);
            w.bytes(b.as_ref().as_bytes());
        }
        Value::TimeTz(t, z) => {
            w.u8(20);
            w.u64(t.cast_unsigned());
            w.u32(z.cast_unsigned());
        }
    }
}

pub(crate) fn decode_value(r: &mut Reader<'_>) -> Result<Value> {
    Ok(match r.u8()? {
        0 => Value::Null,
        1 => Value::Bool(r.bool()?),
        2 => Value::Int2(r.u16()?.cast_signed()),
        3 => Value::Int4(r.u32()?.cast_signed()),
        4 => Value::Int8(r.u64()?.cast_signed()),
        5 => {
            let raw = r.bytes()?;
            if raw.len() != 16 {
                return Err(EngineError::Corrupt("numeric width".into()));
            }
            Value::Numeric(Numeric::new(i128::from_le_bytes(arr(raw)), r.u8()?))
        }
        6 => Value::Float4(f32::from_bits(r.u32()?)),
        7 => Value::Float8(f64::from_bits(r.u64()?)),
        8 => Value::Text(r.str()?),
        9 => Value::Bytea(r.bytes()?.to_vec()),
        10 => Value::Date(r.u32()?.cast_signed()),
        11 => Value::Timestamp(r.u64()?.cast_signed()),
        12 => Value::TimestampTz(r.u64()?.cast_signed()),
        13 => {
            let raw = r.bytes()?;
            if raw.len() != 16 {
                return Err(EngineError::Corrupt("uuid width".into()));
            }
            Value::Uuid(arr(raw))
        }
        14 => Value::Time(r.u64()?.cast_signed()),
        15 => Value::Interval(Interval {
            micros: r.u64()?.cast_signed(),
            days: r.u32()?.cast_signed(),
            months: r.u32()?.cast_signed(),
        }),
        16 => Value::Json(r.str()?),
        17 => Value::Jsonb(r.str()?),
        18 => crate::array::decode(r.bytes()?)?,
        19 => Value::NumericBig(
            NumericBig::from_bytes(r.bytes()?).ok_or_else(|| EngineError::Corrupt("numeric encoding".into()))?,
        ),
        20 => Value::TimeTz(r.u64()?.cast_signed(), r.u32()?.cast_signed()),
        tag => return Err(EngineError::Corrupt(format!("unknown value tag {tag}"))),
    })
}

/// `values` in the self-describing encoding, appended to `out`: how the
/// SQL executor writes rows it spills to a temporary file.
pub fn encode_values(values: &[Value], out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    for v in values {
        encode_value(&mut w, v);
    }
}

/// The values [`encode_values`] wrote into `bytes`, appended to `out`.
pub fn decode_values(bytes: &[u8], out: &mut Vec<Value>) -> Result<()> {
    let mut r = Reader::new(bytes);
    while !r.is_empty() {
        out.push(decode_value(&mut r)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> RowLayout {
        RowLayout::new(&[
            DataType::Int4,
            DataType::Text,
            DataType::Int2,
            DataType::Char(3),
            DataType::Numeric { precision: 10, scale: 2 },
            DataType::Bytea,
            DataType::Float8,
            DataType::Bool,
        ])
    }

    #[test]
    fn encode_get_round_trip() {
        let l = layout();
        let values = vec![
            Value::Int4(-7),
            Value::Text("héllo".into()),
            Value::Null,
            Value::Text("ab ".into()),
            Value::Numeric(Numeric::new(12345, 2)),
            Value::Bytea(vec![0, 1, 2]),
            Value::Float8(2.5),
            Value::Bool(true),
        ];
        let mut buf = Vec::new();
        assert!(l.encode(&values, &mut buf).is_ok());
        assert_eq!(l.row_len(&buf), buf.len());
        assert!(l.validate_image(&buf).is_ok());
        for (col, v) in values.iter().enumerate() {
            assert_eq!(l.get(&buf, col).to_owned_value(), *v, "column {col}");
        }
        // 1 flag + 1 bitmap + 4 + 2 + 16 + 8 + 1 fixed, 3 var offsets x 2, 6+3+3 var bytes.
        assert_eq!(buf.len(), 1 + 1 + 31 + 6 + 12);
    }

    fn big(negative: bool, digits: &str, scale: u16) -> Value {
        match NumericBig::finite(negative, digits, scale) {
            Some(Err(b)) => Value::NumericBig(b),
            other => panic!("not wide: {other:?}"),
        }
    }

    #[test]
    fn wide_numerics_use_the_side_area() {
        let unconstrained = DataType::Numeric { precision: 0, scale: 0 };
        let constrained = DataType::Numeric { precision: 5, scale: 2 };
        for types in
            [vec![unconstrained, DataType::Int4, constrained], vec![unconstrained, DataType::Text, constrained]]
        {
            let l = RowLayout::new(&types);
            let middle = if types[1] == DataType::Text { Value::Text("x".into()) } else { Value::Int4(3) };
            let wide = big(true, &"7".repeat(60), 20);
            let nan = Value::NumericBig(NumericBig::nan());
            for row in [
                vec![wide.clone(), middle.clone(), nan.clone()],
                vec![
                    Value::NumericBig(NumericBig::infinity(false)),
                    middle.clone(),
                    Value::Numeric(Numeric::new(-12345, 2)),
                ],
            ] {
                let mut buf = Vec::new();
                assert!(l.encode(&row, &mut buf).is_ok());
                assert!(l.has_side(&buf));
                assert_eq!(l.row_len(&buf), buf.len());
                assert!(l.validate_image(&buf).is_ok());
                for (col, v) in row.iter().enumerate() {
                    assert_eq!(l.get(&buf, col).to_owned_value(), *v, "column {col}");
                }
                // A cut side area is caught.
                assert!(l.validate_image(&buf[..buf.len() - 1]).is_err());
            }
            // Rows of i128-form values have no side area (their old bytes).
            let mut buf = Vec::new();
            assert!(
                l.encode(
                    &[Value::Numeric(Numeric::new(i128::MIN + 5, 255)), middle, Value::Numeric(Numeric::new(1, 2))],
                    &mut buf
                )
                .is_ok()
            );
            assert!(!l.has_side(&buf));
            assert_eq!(l.get(&buf, 0).to_owned_value(), Value::Numeric(Numeric::new(i128::MIN + 5, 255)));
        }
        let mut out = Vec::new();
        let wide = big(false, "1", 400);
        encode_values(&[wide.clone(), Value::NumericBig(NumericBig::nan())], &mut out);
        let mut back = Vec::new();
        assert!(decode_values(&out, &mut back).is_ok());
        assert_eq!(back, vec![wide, Value::NumericBig(NumericBig::nan())]);
    }

    #[test]
    fn new_types_round_trip_in_rows_and_defaults() {
        let l = RowLayout::new(&[
            DataType::Uuid,
            DataType::Int4,
            DataType::Uuid,
            DataType::Interval,
            DataType::Time(Some(2)),
        ]);
        let u = Value::Uuid(core::array::from_fn(|i| u8::try_from(i * 17).unwrap()));
        let iv = Value::Interval(Interval { months: -14, days: 3, micros: i64::MIN + 7 });
        let values = vec![u.clone(), Value::Int4(3), Value::Null, iv.clone(), Value::Time(86_400_000_000)];
        let mut buf = Vec::new();
        assert!(l.encode(&values, &mut buf).is_ok());
        assert_eq!(buf.len(), 1 + 1 + 16 + 4 + 16 + 16 + 8);
        for (col, v) in values.iter().enumerate() {
            assert_eq!(l.get(&buf, col).to_owned_value(), *v, "column {col}");
        }
        let mut bytes = Vec::new();
        encode_value(&mut Writer::new(&mut bytes), &u);
        assert_eq!(decode_value(&mut Reader::new(&bytes)).unwrap(), u);
        let mut bytes = Vec::new();
        encode_value(&mut Writer::new(&mut bytes), &iv);
        assert_eq!(decode_value(&mut Reader::new(&bytes)).unwrap(), iv);
    }

    #[test]
    fn timetz_round_trips_in_rows_and_spills() {
        let l = RowLayout::new(&[DataType::TimeTz(Some(2)), DataType::Int4, DataType::TimeTz(None)]);
        let values = vec![Value::TimeTz(86_400_000_000, -50_400), Value::Int4(3), Value::TimeTz(1, 25_200)];
        let mut buf = Vec::new();
        assert!(l.encode(&values, &mut buf).is_ok());
        for (col, v) in values.iter().enumerate() {
            assert_eq!(l.get(&buf, col).to_owned_value(), *v, "column {col}");
        }
        let mut out = Vec::new();
        encode_values(&values, &mut out);
        let mut back = Vec::new();
        assert!(decode_values(&out, &mut back).is_ok());
        assert_eq!(back, values);
    }

    #[test]
    fn wide_rows_switch_offset_width() {
        let l = RowLayout::new(&[DataType::Int4, DataType::Bytea, DataType::Text]);
        let values = vec![Value::Int4(1), Value::Bytea(vec![7; 70_000]), Value::Text("x".into())];
        let mut buf = Vec::new();
        assert!(l.encode(&values, &mut buf).is_ok());
        assert_eq!(buf[0] & FLAG_WIDE, FLAG_WIDE);
        assert_eq!(l.row_len(&buf), buf.len());
        assert_eq!(l.get(&buf, 2), ValueRef::Text("x"));
        assert_eq!(l.get(&buf, 1), ValueRef::Bytea(&[7; 70_000][..]));
    }
}
