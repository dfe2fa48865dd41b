//! Population: sizes from one `scale` knob, rows generated from their
//! index alone (no random stream), so a key, its product, its keyword and
//! its items can be recomputed by the transactions without asking the
//! database, and two populations of one scale are identical.
//!
//! Per unit of scale: 1 category, 25 products (JPetStore's demo data has
//! 5 categories, 16 products, 28 items; the study's 90 GB schema keeps the
//! same shape), 4 items per product, one inventory row per item, 50
//! accounts. Orders and line items start empty: the mix inserts them.

use std::time::{Duration, Instant};

use super::schema;
use crate::target::{DbError, RowSource, Target, Value};

pub const CATEGORIES_PER_SCALE: u64 = 1;
pub const PRODUCTS_PER_CATEGORY: u64 = 25;
pub const ITEMS_PER_PRODUCT: u64 = 4;
pub const ACCOUNTS_PER_SCALE: u64 = 50;
/// Products sharing one search keyword (consecutive product numbers, so a
/// keyword's products all lie inside or all outside a search range that
/// ends on a multiple of it).
pub const PRODUCTS_PER_KEYWORD: u64 = 5;
/// Stock every item starts with: large enough that the orders of a run
/// never drive it below zero (the mix also restocks).
pub const INITIAL_QTY: i64 = 10_000;
/// `itemid` is `EST-` and six digits (varchar(10)).
pub const SCALE_MAX: u64 = 9_999;

/// Row counts of one scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    pub scale: u64,
    pub categories: u64,
    pub products: u64,
    pub items: u64,
    pub accounts: u64,
}

impl Sizes {
    pub fn of(scale: u64) -> Sizes {
        let categories = scale * CATEGORIES_PER_SCALE;
        let products = categories * PRODUCTS_PER_CATEGORY;
        Sizes { scale, categories, products, items: products * ITEMS_PER_PRODUCT, accounts: scale * ACCOUNTS_PER_SCALE }
    }

    /// Products a search range of `percent` covers: the first ones, rounded
    /// up to whole keywords, at least one keyword.
    pub fn products_in_range(&self, percent: u32) -> u64 {
        let wanted = (self.products * u64::from(percent)).div_ceil(100);
        let keywords = wanted.div_ceil(PRODUCTS_PER_KEYWORD).max(1);
        (keywords * PRODUCTS_PER_KEYWORD).min(self.products)
    }
}

pub fn catid(category: u64) -> String {
    format!("CAT{category:06}")
}

pub fn productid(product: u64) -> String {
    format!("P{product:08}")
}

pub fn itemid(item: u64) -> String {
    format!("EST-{item:06}")
}

pub fn userid(account: u64) -> String {
    format!("user{account:07}")
}

pub fn category_of(product: u64) -> u64 {
    product / PRODUCTS_PER_CATEGORY
}

/// The items of `product` are `first..first + ITEMS_PER_PRODUCT`.
pub fn first_item(product: u64) -> u64 {
    product * ITEMS_PER_PRODUCT
}

pub fn keyword(product: u64) -> String {
    format!("kw{:06}", product / PRODUCTS_PER_KEYWORD)
}

/// JPetStore's search: `lower(name) LIKE '%keyword%'`.
pub fn keyword_pattern(keyword_number: u64) -> String {
    format!("%kw{keyword_number:06}%")
}

pub fn list_price_cents(item: u64) -> i64 {
    1_000 + (item as i64 * 37) % 9_000
}

const ANIMALS: [&str; 8] = ["koi", "goldfish", "poodle", "dalmation", "manx", "persian", "iguana", "finch"];
const ADJECTIVES: [&str; 6] = ["spotted", "large", "tailless", "friendly", "adult male", "adult female"];

fn text(s: String) -> Value {
    Value::Text(s)
}

fn category_row(i: u64, row: &mut Vec<Value>) {
    row.extend([
        text(catid(i)),
        text(format!("Category {i}")),
        text(format!("<image src=\"../images/cat_{i}.gif\"><font size=\"5\" color=\"blue\"> Category {i}</font>")),
    ]);
}

fn product_row(p: u64, row: &mut Vec<Value>) {
    let animal = ANIMALS[(p % 8) as usize];
    let adjective = ADJECTIVES[(p % 6) as usize];
    row.extend([
        text(productid(p)),
        text(catid(category_of(p))),
        text(format!("{adjective} {animal} {}", keyword(p))),
        text(format!("<image src=\"../images/{animal}.gif\">A {adjective} {animal}, product {p}")),
    ]);
}

fn item_row(i: u64, row: &mut Vec<Value>) {
    let product = i / ITEMS_PER_PRODUCT;
    let price = list_price_cents(i);
    row.extend([
        text(itemid(i)),
        text(productid(product)),
        Value::Int(price),
        Value::Int(price * 3 / 5),
        Value::Int((i % 2 + 1) as i64),
        text("P".to_owned()),
        text(ADJECTIVES[(i % 6) as usize].to_owned()),
        text(format!("with {} spots", i % 97)),
        text(format!("lot {i} from the spring breeding")),
        text("vaccinated, microchipped".to_owned()),
        text(format!("batch {}", i / 64)),
    ]);
}

