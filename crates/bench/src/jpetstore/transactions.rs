//! The four transactions of the mix, written against [`Session`] so the same
//! code drives PostgreSQL and pgtier.
//!
//! Statements are JPetStore's (its iBATIS/MyBatis maps) except where a
//! DYNAMIC cache group needs the root key in the lookup: a product's item
//! list is `WHERE productid = ?` in JPetStore, which on the `item`-rooted
//! group does not name the root key and so would answer only from what
//! memory holds (TimesTen's rule, crates/cache/src/dynamic.rs). The items
//! of a product follow from the population rule
//! ([`super::population::first_item`]), so the list is read by `itemid`
//! instead: the same rows, by key. PostgreSQL runs the same statements.
//!
//! Errors: every error a statement returns is counted by SQLSTATE
//! ([`Counters`]), the transaction rolled back, and the run goes on (an
//! error with no SQLSTATE, a lost connection, stops it). Which SQLSTATEs
//! are expected is [`EXPECTED_SQLSTATES`]; the report flags the others.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::population::{self as pop, ITEMS_PER_PRODUCT, PRODUCTS_PER_KEYWORD, Sizes};
use crate::driver::{Outcome, WorkloadClient};
use crate::target::{DbError, Session, StatementId, Value};

/// Transaction types in report order; the index is the type id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnType {
    Browse,
    Search,
    UpdateCart,
    PlaceOrder,
}

impl TxnType {
    pub const ALL: [TxnType; 4] = [TxnType::Browse, TxnType::Search, TxnType::UpdateCart, TxnType::PlaceOrder];
    pub const NAMES: [&'static str; 4] = ["BROWSE", "SEARCH", "UPDATE_CART", "PLACE_ORDER"];
    /// In %: the study's Tx2 (search only, 80 %) split evenly between
    /// browsing and keyword search; its Tx1 (search and purchase, 20 %)
    /// split evenly between the cart's inventory update and the order.
    pub const MIX_PERCENT: [u32; 4] = [40, 40, 10, 10];

    pub fn from_percentile(p: u32) -> TxnType {
        let mut acc = 0;
        for (t, share) in Self::ALL.iter().zip(Self::MIX_PERCENT) {
            acc += share;
            if p < acc {
                return *t;
            }
        }
        TxnType::PlaceOrder
    }
}

/// Serialization failure and deadlock: concurrent orders on one item may
/// meet them on either side (items are locked in key order, so PostgreSQL
/// should not deadlock; pgtier reports write conflicts as 40001).
pub const EXPECTED_SQLSTATES: [&str; 2] = ["40001", "40P01"];

pub const CATEGORY: &str = "SELECT catid, name, descn FROM category WHERE catid = $1";
pub const PRODUCTS_BY_CATEGORY: &str = "SELECT productid, name, descn FROM product WHERE category = $1";
pub const PRODUCT: &str = "SELECT productid, category, name, descn FROM product WHERE productid = $1";
pub const SEARCH_PRODUCTS: &str = "SELECT productid, name, descn FROM product WHERE lower(name) LIKE $1";
pub const ITEM_LIST_ENTRY: &str = "SELECT itemid, productid, listprice, attr1 FROM item WHERE itemid = $1";
/// JPetStore's getItem: the item, its product and its stock.
pub const ITEM_DETAIL: &str = "SELECT i.itemid, i.listprice, i.unitcost, i.supplier, i.status, \
     i.attr1, i.attr2, i.attr3, i.attr4, i.attr5, p.name, p.descn, v.qty \
     FROM item i JOIN inventory v ON v.itemid = i.itemid JOIN product p ON p.productid = i.productid \
     WHERE i.itemid = $1";
pub const RESTOCK: &str = "UPDATE inventory SET qty = qty + $1 WHERE itemid = $2";
pub const TAKE_STOCK: &str = "UPDATE inventory SET qty = qty - $1 WHERE itemid = $2";
pub const ACCOUNT: &str = "SELECT userid, email, firstname, lastname, status, addr1, addr2, city, state, zip, \
     country, phone FROM account WHERE userid = $1";
/// JPetStore's insertOrder; the billing address is the account's, as its
/// order form fills it by default.
pub const INSERT_ORDER: &str = "INSERT INTO orders (orderid, userid, orderdate, shipaddr1, shipaddr2, shipcity, \
     shipstate, shipzip, shipcountry, billaddr1, billaddr2, billcity, billstate, billzip, billcountry, courier, \
     totalprice, billtofirstname, billtolastname, shiptofirstname, shiptolastname, creditcard, exprdate, cardtype, \
     locale) VALUES ($1, $2, CURRENT_DATE, $3, $4, $5, $6, $7, $8, $3, $4, $5, $6, $7, $8, 'UPS', $9, $10, $11, \
     $10, $11, '999 9999 9999 9999', '12/03', 'Visa', 'CA')";
pub const INSERT_LINE: &str =
    "INSERT INTO lineitem (orderid, linenum, itemid, quantity, unitprice) VALUES ($1, $2, $3, $4, $5)";

/// Errors of one SQLSTATE over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ErrorCount {
    pub count: u64,
    pub first_message: String,
}

