//! The nine TPC-C tables (spec 1.3) with the spec's columns, PostgreSQL
//! types close to HammerDB's PostgreSQL schema, the spec's primary keys and
//! HammerDB's two secondary indexes (customer by last name, orders by
//! customer). The same column lists serve every target; keys come with
//! CREATE TABLE where the target needs them there
//! ([`crate::target::Target::keys_with_tables`]) and after the load
//! elsewhere (PostgreSQL builds a btree from sorted input many times faster
//! than it maintains one row by row during COPY). CH-benCHmark reuses the
//! tables as they are.

use crate::target::{DbError, Target};

/// One table: its columns (`name type` lines) and its primary key.
pub struct TableDdl {
    pub name: &'static str,
    pub columns: &'static [(&'static str, &'static str)],
    /// Primary-key columns; empty for history, which has none in the spec.
    pub key: &'static [&'static str],
}

/// The tables, in the spec's order (1.3).
pub const TABLES: [TableDdl; 9] = [
    TableDdl {
        name: "warehouse",
        columns: &[
            ("w_id", "integer NOT NULL"),
            ("w_name", "varchar(10)"),
            ("w_street_1", "varchar(20)"),
            ("w_street_2", "varchar(20)"),
            ("w_city", "varchar(20)"),
            ("w_state", "char(2)"),
            ("w_zip", "char(9)"),
            ("w_tax", "numeric(4,4)"),
            ("w_ytd", "numeric(12,2)"),
        ],
        key: &["w_id"],
    },
    TableDdl {
        name: "district",
        columns: &[
            ("d_id", "integer NOT NULL"),
            ("d_w_id", "integer NOT NULL"),
            ("d_name", "varchar(10)"),
            ("d_street_1", "varchar(20)"),
            ("d_street_2", "varchar(20)"),
            ("d_city", "varchar(20)"),
            ("d_state", "char(2)"),
            ("d_zip", "char(9)"),
            ("d_tax", "numeric(4,4)"),
            ("d_ytd", "numeric(12,2)"),
            ("d_next_o_id", "integer"),
        ],
        key: &["d_w_id", "d_id"],
    },
    TableDdl {
        name: "customer",
        columns: &[
            ("c_id", "integer NOT NULL"),
            ("c_d_id", "integer NOT NULL"),
            ("c_w_id", "integer NOT NULL"),
            ("c_first", "varchar(16)"),
            ("c_middle", "char(2)"),
            ("c_last", "varchar(16)"),
            ("c_street_1", "varchar(20)"),
            ("c_street_2", "varchar(20)"),
            ("c_city", "varchar(20)"),
            ("c_state", "char(2)"),
            ("c_zip", "char(9)"),
            ("c_phone", "char(16)"),
            ("c_since", "timestamp"),
            ("c_credit", "char(2)"),
            ("c_credit_lim", "numeric(12,2)"),
            ("c_discount", "numeric(4,4)"),
            ("c_balance", "numeric(12,2)"),
            ("c_ytd_payment", "numeric(12,2)"),
            ("c_payment_cnt", "integer"),
            ("c_delivery_cnt", "integer"),
            ("c_data", "varchar(500)"),
        ],
        key: &["c_w_id", "c_d_id", "c_id"],
    },
    TableDdl {
        name: "history",
        columns: &[
            ("h_c_id", "integer"),
            ("h_c_d_id", "integer"),
            ("h_c_w_id", "integer"),
            ("h_d_id", "integer"),
            ("h_w_id", "integer"),
            ("h_date", "timestamp"),
            ("h_amount", "numeric(6,2)"),
            ("h_data", "varchar(24)"),
        ],
        key: &[],
    },
    TableDdl {
        name: "new_order",
        columns: &[("no_o_id", "integer NOT NULL"), ("no_d_id", "integer NOT NULL"), ("no_w_id", "integer NOT NULL")],
        key: &["no_w_id", "no_d_id", "no_o_id"],
    },
    TableDdl {
        name: "orders",
        columns: &[
            ("o_id", "integer NOT NULL"),
            ("o_d_id", "integer NOT NULL"),
            ("o_w_id", "integer NOT NULL"),
            ("o_c_id", "integer"),
            ("o_entry_d", "timestamp"),
            ("o_carrier_id", "integer"),
            ("o_ol_cnt", "integer"),
            ("o_all_local", "integer"),
        ],
        key: &["o_w_id", "o_d_id", "o_id"],
    },
    TableDdl {
        name: "order_line",
        columns: &[
            ("ol_o_id", "integer NOT NULL"),
            ("ol_d_id", "integer NOT NULL"),
            ("ol_w_id", "integer NOT NULL"),
            ("ol_number", "integer NOT NULL"),
            ("ol_i_id", "integer"),
            ("ol_supply_w_id", "integer"),
            ("ol_delivery_d", "timestamp"),
            ("ol_quantity", "integer"),
            ("ol_amount", "numeric(6,2)"),
            ("ol_dist_info", "char(24)"),
        ],
        key: &["ol_w_id", "ol_d_id", "ol_o_id", "ol_number"],
    },
    TableDdl {
        name: "item",
        columns: &[
            ("i_id", "integer NOT NULL"),
            ("i_im_id", "integer"),
            ("i_name", "varchar(24)"),
            ("i_price", "numeric(5,2)"),
            ("i_data", "varchar(50)"),
        ],
        key: &["i_id"],
    },
    TableDdl {
        name: "stock",
        columns: &[
            ("s_i_id", "integer NOT NULL"),
            ("s_w_id", "integer NOT NULL"),
            ("s_quantity", "integer"),
            ("s_dist_01", "char(24)"),
            ("s_dist_02", "char(24)"),
            ("s_dist_03", "char(24)"),
            ("s_dist_04", "char(24)"),
            ("s_dist_05", "char(24)"),
            ("s_dist_06", "char(24)"),
            ("s_dist_07", "char(24)"),
            ("s_dist_08", "char(24)"),
            ("s_dist_09", "char(24)"),
            ("s_dist_10", "char(24)"),
            ("s_ytd", "numeric(8,0)"),
            ("s_order_cnt", "integer"),
            ("s_remote_cnt", "integer"),
            ("s_data", "varchar(50)"),
        ],
        key: &["s_w_id", "s_i_id"],
    },
];

