//! CH-benCHmark's three tables beside TPC-C's nine: `region` (5 rows),
//! `nation` (62 rows) and `supplier` (10,000 rows), with the columns of the
//! reference implementations (benchbase's `chbenchmark` DDL, after Cole et
//! al. 2011). A nation's key is the ASCII code of a letter or digit, so a
//! customer's nation is `ascii(substr(c_state, 1, 1))` (TPC-C's C_STATE is
//! two random letters or digits); a stock row's supplier is
//! `mod(s_w_id * s_i_id, 10000)`. Both mappings live in the queries.
//!
//! Names and regions of the nations are the reference data's (the queries
//! ask for 'Germany', 'Cambodia', 'Europe'); every comment, address, phone
//! and balance is drawn from the run's seed, so every target loads the
//! same rows through its bulk path.

use std::sync::atomic::AtomicU64;

use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::target::{DbError, Target, Value};
use crate::tpcc::population::{Rows, text};
use crate::tpcc::random::{a_string, decimal, uniform};
use crate::tpcc::schema::{TableDdl, add_key, create_table};

/// Suppliers (the paper's fixed 10,000, whatever the warehouses).
pub const SUPPLIERS: i64 = 10_000;

/// The three tables, parents first.
pub const TABLES: [TableDdl; 3] = [
    TableDdl {
        name: "region",
        columns: &[("r_regionkey", "integer NOT NULL"), ("r_name", "char(55)"), ("r_comment", "char(152)")],
        key: &["r_regionkey"],
    },
    TableDdl {
        name: "nation",
        columns: &[
            ("n_nationkey", "integer NOT NULL"),
            ("n_name", "char(25)"),
            ("n_regionkey", "integer"),
            ("n_comment", "char(152)"),
        ],
        key: &["n_nationkey"],
    },
    TableDdl {
        name: "supplier",
        columns: &[
            ("su_suppkey", "integer NOT NULL"),
            ("su_name", "char(25)"),
            ("su_address", "varchar(40)"),
            ("su_nationkey", "integer"),
            ("su_phone", "char(15)"),
            ("su_acctbal", "numeric(12,2)"),
            ("su_comment", "char(101)"),
        ],
        key: &["su_suppkey"],
    },
];

/// The regions, keys 1 to 5.
pub const REGIONS: [&str; 5] = ["Africa", "America", "Asia", "Australia", "Europe"];

/// The 62 nations in key order (ASCII of '0'..'9', 'A'..'Z', 'a'..'z'):
/// name and region key, as the reference data has them.
pub const NATIONS: [(&str, i64); 62] = [
    ("Australia", 4),
    ("Belgium", 5),
    ("Cameroon", 1),
    ("Denmark", 5),
    ("Ecuador", 2),
    ("France", 5),
    ("Germany", 5),
    ("Hungary", 5),
    ("Italy", 5),
    ("Japan", 3),
    ("Kenya", 1),
    ("Lithuania", 5),
    ("Mexico", 2),
    ("Netherlands", 5),
    ("Oman", 1),
    ("Portugal", 5),
    ("Qatar", 1),
    ("Rwanda", 1),
    ("Serbia", 5),
    ("Togo", 1),
    ("United States", 2),
    ("Vietnam", 3),
    ("Singapore", 3),
    ("Cambodia", 3),
    ("Yemen", 1),
    ("Zimbabwe", 1),
    ("Argentina", 2),
    ("Bolivia", 2),
    ("Canada", 2),
    ("Dominican Republic", 2),
    ("Egypt", 1),
    ("Finnland", 5),
    ("Ghana", 1),
    ("Haiti", 2),
    ("India", 3),
    ("Jamaica", 4),
    ("Kazakhstan", 3),
    ("Luxembourg", 5),
    ("Morocco", 1),
    ("Norway", 5),
    ("Poland", 5),
    ("Peru", 2),
    ("Nicaragua", 2),
    ("Romania", 5),
    ("South Africa", 1),
    ("Thailand", 3),
    ("United Kingdom", 5),
    ("Venezuela", 2),
    ("Liechtenstein", 5),
    ("Austria", 5),
    ("Laos", 3),
    ("Zambia", 1),
    ("Switzerland", 5),
    ("China", 3),
    ("Papua New Guinea", 4),
    ("East Timor", 4),
    ("Bulgaria", 5),
    ("Brazil", 2),
    ("Albania", 5),
    ("Andorra", 5),
    ("Belize", 2),
    ("Botswana", 1),
];