/// Shared by every client of one workload: order keys, commits and errors
/// over all phases (ramp-up and ramp-down too), which is what PostgreSQL
/// holds afterwards.
#[derive(Debug, Default)]
pub struct Counters {
    /// The next `orderid`: one sequence for every worker, so keys never collide.
    pub next_order_id: AtomicI64,
    pub orders_committed: AtomicU64,
    pub lines_committed: AtomicU64,
    /// Units committed transactions added to stock (restocks minus orders).
    pub stock_change: AtomicI64,
    pub errors: Mutex<BTreeMap<String, ErrorCount>>,
}

impl Counters {
    pub fn starting_after(last_order_id: i64) -> Arc<Counters> {
        Arc::new(Counters { next_order_id: AtomicI64::new(last_order_id + 1), ..Counters::default() })
    }

    fn record_error(&self, error: &DbError) {
        let code = error.sqlstate.clone().unwrap_or_default();
        let mut errors = self.errors.lock().unwrap_or_else(|p| p.into_inner());
        let entry = errors.entry(code).or_default();
        if entry.count == 0 {
            entry.first_message = error.message.clone();
        }
        entry.count += 1;
    }

    pub fn errors(&self) -> BTreeMap<String, ErrorCount> {
        self.errors.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

struct Statements {
    category: StatementId,
    products_by_category: StatementId,
    product: StatementId,
    search: StatementId,
    item_list_entry: StatementId,
    item_detail: StatementId,
    restock: StatementId,
    take_stock: StatementId,
    account: StatementId,
    insert_order: StatementId,
    insert_line: StatementId,
}

impl Statements {
    fn prepare(s: &mut dyn Session) -> Result<Statements, DbError> {
        Ok(Statements {
            category: s.prepare(CATEGORY)?,
            products_by_category: s.prepare(PRODUCTS_BY_CATEGORY)?,
            product: s.prepare(PRODUCT)?,
            search: s.prepare(SEARCH_PRODUCTS)?,
            item_list_entry: s.prepare(ITEM_LIST_ENTRY)?,
            item_detail: s.prepare(ITEM_DETAIL)?,
            restock: s.prepare(RESTOCK)?,
            take_stock: s.prepare(TAKE_STOCK)?,
            account: s.prepare(ACCOUNT)?,
            insert_order: s.prepare(INSERT_ORDER)?,
            insert_line: s.prepare(INSERT_LINE)?,
        })
    }
}

/// One worker's client.
pub struct JpetClient {
    session: Box<dyn Session>,
    st: Statements,
    rng: SmallRng,
    sizes: Sizes,
    /// Products the search range covers: `0..products_in_range`.
    products_in_range: u64,
    counters: Arc<Counters>,
    out: Vec<Value>,
    /// Line items of the order being placed.
    pending_lines: u64,
    /// Units the transaction under way adds to stock.
    pending_stock: i64,
}

/// Whether every lookup of a transaction found its rows.
type Found = bool;

impl JpetClient {
    pub fn new(
        mut session: Box<dyn Session>,
        sizes: Sizes,
        search_range_percent: u32,
        counters: Arc<Counters>,
        seed: u64,
    ) -> Result<JpetClient, DbError> {
        let st = Statements::prepare(session.as_mut())?;
        Ok(JpetClient {
            session,
            st,
            rng: SmallRng::seed_from_u64(seed),
            sizes,
            products_in_range: sizes.products_in_range(search_range_percent),
            counters,
            out: Vec::with_capacity(64),
            pending_lines: 0,
            pending_stock: 0,
        })
    }

    pub fn run(&mut self, kind: TxnType) -> Result<Outcome, DbError> {
        let result = match kind {
            TxnType::Browse => self.browse(),
            TxnType::Search => self.search(),
            TxnType::UpdateCart | TxnType::PlaceOrder => {
                self.pending_lines = 0;
                self.pending_stock = 0;
                let body = if kind == TxnType::UpdateCart { Self::update_cart } else { Self::place_order };
                let result = self.in_transaction(body);
                // Counted once the commit succeeded: what PostgreSQL must hold.
                if result.is_ok() {
                    if kind == TxnType::PlaceOrder {
                        self.counters.orders_committed.fetch_add(1, Ordering::Relaxed);
                        self.counters.lines_committed.fetch_add(self.pending_lines, Ordering::Relaxed);
                    }
                    self.counters.stock_change.fetch_add(self.pending_stock, Ordering::Relaxed);
                }
                result
            }
        };
        match result {
            Ok(true) => Ok(Outcome::Found),
            Ok(false) => Ok(Outcome::NotFound),
            Err(error) if error.sqlstate.is_some() => {
                self.counters.record_error(&error);
                Ok(Outcome::AcceptableError)
            }
            Err(error) => Err(error),
        }
    }

    fn in_transaction(&mut self, body: fn(&mut JpetClient) -> Result<Found, DbError>) -> Result<Found, DbError> {
        self.session.begin()?;
        match body(self).and_then(|found| self.session.commit().map(|()| found)) {
            Ok(found) => Ok(found),
            Err(error) => {
                // The error is what the report needs; a failed rollback
                // after it says nothing new (the session is reset by it or
                // the next statement fails with a SQLSTATE of its own).
                let _ = self.session.rollback();
                Err(error)
            }
        }
    }

    fn query(&mut self, stmt: StatementId, params: &[Value]) -> Result<usize, DbError> {
        self.session.query(stmt, params, &mut self.out)
    }

    fn product_in_range(&mut self) -> u64 {
        self.rng.random_range(0..self.products_in_range)
    }

    /// The product's item list (each entry by key) and one item's detail.
    fn view_product_items(&mut self, product: u64) -> Result<Found, DbError> {
        let first = pop::first_item(product);
        let mut found = true;
        for item in first..first + ITEMS_PER_PRODUCT {
            found &= self.query(self.st.item_list_entry, &[Value::Text(pop::itemid(item))])? == 1;
        }
        let item = first + self.rng.random_range(0..ITEMS_PER_PRODUCT);
        found &= self.query(self.st.item_detail, &[Value::Text(pop::itemid(item))])? == 1;
        Ok(found)
    }

    /// Category page, its product list, a product page with its items.
    fn browse(&mut self) -> Result<Found, DbError> {
        let product = self.product_in_range();
        let category = Value::Text(pop::catid(pop::category_of(product)));
        let mut found = self.query(self.st.category, std::slice::from_ref(&category))? == 1;
        found &= self.query(self.st.products_by_category, &[category])? > 0;
        found &= self.query(self.st.product, &[Value::Text(pop::productid(product))])? == 1;
        Ok(self.view_product_items(product)? && found)
    }

    /// A keyword search inside the range, then one of the products found.
    fn search(&mut self) -> Result<Found, DbError> {
        let keywords = self.products_in_range / PRODUCTS_PER_KEYWORD;
        let keyword = self.rng.random_range(0..keywords.max(1));
        let rows = self.query(self.st.search, &[Value::Text(pop::keyword_pattern(keyword))])?;
        let found = rows as u64 == PRODUCTS_PER_KEYWORD;
        let product = keyword * PRODUCTS_PER_KEYWORD + self.rng.random_range(0..PRODUCTS_PER_KEYWORD);
        Ok(self.view_product_items(product.min(self.sizes.products - 1))? && found)
    }

    /// 1–`max` distinct items of the range, in key order (so two
    /// transactions lock shared items in the same order).
    fn pick_items(&mut self, max: u64) -> Vec<u64> {
        let n = self.rng.random_range(1..=max);
        let mut items: Vec<u64> = Vec::with_capacity(n as usize);
        let last = self.products_in_range * ITEMS_PER_PRODUCT;
        while (items.len() as u64) < n.min(last) {
            let item = self.rng.random_range(0..last);
            if !items.contains(&item) {
                items.push(item);
            }
        }
        items.sort_unstable();
        items
    }

    /// The cart: the stock of each of its 1–3 items checked (JPetStore's
    /// isItemInStock, through getItem) and their inventory updated: the
    /// warehouse puts back 1–5 units of each, what the orders take away,
    /// so stock stays positive over long runs.
    fn update_cart(&mut self) -> Result<Found, DbError> {
        let mut found = true;
        for item in self.pick_items(3) {
            let id = Value::Text(pop::itemid(item));
            found &= self.query(self.st.item_detail, std::slice::from_ref(&id))? == 1;
            let units = self.rng.random_range(1..=5);
            found &= self.session.execute(self.st.restock, &[Value::Int(units), id])? == 1;
            self.pending_stock += units;
        }
        Ok(found)
    }

    /// The order: the account, each line's item and stock, the order and
    /// its line items inserted, the stock taken.
    fn place_order(&mut self) -> Result<Found, DbError> {
        let account = self.rng.random_range(0..self.sizes.accounts);
        let mut found = self.query(self.st.account, &[Value::Text(pop::userid(account))])? == 1;
        let address: Vec<Value> = if found { self.out[5..11].to_vec() } else { vec![Value::Null; 6] };
        let (first, last) = (self.out.get(2).cloned(), self.out.get(3).cloned());
        let mut lines = Vec::new();
        let mut total = 0i64;
        for item in self.pick_items(4) {
            let id = pop::itemid(item);
            found &= self.query(self.st.item_detail, &[Value::Text(id.clone())])? == 1;
            let price = match self.out.get(1) {
                Some(Value::Int(p)) => *p,
                _ => pop::list_price_cents(item),
            };
            let quantity = self.rng.random_range(1..=3);
            total += price * quantity;
            lines.push((id, quantity, price));
        }
        let order_id = self.counters.next_order_id.fetch_add(1, Ordering::Relaxed);
        let mut params = vec![Value::Int(order_id), Value::Text(pop::userid(account))];
        // addr1, addr2, city, state, zip, country of the account.
        params.extend(address.into_iter().map(|v| if v == Value::Null { Value::Text(String::new()) } else { v }));
        params.push(Value::Int(total));
        params.push(first.unwrap_or(Value::Text(String::new())));
        params.push(last.unwrap_or(Value::Text(String::new())));
        self.session.execute(self.st.insert_order, &params)?;
        for (n, (id, quantity, price)) in lines.iter().enumerate() {
            let line = [
                Value::Int(order_id),
                Value::Int(n as i64 + 1),
                Value::Text(id.clone()),
                Value::Int(*quantity),
                Value::Int(*price),
            ];
            self.session.execute(self.st.insert_line, &line)?;
        }
        for (id, quantity, _) in &lines {
            found &= self.session.execute(self.st.take_stock, &[Value::Int(*quantity), Value::Text(id.clone())])? == 1;
            self.pending_stock -= quantity;
        }
        self.pending_lines = lines.len() as u64;
        Ok(found)
    }
}

impl WorkloadClient for JpetClient {
    fn run_next(&mut self) -> Result<(usize, Outcome), DbError> {
        let kind = TxnType::from_percentile(self.rng.random_range(0..100));
        Ok((kind as usize, self.run(kind)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_adds_up_and_maps_percentiles() {
        assert_eq!(TxnType::MIX_PERCENT.iter().sum::<u32>(), 100);
        assert_eq!(TxnType::from_percentile(0), TxnType::Browse);
        assert_eq!(TxnType::from_percentile(79), TxnType::Search);
        assert_eq!(TxnType::from_percentile(80), TxnType::UpdateCart);
        assert_eq!(TxnType::from_percentile(99), TxnType::PlaceOrder);
    }
}
