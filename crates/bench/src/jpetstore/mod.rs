//! JPetStore-shaped OLTP after reference study 001 (Oracle Database Smart
//! Flash Cache): an online pet shop whose users mostly search and browse and
//! sometimes buy, swept over the **search range** (the share of the items,
//! with their products and inventory, the transactions touch) and the
//! number of threads, on PostgreSQL alone and on pgtier with and without
//! the flash tier below memory.
//!
//! The mix (study 001, "Load generating tool"): Tx1 "search for a product
//! and make a purchase" (INSERT and UPDATE) and Tx2 "search only" (SELECT)
//! in the ratio 2 : 8. The study gives no finer split; ours is BROWSE 40 %
//! (category → products → items with inventory) and SEARCH 40 % (products
//! by keyword within the search range, then a product's items) for Tx2,
//! UPDATE_CART 10 % (stock check and inventory update of 1–3 items) and
//! PLACE_ORDER 10 % (account, items and stock, INSERT orders + lineitems,
//! inventory decremented) for Tx1. See [`transactions`].
//!
//! The cache groups (crates/cache: a group is a root table and its
//! children by foreign key; a DYNAMIC group loads a missing instance on a
//! lookup by its root key and answers other lookups from memory only):
//! - `jp_items`: DYNAMIC AWT, root `item`, child `inventory` (keyed by
//!   `itemid`, which carries the root key), LRU aging under its own memory
//!   budget, `FLASH DEFAULT` (pgtier-flash) or `FLASH NONE` (pgtier). This
//!   is the study's big, randomly read data (ITEM, PK_ITEM, INVENTORY,
//!   PK_INVENTORY: 80 % of its physical reads).
//! - `jp_catalog`: AWT, root `category`, child `product`, fully loaded:
//!   searches (`lower(name) LIKE`) and category lists are scans, which a
//!   DYNAMIC group would answer from memory only. Products are 1/8 of the
//!   items' size in the study; here they stay in memory.
//! - `jp_account`: AWT, `account`, fully loaded (read by the orders).
//! - `jp_orders`: AWT, root `orders`, child `lineitem`, holding this run's
//!   orders only (`WHERE orderid > last order before the run`).
//!
//! Every table the mix touches is cached, so nothing passes through to
//! PostgreSQL (direct mode has no passthrough: it is the server's).
//!
//! pgtier sides run in direct mode ([`Direct`]: the engine in-process) or,
//! with another [`CacheOpener`], behind a server over the wire.
//!
//! After each pgtier side the write-through is drained and every group is
//! compared with PostgreSQL through `Cache::verify`, and the orders and
//! line items PostgreSQL holds are counted against the commits the run saw.

pub mod population;
pub mod schema;
pub mod transactions;

mod sweep;

pub use sweep::{
    CacheOpener, Crossover, Direct, GroupCheck, JpetError, OpenedCache, PointResult, Report, Side, SideCheck,
    SweepConfig, SweepResult, TxnPoint, crossovers, format_point, format_summary, run_point, run_sweep, write_json,
};

use std::sync::Arc;

/// What a [`CacheOpener`] is given (so an opener outside this crate needs
/// no dependency of its own on the cache crate).
pub use pgtier_cache::CacheConfig;

use crate::driver::{Workload, WorkloadClient};
use crate::target::{DbError, Session, Target};
use population::Sizes;
use transactions::{Counters, JpetClient, TxnType};

/// The workload for the driver: one search range over one population.
#[derive(Clone, Debug)]
pub struct JpetWorkload {
    pub sizes: Sizes,
    pub search_range_percent: u32,
    pub counters: Arc<Counters>,
}

impl Workload for JpetWorkload {
    fn transaction_names(&self) -> &[&'static str] {
        &TxnType::NAMES
    }

    fn open_client(
        &self,
        session: Box<dyn Session>,
        _thread: u32,
        seed: u64,
    ) -> Result<Box<dyn WorkloadClient>, DbError> {
        Ok(Box::new(JpetClient::new(session, self.sizes, self.search_range_percent, self.counters.clone(), seed)?))
    }
}

/// Every way the run departs from JPetStore and the study, one line each.
pub fn deviations(open_loop: bool) -> Vec<String> {
    let mut out = vec![
        "prices are integer cents, not decimal(10,2): the kit's values are integers and text".to_owned(),
        "inventory.itemid references item and lineitem.orderid references orders (JPetStore declares neither): \
         cache-group children are found by foreign key"
            .to_owned(),
        "a product's item list is read by itemid (JPetStore: WHERE productid = ?), which a DYNAMIC group rooted \
         at item would answer from memory only"
            .to_owned(),
        "mix BROWSE/SEARCH/UPDATE_CART/PLACE_ORDER 40/40/10/10: the study gives only Tx1:Tx2 = 2:8".to_owned(),
    ];
    out.push(if open_loop {
        "no think time: Poisson arrivals at a fixed total rate (open loop) instead of users who pause".to_owned()
    } else {
        "no think time: each thread runs transactions back to back (closed loop)".to_owned()
    });
    out
}

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(
        "JPetStore table \"{table}\" does not exist at {target}; run with --populate to create and load the tables"
    )]
    TablesMissing { table: &'static str, target: String },
    #[error("the JPetStore tables at {target} hold {items} items, not a whole scale; run with --populate")]
    Shape { target: String, items: i64 },
    #[error("checking the JPetStore tables at {target}: {source}")]
    Target { target: String, source: DbError },
}

/// Checks that the tables exist and returns the scale they were populated
/// with (from the item count).
pub fn check_population(target: &dyn Target) -> Result<u64, CheckError> {
    let describe = target.describe();
    let wrap = |source: DbError| CheckError::Target { target: describe.clone(), source };
    let mut session = target.connect().map_err(wrap)?;
    for (table, sql) in schema::probe_statements() {
        match session.prepare(&sql) {
            Ok(_) => {}
            Err(e) if e.sqlstate_is("42P01") => return Err(CheckError::TablesMissing { table, target: describe }),
            Err(e) => return Err(wrap(e)),
        }
    }
    let stmt = session.prepare("SELECT count(*) FROM item").map_err(wrap)?;
    let mut out = Vec::new();
    session.query(stmt, &[], &mut out).map_err(wrap)?;
    let items = match out.first() {
        Some(crate::target::Value::Int(n)) => *n,
        _ => 0,
    };
    let per_scale = (population::Sizes::of(1).items) as i64;
    if items <= 0 || items % per_scale != 0 {
        return Err(CheckError::Shape { target: describe, items });
    }
    Ok((items / per_scale) as u64)
}
