//! The `pgoutput` plugin's messages (logical replication protocol version
//! 1, PostgreSQL's `logicalrep_write_*` in `proto.c`) and the CopyData
//! envelope of the walsender (XLogData 'w', primary keepalive 'k').
//!
//! Pure functions over bytes. Every length is checked against the bytes
//! that are there before anything is read or allocated, so a corrupt or
//! truncated message is an error, never a panic or a huge allocation.

use super::{PgLsn, Relation, RelationColumn, ReplicationEvent, TupleValue};

/// Why a message could not be decoded; `offset` is where in it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed pgoutput message at byte {offset}: {reason}")]
pub struct PgOutputError {
    pub offset: usize,
    pub reason: String,
}

/// One CopyData payload of a logical replication stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CopyDataEvent<'a> {
    /// XLogData: the positions the walsender put on it, and the pgoutput
    /// message inside (decode with [`decode_pgoutput`]).
    XLogData { wal_start: PgLsn, wal_end: PgLsn, server_time_us: i64, payload: &'a [u8] },
    /// Primary keepalive, already an event.
    Keepalive(ReplicationEvent),
}

/// Splits a CopyData payload from the walsender.
pub fn decode_copy_data(data: &[u8]) -> Result<CopyDataEvent<'_>, PgOutputError> {
    let mut reader = Reader::new(data);
    match reader.u8()? {
        b'w' => {
            let wal_start = PgLsn(reader.u64()?);
            let wal_end = PgLsn(reader.u64()?);
            let server_time_us = reader.i64()?;
            Ok(CopyDataEvent::XLogData { wal_start, wal_end, server_time_us, payload: reader.rest() })
        }
        b'k' => {
            let wal_end = PgLsn(reader.u64()?);
            let server_time_us = reader.i64()?;
            let reply_requested = reader.u8()? != 0;
            reader.finish()?;
            Ok(CopyDataEvent::Keepalive(ReplicationEvent::Keepalive { wal_end, server_time_us, reply_requested }))
        }
        tag => Err(reader.error_at(0, format!("unknown replication message type {}", shown_tag(tag)))),
    }
}

/// Decodes one pgoutput message (the payload of an XLogData).
pub fn decode_pgoutput(data: &[u8]) -> Result<ReplicationEvent, PgOutputError> {
    let mut reader = Reader::new(data);
    let event = match reader.u8()? {
        b'B' => ReplicationEvent::Begin {
            final_lsn: PgLsn(reader.u64()?),
            commit_time_us: reader.i64()?,
            xid: reader.u32()?,
        },
        b'C' => {
            let _flags = reader.u8()?;
            ReplicationEvent::Commit {
                commit_lsn: PgLsn(reader.u64()?),
                end_lsn: PgLsn(reader.u64()?),
                commit_time_us: reader.i64()?,
            }
        }
        b'O' => ReplicationEvent::Origin { commit_lsn: PgLsn(reader.u64()?), name: reader.cstr()? },
        b'R' => ReplicationEvent::Relation(relation(&mut reader)?),
        b'Y' => ReplicationEvent::Type { oid: reader.u32()?, schema: reader.cstr()?, name: reader.cstr()? },
        b'I' => {
            let relation = reader.u32()?;
            reader.expect_tag(b"N")?;
            ReplicationEvent::Insert { relation, new: tuple(&mut reader)? }
        }
        b'U' => {
            let relation = reader.u32()?;
            let old = match reader.expect_tag(b"KON")? {
                b'N' => None,
                _ => {
                    let old = tuple(&mut reader)?;
                    reader.expect_tag(b"N")?;
                    Some(old)
                }
            };
            ReplicationEvent::Update { relation, old, new: tuple(&mut reader)? }
        }
        b'D' => {
            let relation = reader.u32()?;
            reader.expect_tag(b"KO")?;
            ReplicationEvent::Delete { relation, old: tuple(&mut reader)? }
        }
        b'T' => {
            let count = reader.u32()?;
            let options = reader.u8()?;
            let count = reader.bounded_count(u64::from(count), 4)?;
            let mut relations = Vec::with_capacity(count);
            for _ in 0..count {
                relations.push(reader.u32()?);
            }
            ReplicationEvent::Truncate { relations, cascade: options & 1 != 0, restart_identity: options & 2 != 0 }
        }
        b'M' => {
            let transactional = reader.u8()? & 1 != 0;
            let _lsn = reader.u64()?;
            let prefix = reader.cstr()?;
            let length = reader.u32()?;
            let content = reader.bytes(u64::from(length))?.to_vec();
            ReplicationEvent::Message { transactional, prefix, content }
        }
        tag => {
            return Err(reader.error_at(0, format!("unexpected pgoutput message type {}", shown_tag(tag))));
        }
    };
    reader.finish()?;
    Ok(event)
}

