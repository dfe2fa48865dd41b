//! The TATP schema (spec Appendix A) in PostgreSQL types, split into what is
//! created before population (bare tables) and what is built after it
//! (indexes, keys, foreign keys, statistics): building a btree from sorted
//! input and validating a foreign key with one anti-join is many times faster
//! than maintaining them row by row during COPY.

/// Tables in dependency order (parents first).
pub const TABLES: [&str; 4] = ["subscriber", "access_info", "special_facility", "call_forwarding"];

pub const SUBSCRIBER_COLUMNS: [&str; 34] = [
    "s_id",
    "sub_nbr",
    "bit_1",
    "bit_2",
    "bit_3",
    "bit_4",
    "bit_5",
    "bit_6",
    "bit_7",
    "bit_8",
    "bit_9",
    "bit_10",
    "hex_1",
    "hex_2",
    "hex_3",
    "hex_4",
    "hex_5",
    "hex_6",
    "hex_7",
    "hex_8",
    "hex_9",
    "hex_10",
    "byte2_1",
    "byte2_2",
    "byte2_3",
    "byte2_4",
    "byte2_5",
    "byte2_6",
    "byte2_7",
    "byte2_8",
    "byte2_9",
    "byte2_10",
    "msc_location",
    "vlr_location",
];
pub const ACCESS_INFO_COLUMNS: [&str; 6] = ["s_id", "ai_type", "data1", "data2", "data3", "data4"];
pub const SPECIAL_FACILITY_COLUMNS: [&str; 6] = ["s_id", "sf_type", "is_active", "error_cntrl", "data_a", "data_b"];
pub const CALL_FORWARDING_COLUMNS: [&str; 5] = ["s_id", "sf_type", "start_time", "end_time", "numberx"];

/// Spec types mapped to PostgreSQL: TINYINT → smallint (PostgreSQL has no
/// 1-byte integer); msc/vlr_location → bigint because the spec fills these
/// INTEGER columns with values up to 2^32 − 1, beyond int4. Both are printed
/// as deviations by [`super::deviations`].
pub const TABLE_DDL: [TableDdl; 4] = [
    TableDdl {
        name: "subscriber",
        columns: "
    s_id integer NOT NULL,
    sub_nbr varchar(15) NOT NULL,
    bit_1 smallint, bit_2 smallint, bit_3 smallint, bit_4 smallint, bit_5 smallint,
    bit_6 smallint, bit_7 smallint, bit_8 smallint, bit_9 smallint, bit_10 smallint,
    hex_1 smallint, hex_2 smallint, hex_3 smallint, hex_4 smallint, hex_5 smallint,
    hex_6 smallint, hex_7 smallint, hex_8 smallint, hex_9 smallint, hex_10 smallint,
    byte2_1 smallint, byte2_2 smallint, byte2_3 smallint, byte2_4 smallint, byte2_5 smallint,
    byte2_6 smallint, byte2_7 smallint, byte2_8 smallint, byte2_9 smallint, byte2_10 smallint,
    msc_location bigint, vlr_location bigint",
        keys: "
    CONSTRAINT subscriber_pkey PRIMARY KEY (s_id),
    CONSTRAINT subscriber_sub_nbr_key UNIQUE (sub_nbr)",
    },
    TableDdl {
        name: "access_info",
        columns: "
    s_id integer NOT NULL,
    ai_type smallint NOT NULL,
    data1 smallint, data2 smallint, data3 char(3), data4 char(5)",
        keys: "
    CONSTRAINT access_info_pkey PRIMARY KEY (s_id, ai_type),
    CONSTRAINT access_info_s_id_fkey FOREIGN KEY (s_id) REFERENCES subscriber (s_id)",
    },
    TableDdl {
        name: "special_facility",
        columns: "
    s_id integer NOT NULL,
    sf_type smallint NOT NULL,
    is_active smallint NOT NULL,
    error_cntrl smallint, data_a smallint, data_b char(5)",
        keys: "
    CONSTRAINT special_facility_pkey PRIMARY KEY (s_id, sf_type),
    CONSTRAINT special_facility_s_id_fkey FOREIGN KEY (s_id) REFERENCES subscriber (s_id)",
    },
    TableDdl {
        name: "call_forwarding",
        columns: "
    s_id integer NOT NULL,
    sf_type smallint NOT NULL,
    start_time smallint NOT NULL,
    end_time smallint, numberx varchar(15)",
        keys: "
    CONSTRAINT call_forwarding_pkey PRIMARY KEY (s_id, sf_type, start_time),
    CONSTRAINT call_forwarding_s_id_sf_type_fkey FOREIGN KEY (s_id, sf_type)
        REFERENCES special_facility (s_id, sf_type)",
    },
];

/// One TATP table: its columns, and the keys PostgreSQL gets after the load
/// ([`BUILD_STEPS`], same constraint names) or a keyed target gets up front.
pub struct TableDdl {
    pub name: &'static str,
    pub columns: &'static str,
    pub keys: &'static str,
}

