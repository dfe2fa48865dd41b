//! Registered commit-stream consumers and their acknowledged positions,
//! kept in `consumers.dat` (written atomically). WAL retention reads them
//! (checkpoint.rs): the WAL is never truncated past any registered
//! consumer's position, across restarts too. The cursor that reads the
//! stream is `stream::CommitStream`.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use pgtier_wal::{Lsn, Wal};

use crate::codec::{Reader, Writer};
use crate::error::{EngineError, Result};
use crate::files::sync_dir;

/// Where a newly registered consumer starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamStart {
    /// With the next transaction to commit.
    Now,
    /// With the oldest transaction still in the WAL.
    Oldest,
    /// At a specific position (a `next_lsn` from an earlier read).
    At(Lsn),
}

/// A registered consumer ([`crate::Database::consumers`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerPosition {
    pub name: String,
    /// Where it resumes: after its last acknowledged transaction.
    pub position: Lsn,
}

/// The registered consumers and their acknowledged positions, persisted in
/// `consumers.dat`. The mutex is held across the file write (a leaf lock).
pub(crate) struct Consumers(Mutex<ConsumerRegistry>);

struct ConsumerRegistry {
    path: PathBuf,
    positions: BTreeMap<String, Lsn>,
}

impl Consumers {
    pub(crate) fn load(dir: &Path) -> Result<Consumers> {
        Ok(Consumers(Mutex::new(ConsumerRegistry::load(dir)?)))
    }

    /// Registers `name` (idempotent: a restarting consumer keeps its
    /// position); `Now` is the end of `wal`.
    pub(crate) fn register(&self, wal: &Wal, name: &str, start: StreamStart) -> Result<()> {
        let mut reg = self.0.lock();
        if reg.positions.contains_key(name) {
            return Ok(());
        }
        let position = match start {
            StreamStart::Now => wal.end(),
            StreamStart::Oldest => Lsn(0),
            StreamStart::At(lsn) => lsn,
        };
        reg.positions.insert(name.to_owned(), position);
        reg.save()
    }

    pub(crate) fn unregister(&self, name: &str) -> Result<()> {
        let mut reg = self.0.lock();
        if reg.positions.remove(name).is_none() {
            return Err(undefined_consumer(name));
        }
        reg.save()
    }

    /// Where `name` resumes: after its last acknowledged transaction.
    pub(crate) fn position(&self, name: &str) -> Result<Lsn> {
        self.0.lock().positions.get(name).copied().ok_or_else(|| undefined_consumer(name))
    }

    /// Persists `name`'s position `next_lsn`, which must not lie beyond
    /// the durable end of `wal`; an older position than the one kept is
    /// ignored.
    pub(crate) fn ack(&self, wal: &Wal, name: &str, next_lsn: Lsn) -> Result<()> {
        let mut reg = self.0.lock();
        let Some(pos) = reg.positions.get_mut(name) else {
            return Err(undefined_consumer(name));
        };
        if next_lsn <= *pos {
            return Ok(());
        }
        if next_lsn > wal.durable_end() {
            return Err(EngineError::ProgramLimitExceeded {
                message: format!("cannot acknowledge {next_lsn:?}: beyond the durable end of the WAL"),
            });
        }
        *pos = next_lsn;
        reg.save()
    }

    pub(crate) fn list(&self) -> Vec<ConsumerPosition> {
        self.0
            .lock()
            .positions
            .iter()
            .map(|(name, position)| ConsumerPosition { name: name.clone(), position: *position })
            .collect()
    }

    /// The oldest position any consumer still needs (WAL retention).
    pub(crate) fn min_position(&self) -> Option<Lsn> {
        self.0.lock().positions.values().min().copied()
    }
}

fn undefined_consumer(name: &str) -> EngineError {
    EngineError::UndefinedObject { what: "consumer", name: name.to_owned() }
}

impl ConsumerRegistry {
    fn load(dir: &Path) -> Result<ConsumerRegistry> {
        let path = dir.join("consumers.dat");
        let mut positions = BTreeMap::new();
        match fs::read(&path) {
            Ok(data) => {
                if data.len() < 4 {
                    return Err(EngineError::Corrupt("consumers.dat truncated".into()));
                }
                let (body, crc) = data.split_at(data.len() - 4);
                if crc32c::crc32c(body).to_le_bytes() != crc {
                    return Err(EngineError::Corrupt("consumers.dat checksum mismatch".into()));
                }
                let mut r = Reader::new(body);
                for _ in 0..r.u32()? {
                    let name = r.str()?;
                    positions.insert(name, Lsn(r.u64()?));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(EngineError::io("read consumers.dat", e)),
        }
        Ok(ConsumerRegistry { path, positions })
    }

    fn save(&self) -> Result<()> {
        let mut body = Vec::new();
        let mut w = Writer::new(&mut body);
        w.u32(self.positions.len() as u32);
        for (name, lsn) in &self.positions {
            w.str(name);
            w.u64(lsn.0);
        }
        let crc = crc32c::crc32c(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        let tmp = self.path.with_extension("tmp");
        let io = |e| EngineError::io("write consumers.dat", e);
        let mut f = fs::File::create(&tmp).map_err(io)?;
        f.write_all(&body).map_err(io)?;
        f.sync_all().map_err(io)?;
        fs::rename(&tmp, &self.path).map_err(io)?;
        if let Some(dir) = self.path.parent() {
            sync_dir(dir)?;
        }
        Ok(())
    }
}