fn relation(reader: &mut Reader<'_>) -> Result<Relation, PgOutputError> {
    let oid = reader.u32()?;
    let schema = reader.cstr()?;
    let name = reader.cstr()?;
    let replica_identity = reader.u8()?;
    let count = reader.i16_count()?;
    // Flags, an empty name's NUL, type oid and typmod: 10 bytes at least.
    let count = reader.bounded_count(count, 10)?;
    let mut columns = Vec::with_capacity(count);
    for _ in 0..count {
        let flags = reader.u8()?;
        columns.push(RelationColumn {
            name: reader.cstr()?,
            type_oid: reader.u32()?,
            type_modifier: reader.i32()?,
            part_of_key: flags & 1 != 0,
        });
    }
    Ok(Relation { oid, schema, name, replica_identity, columns })
}

fn tuple(reader: &mut Reader<'_>) -> Result<Vec<TupleValue>, PgOutputError> {
    let count = reader.i16_count()?;
    let count = reader.bounded_count(count, 1)?;
    let mut values = Vec::with_capacity(count);
    for _ in 0..count {
        let at = reader.offset;
        values.push(match reader.u8()? {
            b'n' => TupleValue::Null,
            b'u' => TupleValue::UnchangedToast,
            b't' => {
                let length = reader.u32()?;
                let at = reader.offset;
                let bytes = reader.bytes(u64::from(length))?;
                let text =
                    std::str::from_utf8(bytes).map_err(|_| reader.error_at(at, "column value is not valid UTF-8"))?;
                TupleValue::Text(text.to_owned())
            }
            // With the `binary` option: the type's send format (what binary COPY sends).
            b'b' => {
                let length = reader.u32()?;
                TupleValue::Binary(reader.bytes(u64::from(length))?.to_vec())
            }
            tag => return Err(reader.error_at(at, format!("unexpected column kind {}", shown_tag(tag)))),
        });
    }
    Ok(values)
}

fn shown_tag(tag: u8) -> String {
    if tag.is_ascii_graphic() { format!("'{}'", char::from(tag)) } else { format!("0x{tag:02x}") }
}

