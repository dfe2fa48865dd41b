//! The JPetStore schema (its `jpetstore-hsqldb-schema.sql`: keys, column
//! names and widths) in PostgreSQL types, with three departures the cache
//! groups and the kit need, listed by [`super::deviations`]:
//! - prices (`listprice`, `unitcost`, `totalprice`, `unitprice`) are integer
//!   cents instead of `decimal(10,2)`: the kit's [`crate::target::Value`]
//!   carries integers and text only;
//! - `inventory.itemid` references `item` and `lineitem.orderid` references
//!   `orders` (JPetStore declares neither): a cache group is a root and its
//!   children by foreign key, so the children need one;
//! - no `supplier`, `signon`, `profile`, `bannerdata`, `orderstatus`,
//!   `sequence` tables: the mix never reads them.
//!
//! Tables are created bare, loaded, then keyed and analyzed ([`BUILD`]):
//! cheaper in PostgreSQL than maintaining indexes row by row during COPY.

/// Tables in dependency order (parents first).
pub const TABLES: [&str; 7] = ["category", "product", "item", "inventory", "account", "orders", "lineitem"];

pub const CATEGORY_COLUMNS: [&str; 3] = ["catid", "name", "descn"];
pub const PRODUCT_COLUMNS: [&str; 4] = ["productid", "category", "name", "descn"];
pub const ITEM_COLUMNS: [&str; 11] =
    ["itemid", "productid", "listprice", "unitcost", "supplier", "status", "attr1", "attr2", "attr3", "attr4", "attr5"];
pub const INVENTORY_COLUMNS: [&str; 2] = ["itemid", "qty"];
pub const ACCOUNT_COLUMNS: [&str; 12] = [
    "userid",
    "email",
    "firstname",
    "lastname",
    "status",
    "addr1",
    "addr2",
    "city",
    "state",
    "zip",
    "country",
    "phone",
];

pub const CREATE_TABLES: &str = "
CREATE TABLE category (
    catid varchar(10) NOT NULL,
    name varchar(80),
    descn varchar(255)
);
CREATE TABLE product (
    productid varchar(10) NOT NULL,
    category varchar(10) NOT NULL,
    name varchar(80),
    descn varchar(255)
);
CREATE TABLE item (
    itemid varchar(10) NOT NULL,
    productid varchar(10) NOT NULL,
    listprice integer,
    unitcost integer,
    supplier integer,
    status varchar(2),
    attr1 varchar(80), attr2 varchar(80), attr3 varchar(80), attr4 varchar(80), attr5 varchar(80)
);
CREATE TABLE inventory (
    itemid varchar(10) NOT NULL,
    qty integer NOT NULL
);
CREATE TABLE account (
    userid varchar(80) NOT NULL,
    email varchar(80) NOT NULL,
    firstname varchar(80) NOT NULL,
    lastname varchar(80) NOT NULL,
    status varchar(2),
    addr1 varchar(80) NOT NULL,
    addr2 varchar(40),
    city varchar(80) NOT NULL,
    state varchar(80) NOT NULL,
    zip varchar(20) NOT NULL,
    country varchar(20) NOT NULL,
    phone varchar(80) NOT NULL
);
CREATE TABLE orders (
    orderid integer NOT NULL,
    userid varchar(80) NOT NULL,
    orderdate date NOT NULL,
    shipaddr1 varchar(80) NOT NULL,
    shipaddr2 varchar(80),
    shipcity varchar(80) NOT NULL,
    shipstate varchar(80) NOT NULL,
    shipzip varchar(20) NOT NULL,
    shipcountry varchar(20) NOT NULL,
    billaddr1 varchar(80) NOT NULL,
    billaddr2 varchar(80),
    billcity varchar(80) NOT NULL,
    billstate varchar(80) NOT NULL,
    billzip varchar(20) NOT NULL,
    billcountry varchar(20) NOT NULL,
    courier varchar(80) NOT NULL,
    totalprice integer NOT NULL,
    billtofirstname varchar(80) NOT NULL,
    billtolastname varchar(80) NOT NULL,
    shiptofirstname varchar(80) NOT NULL,
    shiptolastname varchar(80) NOT NULL,
    creditcard varchar(80) NOT NULL,
    exprdate varchar(7) NOT NULL,
    cardtype varchar(80) NOT NULL,
    locale varchar(80) NOT NULL
);
CREATE TABLE lineitem (
    orderid integer NOT NULL,
    linenum integer NOT NULL,
    itemid varchar(10) NOT NULL,
    quantity integer NOT NULL,
    unitprice integer NOT NULL
);
";

pub const DROP_TABLES: &str =
    "DROP TABLE IF EXISTS lineitem, orders, account, inventory, item, product, category CASCADE";

/// Keys, JPetStore's indexes (`productCat`, `productName`, `itemProd`) and
/// statistics, after the load. Foreign keys come with an index on the child
/// column where JPetStore has one; the cache groups follow these keys.
pub const BUILD: &str = "
ALTER TABLE category ADD CONSTRAINT pk_category PRIMARY KEY (catid);
ALTER TABLE product ADD CONSTRAINT pk_product PRIMARY KEY (productid);
ALTER TABLE item ADD CONSTRAINT pk_item PRIMARY KEY (itemid);
ALTER TABLE inventory ADD CONSTRAINT pk_inventory PRIMARY KEY (itemid);
ALTER TABLE account ADD CONSTRAINT pk_account PRIMARY KEY (userid);
ALTER TABLE orders ADD CONSTRAINT pk_orders PRIMARY KEY (orderid);
ALTER TABLE lineitem ADD CONSTRAINT pk_lineitem PRIMARY KEY (orderid, linenum);
ALTER TABLE product ADD CONSTRAINT fk_product_1 FOREIGN KEY (category) REFERENCES category (catid);
ALTER TABLE item ADD CONSTRAINT fk_item_1 FOREIGN KEY (productid) REFERENCES product (productid);
ALTER TABLE inventory ADD CONSTRAINT fk_inventory_item FOREIGN KEY (itemid) REFERENCES item (itemid);
ALTER TABLE lineitem ADD CONSTRAINT fk_lineitem_orders FOREIGN KEY (orderid) REFERENCES orders (orderid);
CREATE INDEX productcat ON product (category);
CREATE INDEX productname ON product (name);
CREATE INDEX itemprod ON item (productid);
ANALYZE category; ANALYZE product; ANALYZE item; ANALYZE inventory; ANALYZE account; ANALYZE orders; ANALYZE lineitem;
CHECKPOINT;
";

/// One statement per table that fails with SQLSTATE 42P01 when it is missing.
pub fn probe_statements() -> impl Iterator<Item = (&'static str, String)> {
    TABLES.iter().map(|t| (*t, format!("SELECT 1 FROM {t} LIMIT 1")))
}
