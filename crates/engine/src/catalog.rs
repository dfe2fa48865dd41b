//! The committed catalog as transactions share it: an immutable
//! [`CatalogState`] (schemas plus the storage of each live table), replaced
//! whole when a DDL transaction commits, a version number that says when it
//! was replaced, and the DDL lock that lets one transaction at a time edit
//! a private copy.
//!
//! Publication happens under the commit lock (`transaction/commit.rs`), so
//! catalog versions follow commit order. A reader loads the version first,
//! then the catalog: a catalog cached with an equal version is current.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::RwLock;

use crate::error::{EngineError, Result};
use crate::ids::TxnId;
use crate::schema::{Catalog, TableId};
use crate::table::TableStore;

/// A catalog plus the storage of each live table.
#[derive(Clone, Default)]
pub(crate) struct CatalogState {
    pub(crate) catalog: Arc<Catalog>,
    /// Indexed by table id; None for ids of dropped tables.
    pub(crate) stores: Vec<Option<Arc<TableStore>>>,
}

impl CatalogState {
    pub(crate) fn store(&self, id: TableId) -> Option<&Arc<TableStore>> {
        self.stores.get(id.0 as usize).and_then(Option::as_ref)
    }
    pub(crate) fn set_store(&mut self, id: TableId, store: Option<Arc<TableStore>>) {
        let i = id.0 as usize;
        if self.stores.len() <= i {
            self.stores.resize(i + 1, None);
        }
        self.stores[i] = store;
    }
    pub(crate) fn live_stores(&self) -> impl Iterator<Item = &Arc<TableStore>> {
        self.stores.iter().flatten()
    }
}

/// The published [`CatalogState`], its version and the DDL lock.
pub(crate) struct CommittedCatalog {
    current: RwLock<Arc<CatalogState>>,
    version: AtomicU64,
    /// Transaction id holding the DDL lock (0: free).
    ddl_owner: AtomicU64,
}

impl CommittedCatalog {
    pub(crate) fn new(state: CatalogState) -> CommittedCatalog {
        CommittedCatalog {
            current: RwLock::new(Arc::new(state)),
            version: AtomicU64::new(1),
            ddl_owner: AtomicU64::new(0),
        }
    }

    /// Changes with every publication; load it before [`Self::current`].
    #[inline]
    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    pub(crate) fn current(&self) -> Arc<CatalogState> {
        self.current.read().clone()
    }

    /// The committed schemas alone.
    pub(crate) fn catalog(&self) -> Arc<Catalog> {
        self.current.read().catalog.clone()
    }

    /// Replaces the committed catalog (a DDL transaction's commit, under
    /// the commit lock).
    pub(crate) fn publish(&self, state: Arc<CatalogState>) {
        *self.current.write() = state;
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// Takes the DDL lock for `me`, waiting for another DDL transaction
    /// to end until `deadline` (55P03).
    pub(crate) fn lock_ddl(&self, me: TxnId, deadline: Instant) -> Result<()> {
        while self.ddl_owner.compare_exchange(0, me.get(), Ordering::AcqRel, Ordering::Relaxed).is_err() {
            if Instant::now() >= deadline {
                return Err(EngineError::LockTimeout { detail: "while waiting for another transaction's DDL".into() });
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        Ok(())
    }

    pub(crate) fn unlock_ddl(&self, me: TxnId) {
        let released = self.ddl_owner.compare_exchange(me.get(), 0, Ordering::AcqRel, Ordering::Relaxed);
        assert!(released.is_ok(), "DDL lock owned by someone else");
    }
}