/// A cursor that checks every read against the bytes left.
struct Reader<'a> {
    data: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8]) -> Reader<'a> {
        Reader { data, offset: 0 }
    }

    fn error_at(&self, offset: usize, reason: impl Into<String>) -> PgOutputError {
        PgOutputError { offset, reason: reason.into() }
    }

    fn left(&self) -> usize {
        self.data.len() - self.offset
    }

    fn bytes(&mut self, length: u64) -> Result<&'a [u8], PgOutputError> {
        let length = usize::try_from(length)
            .ok()
            .filter(|&n| n <= self.left())
            .ok_or_else(|| self.error_at(self.offset, format!("needs {length} bytes, only {} left", self.left())))?;
        let slice = &self.data[self.offset..self.offset + length];
        self.offset += length;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], PgOutputError> {
        let mut out = [0; N];
        out.copy_from_slice(self.bytes(N as u64)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, PgOutputError> {
        Ok(self.array::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32, PgOutputError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, PgOutputError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, PgOutputError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, PgOutputError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    fn i16_count(&mut self) -> Result<u64, PgOutputError> {
        let at = self.offset;
        let count = i16::from_be_bytes(self.array()?);
        u64::try_from(count).map_err(|_| self.error_at(at, format!("negative count {count}")))
    }

    /// `count` items of at least `item_bytes_min` each must fit in what is
    /// left, so the capacity reserved for them is bounded by the message.
    fn bounded_count(&self, count: u64, item_bytes_min: u64) -> Result<usize, PgOutputError> {
        let needed = count.saturating_mul(item_bytes_min);
        usize::try_from(count)
            .ok()
            .filter(|_| needed <= self.left() as u64)
            .ok_or_else(|| self.error_at(self.offset, format!("{count} items cannot fit in {} bytes", self.left())))
    }

    fn cstr(&mut self) -> Result<String, PgOutputError> {
        let at = self.offset;
        let rest = &self.data[self.offset..];
        let end =
            rest.iter().position(|&b| b == 0).ok_or_else(|| self.error_at(at, "string without a terminating NUL"))?;
        let text = std::str::from_utf8(&rest[..end]).map_err(|_| self.error_at(at, "string is not valid UTF-8"))?;
        self.offset += end + 1;
        Ok(text.to_owned())
    }

    /// Reads a one-byte tag that must be one of `allowed`.
    fn expect_tag(&mut self, allowed: &[u8]) -> Result<u8, PgOutputError> {
        let at = self.offset;
        let tag = self.u8()?;
        if allowed.contains(&tag) {
            Ok(tag)
        } else {
            let allowed: Vec<String> = allowed.iter().map(|&b| shown_tag(b)).collect();
            Err(self.error_at(at, format!("expected {}, found {}", allowed.join(" or "), shown_tag(tag))))
        }
    }

    fn rest(&mut self) -> &'a [u8] {
        let rest = &self.data[self.offset..];
        self.offset = self.data.len();
        rest
    }

    fn finish(&self) -> Result<(), PgOutputError> {
        if self.left() == 0 {
            Ok(())
        } else {
            Err(self.error_at(self.offset, format!("{} bytes after the end of the message", self.left())))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn relation_message() -> Vec<u8> {
        let mut m = vec![b'R'];
        m.extend(16385u32.to_be_bytes());
        m.extend(b"public\0t\0");
        m.push(b'd');
        m.extend(2i16.to_be_bytes());
        m.push(1);
        m.extend(b"id\0");
        m.extend(20u32.to_be_bytes());
        m.extend((-1i32).to_be_bytes());
        m.push(0);
        m.extend(b"v\0");
        m.extend(25u32.to_be_bytes());
        m.extend((-1i32).to_be_bytes());
        m
    }

    fn update_message() -> Vec<u8> {
        let mut m = vec![b'U'];
        m.extend(16385u32.to_be_bytes());
        m.push(b'O');
        m.extend(2i16.to_be_bytes());
        m.push(b't');
        m.extend(1u32.to_be_bytes());
        m.push(b'1');
        m.push(b'n');
        m.push(b'N');
        m.extend(2i16.to_be_bytes());
        m.push(b't');
        m.extend(2u32.to_be_bytes());
        m.extend("é".as_bytes());
        m.push(b'u');
        m
    }

    #[test]
    fn decodes_relation_and_update() {
        let ReplicationEvent::Relation(relation) = decode_pgoutput(&relation_message()).unwrap() else {
            panic!("not a relation");
        };
        assert_eq!((relation.oid, relation.schema.as_str(), relation.name.as_str()), (16385, "public", "t"));
        assert_eq!(relation.replica_identity, b'd');
        assert!(relation.columns[0].part_of_key && !relation.columns[1].part_of_key);
        assert_eq!((relation.columns[1].name.as_str(), relation.columns[1].type_oid), ("v", 25));
        assert_eq!(
            decode_pgoutput(&update_message()).unwrap(),
            ReplicationEvent::Update {
                relation: 16385,
                old: Some(vec![TupleValue::Text("1".into()), TupleValue::Null]),
                new: vec![TupleValue::Text("é".into()), TupleValue::UnchangedToast],
            }
        );
    }

    #[test]
    fn every_truncation_and_extension_is_an_error() {
        for message in [relation_message(), update_message()] {
            for cut in 0..message.len() {
                assert!(decode_pgoutput(&message[..cut]).is_err(), "cut at {cut}");
            }
            let mut longer = message.clone();
            longer.push(0);
            assert!(decode_pgoutput(&longer).is_err());
        }
    }

    #[test]
    fn huge_counts_do_not_allocate() {
        let mut m = vec![b'T'];
        m.extend(u32::MAX.to_be_bytes());
        m.push(0);
        assert!(decode_pgoutput(&m).unwrap_err().reason.contains("cannot fit"));
        let mut m = vec![b'I'];
        m.extend(1u32.to_be_bytes());
        m.push(b'N');
        m.extend(i16::MAX.to_be_bytes());
        assert!(decode_pgoutput(&m).is_err());
    }

    #[test]
    fn keepalive_and_xlogdata_envelopes() {
        let mut k = vec![b'k'];
        k.extend(0x1_0000_0010u64.to_be_bytes());
        k.extend(42i64.to_be_bytes());
        k.push(1);
        assert_eq!(
            decode_copy_data(&k).unwrap(),
            CopyDataEvent::Keepalive(ReplicationEvent::Keepalive {
                wal_end: PgLsn(0x1_0000_0010),
                server_time_us: 42,
                reply_requested: true
            })
        );
        let mut w = vec![b'w'];
        w.extend(7u64.to_be_bytes());
        w.extend(9u64.to_be_bytes());
        w.extend(1i64.to_be_bytes());
        w.extend(b"B");
        let CopyDataEvent::XLogData { wal_start, wal_end, payload, .. } = decode_copy_data(&w).unwrap() else {
            panic!("not XLogData");
        };
        assert_eq!((wal_start, wal_end, payload), (PgLsn(7), PgLsn(9), &b"B"[..]));
        assert!(decode_copy_data(&w[..10]).is_err());
        assert!(decode_copy_data(b"x").is_err());
    }
}
