//! The fuzzer's grammar: schemas, their data, and random statements over
//! them. Everything is drawn from one `Rng`, so a seed reproduces a case
//! exactly (tests/fuzz.rs seeds one `Rng` per case from the run's seed and
//! the case number).
//!
//! Statements are built as text, typed loosely: every expression is
//! generated for a type class (`Ty`), so most statements are valid SQL and
//! reach the binder, planner and executor; some are invalid on purpose
//! (overflow, casts of bad text, type errors), and both sides must then
//! refuse. Results are compared row by row in order, so every SELECT ends
//! with `ORDER BY` every output column: a total order of what is printed.
//!
//! Left out on purpose (the comparison would be ambiguous, not pgtier's
//! fault):
//! - `-0` floats: equal to 0 in ORDER BY but printed differently.
//! - sum/avg over real and double: the result depends on the order rows
//!   are added in, which neither side defines.
//! - string_agg / array_agg without an ORDER BY inside: same reason.
//! - UPDATE of primary-key or UNIQUE columns: PostgreSQL checks
//!   uniqueness row by row in heap order, so whether `SET k = k + 1` fails
//!   depends on the physical order of rows.
//! - UPDATE ... FROM whose new values or RETURNING read the FROM row: a
//!   target row joined to several takes one of them, which PostgreSQL
//!   leaves unspecified (the values read the target; RETURNING `*` is the
//!   target's `alias.*`). The FROM / USING table and the WHERE are free.

use std::fmt::Write as _;

/// SplitMix64: tiny, good enough for test generation, and identical on
/// every platform (a dependency's RNG could change its stream in an update
/// and make old seeds lie).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The seed of case `n` of a run: cases are independent, so one can be
/// replayed alone.
pub fn case_seed(run_seed: u64, case: u64) -> u64 {
    let mut r = Rng::new(run_seed ^ case.wrapping_mul(0xD1B5_4A32_D192_ED03));
    r.next_u64()
}

/// Type classes: the generator needs to know what an expression can be
/// combined with, not its exact SQL type (smallint, int and bigint mix
/// freely, and that mixing is part of what is tested).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Int,
    Num,
    Float,
    Text,
    Bool,
    Bytea,
    Date,
    Ts,
}

const ALL_TYS: [Ty; 8] = [Ty::Int, Ty::Num, Ty::Float, Ty::Text, Ty::Bool, Ty::Bytea, Ty::Date, Ty::Ts];

pub struct Col {
    pub name: &'static str,
    pub ty: Ty,
    /// Part of the primary key or a UNIQUE constraint: never assigned by
    /// UPDATE (see the module comment).
    pub key: bool,
    /// An integer column narrower than bigint (int4 signatures accept it).
    pub int4: bool,
}

pub struct Table {
    pub name: &'static str,
    pub ddl: &'static str,
    pub cols: Vec<Col>,
    /// Column names of the primary key (INSERT picks fresh values for them).
    pub pk: Vec<&'static str>,
}

/// The bigint columns of the schemas below.
const BIGINT_COLUMNS: [&str; 3] = ["msc_location", "vlr_location", "i8"];

