//! Where a committed transaction came from. Every WAL record carries its
//! transaction's origin, and the commit stream hands it to consumers, so
//! one stream serves them all, each filtering by origin: write-through
//! propagates only `Application` transactions, an `Evict` delete removes
//! rows locally without being a delete anyone propagates, autorefresh
//! applies never echo back to PostgreSQL.
//!
//! Foreign keys are enforced for `Application` transactions only. Every
//! other origin mirrors rows PostgreSQL already checked, moving whole cache
//! instances (root and descendants, in any order within the transaction):
//! a check could only fail on an intermediate state (a child loaded before
//! its parent, a parent evicted with its children) or, worse, act on it (an
//! evicted parent cascading to children the cache still holds elsewhere,
//! an autorefresh delete repeating a cascade PostgreSQL already shipped).
//! So in those transactions neither side of a foreign key is checked and
//! no ON DELETE action runs; primary keys, UNIQUE and NOT NULL still are.
//! One exception: an `Evict` delete of a parent fails (without waiting) on
//! a child its snapshot does not see, an application's insert beside it,
//! which it would otherwise leave behind as half an instance.

use crate::error::{EngineError, Result};

/// The origin of a transaction (`#[repr(u8)]`: the value is what the WAL
/// stores).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Origin {
    /// A client's transaction (SQL or the embedded API).
    #[default]
    Application = 0,
    /// Rows copied in from PostgreSQL (LOAD CACHE GROUP, dynamic load).
    Load = 1,
    /// Rows replaced by their PostgreSQL images (REFRESH CACHE GROUP).
    Refresh = 2,
    /// Rows removed from the cache only (UNLOAD, aging); PostgreSQL keeps them.
    Evict = 3,
    /// Changes applied from PostgreSQL's logical replication stream.
    Autorefresh = 4,
}

impl Origin {
    pub(crate) const ALL: [Origin; 5] =
        [Origin::Application, Origin::Load, Origin::Refresh, Origin::Evict, Origin::Autorefresh];

    /// Foreign-key checks and ON DELETE actions apply (see the module doc).
    #[inline]
    pub(crate) fn enforces_foreign_keys(self) -> bool {
        self == Origin::Application
    }

    pub(crate) fn from_u8(v: u8) -> Result<Origin> {
        Origin::ALL
            .get(usize::from(v))
            .copied()
            .ok_or_else(|| EngineError::Corrupt(format!("unknown transaction origin {v} in WAL record")))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Application => "application",
            Origin::Load => "load",
            Origin::Refresh => "refresh",
            Origin::Evict => "evict",
            Origin::Autorefresh => "autorefresh",
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_byte_round_trips() {
        for o in Origin::ALL {
            assert_eq!(Origin::from_u8(o as u8).unwrap(), o);
        }
        assert!(Origin::from_u8(5).is_err());
        assert_eq!(Origin::default(), Origin::Application);
    }
}
