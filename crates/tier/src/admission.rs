//! Second-touch admission: a direct-mapped ghost table of key fingerprints.
//! A key is admitted when its fingerprint is already there (it was offered
//! before and not pushed out by another key since). One scan of cold keys
//! then costs a table write each, not a flash write each.

use std::sync::atomic::{AtomicU32, Ordering};

pub(crate) struct Ghost {
    table: Box<[AtomicU32]>,
}

impl Ghost {
    pub(crate) fn new(entries: usize) -> Ghost {
        Ghost { table: (0..entries.max(1024)).map(|_| AtomicU32::new(0)).collect() }
    }

    /// True when the key was offered before (admit it); remembers it either way.
    pub(crate) fn touch(&self, hash: u64) -> bool {
        // Low bits pick the entry and middle bits fingerprint it; the index
        // uses the top bits, so a key's tag says nothing about its ghost entry.
        let i = (hash % self.table.len() as u64) as usize;
        let fingerprint = (hash >> 20) as u32 | 1;
        self.table[i].swap(fingerprint, Ordering::Relaxed) == fingerprint
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.table.len() as u64 * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_touch_admits() {
        let g = Ghost::new(1024);
        assert!(!g.touch(42));
        assert!(g.touch(42));
        assert!(g.touch(42));
        // Another key in the same entry pushes the first out.
        assert!(!g.touch(42 + 1024 * (1 << 21)));
        assert!(!g.touch(42));
    }
}