/// (table, column, type class, key) as a compact table of facts.
fn table(
    name: &'static str,
    ddl: &'static str,
    cols: &[(&'static str, Ty)],
    pk: &[&'static str],
    unique: &[&'static str],
) -> Table {
    Table {
        name,
        ddl,
        cols: cols
            .iter()
            .map(|&(n, ty)| Col {
                name: n,
                ty,
                key: pk.contains(&n) || unique.contains(&n),
                int4: ty == Ty::Int && !BIGINT_COLUMNS.contains(&n),
            })
            .collect(),
        pk: pk.to_vec(),
    }
}

/// TATP (crates/bench/src/tatp/schema.rs: its four tables and keys; of
/// subscriber's thirty repeated bit/hex/byte2 columns one of each), a TPC-C
/// subset, and one table of every supported type.
pub fn schema() -> Vec<Table> {
    use Ty::*;
    vec![
        table(
            "subscriber",
            "CREATE TABLE subscriber (s_id integer NOT NULL, sub_nbr varchar(15) NOT NULL, bit_1 smallint, hex_1 smallint, byte2_1 smallint, msc_location bigint, vlr_location bigint, CONSTRAINT subscriber_pkey PRIMARY KEY (s_id), CONSTRAINT subscriber_sub_nbr_key UNIQUE (sub_nbr))",
            &[
                ("s_id", Int),
                ("sub_nbr", Text),
                ("bit_1", Int),
                ("hex_1", Int),
                ("byte2_1", Int),
                ("msc_location", Int),
                ("vlr_location", Int),
            ],
            &["s_id"],
            &["sub_nbr"],
        ),
        table(
            "access_info",
            "CREATE TABLE access_info (s_id integer NOT NULL, ai_type smallint NOT NULL, data1 smallint, data2 smallint, data3 char(3), data4 char(5), CONSTRAINT access_info_pkey PRIMARY KEY (s_id, ai_type), CONSTRAINT access_info_s_id_fkey FOREIGN KEY (s_id) REFERENCES subscriber (s_id))",
            &[("s_id", Int), ("ai_type", Int), ("data1", Int), ("data2", Int), ("data3", Text), ("data4", Text)],
            &["s_id", "ai_type"],
            &[],
        ),
        table(
            "special_facility",
            "CREATE TABLE special_facility (s_id integer NOT NULL, sf_type smallint NOT NULL, is_active smallint NOT NULL, error_cntrl smallint, data_a smallint, data_b char(5), CONSTRAINT special_facility_pkey PRIMARY KEY (s_id, sf_type), CONSTRAINT special_facility_s_id_fkey FOREIGN KEY (s_id) REFERENCES subscriber (s_id))",
            &[
                ("s_id", Int),
                ("sf_type", Int),
                ("is_active", Int),
                ("error_cntrl", Int),
                ("data_a", Int),
                ("data_b", Text),
            ],
            &["s_id", "sf_type"],
            &[],
        ),
        table(
            "call_forwarding",
            "CREATE TABLE call_forwarding (s_id integer NOT NULL, sf_type smallint NOT NULL, start_time smallint NOT NULL, end_time smallint, numberx varchar(15), CONSTRAINT call_forwarding_pkey PRIMARY KEY (s_id, sf_type, start_time), CONSTRAINT call_forwarding_s_id_sf_type_fkey FOREIGN KEY (s_id, sf_type) REFERENCES special_facility (s_id, sf_type))",
            &[("s_id", Int), ("sf_type", Int), ("start_time", Int), ("end_time", Int), ("numberx", Text)],
            &["s_id", "sf_type", "start_time"],
            &[],
        ),
        table(
            "warehouse",
            "CREATE TABLE warehouse (w_id integer PRIMARY KEY, w_name varchar(10), w_tax numeric(4,4), w_ytd numeric(12,2))",
            &[("w_id", Int), ("w_name", Text), ("w_tax", Num), ("w_ytd", Num)],
            &["w_id"],
            &[],
        ),
        table(
            "district",
            "CREATE TABLE district (d_w_id integer NOT NULL REFERENCES warehouse (w_id), d_id integer NOT NULL, d_name varchar(10), d_tax numeric(4,4), d_ytd numeric(12,2), d_next_o_id integer, PRIMARY KEY (d_w_id, d_id))",
            &[("d_w_id", Int), ("d_id", Int), ("d_name", Text), ("d_tax", Num), ("d_ytd", Num), ("d_next_o_id", Int)],
            &["d_w_id", "d_id"],
            &[],
        ),
        table(
            "customer",
            "CREATE TABLE customer (c_w_id integer NOT NULL, c_d_id integer NOT NULL, c_id integer NOT NULL, c_last varchar(16), c_credit char(2), c_balance numeric(12,2), c_discount numeric(4,4), c_since timestamp, PRIMARY KEY (c_w_id, c_d_id, c_id), FOREIGN KEY (c_w_id, c_d_id) REFERENCES district (d_w_id, d_id))",
            &[
                ("c_w_id", Int),
                ("c_d_id", Int),
                ("c_id", Int),
                ("c_last", Text),
                ("c_credit", Text),
                ("c_balance", Num),
                ("c_discount", Num),
                ("c_since", Ts),
            ],
            &["c_w_id", "c_d_id", "c_id"],
            &[],
        ),
        table(
            "orders",
            "CREATE TABLE orders (o_w_id integer NOT NULL, o_d_id integer NOT NULL, o_id integer NOT NULL, o_c_id integer, o_entry_d timestamp, o_carrier_id integer, o_ol_cnt integer, PRIMARY KEY (o_w_id, o_d_id, o_id))",
            &[
                ("o_w_id", Int),
                ("o_d_id", Int),
                ("o_id", Int),
                ("o_c_id", Int),
                ("o_entry_d", Ts),
                ("o_carrier_id", Int),
                ("o_ol_cnt", Int),
            ],
            &["o_w_id", "o_d_id", "o_id"],
            &[],
        ),
        table(
            "order_line",
            "CREATE TABLE order_line (ol_w_id integer NOT NULL, ol_d_id integer NOT NULL, ol_o_id integer NOT NULL, ol_number integer NOT NULL, ol_i_id integer, ol_supply_w_id integer, ol_delivery_d timestamp, ol_quantity integer, ol_amount numeric(6,2), PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number))",
            &[
                ("ol_w_id", Int),
                ("ol_d_id", Int),
                ("ol_o_id", Int),
                ("ol_number", Int),
                ("ol_i_id", Int),
                ("ol_supply_w_id", Int),
                ("ol_delivery_d", Ts),
                ("ol_quantity", Int),
                ("ol_amount", Num),
            ],
            &["ol_w_id", "ol_d_id", "ol_o_id", "ol_number"],
            &[],
        ),
        table(
            "item",
            "CREATE TABLE item (i_id integer PRIMARY KEY, i_im_id integer, i_name varchar(24), i_price numeric(5,2), i_data varchar(50))",
            &[("i_id", Int), ("i_im_id", Int), ("i_name", Text), ("i_price", Num), ("i_data", Text)],
            &["i_id"],
            &[],
        ),
        table(
            "stock",
            "CREATE TABLE stock (s_w_id integer NOT NULL, s_i_id integer NOT NULL REFERENCES item (i_id), s_quantity integer, s_ytd integer, s_order_cnt integer, s_data varchar(50), PRIMARY KEY (s_w_id, s_i_id))",
            &[
                ("s_w_id", Int),
                ("s_i_id", Int),
                ("s_quantity", Int),
                ("s_ytd", Int),
                ("s_order_cnt", Int),
                ("s_data", Text),
            ],
            &["s_w_id", "s_i_id"],
            &[],
        ),
        table(
            "types",
            "CREATE TABLE types (id integer PRIMARY KEY, i2 smallint, i4 integer, i8 bigint, n numeric(20,4), f4 real, f8 double precision, t text, vc varchar(12), ch char(5), b boolean, by bytea, d date, ts timestamp, tz timestamptz)",
            &[
                ("id", Int),
                ("i2", Int),
                ("i4", Int),
                ("i8", Int),
                ("n", Num),
                ("f4", Float),
                ("f8", Float),
                ("t", Text),
                ("vc", Text),
                ("ch", Text),
                ("b", Bool),
                ("by", Bytea),
                ("d", Date),
                ("ts", Ts),
                ("tz", Ts),
            ],
            &["id"],
            &[],
        ),
    ]
}

/// Joins that follow the schemas' keys, so joins return rows (random
/// equalities mostly return none): (table, column, table, column).
const KEY_JOINS: [(&str, &str, &str, &str); 12] = [
    ("subscriber", "s_id", "access_info", "s_id"),
    ("subscriber", "s_id", "special_facility", "s_id"),
    ("special_facility", "sf_type", "call_forwarding", "sf_type"),
    ("special_facility", "s_id", "call_forwarding", "s_id"),
    ("warehouse", "w_id", "district", "d_w_id"),
    ("district", "d_id", "customer", "c_d_id"),
    ("customer", "c_id", "orders", "o_c_id"),
    ("orders", "o_id", "order_line", "ol_o_id"),
    ("item", "i_id", "order_line", "ol_i_id"),
    ("item", "i_id", "stock", "s_i_id"),
    ("types", "id", "subscriber", "s_id"),
    ("types", "i2", "item", "i_id"),
];

/// The data: the same INSERT statements run on both sides. Sizes are
/// small on purpose: a three-way join stays far below statement_timeout in
/// a debug build, so a 57014 means a hang, not a big join.
pub fn data(rng: &mut Rng) -> Vec<String> {
    let mut out = Vec::new();
    let null_or = |v: String, rng: &mut Rng| if rng.chance(10) { "NULL".to_owned() } else { v };
    for s in 1..=12 {
        let v = [
            s.to_string(),
            format!("'{s:015}'"),
            null_or(rng.range(0, 1).to_string(), rng),
            null_or(rng.range(0, 15).to_string(), rng),
            null_or(rng.range(0, 255).to_string(), rng),
            null_or(rng.range(1, (1 << 32) - 1).to_string(), rng),
            null_or(rng.range(1, (1 << 32) - 1).to_string(), rng),
        ];
        out.push(format!("INSERT INTO subscriber VALUES ({})", v.join(", ")));
        for ai in 1..=rng.range(1, 4) {
            let v = [
                s.to_string(),
                ai.to_string(),
                null_or(rng.range(0, 255).to_string(), rng),
                null_or(rng.range(0, 255).to_string(), rng),
                null_or(format!("'{}'", word(rng, 3)), rng),
                null_or(format!("'{}'", word(rng, 5)), rng),
            ];
            out.push(format!("INSERT INTO access_info VALUES ({})", v.join(", ")));
        }
        for sf in 1..=4 {
            if rng.chance(40) {
                continue;
            }
            let v = [
                s.to_string(),
                sf.to_string(),
                rng.range(0, 1).to_string(),
                null_or(rng.range(0, 255).to_string(), rng),
                null_or(rng.range(0, 255).to_string(), rng),
                null_or(format!("'{}'", word(rng, 5)), rng),
            ];
            out.push(format!("INSERT INTO special_facility VALUES ({})", v.join(", ")));
            for start in [0, 8, 16] {
                if rng.chance(60) {
                    continue;
                }
                let v = [
                    s.to_string(),
                    sf.to_string(),
                    start.to_string(),
                    (start + rng.range(1, 8)).to_string(),
                    null_or(format!("'{}'", rng.range(0, 999_999_999_999_999)), rng),
                ];
                out.push(format!("INSERT INTO call_forwarding VALUES ({})", v.join(", ")));
            }
        }
    }
    for w in 1..=2 {
        out.push(format!(
            "INSERT INTO warehouse VALUES ({w}, '{}', 0.{:04}, {}.{:02})",
            word(rng, 6),
            rng.range(0, 2000),
            rng.range(0, 300_000),
            rng.range(0, 99)
        ));
        for d in 1..=2 {
            out.push(format!(
                "INSERT INTO district VALUES ({w}, {d}, '{}', 0.{:04}, {}.{:02}, {})",
                word(rng, 6),
                rng.range(0, 2000),
                rng.range(0, 30_000),
                rng.range(0, 99),
                rng.range(3001, 3100)
            ));
            for c in 1..=3 {
                let credit = if rng.chance(20) { "BC" } else { "GC" };
                let since = if rng.chance(10) {
                    "NULL".to_owned()
                } else {
                    format!(
                        "'20{:02}-{:02}-{:02} {:02}:{:02}:{:02}.{:06}'",
                        rng.range(0, 25),
                        rng.range(1, 12),
                        rng.range(1, 28),
                        rng.range(0, 23),
                        rng.range(0, 59),
                        rng.range(0, 59),
                        rng.range(0, 999_999)
                    )
                };
                out.push(format!(
                    "INSERT INTO customer VALUES ({w}, {d}, {c}, '{}', '{credit}', {}.{:02}, 0.{:04}, {since})",
                    word(rng, 8),
                    rng.range(-1000, 5000),
                    rng.range(0, 99),
                    rng.range(0, 5000)
                ));
                let o = c + 3000;
                let lines = rng.range(1, 3);
                let carrier = if rng.chance(30) { "NULL".to_owned() } else { rng.range(1, 10).to_string() };
                out.push(format!(
                    "INSERT INTO orders VALUES ({w}, {d}, {o}, {c}, '2024-0{}-1{} 10:00:00', {carrier}, {lines})",
                    rng.range(1, 9),
                    rng.range(0, 9)
                ));
                for n in 1..=lines {
                    let delivery = if rng.chance(30) {
                        "NULL".to_owned()
                    } else {
                        format!("'2024-10-0{} 0{}:30:00'", rng.range(1, 9), rng.range(0, 9))
                    };
                    out.push(format!(
                        "INSERT INTO order_line VALUES ({w}, {d}, {o}, {n}, {}, {w}, {delivery}, {}, {}.{:02})",
                        rng.range(1, 10),
                        rng.range(1, 10),
                        rng.range(0, 9999),
                        rng.range(0, 99)
                    ));
                }
            }
        }
    }
    for i in 1..=10 {
        out.push(format!(
            "INSERT INTO item VALUES ({i}, {}, '{}', {}.{:02}, '{}')",
            rng.range(1, 10_000),
            word(rng, 10),
            rng.range(1, 100),
            rng.range(0, 99),
            word(rng, 30)
        ));
        for w in 1..=2 {
            if rng.chance(20) {
                continue;
            }
            out.push(format!(
                "INSERT INTO stock VALUES ({w}, {i}, {}, {}, {}, '{}')",
                rng.range(10, 100),
                rng.range(0, 1000),
                rng.range(0, 50),
                word(rng, 26)
            ));
        }
    }
    out.extend(types_rows(rng));
    out
}

fn word(rng: &mut Rng, n: usize) -> String {
    (0..n).map(|_| (b'a' + rng.below(26) as u8) as char).collect()
}

/// The types table: the edges of every type (0, -1, each integer type's
/// min and max, 1e308, NaN and the infinities, '', a long string, the first
/// and last dates PostgreSQL's date type and pgtier share), a row of NULLs,
/// then random moderate rows.
fn types_rows(rng: &mut Rng) -> Vec<String> {
    let long = "x".repeat(3000);
    let fixed = [
        "1, 0, 0, 0, 0, 0, 0, '', '', '', false, '\\x', '2000-01-01', '2000-01-01 00:00:00', '2000-01-01 00:00:00+00'".to_owned(),
        "2, -1, -1, -1, -1, -1, -1, 'a', 'a', 'a', true, '\\x00', '1999-12-31', '1999-12-31 23:59:59.999999', '1999-12-31 23:59:59.999999+00'".to_owned(),
        format!("3, 32767, 2147483647, 9223372036854775807, 9999999999999999.9999, '3.4028235e38', '1e308', '{long}', 'abcdefghijkl', 'abcde', true, '\\xffff', '9999-12-31', '9999-12-31 23:59:59', '9999-12-31 23:59:59+00'"),
        "4, -32768, -2147483648, -9223372036854775808, -9999999999999999.9999, '-3.4028235e38', '-1e308', 'ZZZ', ' ', ' ', false, '\\x00ff', '0001-01-01', '0001-01-01 00:00:00', '0001-01-01 00:00:00+00'".to_owned(),
        "5, NULL, NULL, NULL, NULL, 'NaN', 'NaN', 'NaN', 'NaN', 'NaN', NULL, NULL, NULL, NULL, NULL".to_owned(),
        // pgtier refuses these two (numeric NaN: 22P02; BC dates: 22007):
        // the runner counts the refusal and removes the row from PostgreSQL.
        "17, NULL, NULL, NULL, 'NaN', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL".to_owned(),
        "18, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '0001-01-01 BC', '0001-01-01 00:00:00 BC', '0001-01-01 00:00:00+00 BC'".to_owned(),
        "6, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL".to_owned(),
        "7, 1, 1, 1, 0.0001, 'Infinity', '-Infinity', 'h\u{e9}llo', '\u{df}', '\u{e9}', true, '\\x5c27', '2024-02-29', '1970-01-01 00:00:00.5', '1970-01-01 00:00:00+00'".to_owned(),
        "8, 2, 100, 4294967296, 0.5, '1.17549435e-38', '5e-324', 'it''s', '%_', 'a b', false, '\\xdeadbeef', '0001-01-01', '0001-01-01 00:00:00', '2000-02-29 12:00:00+00'".to_owned(),
    ];
    let mut out: Vec<String> = fixed.iter().map(|v| format!("INSERT INTO types VALUES ({v})")).collect();
    for id in 9..=16 {
        let v = [
            id.to_string(),
            rng.range(-100, 100).to_string(),
            rng.range(-100_000, 100_000).to_string(),
            rng.range(-10_000_000_000, 10_000_000_000).to_string(),
            format!("{}.{:04}", rng.range(-99_999, 99_999), rng.range(0, 9999)),
            format!("{}.5", rng.range(-1000, 1000)),
            format!("{}.25", rng.range(-1_000_000, 1_000_000)),
            {
                let n = rng.below(12);
                format!("'{}'", word(rng, n))
            },
            {
                let n = rng.below(12);
                format!("'{}'", word(rng, n))
            },
            {
                let n = rng.below(5);
                format!("'{}'", word(rng, n))
            },
            rng.pick(&["true", "false", "NULL"]).to_string(),
            format!("'\\x{:02x}{:02x}'", rng.below(256), rng.below(256)),
            format!("'20{:02}-{:02}-{:02}'", rng.range(0, 30), rng.range(1, 12), rng.range(1, 28)),
            format!(
                "'19{:02}-{:02}-{:02} {:02}:{:02}:{:02}'",
                rng.range(0, 99),
                rng.range(1, 12),
                rng.range(1, 28),
                rng.range(0, 23),
                rng.range(0, 59),
                rng.range(0, 59)
            ),
            format!(
                "'20{:02}-{:02}-{:02} {:02}:{:02}:{:02}.{:03}+0{}'",
                rng.range(0, 30),
                rng.range(1, 12),
                rng.range(1, 28),
                rng.range(0, 23),
                rng.range(0, 59),
                rng.range(0, 59),
                rng.range(0, 999),
                rng.range(0, 9)
            ),
        ];
        // Some NULLs in the random rows too (never the key).
        let v: Vec<String> = v
            .iter()
            .enumerate()
            .map(|(i, s)| if i > 0 && rng.chance(8) { "NULL".to_owned() } else { s.clone() })
            .collect();
        out.push(format!("INSERT INTO types VALUES ({})", v.join(", ")));
    }
    out
}

/// What a generated case is, so the runner knows how to keep both sides in
/// the same state and what to compare.
pub enum Case {
    /// A read-only statement: run as is.
    Query(String),
    /// INSERT / UPDATE / DELETE on `table`: run inside BEGIN ... ROLLBACK,
    /// then the table's rows are compared inside the transaction.
    /// RETURNING rows are compared as a multiset (their order is not
    /// defined).
    Write { sql: String, table: String },
}

impl Case {
    pub fn sql(&self) -> &str {
        match self {
            Case::Query(s) | Case::Write { sql: s, .. } => s,
        }
    }
}

/// A FROM item in scope: its alias and table.
struct Rel<'a> {
    alias: String,
    table: &'a Table,
}

pub struct Gen<'a> {
    tables: &'a [Table],
    /// Aliases are numbered per statement so nested subqueries never
    /// shadow an outer alias by accident.
    next_alias: usize,
}

impl<'a> Gen<'a> {
    pub fn new(tables: &'a [Table]) -> Gen<'a> {
        Gen { tables, next_alias: 0 }
    }

    fn table(&self, name: &str) -> &'a Table {
        let tables = self.tables;
        tables.iter().find(|t| t.name == name).unwrap_or(&tables[0])
    }

    fn rel(&mut self, table: &'a Table) -> Rel<'a> {
        self.next_alias += 1;
        Rel { alias: format!("t{}", self.next_alias), table }
    }

    pub fn case(&mut self, rng: &mut Rng) -> Case {
        self.next_alias = 0;
        match rng.below(100) {
            0..=34 => Case::Query(self.select(rng)),
            35..=54 => Case::Query(self.aggregate(rng)),
            55..=61 => Case::Query(self.set_operation(rng)),
            62..=66 => Case::Query(self.window(rng)),
            67..=72 => Case::Query(self.unsupported(rng)),
            73..=76 => {
                let width = 1 + rng.below(3);
                Case::Query(format!("SELECT {}", self.projection(rng, &[], width)))
            }
            77..=84 => self.insert(rng),
            85..=92 => self.update(rng),
            93..=96 => self.delete(rng),
            _ => self.merge(rng),
        }
    }

    // ---- FROM ----------------------------------------------------------

    /// One to three relations; a second one joined along a key (mostly)
    /// or on any two integer columns, inner or LEFT, or as a comma join.
    fn from(&mut self, rng: &mut Rng) -> (String, Vec<Rel<'a>>) {
        let n = match rng.below(10) {
            0..=5 => 1,
            6..=8 => 2,
            _ => 3,
        };
        let first = if rng.chance(35) { self.table("types") } else { rng.pick(self.tables) };
        let mut rels = vec![self.rel(first)];
        let mut sql = format!("{} {}", first.name, rels[0].alias);
        // The first relation of the current JOIN chain: after a comma, ON
        // may name only the chain's relations; sometimes it names one
        // before the comma (42P01 "invalid reference to FROM-clause entry").
        let mut chain = 0;
        for _ in 1..n {
            let reach = if rng.chance(15) { 0 } else { chain };
            let (table, on) = self.join_target(rng, &rels[reach..]);
            if on.is_none() {
                chain = rels.len();
            }
            let rel = self.rel(table);
            let on = on.map(|(l, r)| format!("{l} = {}.{r}", rel.alias));
            match (on, rng.below(3)) {
                (Some(on), 0) => {
                    let _ = write!(sql, " LEFT JOIN {} {} ON {on}", table.name, rel.alias);
                }
                (Some(on), _) => {
                    let _ = write!(sql, " JOIN {} {} ON {on}", table.name, rel.alias);
                }
                (None, _) => {
                    let _ = write!(sql, ", {} {}", table.name, rel.alias);
                }
            }
            rels.push(rel);
        }
        (sql, rels)
    }

    /// A table to join to `rels` and the ON equality's (left side, right column).
    fn join_target(&self, rng: &mut Rng, rels: &[Rel<'a>]) -> (&'a Table, Option<(String, &'static str)>) {
        let tables = self.tables;
        if rng.chance(75) {
            let linked: Vec<_> = KEY_JOINS
                .iter()
                .flat_map(|&(a, ac, b, bc)| [(a, ac, b, bc), (b, bc, a, ac)])
                .filter_map(|(a, ac, b, bc)| {
                    rels.iter().find(|r| r.table.name == a).map(|r| (format!("{}.{ac}", r.alias), b, bc))
                })
                .collect();
            if !linked.is_empty() {
                let (left, b, bc) = rng.pick(&linked).clone();
                return (self.table(b), Some((left, bc)));
            }
        }
        let table = rng.pick(tables);
        if rng.chance(30) {
            return (table, None);
        }
        let left = rng.pick(rels);
        let lint: Vec<_> = left.table.cols.iter().filter(|c| c.ty == Ty::Int).collect();
        let rint: Vec<_> = table.cols.iter().filter(|c| c.ty == Ty::Int).collect();
        if lint.is_empty() || rint.is_empty() {
            return (table, None);
        }
        (table, Some((format!("{}.{}", left.alias, rng.pick(&lint).name), rng.pick(&rint).name)))
    }

    // ---- statements ----------------------------------------------------

    fn select(&mut self, rng: &mut Rng) -> String {
        let (from, rels) = self.from(rng);
        let width = 1 + rng.below(4);
        let list = if rng.chance(10) && rels.len() == 1 { "*".to_owned() } else { self.projection(rng, &rels, width) };
        let width = if list == "*" { rels[0].table.cols.len() } else { width };
        let distinct = if rng.chance(10) { "DISTINCT " } else { "" };
        let mut sql = format!("SELECT {distinct}{list} FROM {from}");
        if rng.chance(75) {
            let _ = write!(sql, " WHERE {}", self.expr(rng, Ty::Bool, &rels, 3));
        }
        let _ = write!(sql, " ORDER BY {}", order_all(width, rng));
        limit(rng, &mut sql);
        sql
    }

    /// `width` expressions of random types over `rels`.
    fn projection(&mut self, rng: &mut Rng, rels: &[Rel<'a>], width: usize) -> String {
        let items: Vec<String> = (0..width)
            .map(|_| {
                let ty = *rng.pick(&ALL_TYS);
                self.expr(rng, ty, rels, 3)
            })
            .collect();
        items.join(", ")
    }

    fn aggregate(&mut self, rng: &mut Rng) -> String {
        let (from, rels) = self.from(rng);
        let groups: Vec<String> = (0..rng.below(3))
            .map(|_| {
                let ty = *rng.pick(&ALL_TYS);
                // Mostly plain columns: GROUP BY of an expression must be
                // repeated textually in the select list, which it is.
                if rng.chance(70) {
                    self.column(rng, ty, &rels).unwrap_or_else(|| self.expr(rng, ty, &rels, 1))
                } else {
                    self.expr(rng, ty, &rels, 1)
                }
            })
            .collect();
        let aggs: Vec<String> = (0..1 + rng.below(3)).map(|_| self.agg_call(rng, &rels)).collect();
        let mut items = groups.clone();
        items.extend(aggs);
        let mut sql = format!("SELECT {} FROM {from}", items.join(", "));
        if rng.chance(60) {
            let _ = write!(sql, " WHERE {}", self.expr(rng, Ty::Bool, &rels, 2));
        }
        if !groups.is_empty() {
            let _ = write!(sql, " GROUP BY {}", groups.join(", "));
        }
        if rng.chance(25) {
            let agg = self.agg_call(rng, &rels);
            let op = rng.pick(&[">", "<", "=", ">=", "<>"]);
            // count/sum/min/max results of any class compare with their own
            // column type; comparing with NULL or 1 keeps it valid often.
            let _ = write!(sql, " HAVING count(*) {op} {}", rng.range(0, 3));
            if rng.chance(30) {
                let _ = write!(sql, " OR {agg} IS NULL");
            }
        }
        let _ = write!(sql, " ORDER BY {}", order_all(items.len(), rng));
        limit(rng, &mut sql);
        sql
    }

    fn agg_call(&mut self, rng: &mut Rng, rels: &[Rel<'a>]) -> String {
        match rng.below(9) {
            0 => "count(*)".to_owned(),
            1 => {
                let ty = *rng.pick(&ALL_TYS);
                format!("count({})", self.expr(rng, ty, rels, 1))
            }
            2 => {
                let ty = *rng.pick(&[Ty::Int, Ty::Text, Ty::Num, Ty::Date]);
                format!("count(DISTINCT {})", self.expr(rng, ty, rels, 1))
            }
            // Exact sums only (module comment).
            3 | 4 => {
                let ty = *rng.pick(&[Ty::Int, Ty::Num]);
                let f = rng.pick(&["sum", "avg"]);
                format!("{f}({})", self.expr(rng, ty, rels, 1))
            }
            5 | 6 => {
                let ty = *rng.pick(&[Ty::Int, Ty::Num, Ty::Float, Ty::Text, Ty::Date, Ty::Ts, Ty::Bytea]);
                let f = rng.pick(&["min", "max"]);
                format!("{f}({})", self.expr(rng, ty, rels, 1))
            }
            // pgtier has no bool_and / bool_or / every (42883): rare.
            7 if rng.chance(10) => {
                let f = rng.pick(&["bool_and", "bool_or", "every"]);
                format!("{f}({})", self.expr(rng, Ty::Bool, rels, 1))
            }
            _ => {
                let e = self.expr(rng, Ty::Text, rels, 1);
                format!("string_agg({e}, ',' ORDER BY {e})")
            }
        }
    }

    /// UNION / INTERSECT / EXCEPT [ALL] of two selects with the same type
    /// classes per column (the exact SQL types may differ: PostgreSQL's
    /// type resolution of the set operation is part of the test).
    fn set_operation(&mut self, rng: &mut Rng) -> String {
        let width = 1 + rng.below(2);
        let tys: Vec<Ty> = (0..width).map(|_| *rng.pick(&[Ty::Int, Ty::Num, Ty::Text, Ty::Date, Ty::Bool])).collect();
        let arm = |g: &mut Self, rng: &mut Rng| {
            let table = rng.pick(g.tables);
            let rel = g.rel(table);
            let rels = [rel];
            // String columns mostly as text (see `mostly_text`).
            let list: Vec<String> = tys
                .iter()
                .map(|&ty| {
                    let e = g.expr(rng, ty, &rels, 2);
                    mostly_text(rng, ty, e)
                })
                .collect();
            let mut s = format!("SELECT {} FROM {} {}", list.join(", "), table.name, rels[0].alias);
            if rng.chance(60) {
                let _ = write!(s, " WHERE {}", g.expr(rng, Ty::Bool, &rels, 2));
            }
            s
        };
        let a = arm(self, rng);
        let b = arm(self, rng);
        let op = rng.pick(&["UNION", "UNION ALL", "INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL"]);
        let mut sql = format!("{a} {op} {b} ORDER BY {}", order_all(width, rng));
        limit(rng, &mut sql);
        sql
    }

    /// Window functions whose result is defined: the window's ORDER BY is
    /// the table's whole primary key, or the function ignores row order
    /// within peers (rank, sum over a partition without ORDER BY, an
    /// integer aggregate over a frame of whole peer groups, a value of
    /// the ORDER BY key itself).
    fn window(&mut self, rng: &mut Rng) -> String {
        let table = rng.pick(self.tables);
        let rel = self.rel(table);
        let pk: Vec<String> = table.pk.iter().map(|c| format!("{}.{c}", rel.alias)).collect();
        let rels = [rel];
        let part_ty = *rng.pick(&[Ty::Int, Ty::Text]);
        let part = self.column(rng, part_ty, &rels).unwrap_or_else(|| "1".to_owned());
        let ord_ty = *rng.pick(&[Ty::Int, Ty::Num, Ty::Date]);
        let ord = self.column(rng, ord_ty, &rels).unwrap_or_else(|| pk.join(", "));
        let exclude = *rng.pick(&["", " EXCLUDE CURRENT ROW", " EXCLUDE GROUP", " EXCLUDE TIES", " EXCLUDE NO OTHERS"]);
        let offset = match ord_ty {
            Ty::Num => "1.5",
            Ty::Date => "interval '3 days'",
            _ => "2",
        };
        let agg = *rng.pick(&["sum", "count", "min", "max", "avg"]);
        let f = match rng.below(12) {
            0 => format!("row_number() OVER (PARTITION BY {part} ORDER BY {})", pk.join(", ")),
            1 => format!("rank() OVER (ORDER BY {ord})"),
            2 => format!("dense_rank() OVER (PARTITION BY {part} ORDER BY {ord} DESC)"),
            3 => format!("count(*) OVER (PARTITION BY {part})"),
            4 => {
                let e = self.expr(rng, Ty::Int, &rels, 1);
                format!("sum({e}) OVER (PARTITION BY {part})")
            }
            5 => {
                let e = self.expr(rng, Ty::Int, &rels, 1);
                let (a, b) = (rng.below(3), rng.below(3));
                format!(
                    "{agg}({e}) OVER w FROM {} {} WINDOW w AS (PARTITION BY {part} ORDER BY {} ROWS BETWEEN {a} PRECEDING AND {b} FOLLOWING{exclude})",
                    table.name,
                    rels[0].alias,
                    pk.join(", ")
                )
            }
            6 => {
                let e = self.expr(rng, Ty::Int, &rels, 1);
                format!(
                    "{agg}({e}) OVER (ORDER BY {ord} RANGE BETWEEN {offset} PRECEDING AND {offset} FOLLOWING{exclude})"
                )
            }
            7 => {
                let e = self.expr(rng, Ty::Int, &rels, 1);
                let (a, b) = (rng.below(3), rng.below(3));
                format!(
                    "{agg}({e}) OVER (PARTITION BY {part} ORDER BY {ord} GROUPS BETWEEN {a} PRECEDING AND {b} FOLLOWING{exclude})"
                )
            }
            8 => format!(
                "first_value({ord}) OVER (ORDER BY {ord} RANGE BETWEEN {offset} PRECEDING AND UNBOUNDED FOLLOWING{exclude})"
            ),
            9 => format!(
                "nth_value({ord}, 2) OVER (ORDER BY {} ROWS BETWEEN 1 PRECEDING AND 2 FOLLOWING{exclude})",
                pk.join(", ")
            ),
            10 => {
                format!("last_value({ord}) OVER (ORDER BY {ord} GROUPS BETWEEN CURRENT ROW AND 1 FOLLOWING{exclude})")
            }
            _ => format!("lag({ord}) OVER (ORDER BY {})", pk.join(", ")),
        };
        // A named window's query has its WINDOW clause after the FROM.
        if let Some((call, rest)) = f.split_once(" FROM ") {
            let other_ty = *rng.pick(&ALL_TYS);
            let other = self.expr(rng, other_ty, &rels, 1);
            let (from, window) = rest.split_once(" WINDOW ").unwrap_or((rest, ""));
            let mut sql = format!("SELECT {}, {call}, {other} FROM {from}", pk.join(", "));
            if rng.chance(50) {
                let _ = write!(sql, " WHERE {}", self.expr(rng, Ty::Bool, &rels, 2));
            }
            let _ = write!(sql, " WINDOW {window} ORDER BY {}", order_all(pk.len() + 2, rng));
            return sql;
        }
        let other_ty = *rng.pick(&ALL_TYS);
        let other = self.expr(rng, other_ty, &rels, 1);
        let mut sql = format!("SELECT {}, {f}, {other} FROM {} {}", pk.join(", "), table.name, rels[0].alias);
        if rng.chance(50) {
            let _ = write!(sql, " WHERE {}", self.expr(rng, Ty::Bool, &rels, 2));
        }
        let _ = write!(sql, " ORDER BY {}", order_all(pk.len() + 2, rng));
        sql
    }

    /// Constructs README "Not supported" lists: pgtier must answer 0A000
    /// (counted), or, if it answers, the same as PostgreSQL.
    fn unsupported(&mut self, rng: &mut Rng) -> String {
        match rng.below(8) {
            0 => "SELECT a.s_id, b.ai_type FROM subscriber a RIGHT JOIN access_info b ON a.s_id = b.s_id ORDER BY 1, 2".to_owned(),
            1 => "SELECT a.w_id, b.d_id FROM warehouse a FULL JOIN district b ON a.w_id = b.d_w_id + 1 ORDER BY 1, 2".to_owned(),
            2 => "SELECT s_id, ai_type FROM subscriber NATURAL JOIN access_info ORDER BY 1, 2".to_owned(),
            3 => format!("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < {}) SELECT n FROM r ORDER BY 1", rng.range(1, 20)),
            // A ROWS frame over peers that differ (no ORDER BY: all rows are peers).
            4 => "SELECT id, sum(i4) OVER (ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM types ORDER BY 1".to_owned(),
            5 => "SELECT id, var_pop(i2) OVER (ORDER BY id) FROM types ORDER BY 1".to_owned(),
            6 => "SELECT a.s_id, x.m FROM subscriber a, LATERAL (SELECT max(ai_type) AS m FROM access_info b WHERE b.s_id = a.s_id) x ORDER BY 1, 2".to_owned(),
            _ => format!("SELECT d + interval '{} days' FROM types ORDER BY 1", rng.range(0, 10)),
        }
    }

    fn insert(&mut self, rng: &mut Rng) -> Case {
        let table = if rng.chance(40) { self.table("types") } else { rng.pick(self.tables) };
        let on_conflict = rng.chance(25);
        let rows = 1 + rng.below(3);
        let cols: Vec<&Col> = table.cols.iter().filter(|c| c.key || rng.chance(70)).collect();
        let names: Vec<&str> = cols.iter().map(|c| c.name).collect();
        let values: Vec<String> = (0..rows)
            .map(|_| {
                let vals: Vec<String> = cols
                    .iter()
                    .map(|c| {
                        if c.key && c.ty == Ty::Int {
                            // Fresh keys mostly; sometimes an existing one (23505).
                            if rng.chance(85) {
                                rng.range(100, 10_000).to_string()
                            } else {
                                rng.range(1, 12).to_string()
                            }
                        } else if c.key {
                            format!("'k{}'", rng.range(0, 100_000))
                        } else {
                            self.expr(rng, c.ty, &[], 1)
                        }
                    })
                    .collect();
                format!("({})", vals.join(", "))
            })
            .collect::<Vec<String>>();
        // ON CONFLICT of a row proposed twice: DO UPDATE cannot affect a
        // row a second time (21000), DO NOTHING skips the second.
        let mut values = values;
        if on_conflict && values.len() > 1 && rng.chance(30) {
            let first = values[0].clone();
            values.push(first);
        }
        let mut sql = format!("INSERT INTO {} ({}) VALUES {}", table.name, names.join(", "), values.join(", "));
        if on_conflict {
            let pk = table.pk.join(", ");
            match table.cols.iter().find(|c| !c.key) {
                Some(c) if rng.chance(60) && names.contains(&c.name) => {
                    let _ = write!(sql, " ON CONFLICT ({pk}) DO UPDATE SET {0} = excluded.{0}", c.name);
                }
                _ => {
                    let _ = write!(sql, " ON CONFLICT ({pk}) DO NOTHING");
                }
            }
        }
        returning(rng, &mut sql, table);
        Case::Write { sql, table: table.name.to_owned() }
    }

    fn update(&mut self, rng: &mut Rng) -> Case {
        let table = if rng.chance(40) { self.table("types") } else { rng.pick(self.tables) };
        let rel = self.rel(table);
        let mut rels = vec![rel];
        let settable: Vec<&Col> = table.cols.iter().filter(|c| !c.key).collect();
        let n = 1 + rng.below(2.min(settable.len()));
        let mut sets = Vec::new();
        let mut used = Vec::new();
        // New values read the target only: a target row joined to several
        // FROM rows takes one of them, which PostgreSQL leaves unspecified.
        for _ in 0..n {
            let c = *rng.pick(&settable);
            if used.contains(&c.name) {
                continue;
            }
            used.push(c.name);
            sets.push(format!("{} = {}", c.name, self.expr(rng, c.ty, &rels, 2)));
        }
        let mut sql = format!("UPDATE {} {} SET {}", table.name, rels[0].alias, sets.join(", "));
        let joined = self.joined_dml(rng, &mut sql, &mut rels, " FROM");
        if joined.is_some() || rng.chance(85) {
            self.dml_where(rng, &mut sql, &rels, joined.clone());
        }
        returning(rng, &mut sql, table);
        if joined.is_some() && sql.ends_with(" RETURNING *") {
            // `*` would add the FROM row, unspecified when several join.
            sql.truncate(sql.len() - 1);
            let _ = write!(sql, "{}.*", rels[0].alias);
        }
        Case::Write { sql, table: table.name.to_owned() }
    }

    fn delete(&mut self, rng: &mut Rng) -> Case {
        let table = if rng.chance(40) { self.table("types") } else { rng.pick(self.tables) };
        let rel = self.rel(table);
        let mut rels = vec![rel];
        let mut sql = format!("DELETE FROM {} {}", table.name, rels[0].alias);
        let joined = self.joined_dml(rng, &mut sql, &mut rels, " USING");
        if joined.is_some() || rng.chance(90) {
            self.dml_where(rng, &mut sql, &rels, joined.clone());
        }
        returning(rng, &mut sql, table);
        if joined.is_some() && sql.ends_with(" RETURNING *") {
            // `*` would add the FROM row, unspecified when several join.
            sql.truncate(sql.len() - 1);
            let _ = write!(sql, "{}.*", rels[0].alias);
        }
        Case::Write { sql, table: table.name.to_owned() }
    }

    /// MERGE (PostgreSQL 15's): a source table joined along a key or on
    /// a condition, one to three WHEN clauses. Deterministic whatever the
    /// join order: a target row that two source rows would change is
    /// 21000 either way, and an UPDATE reads the one source row it acts on.
    fn merge(&mut self, rng: &mut Rng) -> Case {
        let table = if rng.chance(30) { self.table("types") } else { rng.pick(self.tables) };
        let target = self.rel(table);
        let (source_table, on) = self.join_target(rng, std::slice::from_ref(&target));
        let source = self.rel(source_table);
        let on = match on {
            Some((l, r)) => format!("{l} = {}.{r}", source.alias),
            None => self.expr(
                rng,
                Ty::Bool,
                &[Rel { alias: target.alias.clone(), table }, Rel { alias: source.alias.clone(), table: source_table }],
                1,
            ),
        };
        let mut sql =
            format!("MERGE INTO {} {} USING {} {} ON {on}", table.name, target.alias, source_table.name, source.alias);
        let rels = [target, source];
        for _ in 0..1 + rng.below(3) {
            if rng.chance(55) {
                sql.push_str(" WHEN MATCHED");
                if rng.chance(40) {
                    let _ = write!(sql, " AND {}", self.expr(rng, Ty::Bool, &rels, 1));
                }
                let settable: Vec<&Col> = table.cols.iter().filter(|c| !c.key).collect();
                match rng.below(3) {
                    0 if !settable.is_empty() => {
                        let c = *rng.pick(&settable);
                        let _ = write!(sql, " THEN UPDATE SET {} = {}", c.name, self.expr(rng, c.ty, &rels, 2));
                    }
                    1 => sql.push_str(" THEN DELETE"),
                    _ => sql.push_str(" THEN DO NOTHING"),
                }
            } else {
                sql.push_str(" WHEN NOT MATCHED");
                let source_only = &rels[1..];
                if rng.chance(40) {
                    let _ = write!(sql, " AND {}", self.expr(rng, Ty::Bool, source_only, 1));
                }
                if rng.chance(70) {
                    let values: Vec<String> = table.cols.iter().map(|c| self.expr(rng, c.ty, source_only, 1)).collect();
                    let names: Vec<&str> = table.cols.iter().map(|c| c.name).collect();
                    let _ = write!(sql, " THEN INSERT ({}) VALUES ({})", names.join(", "), values.join(", "));
                } else {
                    sql.push_str(" THEN DO NOTHING");
                }
            }
        }
        Case::Write { sql, table: table.name.to_owned() }
    }

    /// Sometimes `FROM` / `USING` another table (`keyword`), added to
    /// `rels`; the join's equality for the WHERE, if it has one.
    fn joined_dml(
        &mut self,
        rng: &mut Rng,
        sql: &mut String,
        rels: &mut Vec<Rel<'a>>,
        keyword: &str,
    ) -> Option<Option<String>> {
        if !rng.chance(30) {
            return None;
        }
        let (other, on) = self.join_target(rng, rels);
        let rel = self.rel(other);
        let _ = write!(sql, "{keyword} {} {}", other.name, rel.alias);
        let on = on.map(|(l, r)| format!("{l} = {}.{r}", rel.alias));
        rels.push(rel);
        Some(on)
    }

    /// ` WHERE` a condition over `rels`, after the join's equality.
    fn dml_where(&mut self, rng: &mut Rng, sql: &mut String, rels: &[Rel<'a>], joined: Option<Option<String>>) {
        let cond = self.expr(rng, Ty::Bool, rels, 2);
        match joined.flatten() {
            Some(on) => {
                let _ = write!(sql, " WHERE {on} AND ({cond})");
            }
            None => {
                let _ = write!(sql, " WHERE {cond}");
            }
        }
    }

    // ---- expressions ---------------------------------------------------

    /// A column of class `ty` from `rels`, qualified.
    fn column(&self, rng: &mut Rng, ty: Ty, rels: &[Rel<'a>]) -> Option<String> {
        let cands: Vec<String> = rels
            .iter()
            .flat_map(|r| r.table.cols.iter().filter(|c| c.ty == ty).map(move |c| format!("{}.{}", r.alias, c.name)))
            .collect();
        (!cands.is_empty()).then(|| rng.pick(&cands).clone())
    }

    /// An expression of class `ty` over `rels`, at most `depth` levels of
    /// operators deep (depth 0: a column or a literal).
    fn expr(&mut self, rng: &mut Rng, ty: Ty, rels: &[Rel<'a>], depth: usize) -> String {
        if depth == 0 || rng.chance(30) {
            if rng.chance(65)
                && let Some(c) = self.column(rng, ty, rels)
            {
                return c;
            }
            return literal(rng, ty);
        }
        let d = depth - 1;
        // Forms every class shares.
        match rng.below(12) {
            0 => {
                let b = self.expr(rng, Ty::Bool, rels, d);
                let x = self.expr(rng, ty, rels, d);
                let x = mostly_text(rng, ty, x);
                let y = self.expr(rng, ty, rels, d);
                let y = mostly_text(rng, ty, y);
                return if rng.chance(50) {
                    format!("CASE WHEN {b} THEN {x} ELSE {y} END")
                } else {
                    format!("CASE WHEN {b} THEN {x} END")
                };
            }
            1 => {
                let x = self.expr(rng, ty, rels, d);
                let y = self.expr(rng, ty, rels, d);
                let f = rng.pick(&["COALESCE", "NULLIF", "GREATEST", "LEAST"]);
                return format!("{f}({}, {})", mostly_text(rng, ty, x), mostly_text(rng, ty, y));
            }
            2 if d > 0 && ty != Ty::Bool => return self.scalar_subquery(rng, ty, rels, d),
            _ => {}
        }
        match ty {
            Ty::Int => self.int_expr(rng, rels, d),
            Ty::Num => self.num_expr(rng, rels, d),
            Ty::Float => self.float_expr(rng, rels, d),
            Ty::Text => self.text_expr(rng, rels, d),
            Ty::Bool => self.bool_expr(rng, rels, d),
            // `bytea || bytea` (42883) and text in bytea's escape format
            // (0A000) are refused by pgtier: rare, so they do not hide the
            // rest of the statement.
            Ty::Bytea => match rng.below(20) {
                0 => format!("({} || {})", self.expr(rng, Ty::Bytea, rels, d), self.expr(rng, Ty::Bytea, rels, d)),
                1 => format!("({})::bytea", self.expr(rng, Ty::Text, rels, d)),
                _ => literal(rng, Ty::Bytea),
            },
            Ty::Date => match rng.below(4) {
                0 => format!("({} + {})", self.expr(rng, Ty::Date, rels, d), self.small_int(rng, rels, d)),
                1 => format!("({} - {})", self.expr(rng, Ty::Date, rels, d), self.small_int(rng, rels, d)),
                2 => format!("({})::date", self.expr(rng, Ty::Ts, rels, d)),
                _ => format!("({})::date", self.expr(rng, Ty::Text, rels, d)),
            },
            Ty::Ts => match rng.below(3) {
                0 => format!("({})::timestamp", self.expr(rng, Ty::Date, rels, d)),
                1 => format!("({})::timestamptz", self.expr(rng, Ty::Ts, rels, d)),
                _ => format!("({})::timestamp", self.expr(rng, Ty::Text, rels, d)),
            },
        }
    }

    /// A small integer literal or an int4 column mostly, for `date + n`
    /// and substr's positions; sometimes any integer expression (bigint
    /// there is 42883: PostgreSQL has only int4 signatures).
    fn small_int(&mut self, rng: &mut Rng, rels: &[Rel<'a>], d: usize) -> String {
        if rng.chance(15) {
            return self.expr(rng, Ty::Int, rels, d);
        }
        let int4: Vec<String> = rels
            .iter()
            .flat_map(|r| {
                r.table
                    .cols
                    .iter()
                    .filter(|c| c.ty == Ty::Int && c.int4)
                    .map(move |c| format!("{}.{}", r.alias, c.name))
            })
            .collect();
        if rng.chance(30) && !int4.is_empty() { rng.pick(&int4).clone() } else { rng.range(-40, 40).to_string() }
    }

    fn int_expr(&mut self, rng: &mut Rng, rels: &[Rel<'a>], d: usize) -> String {
        match rng.below(10) {
            0..=2 => {
                let op = rng.pick(&["+", "-", "*", "/", "%"]);
                format!("({} {op} {})", self.expr(rng, Ty::Int, rels, d), self.expr(rng, Ty::Int, rels, d))
            }
            // `-(x)`, never `- x`: `- -1` would print as `--1`, a comment.
            3 => format!("-({})", self.expr(rng, Ty::Int, rels, d)),
            4 => format!("abs({})", self.expr(rng, Ty::Int, rels, d)),
            5 => format!("length({})", self.expr(rng, Ty::Text, rels, d)),
            6 => format!("position({} IN {})", self.expr(rng, Ty::Text, rels, d), self.expr(rng, Ty::Text, rels, d)),
            7 => {
                let from = *rng.pick(&[Ty::Int, Ty::Num, Ty::Float, Ty::Text, Ty::Bool]);
                // boolean casts only to integer (smallint, bigint: 42846):
                // half the time integer, so the cast's value is tested too.
                let to = if from == Ty::Bool && rng.chance(50) {
                    "integer"
                } else {
                    rng.pick(&["smallint", "integer", "bigint", "int2", "int4", "int8"])
                };
                let e = self.expr(rng, from, rels, d);
                if rng.chance(50) { cast(rng, &e, to) } else { format!("CAST(({e}) AS {to})") }
            }
            8 => format!("({} - {})", self.expr(rng, Ty::Date, rels, d), self.expr(rng, Ty::Date, rels, d)),
            _ => format!("mod({}, {})", self.expr(rng, Ty::Int, rels, d), self.expr(rng, Ty::Int, rels, d)),
        }
    }

    fn num_expr(&mut self, rng: &mut Rng, rels: &[Rel<'a>], d: usize) -> String {
        match rng.below(8) {
            0..=2 => {
                let op = rng.pick(&["+", "-", "*", "/", "%"]);
                let other = *rng.pick(&[Ty::Num, Ty::Int]);
                format!("({} {op} {})", self.expr(rng, Ty::Num, rels, d), self.expr(rng, other, rels, d))
            }
            3 => format!("round({}, {})", self.expr(rng, Ty::Num, rels, d), rng.range(-2, 5)),
            4 => format!(
                "{}({})",
                rng.pick(&["round", "ceil", "floor", "abs", "trunc"]),
                self.expr(rng, Ty::Num, rels, d)
            ),
            5 => {
                let from = *rng.pick(&[Ty::Int, Ty::Float, Ty::Text, Ty::Num]);
                let to = rng.pick(&["numeric", "numeric(10,2)", "numeric(5,0)", "decimal(20,4)"]);
                let e = self.expr(rng, from, rels, d);
                cast(rng, &e, to)
            }
            6 => format!("-({})", self.expr(rng, Ty::Num, rels, d)),
            _ => format!("({} / {})", self.expr(rng, Ty::Int, rels, d), literal(rng, Ty::Num)),
        }
    }

    fn float_expr(&mut self, rng: &mut Rng, rels: &[Rel<'a>], d: usize) -> String {
        match rng.below(6) {
            0..=2 => {
                let op = rng.pick(&["+", "-", "*", "/"]);
                let other = *rng.pick(&[Ty::Float, Ty::Int]);
                format!("({} {op} {})", self.expr(rng, Ty::Float, rels, d), self.expr(rng, other, rels, d))
            }
            3 => {
                let from = *rng.pick(&[Ty::Int, Ty::Num, Ty::Text, Ty::Float]);
                let to = rng.pick(&["float8", "real", "double precision", "float4"]);
                let e = self.expr(rng, from, rels, d);
                cast(rng, &e, to)
            }
            4 => format!("abs({})", self.expr(rng, Ty::Float, rels, d)),
            _ => format!("-({})", self.expr(rng, Ty::Float, rels, d)),
        }
    }

    fn text_expr(&mut self, rng: &mut Rng, rels: &[Rel<'a>], d: usize) -> String {
        let t = |g: &mut Self, rng: &mut Rng| g.expr(rng, Ty::Text, rels, d);
        match rng.below(12) {
            0 | 1 => format!("({} || {})", t(self, rng), t(self, rng)),
            2 => format!("{}({})", rng.pick(&["lower", "upper", "trim", "btrim", "ltrim", "rtrim"]), t(self, rng)),
            3 => {
                let s = t(self, rng);
                let from = self.small_int(rng, rels, d);
                if rng.chance(50) {
                    format!("substr({s}, {from})")
                } else {
                    format!("substr({s}, {from}, {})", self.small_int(rng, rels, d))
                }
            }
            4 => {
                let f = rng.pick(&["lpad", "rpad"]);
                let s = t(self, rng);
                format!("{f}({s}, {}, {})", rng.range(-1, 20), literal(rng, Ty::Text))
            }
            5 => format!("replace({}, {}, {})", t(self, rng), t(self, rng), t(self, rng)),
            6 => {
                let a = t(self, rng);
                let ty = *rng.pick(&ALL_TYS);
                let b = self.expr(rng, ty, rels, d);
                format!("concat({a}, {b})")
            }
            7 | 8 => {
                let ty = *rng.pick(&ALL_TYS);
                let e = self.expr(rng, ty, rels, d);
                cast(rng, &e, "text")
            }
            9 => {
                let ty = *rng.pick(&[Ty::Int, Ty::Num, Ty::Date]);
                format!("CAST({} AS varchar(4))", self.expr(rng, ty, rels, d))
            }
            10 => format!("({} || {})", t(self, rng), self.expr(rng, Ty::Int, rels, d)),
            _ => format!("({})::char(3)", t(self, rng)),
        }
    }

    fn bool_expr(&mut self, rng: &mut Rng, rels: &[Rel<'a>], d: usize) -> String {
        match rng.below(16) {
            0..=4 => {
                let ty = *rng.pick(&ALL_TYS);
                // Integer, numeric and float compare across classes in
                // PostgreSQL (and must in pgtier).
                let other = match ty {
                    Ty::Int | Ty::Num | Ty::Float => *rng.pick(&[Ty::Int, Ty::Num, Ty::Float]),
                    Ty::Date | Ty::Ts => *rng.pick(&[Ty::Date, Ty::Ts]),
                    t => t,
                };
                let op = rng.pick(&["=", "<>", "<", "<=", ">", ">=", "IS DISTINCT FROM", "IS NOT DISTINCT FROM"]);
                let e = format!("{} {op} {}", self.expr(rng, ty, rels, d), self.expr(rng, other, rels, d));
                maybe_paren(rng, e)
            }
            5 => format!("({} AND {})", self.expr(rng, Ty::Bool, rels, d), self.expr(rng, Ty::Bool, rels, d)),
            6 => format!("({} OR {})", self.expr(rng, Ty::Bool, rels, d), self.expr(rng, Ty::Bool, rels, d)),
            7 => format!("NOT ({})", self.expr(rng, Ty::Bool, rels, d)),
            8 => {
                let ty = *rng.pick(&ALL_TYS);
                let test = rng.pick(&["IS NULL", "IS NOT NULL"]);
                let e = format!("{} {test}", self.expr(rng, ty, rels, d));
                maybe_paren(rng, e)
            }
            9 => {
                let test =
                    rng.pick(&["IS TRUE", "IS NOT TRUE", "IS FALSE", "IS NOT FALSE", "IS UNKNOWN", "IS NOT UNKNOWN"]);
                let e = self.expr(rng, Ty::Bool, rels, d);
                let e = format!("{} {test}", maybe_paren(rng, e));
                maybe_paren(rng, e)
            }
            10 => {
                let ty = *rng.pick(&[Ty::Int, Ty::Num, Ty::Text, Ty::Date]);
                let not = if rng.chance(30) { "NOT " } else { "" };
                let e = format!(
                    "{} {not}BETWEEN {} AND {}",
                    self.expr(rng, ty, rels, d),
                    self.expr(rng, ty, rels, d),
                    self.expr(rng, ty, rels, d)
                );
                maybe_paren(rng, e)
            }
            11 => {
                let ty = *rng.pick(&[Ty::Int, Ty::Num, Ty::Text, Ty::Float]);
                let not = if rng.chance(40) { "NOT " } else { "" };
                // PostgreSQL compares x with each item that references a
                // column by its own `=`, and gives only the column-free
                // items a common type. String items are a bare column
                // sometimes, else text: a first character(n) with text is
                // bpchar in PostgreSQL, refused by pgtier (0A000).
                let list: Vec<String> = (0..1 + rng.below(4))
                    .map(|_| match ty {
                        Ty::Num | Ty::Float if rng.chance(60) => literal(rng, ty),
                        Ty::Num | Ty::Float => self.expr(rng, ty, rels, d.min(1)),
                        _ => match self.column(rng, ty, rels) {
                            Some(c) if rng.chance(30) => c,
                            _ => text_arm(ty, self.expr(rng, ty, rels, d.min(1))),
                        },
                    })
                    .collect();
                let e = format!("{} {not}IN ({})", text_arm(ty, self.expr(rng, ty, rels, d)), list.join(", "));
                maybe_paren(rng, e)
            }
            12 => {
                let op = rng.pick(&["LIKE", "NOT LIKE", "ILIKE"]);
                let pat = rng.pick(&["'%'", "'a%'", "'%a%'", "'_'", "'%\\_%'", "''", "'A%'", "'%5'"]);
                let e = format!("{} {op} {pat}", self.expr(rng, Ty::Text, rels, d));
                maybe_paren(rng, e)
            }
            13 if d > 0 => self.in_subquery(rng, rels, d),
            14 if d > 0 => {
                let table = rng.pick(self.tables);
                let rel = self.rel(table);
                let mut inner: Vec<Rel<'a>> = vec![rel];
                let alias = inner[0].alias.clone();
                // The subquery may see the outer relations (correlation).
                let cond = {
                    let outer: Vec<Rel<'a>> =
                        rels.iter().map(|r| Rel { alias: r.alias.clone(), table: r.table }).collect();
                    inner.extend(outer);
                    self.expr(rng, Ty::Bool, &inner, d - 1)
                };
                let not = if rng.chance(30) { "NOT " } else { "" };
                // Bare sometimes: `NOT EXISTS (...) IS NULL` is
                // `NOT (EXISTS (...) IS NULL)`.
                maybe_paren(rng, format!("{not}EXISTS (SELECT 1 FROM {} {alias} WHERE {cond})", table.name))
            }
            _ => {
                if rng.chance(50)
                    && let Some(c) = self.column(rng, Ty::Bool, rels)
                {
                    return c;
                }
                literal(rng, Ty::Bool)
            }
        }
    }

    /// `x [NOT] IN (SELECT col FROM t WHERE ...)`, correlated sometimes.
    fn in_subquery(&mut self, rng: &mut Rng, rels: &[Rel<'a>], d: usize) -> String {
        let ty = *rng.pick(&[Ty::Int, Ty::Text, Ty::Num]);
        let table = rng.pick(self.tables);
        let rel = self.rel(table);
        let alias = rel.alias.clone();
        let mut scope = vec![rel];
        let Some(col) = self.column(rng, ty, &scope) else {
            return literal(rng, Ty::Bool);
        };
        scope.extend(rels.iter().map(|r| Rel { alias: r.alias.clone(), table: r.table }));
        let cond = self.expr(rng, Ty::Bool, &scope, d - 1);
        let not = if rng.chance(35) { "NOT " } else { "" };
        // String operands as text half the time: char(n) against text
        // compares as text, against varchar or char(m) as bpchar.
        let x = self.expr(rng, ty, rels, d - 1);
        let x = if rng.chance(50) { text_arm(ty, x) } else { x };
        let col = if rng.chance(50) { text_arm(ty, col) } else { col };
        format!("({x} {not}IN (SELECT {col} FROM {} {alias} WHERE {cond}))", table.name)
    }

    /// A scalar subquery of class `ty`: an aggregate (one row always) or
    /// a column with ORDER BY ... LIMIT 1 (zero or one row).
    fn scalar_subquery(&mut self, rng: &mut Rng, ty: Ty, rels: &[Rel<'a>], d: usize) -> String {
        let table = rng.pick(self.tables);
        let rel = self.rel(table);
        let alias = rel.alias.clone();
        let mut scope = vec![rel];
        let inner_only = [Rel { alias: alias.clone(), table }];
        let value = match (ty, rng.below(3)) {
            (Ty::Int, 0) => "count(*)".to_owned(),
            (_, 1) => format!("{}({})", rng.pick(&["min", "max"]), self.expr(rng, ty, &inner_only, d - 1)),
            _ => self.expr(rng, ty, &inner_only, d - 1),
        };
        scope.extend(rels.iter().map(|r| Rel { alias: r.alias.clone(), table: r.table }));
        let cond = self.expr(rng, Ty::Bool, &scope, d - 1);
        if value.contains("count(") || value.starts_with("min(") || value.starts_with("max(") {
            format!("(SELECT {value} FROM {} {alias} WHERE {cond})", table.name)
        } else {
            format!("(SELECT {value} FROM {} {alias} WHERE {cond} ORDER BY 1 LIMIT 1)", table.name)
        }
    }
}

/// `text_arm` mostly; a bare string expression sometimes: with a first
/// character(n) arm PostgreSQL's result is bpchar, which pgtier refuses
/// (0A000), and text or varchar first answer as text.
fn mostly_text(rng: &mut Rng, ty: Ty, e: String) -> String {
    if rng.chance(75) { text_arm(ty, e) } else { e }
}

/// A string expression as text (`::text` drops char(n)'s padding), so
/// most string arms and operands test values rather than pgtier's
/// refusal of a first character(n) arm (see `mostly_text`).
fn text_arm(ty: Ty, e: String) -> String {
    if ty == Ty::Text { format!("({e})::text") } else { e }
}

/// `(e)` mostly, sometimes `e`: comparisons, IS, BETWEEN, IN and LIKE are
/// non-associative (a chain is 42601), IS binds tighter than NOT and
/// looser than comparisons, IS DISTINCT FROM's right operand binds at IS.
fn maybe_paren(rng: &mut Rng, e: String) -> String {
    if rng.chance(70) { format!("({e})") } else { e }
}

/// `(e)::to`, or `e::to` when `e` is a negation `-(x)`: a unary minus
/// binds looser than `::` (`-(x)::text` is `-(x::text)`, 42883).
fn cast(rng: &mut Rng, e: &str, to: &str) -> String {
    if e.starts_with("-(") && rng.chance(50) { format!("{e}::{to}") } else { format!("({e})::{to}") }
}

/// `ORDER BY` every output column by position, in random directions: the
/// printed rows are then totally ordered (rows that tie print the same),
/// so results compare in order, LIMIT included.
fn order_all(width: usize, rng: &mut Rng) -> String {
    let items: Vec<String> = (1..=width)
        .map(|i| {
            let dir = rng.pick(&["", " DESC", " NULLS FIRST", " DESC NULLS LAST"]);
            format!("{i}{dir}")
        })
        .collect();
    items.join(", ")
}

fn limit(rng: &mut Rng, sql: &mut String) {
    if rng.chance(25) {
        let _ = write!(sql, " LIMIT {}", rng.range(0, 5));
        if rng.chance(30) {
            let _ = write!(sql, " OFFSET {}", rng.range(0, 3));
        }
    }
}

fn returning(rng: &mut Rng, sql: &mut String, table: &Table) {
    if rng.chance(35) {
        let cols: Vec<&str> = table.cols.iter().filter(|_| rng.chance(50)).map(|c| c.name).collect();
        let _ = write!(sql, " RETURNING {}", if cols.is_empty() { "*".to_owned() } else { cols.join(", ") });
    }
}

/// Literals of each class, the edges first in mind: each integer type's
/// limits, values one past them (22003 on both sides), NaN and the
/// infinities, 1e308 (a numeric literal in PostgreSQL), empty and long
/// strings, the first and last dates.
pub fn literal(rng: &mut Rng, ty: Ty) -> String {
    if rng.chance(8) {
        return match ty {
            Ty::Int => "NULL::int",
            Ty::Num => "NULL::numeric",
            Ty::Float => "NULL::float8",
            Ty::Text => "NULL::text",
            Ty::Bool => "NULL::boolean",
            Ty::Bytea => "NULL::bytea",
            Ty::Date => "NULL::date",
            Ty::Ts => "NULL::timestamp",
        }
        .to_owned();
    }
    match ty {
        Ty::Int => {
            if rng.chance(50) {
                return rng.range(-5, 20).to_string();
            }
            rng.pick(&[
                "0",
                "-1",
                "32767",
                "(-32768)",
                "2147483647",
                "(-2147483648)",
                "9223372036854775807",
                "(-9223372036854775807)",
                "32767::smallint",
                "(-32768)::smallint",
                "-32768::smallint",
                "2147483647::int4",
                "9223372036854775807::int8",
                "(-9223372036854775808)::int8",
                "'12'::int",
            ])
            .to_string()
        }
        Ty::Num => {
            // Literals pgtier refuses (0A000: more than 38 digits; numeric
            // NaN) are rare, or they would hide the rest of the statement.
            if rng.chance(3) {
                return rng.pick(&["1e308", "'NaN'::numeric", "1e38"]).to_string();
            }
            rng.pick(&[
                "0.5",
                "1.5",
                "(-2.25)",
                "0.0001",
                "12345.6789",
                "1e10",
                "99999999999999999999.5",
                "0.000000000000000000001",
                "2.50",
                "(-0.5)",
                "100",
            ])
            .to_string()
        }
        Ty::Float => rng
            .pick(&[
                "1.5::float8",
                "'NaN'::float8",
                "'Infinity'::float8",
                "'-Infinity'::float8",
                "1e308::float8",
                "(-1e308)::float8",
                "0.1::float8",
                "3::real",
                "'NaN'::real",
                "1e-300::float8",
                "2.5::float4",
                "1e38::real",
            ])
            .to_string(),
        Ty::Text => {
            if rng.chance(5) {
                return format!("'{}'", "y".repeat(rng.range(100, 5000) as usize));
            }
            rng.pick(&[
                "''",
                "'a'",
                "'abc'",
                "'ABC'",
                "' x '",
                "'%'",
                "'hello world'",
                "'123'",
                "'-7'",
                "'1.5'",
                "'NaN'",
                "'t'",
                "'2000-01-01'",
                "'it''s'",
                "'x'",
                "'Zz'",
                "'caf\u{e9}'",
            ])
            .to_string()
        }
        Ty::Bool => rng.pick(&["true", "false"]).to_string(),
        Ty::Bytea => rng.pick(&["'\\x00'::bytea", "'\\xdeadbeef'::bytea", "''::bytea", "'\\x'::bytea"]).to_string(),
        // pgtier refuses BC in date input (22007): rare.
        Ty::Date if rng.chance(3) => "DATE '0001-01-01 BC'".to_owned(),
        Ty::Date => rng
            .pick(&[
                "DATE '2000-01-01'",
                "DATE '1999-12-31'",
                "DATE '9999-12-31'",
                "DATE '0001-01-01'",
                "DATE '2024-02-29'",
                "'1970-01-01'::date",
            ])
            .to_string(),
        Ty::Ts => rng
            .pick(&[
                "TIMESTAMP '2000-01-01 12:34:56'",
                "TIMESTAMP '1970-01-01 00:00:00.5'",
                "TIMESTAMP '9999-12-31 23:59:59'",
                "TIMESTAMPTZ '2024-06-01 10:00:00+02'",
                "'2000-01-01'::timestamp",
            ])
            .to_string(),
    }
}