fn inventory_row(i: u64, row: &mut Vec<Value>) {
    row.extend([text(itemid(i)), Value::Int(INITIAL_QTY)]);
}

fn account_row(a: u64, row: &mut Vec<Value>) {
    let id = userid(a);
    row.extend([
        text(format!("{id}@example.com")),
        text(format!("First{a}")),
        text(format!("Last{a}")),
        text("OK".to_owned()),
        text(format!("{} Main St", a % 900 + 1)),
        text(format!("Apt {}", a % 50)),
        text("Palo Alto".to_owned()),
        text("CA".to_owned()),
        text(format!("94{:03}", a % 1000)),
        text("USA".to_owned()),
        text(format!("555-{:04}", a % 10_000)),
    ]);
    row.insert(0, text(id));
}

/// Writes the row of one index into the buffer.
type FillRow = fn(u64, &mut Vec<Value>);

/// Rows `0..count` of one table, each from its index.
struct Indexed {
    next: u64,
    count: u64,
    fill: FillRow,
}

impl RowSource for Indexed {
    fn next_row(&mut self, row: &mut Vec<Value>) -> bool {
        if self.next >= self.count {
            return false;
        }
        (self.fill)(self.next, row);
        self.next += 1;
        true
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PopulateError {
    #[error("invalid --scale {0}: must be 1 to {SCALE_MAX}")]
    Scale(u64),
    #[error("population: {phase}: {source}")]
    Target { phase: &'static str, source: DbError },
}

/// What [`populate`] loaded, and how long it took.
#[derive(Clone, Debug)]
pub struct PopulateReport {
    pub sizes: Sizes,
    /// (table, rows).
    pub tables: Vec<(&'static str, u64)>,
    pub total: Duration,
}

/// Drops and recreates the JPetStore tables in `target` (PostgreSQL), loads
/// them for `scale` through [`Target::bulk_load`], then builds keys.
pub fn populate(target: &dyn Target, scale: u64) -> Result<PopulateReport, PopulateError> {
    if scale == 0 || scale > SCALE_MAX {
        return Err(PopulateError::Scale(scale));
    }
    let started = Instant::now();
    let sizes = Sizes::of(scale);
    let err = |phase| move |source| PopulateError::Target { phase, source };
    target.execute_batch(schema::DROP_TABLES).map_err(err("drop tables"))?;
    target.execute_batch(schema::CREATE_TABLES).map_err(err("create tables"))?;
    let loads: [(&'static str, &[&str], u64, FillRow); 5] = [
        ("category", &schema::CATEGORY_COLUMNS, sizes.categories, category_row),
        ("product", &schema::PRODUCT_COLUMNS, sizes.products, product_row),
        ("item", &schema::ITEM_COLUMNS, sizes.items, item_row),
        ("inventory", &schema::INVENTORY_COLUMNS, sizes.items, inventory_row),
        ("account", &schema::ACCOUNT_COLUMNS, sizes.accounts, account_row),
    ];
    // One stream per table, side by side: item and inventory dominate.
    let tables = std::thread::scope(|scope| {
        let handles: Vec<_> = loads
            .iter()
            .map(|&(table, columns, count, fill)| {
                scope.spawn(move || {
                    let mut rows = Indexed { next: 0, count, fill };
                    target.bulk_load(table, columns, &mut rows).map(|n| (table, n))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(DbError::new(None, "a loader thread panicked"))))
            .collect::<Result<Vec<_>, DbError>>()
    })
    .map_err(err("load"))?;
    target.execute_batch(schema::BUILD).map_err(err("keys and statistics"))?;
    Ok(PopulateReport { sizes, tables, total: started.elapsed() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_fit_their_columns() {
        let s = Sizes::of(SCALE_MAX);
        assert!(itemid(s.items - 1).len() <= 10);
        assert!(productid(s.products - 1).len() <= 10);
        assert!(catid(s.categories - 1).len() <= 10);
    }

    #[test]
    fn ranges_cover_whole_keywords() {
        let s = Sizes::of(4); // 100 products
        assert_eq!(s.products_in_range(100), 100);
        assert_eq!(s.products_in_range(10), 10);
        assert_eq!(s.products_in_range(1), PRODUCTS_PER_KEYWORD);
        assert_eq!(s.products_in_range(12), 15);
        let tiny = Sizes::of(1); // 25 products
        assert_eq!(tiny.products_in_range(10), 5);
    }

    #[test]
    fn rows_match_their_column_lists() {
        let mut row = Vec::new();
        for (fill, n) in [
            (category_row as FillRow, schema::CATEGORY_COLUMNS.len()),
            (product_row, schema::PRODUCT_COLUMNS.len()),
            (item_row, schema::ITEM_COLUMNS.len()),
            (inventory_row, schema::INVENTORY_COLUMNS.len()),
            (account_row, schema::ACCOUNT_COLUMNS.len()),
        ] {
            row.clear();
            fill(7, &mut row);
            assert_eq!(row.len(), n);
        }
    }
}