/// HammerDB's secondary indexes (its PostgreSQL `CREATE INDEX` statements):
/// Payment and Order-Status find a customer by last name, Order-Status a
/// customer's last order.
pub const INDEXES: [&str; 2] = [
    "CREATE UNIQUE INDEX customer_i2 ON customer (c_w_id, c_d_id, c_last, c_first, c_id)",
    "CREATE UNIQUE INDEX orders_i2 ON orders (o_w_id, o_d_id, o_c_id, o_id)",
];

pub fn table(name: &str) -> Option<&'static TableDdl> {
    TABLES.iter().find(|t| t.name == name)
}

/// Column names of a table, in DDL order.
pub fn columns(name: &str) -> Vec<&'static str> {
    table(name).map(|t| t.columns.iter().map(|(c, _)| *c).collect()).unwrap_or_default()
}

/// `CREATE TABLE` of one table, with its primary key or without.
pub fn create_table(t: &TableDdl, with_key: bool) -> String {
    let mut sql = format!("CREATE TABLE {} (", t.name);
    let cols: Vec<String> = t.columns.iter().map(|(c, ty)| format!("{c} {ty}")).collect();
    sql.push_str(&cols.join(", "));
    if with_key && !t.key.is_empty() {
        sql.push_str(&format!(", CONSTRAINT {}_pkey PRIMARY KEY ({})", t.name, t.key.join(", ")));
    }
    sql.push(')');
    sql
}

/// `ALTER TABLE ... ADD PRIMARY KEY` for a table created without one.
pub fn add_key(t: &TableDdl) -> Option<String> {
    (!t.key.is_empty())
        .then(|| format!("ALTER TABLE {} ADD CONSTRAINT {}_pkey PRIMARY KEY ({})", t.name, t.name, t.key.join(", ")))
}

/// Drops the tables (children of no one: TPC-C declares no foreign keys here).
pub fn drop_tables(target: &dyn Target) -> Result<(), DbError> {
    for t in TABLES.iter().rev() {
        target.execute_batch(&format!("DROP TABLE IF EXISTS {}", t.name))?;
    }
    Ok(())
}

/// Creates the tables; with keys when the target needs them up front.
pub fn create_tables(target: &dyn Target) -> Result<(), DbError> {
    for t in &TABLES {
        target.execute_batch(&create_table(t, target.keys_with_tables()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ddl_reads_as_sql() {
        let d = table("district").map(|t| create_table(t, true)).unwrap_or_default();
        assert!(d.starts_with("CREATE TABLE district (d_id integer NOT NULL, d_w_id integer NOT NULL"));
        assert!(d.ends_with(", CONSTRAINT district_pkey PRIMARY KEY (d_w_id, d_id))"));
        let h = table("history").map(|t| create_table(t, true)).unwrap_or_default();
        assert!(!h.contains("PRIMARY KEY"));
        assert_eq!(table("history").and_then(add_key), None);
        assert_eq!(columns("stock").len(), 17);
        assert_eq!(columns("customer").len(), 21);
    }
}