/// CREATE TABLE statements for the four tables, parents first. Without keys
/// for PostgreSQL, which loads first and builds keys after
/// ([`BUILD_STEPS`]); with keys for targets that cannot add them after a load
/// ([`crate::target::Target::keys_with_tables`]). One table list serves
/// both, so the two targets can never get different columns.
pub fn create_tables(with_keys: bool) -> String {
    let mut sql = String::new();
    for table in &TABLE_DDL {
        sql.push_str("CREATE TABLE ");
        sql.push_str(table.name);
        sql.push_str(" (");
        sql.push_str(table.columns);
        if with_keys {
            sql.push(',');
            sql.push_str(table.keys);
        }
        sql.push_str("\n);\n");
    }
    sql
}

pub const DROP_TABLES: &str = "DROP TABLE IF EXISTS call_forwarding, special_facility, access_info, subscriber CASCADE";

/// Statements that build keys after the load, grouped in steps. Statements of
/// one step are independent and may run in parallel sessions; steps run in
/// order. The lock levels are what makes that safe in PostgreSQL:
/// `CREATE UNIQUE INDEX` takes SHARE (two on one table do not block each
/// other), `... USING INDEX` only attaches an index, and foreign keys are
/// added `NOT VALID` (instant) and then validated, which takes SHARE UPDATE
/// EXCLUSIVE on the child and ROW SHARE on the parent, so the three
/// validations run side by side.
pub const BUILD_STEPS: [(&str, &[&str]); 5] = [
    (
        "indexes",
        &[
            // Largest first so the longest build starts first.
            "CREATE UNIQUE INDEX call_forwarding_pkey ON call_forwarding (s_id, sf_type, start_time)",
            "CREATE UNIQUE INDEX access_info_pkey ON access_info (s_id, ai_type)",
            "CREATE UNIQUE INDEX special_facility_pkey ON special_facility (s_id, sf_type)",
            "CREATE UNIQUE INDEX subscriber_sub_nbr_key ON subscriber (sub_nbr)",
            "CREATE UNIQUE INDEX subscriber_pkey ON subscriber (s_id)",
        ],
    ),
    (
        "keys",
        &["ALTER TABLE subscriber ADD CONSTRAINT subscriber_pkey PRIMARY KEY USING INDEX subscriber_pkey, \
               ADD CONSTRAINT subscriber_sub_nbr_key UNIQUE USING INDEX subscriber_sub_nbr_key;
           ALTER TABLE access_info ADD CONSTRAINT access_info_pkey PRIMARY KEY USING INDEX access_info_pkey;
           ALTER TABLE special_facility ADD CONSTRAINT special_facility_pkey PRIMARY KEY USING INDEX special_facility_pkey;
           ALTER TABLE call_forwarding ADD CONSTRAINT call_forwarding_pkey PRIMARY KEY USING INDEX call_forwarding_pkey;
           ALTER TABLE access_info ADD CONSTRAINT access_info_s_id_fkey
               FOREIGN KEY (s_id) REFERENCES subscriber (s_id) NOT VALID;
           ALTER TABLE special_facility ADD CONSTRAINT special_facility_s_id_fkey
               FOREIGN KEY (s_id) REFERENCES subscriber (s_id) NOT VALID;
           ALTER TABLE call_forwarding ADD CONSTRAINT call_forwarding_s_id_sf_type_fkey
               FOREIGN KEY (s_id, sf_type) REFERENCES special_facility (s_id, sf_type) NOT VALID"],
    ),
    (
        "foreign keys",
        &[
            "ALTER TABLE call_forwarding VALIDATE CONSTRAINT call_forwarding_s_id_sf_type_fkey",
            "ALTER TABLE access_info VALIDATE CONSTRAINT access_info_s_id_fkey",
            "ALTER TABLE special_facility VALIDATE CONSTRAINT special_facility_s_id_fkey",
        ],
    ),
    (
        "analyze",
        &[
            "ANALYZE call_forwarding",
            "ANALYZE access_info",
            "ANALYZE special_facility",
            "ANALYZE subscriber",
        ],
    ),
    // Checkpoint so the first measure window does not pay for flushing the
    // population's dirty pages.
    ("checkpoint", &["CHECKPOINT"]),
];

/// One statement per table that fails with SQLSTATE 42P01 when it is missing.
pub fn probe_statements() -> impl Iterator<Item = (&'static str, String)> {
    TABLES.iter().map(|t| (*t, format!("SELECT 1 FROM {t} LIMIT 1")))
}

#[cfg(test)]
mod ddl_tests {
    use super::{TABLE_DDL, TABLES};

    #[test]
    fn ddl_lists_the_tables_in_the_same_order() {
        let ddl_names: Vec<&str> = TABLE_DDL.iter().map(|t| t.name).collect();
        assert_eq!(ddl_names, TABLES);
    }
}
