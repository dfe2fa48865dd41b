//! Little-endian binary encoding shared by WAL records, checkpoints and the
//! consumer-position file. Readers never panic on malformed input: every
//! read is bounds-checked and reports `Corrupt`.

use crate::error::{EngineError, Result};

pub(crate) struct Writer<'a> {
    pub(crate) buf: &'a mut Vec<u8>,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(buf: &'a mut Vec<u8>) -> Writer<'a> {
        Writer { buf }
    }
    pub(crate) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }
    /// Length-prefixed bytes (u32 length).
    pub(crate) fn bytes(&mut self, v: &[u8]) {
        let len = u32::try_from(v.len()).unwrap_or(u32::MAX);
        assert_eq!(len as usize, v.len(), "encoded field larger than 4 GiB");
        self.u32(len);
        self.buf.extend_from_slice(v);
    }
    pub(crate) fn str(&mut self, v: &str) {
        self.bytes(v.as_bytes());
    }
}

pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Reader<'a> {
        Reader { data, pos: 0 }
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }
    pub(crate) fn position(&self) -> usize {
        self.pos
    }
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end =
            self.pos.checked_add(n).filter(|&e| e <= self.data.len()).ok_or_else(|| {
                EngineError::Corrupt(format!("record truncated: need {n} bytes at offset {}", self.pos))
            })?;
        let out = &self.data[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub(crate) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub(crate) fn bool(&mut self) -> Result<bool> {
        Ok(self.u8()? != 0)
    }
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }
    pub(crate) fn str(&mut self) -> Result<String> {
        let raw = self.bytes()?;
        String::from_utf8(raw.to_vec()).map_err(|_| EngineError::Corrupt("invalid UTF-8 in record".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf);
        w.u8(7);
        w.u64(u64::MAX - 1);
        w.str("héllo");
        w.bool(true);
        let mut r = Reader::new(&buf);
        assert_eq!(r.u8().ok(), Some(7));
        assert_eq!(r.u64().ok(), Some(u64::MAX - 1));
        assert_eq!(r.str().ok().as_deref(), Some("héllo"));
        assert_eq!(r.bool().ok(), Some(true));
        assert!(r.is_empty());
        let mut short = Reader::new(&buf[..5]);
        assert!(short.u8().is_ok());
        assert!(short.u64().is_err());
    }
}