/// The nation keys: the ASCII codes of the digits, upper- and lower-case
/// letters, in that order (C_STATE's alphabet).
pub fn nation_keys() -> Vec<i64> {
    (b'0'..=b'9').chain(b'A'..=b'Z').chain(b'a'..=b'z').map(i64::from).collect()
}

/// Rows of the three tables, for progress.
pub fn expected_rows() -> u64 {
    (REGIONS.len() + NATIONS.len()) as u64 + SUPPLIERS as u64
}

/// Drops and creates the three tables (keys with them where the target
/// needs them there).
pub fn create_tables(target: &dyn Target) -> Result<(), DbError> {
    for t in TABLES.iter().rev() {
        target.execute_batch(&format!("DROP TABLE IF EXISTS {}", t.name))?;
    }
    for t in &TABLES {
        target.execute_batch(&create_table(t, target.keys_with_tables()))?;
    }
    Ok(())
}

/// Loads region, nation and supplier from `seed`; keys after the load
/// where the target builds them then. Returns the rows per table.
pub fn load(target: &dyn Target, seed: u64, loaded: &AtomicU64) -> Result<Vec<(String, u64)>, DbError> {
    // Apart from TPC-C's streams (which mix the seed per table and warehouse).
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x4348_4245_4e43_484d);
    let columns = |t: &TableDdl| t.columns.iter().map(|(c, _)| *c).collect::<Vec<_>>();
    let mut out = Vec::new();
    let mut r = 0;
    let regions = target.bulk_load(
        "region",
        &columns(&TABLES[0]),
        &mut Rows {
            next: |row: &mut Vec<Value>| {
                let Some(name) = REGIONS.get(r) else { return false };
                r += 1;
                row.extend([Value::Int(r as i64), text(*name), text(a_string(&mut rng, 31, 115))]);
                true
            },
            loaded,
        },
    )?;
    out.push(("region".to_owned(), regions));
    let keys = nation_keys();
    let mut n = 0;
    let nations = target.bulk_load(
        "nation",
        &columns(&TABLES[1]),
        &mut Rows {
            next: |row: &mut Vec<Value>| {
                let Some((name, region)) = NATIONS.get(n) else { return false };
                row.extend([Value::Int(keys[n]), text(*name), Value::Int(*region), text(a_string(&mut rng, 31, 114))]);
                n += 1;
                true
            },
            loaded,
        },
    )?;
    out.push(("nation".to_owned(), nations));
    let mut s = -1;
    let suppliers = target.bulk_load(
        "supplier",
        &columns(&TABLES[2]),
        &mut Rows {
            next: |row: &mut Vec<Value>| {
                s += 1;
                if s >= SUPPLIERS {
                    return false;
                }
                let nation = uniform(&mut rng, 0, keys.len() as i64 - 1);
                row.extend([Value::Int(s), text(format!("Supplier#{s:09}")), text(a_string(&mut rng, 10, 40))]);
                row.push(Value::Int(keys[nation as usize]));
                // TPC-H's phone shape: country code (10 + nation), then 3-3-4 digits.
                row.push(text(format!(
                    "{}-{}-{}-{}",
                    10 + nation,
                    uniform(&mut rng, 100, 999),
                    uniform(&mut rng, 100, 999),
                    uniform(&mut rng, 1000, 9999)
                )));
                row.push(text(decimal(uniform(&mut rng, -99_999, 999_999), 2)));
                row.push(text(a_string(&mut rng, 25, 100)));
                true
            },
            loaded,
        },
    )?;
    out.push(("supplier".to_owned(), suppliers));
    if !target.keys_with_tables() {
        for t in &TABLES {
            if let Some(sql) = add_key(t) {
                target.execute_batch(&sql)?;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nation_keys_are_the_ascii_codes_of_c_state_s_alphabet() {
        let keys = nation_keys();
        assert_eq!(keys.len(), NATIONS.len());
        assert_eq!((keys[0], keys[9], keys[10], keys[36], keys[61]), (48, 57, 65, 97, 122));
        // The nations the queries name exist, in a region that exists.
        for name in ["Germany", "Cambodia"] {
            assert!(NATIONS.iter().any(|(n, _)| *n == name));
        }
        assert!(NATIONS.iter().all(|(_, r)| (1..=REGIONS.len() as i64).contains(r)));
        assert_eq!(NATIONS[6], ("Germany", 5));
        assert_eq!(REGIONS[4], "Europe");
    }
}
