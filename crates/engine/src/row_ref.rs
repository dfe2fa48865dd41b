//! Row accessors handed to callers: [`RowRef`] borrows a row's bytes,
//! [`RowBuf`] owns a reusable copy (reads through it never allocate once
//! its buffer has grown).

use std::sync::Arc;

use crate::error::Result;
use crate::schema::TableSchema;
use crate::types::{Value, ValueRef};

/// A row of a known table, borrowed.
#[derive(Clone, Copy)]
pub struct RowRef<'a> {
    pub(crate) schema: &'a TableSchema,
    pub(crate) data: &'a [u8],
}

impl<'a> RowRef<'a> {
    pub(crate) fn new(schema: &'a TableSchema, data: &'a [u8]) -> RowRef<'a> {
        RowRef { schema, data }
    }

    /// A row of `schema` from bytes kept outside the engine (a row's
    /// `bytes()` stored elsewhere, as the cache's flash tier does): checked
    /// against the table's layout first, so damaged bytes are an error,
    /// never a panic.
    pub fn from_image(schema: &'a TableSchema, image: &'a [u8]) -> Result<RowRef<'a>> {
        schema.layout().validate_image(image)?;
        Ok(RowRef { schema, data: image })
    }

    /// `values` as a row of `schema` in the engine's row format (what
    /// `bytes()` returns for a stored row), coerced to the column types as
    /// an insert would be; appended to `out`.
    pub fn encode(schema: &TableSchema, values: &[Value], out: &mut Vec<u8>) -> Result<()> {
        crate::transaction::encode_row(schema, values, out)
    }

    pub fn schema(&self) -> &'a TableSchema {
        self.schema
    }

    pub fn len(&self) -> usize {
        self.schema.columns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.schema.columns.is_empty()
    }

    /// Column `col` (panics if out of range, like slice indexing).
    pub fn get(&self, col: usize) -> ValueRef<'a> {
        self.schema.layout().get(self.data, col)
    }

    pub fn is_null(&self, col: usize) -> bool {
        self.schema.layout().is_null(self.data, col)
    }

    /// Integer column as i64 (smallint/integer/bigint); None if NULL or not an integer.
    pub fn get_i64(&self, col: usize) -> Option<i64> {
        match self.get(col) {
            ValueRef::Int2(v) => Some(i64::from(v)),
            ValueRef::Int4(v) => Some(i64::from(v)),
            ValueRef::Int8(v) => Some(v),
            _ => None,
        }
    }

    pub fn get_str(&self, col: usize) -> Option<&'a str> {
        match self.get(col) {
            ValueRef::Text(s) => Some(s),
            _ => None,
        }
    }

    pub fn values(&self) -> Vec<Value> {
        (0..self.len()).map(|c| self.get(c).to_owned_value()).collect()
    }

    /// The row's encoded bytes (engine row format).
    pub fn bytes(&self) -> &'a [u8] {
        self.data
    }
}

impl std::fmt::Debug for RowRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries((0..self.len()).map(|c| self.get(c))).finish()
    }
}

/// An owned, reusable row buffer.
#[derive(Default, Clone)]
pub struct RowBuf {
    pub(crate) schema: Option<Arc<TableSchema>>,
    pub(crate) data: Vec<u8>,
}

impl RowBuf {
    pub fn new() -> RowBuf {
        RowBuf::default()
    }

    /// The row (None before the first successful read).
    pub fn row(&self) -> Option<RowRef<'_>> {
        self.schema.as_deref().map(|s| RowRef::new(s, &self.data))
    }

    /// Column `col` of the row read last. Panics if nothing was read.
    pub fn get(&self, col: usize) -> ValueRef<'_> {
        match self.row() {
            Some(r) => r.get(col),
            None => panic!("RowBuf::get before a row was read"),
        }
    }

    pub fn get_i64(&self, col: usize) -> Option<i64> {
        self.row().and_then(|r| r.get_i64(col))
    }

    pub fn get_str(&self, col: usize) -> Option<&str> {
        self.row().and_then(|r| r.get_str(col))
    }

    pub fn values(&self) -> Vec<Value> {
        self.row().map(|r| r.values()).unwrap_or_default()
    }

    pub(crate) fn set_schema(&mut self, schema: &Arc<TableSchema>) {
        if !self.schema.as_ref().is_some_and(|s| Arc::ptr_eq(s, schema)) {
            self.schema = Some(Arc::clone(schema));
        }
    }
}
