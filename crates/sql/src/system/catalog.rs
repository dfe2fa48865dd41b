//! The system relations: pg_catalog tables and views and the
//! information_schema views drivers and psql read, generated from the engine
//! catalog snapshot (and the session's settings) each time a statement
//! reads them. Read-only; nothing here is stored.
//!
//! OIDs: builtin types, namespaces and the system relations themselves use
//! PostgreSQL's own; user objects get stable OIDs derived from engine ids
//! (ranges below), so the same table keeps its OID for its lifetime.

use std::sync::Arc;

use pgtier_engine::{Catalog, Column, DataType, ForeignKey, IndexSchema, SequenceDefault, TableId, TableSchema, Value};

use super::SysCtx;
use super::types::{Elem, OID};

pub const NS_PG_CATALOG: i64 = 11;
pub const NS_PUBLIC: i64 = 2200;
pub const NS_INFORMATION_SCHEMA: i64 = 13_000;
pub const NS_PG_TOAST: i64 = 99;
/// The bootstrap superuser; it stands for the session's user.
pub const OWNER_OID: i64 = 10;
pub const DATABASE_OID: i64 = 5;
/// PostgreSQL 15's owner of schema public.
pub const DATABASE_OWNER_ROLE: i64 = 6171;
pub const DEFAULT_COLLATION: i64 = 100;
pub const HEAP_AM: i64 = 2;
pub const BTREE_AM: i64 = 403;

const USER_BASE: i64 = 16_384;
const INDEX_BASE: i64 = USER_BASE + 1_000_000;
const FK_BASE: i64 = USER_BASE + 2_000_000;
const INDEX_CONSTRAINT_BASE: i64 = USER_BASE + 3_000_000;
const ATTRDEF_BASE: i64 = USER_BASE + 4_000_000;
/// CHECK constraints: table id * CHECKS_PER_TABLE + position.
const CHECK_BASE: i64 = USER_BASE + 5_000_000;
const CHECKS_PER_TABLE: i64 = 1_000;

pub fn table_oid(t: &TableSchema) -> i64 {
    relation_oid(t.id)
}
pub fn relation_oid(id: TableId) -> i64 {
    USER_BASE + i64::from(id.0)
}
pub fn index_oid(i: &IndexSchema) -> i64 {
    INDEX_BASE + i64::from(i.id.0)
}
fn fk_oid(f: &ForeignKey) -> i64 {
    FK_BASE + i64::from(f.id.0)
}
fn index_constraint_oid(i: &IndexSchema) -> i64 {
    INDEX_CONSTRAINT_BASE + i64::from(i.id.0)
}
fn attrdef_oid(t: &TableSchema, attnum: usize) -> i64 {
    ATTRDEF_BASE + i64::from(t.id.0) * 1_600 + attnum as i64
}

/// A user table by OID.
pub fn table_by_oid(catalog: &Catalog, oid: i64) -> Option<&Arc<TableSchema>> {
    let id = u32::try_from(oid.checked_sub(USER_BASE)?).ok().filter(|_| oid < INDEX_BASE)?;
    catalog.table(pgtier_engine::TableId(id))
}
pub fn index_by_oid(catalog: &Catalog, oid: i64) -> Option<&Arc<IndexSchema>> {
    let id = u32::try_from(oid.checked_sub(INDEX_BASE)?).ok().filter(|_| oid < FK_BASE)?;
    catalog.index(pgtier_engine::IndexId(id))
}

/// A constraint by OID: a foreign key, or the primary/unique index behind one.
pub enum ConstraintRef {
    Index(Arc<IndexSchema>),
    Foreign(Arc<ForeignKey>),
    /// A table's CHECK constraint, by position in `TableSchema::checks`.
    Check(Arc<TableSchema>, usize),
}

fn check_oid(t: &TableSchema, k: usize) -> i64 {
    CHECK_BASE + i64::from(t.id.0) * CHECKS_PER_TABLE + i64::try_from(k).unwrap_or(0)
}

/// The columns a CHECK constraint's text names (pg_constraint.conkey).
pub fn check_columns(t: &TableSchema, sql: &str) -> Vec<usize> {
    let dialect = sqlparser::dialect::PostgreSqlDialect {};
    let tokens = sqlparser::tokenizer::Tokenizer::new(&dialect, sql).tokenize().unwrap_or_default();
    let mut cols: Vec<usize> = tokens
        .iter()
        .filter_map(|tok| match tok {
            sqlparser::tokenizer::Token::Word(w) => {
                let name = if w.quote_style.is_some() { w.value.clone() } else { w.value.to_lowercase() };
                t.column_index(&name).filter(|&c| !t.columns[c].is_hidden())
            }
            _ => None,
        })
        .collect();
    cols.sort_unstable();
    cols.dedup();
    cols
}

pub fn constraint_by_oid(catalog: &Catalog, oid: i64) -> Option<ConstraintRef> {
    if (FK_BASE..INDEX_CONSTRAINT_BASE).contains(&oid) {
        let id = u32::try_from(oid - FK_BASE).ok()?;
        return catalog.foreign_key(pgtier_engine::ForeignKeyId(id)).cloned().map(ConstraintRef::Foreign);
    }
    if (INDEX_CONSTRAINT_BASE..ATTRDEF_BASE).contains(&oid) {
        let id = u32::try_from(oid - INDEX_CONSTRAINT_BASE).ok()?;
        return catalog.index(pgtier_engine::IndexId(id)).filter(|i| i.unique).cloned().map(ConstraintRef::Index);
    }
    if oid >= CHECK_BASE {
        let (table, k) = ((oid - CHECK_BASE) / CHECKS_PER_TABLE, (oid - CHECK_BASE) % CHECKS_PER_TABLE);
        let t = catalog.table(pgtier_engine::TableId(u32::try_from(table).ok()?))?;
        let k = usize::try_from(k).ok().filter(|&k| k < t.checks.len())?;
        return Some(ConstraintRef::Check(Arc::clone(t), k));
    }
    None
}

/// Column types of the system relations, as PostgreSQL declares them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum T {
    Oid,
    Name,
    Char,
    Bool,
    Int2,
    Int4,
    Int8,
    Float4,
    Text,
    RegProc,
    Xid,
    /// pg_node_tree, anyarray: their text form.
    Tree,
    Arr(Elem),
}

impl T {
    pub fn data_type(self) -> DataType {
        match self {
            T::Oid | T::Xid => OID,
            T::Name | T::Char | T::Text | T::RegProc | T::Tree => DataType::Text,
            T::Bool => DataType::Bool,
            T::Int2 => DataType::Int2,
            T::Int4 => DataType::Int4,
            T::Int8 => DataType::Int8,
            T::Float4 => DataType::Float4,
            T::Arr(e) => e.data_type(),
        }
    }

    fn type_oid(self) -> i64 {
        match self {
            T::Oid => 26,
            T::Name => 19,
            T::Char => 18,
            T::Bool => 16,
            T::Int2 => 21,
            T::Int4 => 23,
            T::Int8 => 20,
            T::Float4 => 700,
            T::Text => 25,
            T::RegProc => 24,
            T::Xid => 28,
            T::Tree => 194,
            T::Arr(e) => i64::from(e.type_oid()),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schema {
    PgCatalog,
    InformationSchema,
}

pub struct RelDef {
    pub schema: Schema,
    pub name: &'static str,
    pub oid: i64,
    /// 'r' catalog table, 'v' view.
    pub kind: &'static str,
    pub columns: &'static [(&'static str, T)],
}

use Elem as E;
use T::*;

const OIDS: T = Arr(E::Oid);
const TEXTS: T = Arr(E::Text);
const ACL: T = Arr(E::AclItem);

pub static RELATIONS: &[RelDef] = &[
    RelDef { schema: Schema::PgCatalog, name: "pg_namespace", oid: 2615, kind: "r", columns: &[("oid", Oid), ("nspname", Name), ("nspowner", Oid), ("nspacl", ACL)] },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_class",
        oid: 1259,
        kind: "r",
        columns: &[
            ("oid", Oid), ("relname", Name), ("relnamespace", Oid), ("reltype", Oid), ("reloftype", Oid), ("relowner", Oid), ("relam", Oid),
            ("relfilenode", Oid), ("reltablespace", Oid), ("relpages", Int4), ("reltuples", Float4), ("relallvisible", Int4),
            ("reltoastrelid", Oid), ("relhasindex", Bool), ("relisshared", Bool), ("relpersistence", Char), ("relkind", Char),
            ("relnatts", Int2), ("relchecks", Int2), ("relhasrules", Bool), ("relhastriggers", Bool), ("relhassubclass", Bool),
            ("relrowsecurity", Bool), ("relforcerowsecurity", Bool), ("relispopulated", Bool), ("relreplident", Char),
            ("relispartition", Bool), ("relrewrite", Oid), ("relfrozenxid", Xid), ("relminmxid", Xid), ("relacl", ACL),
            ("reloptions", TEXTS), ("relpartbound", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_attribute",
        oid: 1249,
        kind: "r",
        columns: &[
            ("attrelid", Oid), ("attname", Name), ("atttypid", Oid), ("attstattarget", Int4), ("attlen", Int2), ("attnum", Int2),
            ("attndims", Int4), ("attcacheoff", Int4), ("atttypmod", Int4), ("attbyval", Bool), ("attalign", Char), ("attstorage", Char),
            ("attcompression", Char), ("attnotnull", Bool), ("atthasdef", Bool), ("atthasmissing", Bool), ("attidentity", Char),
            ("attgenerated", Char), ("attisdropped", Bool), ("attislocal", Bool), ("attinhcount", Int4), ("attcollation", Oid),
            ("attacl", ACL), ("attoptions", TEXTS), ("attfdwoptions", TEXTS), ("attmissingval", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_type",
        oid: 1247,
        kind: "r",
        columns: &[
            ("oid", Oid), ("typname", Name), ("typnamespace", Oid), ("typowner", Oid), ("typlen", Int2), ("typbyval", Bool), ("typtype", Char),
            ("typcategory", Char), ("typispreferred", Bool), ("typisdefined", Bool), ("typdelim", Char), ("typrelid", Oid),
            ("typsubscript", RegProc), ("typelem", Oid), ("typarray", Oid), ("typinput", RegProc), ("typoutput", RegProc),
            ("typreceive", RegProc), ("typsend", RegProc), ("typmodin", RegProc), ("typmodout", RegProc), ("typanalyze", RegProc),
            ("typalign", Char), ("typstorage", Char), ("typnotnull", Bool), ("typbasetype", Oid), ("typtypmod", Int4), ("typndims", Int4),
            ("typcollation", Oid), ("typdefaultbin", Tree), ("typdefault", Text), ("typacl", ACL),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_index",
        oid: 2610,
        kind: "r",
        columns: &[
            ("indexrelid", Oid), ("indrelid", Oid), ("indnatts", Int2), ("indnkeyatts", Int2), ("indisunique", Bool),
            ("indnullsnotdistinct", Bool), ("indisprimary", Bool), ("indisexclusion", Bool), ("indimmediate", Bool),
            ("indisclustered", Bool), ("indisvalid", Bool), ("indcheckxmin", Bool), ("indisready", Bool), ("indislive", Bool),
            ("indisreplident", Bool), ("indkey", Arr(E::Int2Vector)), ("indcollation", Arr(E::OidVector)), ("indclass", Arr(E::OidVector)),
            ("indoption", Arr(E::Int2Vector)), ("indexprs", Tree), ("indpred", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_constraint",
        oid: 2606,
        kind: "r",
        columns: &[
            ("oid", Oid), ("conname", Name), ("connamespace", Oid), ("contype", Char), ("condeferrable", Bool), ("condeferred", Bool),
            ("convalidated", Bool), ("conrelid", Oid), ("contypid", Oid), ("conindid", Oid), ("conparentid", Oid), ("confrelid", Oid),
            ("confupdtype", Char), ("confdeltype", Char), ("confmatchtype", Char), ("conislocal", Bool), ("coninhcount", Int4),
            ("connoinherit", Bool), ("conkey", Arr(E::Int2)), ("confkey", Arr(E::Int2)), ("conpfeqop", OIDS), ("conppeqop", OIDS),
            ("conffeqop", OIDS), ("confdelsetcols", Arr(E::Int2)), ("conexclop", OIDS), ("conbin", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_sequence",
        oid: 2224,
        kind: "r",
        columns: &[
            ("seqrelid", Oid), ("seqtypid", Oid), ("seqstart", Int8), ("seqincrement", Int8), ("seqmax", Int8), ("seqmin", Int8), ("seqcache", Int8),
            ("seqcycle", Bool),
        ],
    },
    // Only the dependencies psql shows: a sequence owned by a column.
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_depend",
        oid: 2608,
        kind: "r",
        columns: &[("classid", Oid), ("objid", Oid), ("objsubid", Int4), ("refclassid", Oid), ("refobjid", Oid), ("refobjsubid", Int4), ("deptype", Char)],
    },
    RelDef { schema: Schema::PgCatalog, name: "pg_attrdef", oid: 2604, kind: "r", columns: &[("oid", Oid), ("adrelid", Oid), ("adnum", Int2), ("adbin", Tree)] },
    RelDef { schema: Schema::PgCatalog, name: "pg_am", oid: 2601, kind: "r", columns: &[("oid", Oid), ("amname", Name), ("amhandler", RegProc), ("amtype", Char)] },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_database",
        oid: 1262,
        kind: "r",
        columns: &[
            ("oid", Oid), ("datname", Name), ("datdba", Oid), ("encoding", Int4), ("datlocprovider", Char), ("datistemplate", Bool),
            ("datallowconn", Bool), ("datconnlimit", Int4), ("datfrozenxid", Xid), ("datminmxid", Xid), ("dattablespace", Oid),
            ("datcollate", Text), ("datctype", Text), ("daticulocale", Text), ("datcollversion", Text), ("datacl", ACL),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_roles",
        oid: 12_001,
        kind: "v",
        columns: &[
            ("rolname", Name), ("rolsuper", Bool), ("rolinherit", Bool), ("rolcreaterole", Bool), ("rolcreatedb", Bool), ("rolcanlogin", Bool),
            ("rolreplication", Bool), ("rolconnlimit", Int4), ("rolpassword", Text), ("rolvaliduntil", Text), ("rolbypassrls", Bool),
            ("rolconfig", TEXTS), ("oid", Oid),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_user",
        oid: 12_002,
        kind: "v",
        columns: &[
            ("usename", Name), ("usesysid", Oid), ("usecreatedb", Bool), ("usesuper", Bool), ("userepl", Bool), ("usebypassrls", Bool),
            ("passwd", Text), ("valuntil", Text), ("useconfig", TEXTS),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_authid",
        oid: 1260,
        kind: "r",
        columns: &[
            ("oid", Oid), ("rolname", Name), ("rolsuper", Bool), ("rolinherit", Bool), ("rolcreaterole", Bool), ("rolcreatedb", Bool),
            ("rolcanlogin", Bool), ("rolreplication", Bool), ("rolbypassrls", Bool), ("rolconnlimit", Int4), ("rolpassword", Text),
            ("rolvaliduntil", Text),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_settings",
        oid: 12_003,
        kind: "v",
        columns: &[
            ("name", Text), ("setting", Text), ("unit", Text), ("category", Text), ("short_desc", Text), ("extra_desc", Text),
            ("context", Text), ("vartype", Text), ("source", Text), ("min_val", Text), ("max_val", Text), ("enumvals", TEXTS),
            ("boot_val", Text), ("reset_val", Text), ("sourcefile", Text), ("sourceline", Int4), ("pending_restart", Bool),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_auth_members",
        oid: 1261,
        kind: "r",
        columns: &[("oid", Oid), ("roleid", Oid), ("member", Oid), ("grantor", Oid), ("admin_option", Bool)],
    },
    RelDef { schema: Schema::PgCatalog, name: "pg_description", oid: 2609, kind: "r", columns: &[("objoid", Oid), ("classoid", Oid), ("objsubid", Int4), ("description", Text)] },
    RelDef { schema: Schema::PgCatalog, name: "pg_shdescription", oid: 2396, kind: "r", columns: &[("objoid", Oid), ("classoid", Oid), ("description", Text)] },
    RelDef { schema: Schema::PgCatalog, name: "pg_inherits", oid: 2611, kind: "r", columns: &[("inhrelid", Oid), ("inhparent", Oid), ("inhseqno", Int4), ("inhdetachpending", Bool)] },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_collation",
        oid: 3456,
        kind: "r",
        columns: &[
            ("oid", Oid), ("collname", Name), ("collnamespace", Oid), ("collowner", Oid), ("collprovider", Char), ("collisdeterministic", Bool),
            ("collencoding", Int4), ("collcollate", Text), ("collctype", Text), ("colliculocale", Text), ("collversion", Text),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_proc",
        oid: 1255,
        kind: "r",
        columns: &[
            ("oid", Oid), ("proname", Name), ("pronamespace", Oid), ("proowner", Oid), ("prolang", Oid), ("procost", Float4), ("prorows", Float4),
            ("provariadic", Oid), ("prosupport", RegProc), ("prokind", Char), ("prosecdef", Bool), ("proleakproof", Bool), ("proisstrict", Bool),
            ("proretset", Bool), ("provolatile", Char), ("proparallel", Char), ("pronargs", Int2), ("pronargdefaults", Int2), ("prorettype", Oid),
            ("proargtypes", Arr(E::OidVector)), ("proallargtypes", OIDS), ("proargmodes", Arr(E::Char)), ("proargnames", TEXTS),
            ("proargdefaults", Tree), ("protrftypes", OIDS), ("prosrc", Text), ("probin", Text), ("prosqlbody", Tree), ("proconfig", TEXTS),
            ("proacl", ACL),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_policy",
        oid: 3256,
        kind: "r",
        columns: &[
            ("oid", Oid), ("polname", Name), ("polrelid", Oid), ("polcmd", Char), ("polpermissive", Bool), ("polroles", OIDS), ("polqual", Tree),
            ("polwithcheck", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_statistic_ext",
        oid: 3381,
        kind: "r",
        columns: &[
            ("oid", Oid), ("stxrelid", Oid), ("stxname", Name), ("stxnamespace", Oid), ("stxowner", Oid), ("stxstattarget", Int4),
            ("stxkeys", Arr(E::Int2Vector)), ("stxkind", Arr(E::Char)), ("stxexprs", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_publication",
        oid: 6104,
        kind: "r",
        columns: &[
            ("oid", Oid), ("pubname", Name), ("pubowner", Oid), ("puballtables", Bool), ("pubinsert", Bool), ("pubupdate", Bool),
            ("pubdelete", Bool), ("pubtruncate", Bool), ("pubviaroot", Bool),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_publication_rel",
        oid: 6106,
        kind: "r",
        columns: &[("oid", Oid), ("prpubid", Oid), ("prrelid", Oid), ("prqual", Tree), ("prattrs", Arr(E::Int2Vector))],
    },
    RelDef { schema: Schema::PgCatalog, name: "pg_publication_namespace", oid: 6237, kind: "r", columns: &[("oid", Oid), ("pnpubid", Oid), ("pnnspid", Oid)] },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_trigger",
        oid: 2620,
        kind: "r",
        columns: &[
            ("oid", Oid), ("tgrelid", Oid), ("tgparentid", Oid), ("tgname", Name), ("tgfoid", Oid), ("tgtype", Int2), ("tgenabled", Char),
            ("tgisinternal", Bool), ("tgconstrrelid", Oid), ("tgconstrindid", Oid), ("tgconstraint", Oid), ("tgdeferrable", Bool),
            ("tginitdeferred", Bool), ("tgnargs", Int2), ("tgattr", Arr(E::Int2Vector)), ("tgargs", Text), ("tgqual", Tree),
            ("tgoldtable", Name), ("tgnewtable", Name),
        ],
    },
    RelDef { schema: Schema::PgCatalog, name: "pg_tablespace", oid: 1213, kind: "r", columns: &[("oid", Oid), ("spcname", Name), ("spcowner", Oid), ("spcacl", ACL), ("spcoptions", TEXTS)] },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_extension",
        oid: 3079,
        kind: "r",
        columns: &[
            ("oid", Oid), ("extname", Name), ("extowner", Oid), ("extnamespace", Oid), ("extrelocatable", Bool), ("extversion", Text),
            ("extconfig", OIDS), ("extcondition", TEXTS),
        ],
    },
    RelDef { schema: Schema::PgCatalog, name: "pg_enum", oid: 3501, kind: "r", columns: &[("oid", Oid), ("enumtypid", Oid), ("enumsortorder", Float4), ("enumlabel", Name)] },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_range",
        oid: 3541,
        kind: "r",
        columns: &[
            ("rngtypid", Oid), ("rngsubtype", Oid), ("rngmultitypid", Oid), ("rngcollation", Oid), ("rngsubopc", Oid), ("rngcanonical", RegProc),
            ("rngsubdiff", RegProc),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_tables",
        oid: 12_004,
        kind: "v",
        columns: &[
            ("schemaname", Name), ("tablename", Name), ("tableowner", Name), ("tablespace", Name), ("hasindexes", Bool), ("hasrules", Bool),
            ("hastriggers", Bool), ("rowsecurity", Bool),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_indexes",
        oid: 12_005,
        kind: "v",
        columns: &[("schemaname", Name), ("tablename", Name), ("indexname", Name), ("tablespace", Name), ("indexdef", Text)],
    },
    RelDef {
        schema: Schema::InformationSchema,
        name: "schemata",
        oid: 13_001,
        kind: "v",
        columns: &[
            ("catalog_name", Name), ("schema_name", Name), ("schema_owner", Name), ("default_character_set_catalog", Name),
            ("default_character_set_schema", Name), ("default_character_set_name", Name), ("sql_path", Text),
        ],
    },
    RelDef {
        schema: Schema::InformationSchema,
        name: "tables",
        oid: 13_002,
        kind: "v",
        columns: &[
            ("table_catalog", Name), ("table_schema", Name), ("table_name", Name), ("table_type", Text), ("self_referencing_column_name", Name),
            ("reference_generation", Text), ("user_defined_type_catalog", Name), ("user_defined_type_schema", Name),
            ("user_defined_type_name", Name), ("is_insertable_into", Text), ("is_typed", Text), ("commit_action", Text),
        ],
    },
    RelDef {
        schema: Schema::InformationSchema,
        name: "columns",
        oid: 13_003,
        kind: "v",
        columns: &[
            ("table_catalog", Name), ("table_schema", Name), ("table_name", Name), ("column_name", Name), ("ordinal_position", Int4),
            ("column_default", Text), ("is_nullable", Text), ("data_type", Text), ("character_maximum_length", Int4),
            ("character_octet_length", Int4), ("numeric_precision", Int4), ("numeric_precision_radix", Int4), ("numeric_scale", Int4),
            ("datetime_precision", Int4), ("interval_type", Text), ("interval_precision", Int4), ("character_set_catalog", Name),
            ("character_set_schema", Name), ("character_set_name", Name), ("collation_catalog", Name), ("collation_schema", Name),
            ("collation_name", Name), ("domain_catalog", Name), ("domain_schema", Name), ("domain_name", Name), ("udt_catalog", Name),
            ("udt_schema", Name), ("udt_name", Name), ("scope_catalog", Name), ("scope_schema", Name), ("scope_name", Name),
            ("maximum_cardinality", Int4), ("dtd_identifier", Name), ("is_self_referencing", Text), ("is_identity", Text),
            ("identity_generation", Text), ("identity_start", Text), ("identity_increment", Text), ("identity_maximum", Text),
            ("identity_minimum", Text), ("identity_cycle", Text), ("is_generated", Text), ("generation_expression", Text),
            ("is_updatable", Text),
        ],
    },
    RelDef {
        schema: Schema::InformationSchema,
        name: "table_constraints",
        oid: 13_004,
        kind: "v",
        columns: &[
            ("constraint_catalog", Name), ("constraint_schema", Name), ("constraint_name", Name), ("table_catalog", Name), ("table_schema", Name),
            ("table_name", Name), ("constraint_type", Text), ("is_deferrable", Text), ("initially_deferred", Text), ("enforced", Text),
            ("nulls_distinct", Text),
        ],
    },
    RelDef {
        schema: Schema::InformationSchema,
        name: "key_column_usage",
        oid: 13_005,
        kind: "v",
        columns: &[
            ("constraint_catalog", Name), ("constraint_schema", Name), ("constraint_name", Name), ("table_catalog", Name), ("table_schema", Name),
            ("table_name", Name), ("column_name", Name), ("ordinal_position", Int4), ("position_in_unique_constraint", Int4),
        ],
    },
];

/// One system relation (an index into [`RELATIONS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemRel(pub usize);

impl SystemRel {
    pub fn def(self) -> &'static RelDef {
        &RELATIONS[self.0]
    }

    pub fn find(schema: Schema, name: &str) -> Option<SystemRel> {
        RELATIONS.iter().position(|r| r.schema == schema && r.name == name).map(SystemRel)
    }

    pub fn schema_columns(self) -> Vec<Column> {
        self.def().columns.iter().map(|(n, t)| Column { name: (*n).to_owned(), ty: t.data_type(), nullable: true, default: None, sequence: None, default_sql: None }).collect()
    }
}

pub fn namespace_oid(s: Schema) -> i64 {
    match s {
        Schema::PgCatalog => NS_PG_CATALOG,
        Schema::InformationSchema => NS_INFORMATION_SCHEMA,
    }
}

pub fn namespace_name(oid: i64) -> Option<&'static str> {
    Some(match oid {
        NS_PG_CATALOG => "pg_catalog",
        NS_PUBLIC => "public",
        NS_INFORMATION_SCHEMA => "information_schema",
        NS_PG_TOAST => "pg_toast",
        _ => return None,
    })
}

// ------------------------------------------------------------ types

/// A builtin type: (oid, name, len, byval, category, align, storage, array oid, element oid, collation).
type TypeRow = (i64, &'static str, i16, bool, &'static str, &'static str, &'static str, i64, i64, i64);

pub static BUILTIN_TYPES: &[TypeRow] = &[
    (16, "bool", 1, true, "B", "c", "p", 1000, 0, 0),
    (17, "bytea", -1, false, "U", "i", "x", 1001, 0, 0),
    (18, "char", 1, true, "Z", "c", "p", 1002, 0, 0),
    (19, "name", 64, false, "S", "c", "p", 1003, 18, 950),
    (20, "int8", 8, true, "N", "d", "p", 1016, 0, 0),
    (21, "int2", 2, true, "N", "s", "p", 1005, 0, 0),
    (22, "int2vector", -1, false, "A", "i", "p", 1006, 21, 0),
    (23, "int4", 4, true, "N", "i", "p", 1007, 0, 0),
    (24, "regproc", 4, true, "N", "i", "p", 1008, 0, 0),
    (25, "text", -1, false, "S", "i", "x", 1009, 0, DEFAULT_COLLATION),
    (26, "oid", 4, true, "N", "i", "p", 1028, 0, 0),
    (28, "xid", 4, true, "U", "i", "p", 1011, 0, 0),
    (30, "oidvector", -1, false, "A", "i", "p", 1013, 26, 0),
    (114, "json", -1, false, "U", "i", "x", 199, 0, 0),
    (194, "pg_node_tree", -1, false, "Z", "i", "x", 0, 0, DEFAULT_COLLATION),
    (700, "float4", 4, true, "N", "i", "p", 1021, 0, 0),
    (701, "float8", 8, true, "N", "d", "p", 1022, 0, 0),
    (705, "unknown", -2, false, "X", "c", "p", 0, 0, 0),
    (1033, "aclitem", 12, false, "U", "i", "p", 1034, 0, 0),
    (1042, "bpchar", -1, false, "S", "i", "x", 1014, 0, DEFAULT_COLLATION),
    (1043, "varchar", -1, false, "S", "i", "x", 1015, 0, DEFAULT_COLLATION),
    (1082, "date", 4, true, "D", "i", "p", 1182, 0, 0),
    (1083, "time", 8, true, "D", "d", "p", 1183, 0, 0),
    (1114, "timestamp", 8, true, "D", "d", "p", 1115, 0, 0),
    (1184, "timestamptz", 8, true, "D", "d", "p", 1185, 0, 0),
    (1186, "interval", 16, false, "T", "d", "p", 1187, 0, 0),
    (1700, "numeric", -1, false, "N", "i", "m", 1231, 0, 0),
    (2205, "regclass", 4, true, "N", "i", "p", 2210, 0, 0),
    (2206, "regtype", 4, true, "N", "i", "p", 2211, 0, 0),
    (2249, "record", -1, false, "P", "d", "x", 2287, 0, 0),
    (2278, "void", 4, true, "P", "i", "p", 0, 0, 0),
    (2950, "uuid", 16, false, "U", "c", "p", 2951, 0, 0),
    (3802, "jsonb", -1, false, "U", "i", "x", 3807, 0, 0),
    (4089, "regnamespace", 4, true, "N", "i", "p", 4090, 0, 0),
    (4096, "regrole", 4, true, "N", "i", "p", 4097, 0, 0),
];

/// Builtin types plus their array types: (oid, name, row).
pub fn type_by_oid(oid: i64) -> Option<(String, TypeRow, bool)> {
    for row in BUILTIN_TYPES {
        if row.0 == oid {
            return Some((row.1.to_owned(), *row, false));
        }
        if row.7 == oid {
            return Some((format!("_{}", row.1), *row, true));
        }
    }
    None
}

pub fn type_by_name(name: &str) -> Option<i64> {
    let n = name.strip_prefix("pg_catalog.").unwrap_or(name);
    let canonical = match n {
        "integer" | "int" => "int4",
        "smallint" => "int2",
        "bigint" => "int8",
        "boolean" => "bool",
        "real" => "float4",
        "double precision" => "float8",
        "character varying" => "varchar",
        "character" => "bpchar",
        "timestamp without time zone" => "timestamp",
        "timestamp with time zone" => "timestamptz",
        "time without time zone" => "time",
        "decimal" => "numeric",
        "\"char\"" => "char",
        other => other,
    };
    if let Some(elem) = canonical.strip_suffix("[]") {
        let e = type_by_name(elem)?;
        return BUILTIN_TYPES.iter().find(|r| r.0 == e).map(|r| r.7).filter(|a| *a != 0);
    }
    for row in BUILTIN_TYPES {
        if row.1 == canonical {
            return Some(row.0);
        }
        if row.7 != 0 && canonical.strip_prefix('_') == Some(row.1) {
            return Some(row.7);
        }
    }
    None
}

/// PostgreSQL's name of an I/O function of a type (`int4in`, `date_out`).
fn io_func(name: &str, which: &str) -> String {
    let underscored = ["json", "date", "time", "timestamp", "timestamptz", "interval", "numeric", "uuid", "jsonb", "record", "void"];
    if underscored.contains(&name) { format!("{name}_{which}") } else { format!("{name}{which}") }
}

fn type_rows(out: &mut Vec<Value>) {
    for row in BUILTIN_TYPES {
        let (oid, name, len, byval, cat, align, storage, array, elem, coll) = *row;
        let ptype = matches!(cat, "P" | "X");
        let typmodin = match name {
            "varchar" => "varchartypmodin",
            "bpchar" => "bpchartypmodin",
            "numeric" => "numerictypmodin",
            "timestamp" => "timestamptypmodin",
            "timestamptz" => "timestamptztypmodin",
            "time" => "timetypmodin",
            "interval" => "intervaltypmodin",
            _ => "-",
        };
        let typmodout = if typmodin == "-" { "-".to_owned() } else { typmodin.replace("in", "out") };
        let preferred = matches!(name, "bool" | "text" | "oid" | "float8" | "timestamptz" | "interval");
        push_type(out, oid, name, len, byval, if ptype { "p" } else { "b" }, cat, preferred, elem, array, &io_func(name, "in"), &io_func(name, "out"),
            &io_func(name, "recv"), &io_func(name, "send"), typmodin, &typmodout, align, storage, coll, if elem != 0 { "raw_array_subscript_handler" } else { "-" });
        if array != 0 {
            let arr_name = format!("_{name}");
            let arr_align = if align == "d" { "d" } else { "i" };
            push_type(out, array, &arr_name, -1, false, "b", "A", false, oid, 0, "array_in", "array_out", "array_recv", "array_send", typmodin,
                &typmodout, arr_align, "x", coll, "array_subscript_handler");
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn push_type(
    out: &mut Vec<Value>, oid: i64, name: &str, len: i16, byval: bool, typtype: &str, cat: &str, preferred: bool, elem: i64, array: i64,
    input: &str, output: &str, recv: &str, send: &str, modin: &str, modout: &str, align: &str, storage: &str, coll: i64, subscript: &str,
) {
    out.extend([
        Value::Int8(oid), text(name), Value::Int8(NS_PG_CATALOG), Value::Int8(OWNER_OID), Value::Int2(len), Value::Bool(byval), text(typtype),
        text(cat), Value::Bool(preferred), Value::Bool(true), text(","), Value::Int8(0), text(subscript), Value::Int8(elem), Value::Int8(array),
        text(input), text(output), text(recv), text(send), text(modin), text(modout), text("-"), text(align), text(storage), Value::Bool(false),
        Value::Int8(0), Value::Int4(-1), Value::Int4(0), Value::Int8(coll), Value::Null, Value::Null, Value::Null,
    ]);
}

/// pg_type facts about an engine column type:
/// (type oid, typmod, len, byval, align, storage, collation).
pub fn column_type_info(ty: DataType) -> (i64, i32, i16, bool, &'static str, &'static str, i64) {
    let text_mod = |n: u32| i32::try_from(n).map_or(-1, |n| n.saturating_add(4));
    match ty {
        DataType::Bool => (16, -1, 1, true, "c", "p", 0),
        DataType::Int2 => (21, -1, 2, true, "s", "p", 0),
        DataType::Int4 => (23, -1, 4, true, "i", "p", 0),
        DataType::Int8 => (20, -1, 8, true, "d", "p", 0),
        DataType::Numeric { precision: 0, .. } => (1700, -1, -1, false, "i", "m", 0),
        DataType::Numeric { precision, scale } => (1700, ((i32::from(precision) << 16) | i32::from(scale)) + 4, -1, false, "i", "m", 0),
        DataType::Float4 => (700, -1, 4, true, "i", "p", 0),
        DataType::Float8 => (701, -1, 8, true, "d", "p", 0),
        DataType::Text => (25, -1, -1, false, "i", "x", DEFAULT_COLLATION),
        DataType::Varchar(n) => (1043, text_mod(n), -1, false, "i", "x", DEFAULT_COLLATION),
        DataType::Char(n) => (1042, text_mod(n), -1, false, "i", "x", DEFAULT_COLLATION),
        DataType::Bytea => (17, -1, -1, false, "i", "x", 0),
        DataType::Date => (1082, -1, 4, true, "i", "p", 0),
        DataType::Timestamp => (1114, -1, 8, true, "d", "p", 0),
        DataType::TimestampTz => (1184, -1, 8, true, "d", "p", 0),
    }
}

// ------------------------------------------------------------ rows

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

/// Only the user's tables, in id order (stable output).
/// Tables (not sequences, which are engine tables too).
fn user_tables(catalog: &Catalog) -> Vec<&Arc<TableSchema>> {
    catalog.tables().filter(|t| t.sequence.is_none()).collect()
}

fn user_sequences(catalog: &Catalog) -> impl Iterator<Item = &Arc<TableSchema>> {
    catalog.tables().filter(|t| t.sequence.is_some())
}

/// A column's default as `pg_get_expr(adbin)` prints it. Identity columns
/// have none (their sequence is implied, as in PostgreSQL).
pub fn column_default_text(catalog: &Catalog, col: &Column) -> Option<String> {
    match col.sequence {
        Some((seq, SequenceDefault::Serial | SequenceDefault::Nextval)) => {
            catalog.table(seq).map(|s| format!("nextval('{}'::regclass)", super::funcs::quote_ident(&s.name).replace('\'', "''")))
        }
        Some(_) => None,
        None => col.default_sql.clone().or_else(|| col.default.as_ref().map(|d| super::funcs::default_expr(d, col.ty))),
    }
}

/// `pg_attribute.attidentity`: 'a' (ALWAYS), 'd' (BY DEFAULT) or ''.
fn identity_code(col: &Column) -> &'static str {
    match col.sequence {
        Some((_, SequenceDefault::IdentityAlways)) => "a",
        Some((_, SequenceDefault::IdentityByDefault)) => "d",
        _ => "",
    }
}

/// The columns PostgreSQL would show, with their positions: not the
/// engine's hidden row id (`Column::is_hidden`), nor the key on it.
fn user_columns(t: &TableSchema) -> impl Iterator<Item = (usize, &Column)> {
    t.columns.iter().enumerate().filter(|(_, c)| !c.is_hidden())
}

/// Indexes PostgreSQL would show (not the key on a hidden row id), by table.
fn table_indexes(catalog: &Catalog, t: &TableSchema) -> Vec<Arc<IndexSchema>> {
    catalog.indexes_of(t.id).into_iter().filter(|i| !i.columns.iter().any(|&c| t.columns[c].is_hidden())).collect()
}

fn all_indexes(catalog: &Catalog) -> Vec<(Arc<TableSchema>, Arc<IndexSchema>)> {
    let mut out = Vec::new();
    for t in catalog.tables() {
        for i in table_indexes(catalog, t) {
            out.push((t.clone(), i));
        }
    }
    out
}

fn int2vector(cols: &[usize]) -> Value {
    let items: Vec<Value> = cols.iter().map(|c| Value::Int2(i16::try_from(c + 1).unwrap_or(i16::MAX))).collect();
    Value::Text(super::types::array_text(Elem::Int2Vector, &items))
}
fn int2array(cols: &[usize]) -> Value {
    let items: Vec<Value> = cols.iter().map(|c| Value::Int2(i16::try_from(c + 1).unwrap_or(i16::MAX))).collect();
    Value::Text(super::types::array_text(Elem::Int2, &items))
}

fn attnum(c: usize) -> i16 {
    i16::try_from(c + 1).unwrap_or(i16::MAX)
}

fn user(ctx: &SysCtx<'_>) -> String {
    ctx.settings.get("session_authorization").cloned().unwrap_or_else(|| "postgres".into())
}
pub fn database(ctx: &SysCtx<'_>) -> String {
    ctx.settings.get("pgtier.database").cloned().unwrap_or_else(|| "postgres".into())
}

/// Appends the rows of `rel` (flat, one value per column).
pub fn rows(rel: SystemRel, ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let catalog = ctx.catalog;
    let def = rel.def();
    let start = out.len();
    match def.name {
        "pg_namespace" => {
            for (oid, name) in [(NS_PG_CATALOG, "pg_catalog"), (NS_PUBLIC, "public"), (NS_INFORMATION_SCHEMA, "information_schema"), (NS_PG_TOAST, "pg_toast")] {
                let owner = if oid == NS_PUBLIC { DATABASE_OWNER_ROLE } else { OWNER_OID };
                out.extend([Value::Int8(oid), text(name), Value::Int8(owner), Value::Null]);
            }
        }
        "pg_class" => class_rows(catalog, out),
        "pg_attribute" => attribute_rows(catalog, out),
        "pg_type" => type_rows(out),
        "pg_index" => {
            for (t, i) in all_indexes(catalog) {
                let n = i16::try_from(i.columns.len()).unwrap_or(i16::MAX);
                let colls: Vec<Value> = i.columns.iter().map(|&c| Value::Int8(column_type_info(t.columns[c].ty).6)).collect();
                let zeros: Vec<Value> = i.columns.iter().map(|_| Value::Int8(0)).collect();
                let opts: Vec<Value> = i.columns.iter().map(|_| Value::Int2(0)).collect();
                out.extend([
                    Value::Int8(index_oid(&i)), Value::Int8(table_oid(&t)), Value::Int2(n), Value::Int2(n), Value::Bool(i.unique), Value::Bool(false),
                    Value::Bool(i.primary), Value::Bool(false), Value::Bool(true), Value::Bool(false), Value::Bool(true), Value::Bool(false),
                    Value::Bool(true), Value::Bool(true), Value::Bool(false), int2vector(&i.columns),
                    Value::Text(super::types::array_text(Elem::OidVector, &colls)), Value::Text(super::types::array_text(Elem::OidVector, &zeros)),
                    Value::Text(super::types::array_text(Elem::Int2Vector, &opts)), Value::Null, Value::Null,
                ]);
            }
        }
        "pg_constraint" => constraint_rows(catalog, out),
        "pg_sequence" => {
            for s in user_sequences(catalog) {
                let Some(o) = &s.sequence else { continue };
                out.extend([
                    Value::Int8(table_oid(s)), Value::Int8(column_type_info(o.data_type).0), Value::Int8(o.start), Value::Int8(o.increment),
                    Value::Int8(o.max), Value::Int8(o.min), Value::Int8(1), Value::Bool(o.cycle),
                ]);
            }
        }
        "pg_depend" => {
            const PG_CLASS: i64 = 1259;
            for t in user_tables(catalog) {
                for (c, col) in user_columns(t) {
                    if let Some((seq, how)) = col.sequence.filter(|(_, how)| how.owns()) {
                        let deptype = if how == SequenceDefault::Serial { "a" } else { "i" };
                        out.extend([
                            Value::Int8(PG_CLASS), Value::Int8(relation_oid(seq)), Value::Int4(0), Value::Int8(PG_CLASS), Value::Int8(table_oid(t)),
                            Value::Int4(i32::from(attnum(c))), text(deptype),
                        ]);
                    }
                }
            }
        }
        "pg_attrdef" => {
            for t in user_tables(catalog) {
                for (c, col) in user_columns(t) {
                    if let Some(d) = column_default_text(catalog, col) {
                        out.extend([Value::Int8(attrdef_oid(t, attnum(c).unsigned_abs().into())), Value::Int8(table_oid(t)), Value::Int2(attnum(c)), Value::Text(d)]);
                    }
                }
            }
        }
        "pg_am" => {
            out.extend([Value::Int8(HEAP_AM), text("heap"), text("heap_tableam_handler"), text("t")]);
            out.extend([Value::Int8(BTREE_AM), text("btree"), text("bthandler"), text("i")]);
            out.extend([Value::Int8(405), text("hash"), text("hashhandler"), text("i")]);
        }
        "pg_database" => {
            out.extend([
                Value::Int8(DATABASE_OID), Value::Text(database(ctx)), Value::Int8(OWNER_OID), Value::Int4(6), text("c"), Value::Bool(false), Value::Bool(true),
                Value::Int4(-1), Value::Int8(0), Value::Int8(1), Value::Int8(1663), text("C"), text("C"), Value::Null, Value::Null, Value::Null,
            ]);
        }
        "pg_roles" => {
            out.extend([
                Value::Text(user(ctx)), Value::Bool(true), Value::Bool(true), Value::Bool(true), Value::Bool(true), Value::Bool(true), Value::Bool(true),
                Value::Int4(-1), text("********"), Value::Null, Value::Bool(true), Value::Null, Value::Int8(OWNER_OID),
            ]);
        }
        "pg_user" => {
            out.extend([
                Value::Text(user(ctx)), Value::Int8(OWNER_OID), Value::Bool(true), Value::Bool(true), Value::Bool(true), Value::Bool(true), text("********"),
                Value::Null, Value::Null,
            ]);
        }
        "pg_authid" => {
            out.extend([
                Value::Int8(OWNER_OID), Value::Text(user(ctx)), Value::Bool(true), Value::Bool(true), Value::Bool(true), Value::Bool(true), Value::Bool(true),
                Value::Bool(true), Value::Bool(true), Value::Int4(-1), Value::Null, Value::Null,
            ]);
        }
        "pg_settings" => {
            let mut names: Vec<String> = ctx.settings.keys().filter(|k| !k.starts_with("pgtier.")).cloned().collect();
            // Fixed facts drivers read (pgJDBC: max_index_keys).
            names.extend(super::funcs::FIXED_SETTINGS.iter().map(|(k, _)| (*k).to_owned()));
            names.sort();
            names.dedup();
            for k in &names {
                let fixed = super::funcs::FIXED_SETTINGS.iter().find(|(f, _)| f == k).map(|(_, v)| (*v).to_owned());
                let v = ctx.settings.get(k).cloned().or_else(|| fixed.clone()).unwrap_or_default();
                let ro = crate::session::READ_ONLY_SETTINGS.contains(&k.as_str()) || fixed.is_some();
                out.extend([
                    text(super::funcs::setting_display_name(k)), Value::Text(v.clone()), Value::Null, text(""), text(""), Value::Null,
                    text(if ro { "internal" } else { "user" }), text("string"), text("default"), Value::Null, Value::Null, Value::Null, Value::Text(v.clone()),
                    Value::Text(v), Value::Null, Value::Null, Value::Bool(false),
                ]);
            }
        }
        "pg_collation" => {
            for (oid, name, provider) in [(DEFAULT_COLLATION, "default", "d"), (950, "C", "c"), (951, "POSIX", "c")] {
                let coll = if provider == "d" { Value::Null } else { text(name) };
                out.extend([
                    Value::Int8(oid), text(name), Value::Int8(NS_PG_CATALOG), Value::Int8(OWNER_OID), text(provider), Value::Bool(true), Value::Int4(-1),
                    coll.clone(), coll, Value::Null, Value::Null,
                ]);
            }
        }
        "pg_tablespace" => {
            for (oid, name) in [(1663, "pg_default"), (1664, "pg_global")] {
                out.extend([Value::Int8(oid), text(name), Value::Int8(OWNER_OID), Value::Null, Value::Null]);
            }
        }
        "pg_extension" => {
            out.extend([Value::Int8(13_500), text("plpgsql"), Value::Int8(OWNER_OID), Value::Int8(NS_PG_CATALOG), Value::Bool(false), text("1.0"), Value::Null, Value::Null]);
        }
        "pg_tables" => {
            for t in user_tables(catalog) {
                out.extend([text("public"), text(&t.name), Value::Text(user(ctx)), Value::Null, Value::Bool(true), Value::Bool(false), Value::Bool(false), Value::Bool(false)]);
            }
        }
        "pg_indexes" => {
            for (t, i) in all_indexes(catalog) {
                out.extend([text("public"), text(&t.name), text(&i.name), Value::Null, Value::Text(super::funcs::index_def(&t, &i, true))]);
            }
        }
        "schemata" => {
            for (name, owner) in [("information_schema", user(ctx)), ("pg_catalog", user(ctx)), ("pg_toast", user(ctx)), ("public", "pg_database_owner".to_owned())] {
                out.extend([Value::Text(database(ctx)), text(name), Value::Text(owner), Value::Null, Value::Null, Value::Null, Value::Null]);
            }
        }
        "tables" => {
            let db = database(ctx);
            for t in user_tables(catalog) {
                out.extend([
                    Value::Text(db.clone()), text("public"), text(&t.name), text("BASE TABLE"), Value::Null, Value::Null, Value::Null, Value::Null, Value::Null,
                    text("YES"), text("NO"), Value::Null,
                ]);
            }
            for r in RELATIONS {
                let schema = if r.schema == Schema::PgCatalog { "pg_catalog" } else { "information_schema" };
                let ty = if r.kind == "v" { "VIEW" } else { "BASE TABLE" };
                out.extend([
                    Value::Text(db.clone()), text(schema), text(r.name), text(ty), Value::Null, Value::Null, Value::Null, Value::Null, Value::Null,
                    text(if r.kind == "v" { "NO" } else { "YES" }), text("NO"), Value::Null,
                ]);
            }
        }
        "columns" => info_columns(ctx, out),
        "table_constraints" => info_table_constraints(ctx, out),
        "key_column_usage" => info_key_columns(ctx, out),
        // Always empty: pgtier has no such objects (role memberships, descriptions, inheritance,
        // policies, statistics objects, publications, triggers, enums, ranges,
        // functions in pg_proc).
        _ => {}
    }
    debug_assert_eq!((out.len() - start) % def.columns.len(), 0, "{}: row width", def.name);
}

fn class_rows(catalog: &Catalog, out: &mut Vec<Value>) {
    let mut push = |oid: i64, name: &str, ns: i64, am: i64, kind: &str, natts: usize, has_index: bool, has_triggers: bool, checks: usize| {
        out.extend([
            Value::Int8(oid), text(name), Value::Int8(ns), Value::Int8(0), Value::Int8(0), Value::Int8(OWNER_OID), Value::Int8(am),
            Value::Int8(if kind == "v" { 0 } else { oid }), Value::Int8(0), Value::Int4(0), Value::Float4(-1.0), Value::Int4(0), Value::Int8(0),
            Value::Bool(has_index), Value::Bool(false), text("p"), text(kind), Value::Int2(i16::try_from(natts).unwrap_or(i16::MAX)), Value::Int2(i16::try_from(checks).unwrap_or(i16::MAX)),
            Value::Bool(false), Value::Bool(has_triggers), Value::Bool(false), Value::Bool(false), Value::Bool(false), Value::Bool(true),
            text(if kind == "i" || kind == "S" { "n" } else { "d" }), Value::Bool(false), Value::Int8(0), Value::Int8(0), Value::Int8(0), Value::Null, Value::Null,
            Value::Null,
        ]);
    };
    for t in user_tables(catalog) {
        // PostgreSQL enforces foreign keys with (internal) triggers on both tables.
        let fk_triggers = !catalog.foreign_keys_of(t.id).is_empty() || !catalog.referencing(t.id).is_empty();
        push(table_oid(t), &t.name, NS_PUBLIC, HEAP_AM, "r", user_columns(t).count(), !table_indexes(catalog, t).is_empty(), fk_triggers, t.checks.len());
    }
    for (_, i) in all_indexes(catalog) {
        push(index_oid(&i), &i.name, NS_PUBLIC, BTREE_AM, "i", i.columns.len(), false, false, 0);
    }
    for s in user_sequences(catalog) {
        push(table_oid(s), &s.name, NS_PUBLIC, 0, "S", user_columns(s).count(), false, false, 0);
    }
    for r in RELATIONS {
        push(r.oid, r.name, namespace_oid(r.schema), if r.kind == "v" { 0 } else { HEAP_AM }, r.kind, r.columns.len(), false, false, 0);
    }
}

fn attribute_rows(catalog: &Catalog, out: &mut Vec<Value>) {
    #[allow(clippy::too_many_arguments)]
    let mut push = |rel: i64, name: &str, num: i16, info: (i64, i32, i16, bool, &str, &str, i64), notnull: bool, hasdef: bool, ndims: i32, identity: &str| {
        let (typ, typmod, len, byval, align, storage, coll) = info;
        out.extend([
            Value::Int8(rel), text(name), Value::Int8(typ), Value::Int4(-1), Value::Int2(len), Value::Int2(num), Value::Int4(ndims), Value::Int4(-1),
            Value::Int4(typmod), Value::Bool(byval), text(align), text(storage), text(""), Value::Bool(notnull), Value::Bool(hasdef), Value::Bool(false),
            text(identity), text(""), Value::Bool(false), Value::Bool(true), Value::Int4(0), Value::Int8(coll), Value::Null, Value::Null, Value::Null,
            Value::Null,
        ]);
    };
    for t in user_tables(catalog).into_iter().chain(user_sequences(catalog)) {
        for (c, col) in user_columns(t) {
            let hasdef = column_default_text(catalog, col).is_some();
            push(table_oid(t), &col.name, attnum(c), column_type_info(col.ty), !col.nullable, hasdef, 0, identity_code(col));
        }
    }
    for (t, i) in all_indexes(catalog) {
        for (k, &c) in i.columns.iter().enumerate() {
            let col = &t.columns[c];
            push(index_oid(&i), &col.name, attnum(k), column_type_info(col.ty), false, false, 0, "");
        }
    }
    for r in RELATIONS {
        for (k, (name, ty)) in r.columns.iter().enumerate() {
            let oid = ty.type_oid();
            let (_, row, is_array) = type_by_oid(oid).unwrap_or_else(|| (String::new(), BUILTIN_TYPES[0], false));
            let info = if is_array || matches!(ty, Arr(_)) {
                (oid, -1, -1, false, if row.5 == "d" { "d" } else { "i" }, "x", 0)
            } else {
                (oid, -1, row.2, row.3, row.5, row.6, row.9)
            };
            let coll = if matches!(ty, Name) { 950 } else { info.6 };
            push(r.oid, name, attnum(k), (info.0, info.1, info.2, info.3, info.4, info.5, coll), false, false, i32::from(is_array), "");
        }
    }
}

fn constraint_rows(catalog: &Catalog, out: &mut Vec<Value>) {
    for (t, i) in all_indexes(catalog) {
        if !i.unique {
            continue;
        }
        out.extend([
            Value::Int8(index_constraint_oid(&i)), text(&i.name), Value::Int8(NS_PUBLIC), text(if i.primary { "p" } else { "u" }), Value::Bool(false),
            Value::Bool(false), Value::Bool(true), Value::Int8(table_oid(&t)), Value::Int8(0), Value::Int8(index_oid(&i)), Value::Int8(0),
            Value::Int8(0), text(" "), text(" "), text(" "), Value::Bool(true), Value::Int4(0), Value::Bool(true), int2array(&i.columns), Value::Null,
            Value::Null, Value::Null, Value::Null, Value::Null, Value::Null, Value::Null,
        ]);
    }
    for t in user_tables(catalog) {
        for f in catalog.foreign_keys_of(t.id) {
            let Some(parent) = catalog.table(f.parent) else { continue };
            let eq: Vec<Value> = f.child_columns.iter().map(|_| Value::Int8(0)).collect();
            let eqs = Value::Text(super::types::array_text(Elem::Oid, &eq));
            out.extend([
                Value::Int8(fk_oid(&f)), text(&f.name), Value::Int8(NS_PUBLIC), text("f"), Value::Bool(false), Value::Bool(false), Value::Bool(true),
                Value::Int8(table_oid(t)), Value::Int8(0), Value::Int8(INDEX_BASE + i64::from(f.parent_index.0)), Value::Int8(0),
                Value::Int8(table_oid(parent)), text("a"), text(match f.on_delete {
                    pgtier_engine::FkAction::NoAction => "a",
                    pgtier_engine::FkAction::Cascade => "c",
                    pgtier_engine::FkAction::SetNull => "n",
                }), text("s"), Value::Bool(true), Value::Int4(0), Value::Bool(true),
                int2array(&f.child_columns), int2array(&f.parent_columns), eqs.clone(), eqs.clone(), eqs, Value::Null, Value::Null, Value::Null,
            ]);
        }
        for (k, c) in t.checks.iter().enumerate() {
            out.extend([
                Value::Int8(check_oid(t, k)), text(&c.name), Value::Int8(NS_PUBLIC), text("c"), Value::Bool(false), Value::Bool(false), Value::Bool(true),
                Value::Int8(table_oid(t)), Value::Int8(0), Value::Int8(0), Value::Int8(0), Value::Int8(0), text(" "), text(" "), text(" "),
                Value::Bool(true), Value::Int4(0), Value::Bool(false), int2array(&check_columns(t, &c.sql)), Value::Null, Value::Null, Value::Null,
                Value::Null, Value::Null, Value::Null, Value::Text(c.sql.clone()),
            ]);
        }
    }
}

fn info_columns(ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let db = database(ctx);
    for t in user_tables(ctx.catalog) {
        for (c, col) in user_columns(t) {
            let typ = column_type_info(col.ty).0;
            let (_, row, _) = type_by_oid(typ).unwrap_or_else(|| (String::new(), BUILTIN_TYPES[0], false));
            let data_type = match col.ty {
                DataType::Numeric { .. } => "numeric".to_owned(),
                DataType::Varchar(_) => "character varying".to_owned(),
                DataType::Char(_) => "character".to_owned(),
                other => other.pg_name(),
            };
            let int = |v: Option<i64>| v.map_or(Value::Null, |x| Value::Int4(i32::try_from(x).unwrap_or(i32::MAX)));
            let (char_len, octet_len) = match col.ty {
                DataType::Varchar(n) | DataType::Char(n) => (Some(i64::from(n)), Some(i64::from(n) * 4)),
                DataType::Text => (None, Some(1_073_741_824)),
                _ => (None, None),
            };
            let (prec, radix, scale) = match col.ty {
                DataType::Int2 => (Some(16), Some(2), Some(0)),
                DataType::Int4 => (Some(32), Some(2), Some(0)),
                DataType::Int8 => (Some(64), Some(2), Some(0)),
                DataType::Float4 => (Some(24), Some(2), None),
                DataType::Float8 => (Some(53), Some(2), None),
                DataType::Numeric { precision: 0, .. } => (None, Some(10), None),
                DataType::Numeric { precision, scale } => (Some(i64::from(precision)), Some(10), Some(i64::from(scale))),
                _ => (None, None, None),
            };
            let dt_prec = match col.ty {
                DataType::Date => Some(0),
                DataType::Timestamp | DataType::TimestampTz => Some(6),
                _ => None,
            };
            let position = i64::try_from(c + 1).unwrap_or(i64::MAX);
            out.extend([
                Value::Text(db.clone()), text("public"), text(&t.name), text(&col.name), int(Some(position)),
                column_default_text(ctx.catalog, col).map_or(Value::Null, Value::Text),
                text(if col.nullable { "YES" } else { "NO" }), Value::Text(data_type), int(char_len), int(octet_len), int(prec), int(radix), int(scale),
                int(dt_prec), Value::Null, Value::Null, Value::Null, Value::Null, Value::Null, Value::Null, Value::Null,
                Value::Null, Value::Null, Value::Null, Value::Null, Value::Text(db.clone()), text("pg_catalog"),
                text(row.1), Value::Null, Value::Null, Value::Null, Value::Null, Value::Text(position.to_string()), text("NO"),
            ]);
            out.extend(identity_info(ctx.catalog, col));
            out.extend([text("NEVER"), Value::Null, text("YES")]);
        }
    }
}

/// information_schema.columns' is_identity .. identity_cycle.
fn identity_info(catalog: &Catalog, col: &Column) -> [Value; 7] {
    let options = col.sequence.filter(|(_, how)| matches!(how, SequenceDefault::IdentityAlways | SequenceDefault::IdentityByDefault));
    let Some((how, o)) = options.and_then(|(seq, how)| catalog.table(seq).and_then(|s| s.sequence.clone()).map(|o| (how, o))) else {
        return [text("NO"), Value::Null, Value::Null, Value::Null, Value::Null, Value::Null, text("NO")];
    };
    let generation = if how == SequenceDefault::IdentityAlways { "ALWAYS" } else { "BY DEFAULT" };
    [
        text("YES"), text(generation), Value::Text(o.start.to_string()), Value::Text(o.increment.to_string()), Value::Text(o.max.to_string()),
        Value::Text(o.min.to_string()), text(if o.cycle { "YES" } else { "NO" }),
    ]
}

/// A constraint as information_schema lists it: (name, table, type, columns, the foreign key).
type InfoConstraint = (String, Arc<TableSchema>, &'static str, Vec<usize>, Option<Arc<ForeignKey>>);

fn info_constraints(catalog: &Catalog) -> Vec<InfoConstraint> {
    let mut out = Vec::new();
    for (t, i) in all_indexes(catalog) {
        if i.unique {
            out.push((i.name.clone(), t.clone(), if i.primary { "PRIMARY KEY" } else { "UNIQUE" }, i.columns.clone(), None));
        }
    }
    for t in user_tables(catalog) {
        for f in catalog.foreign_keys_of(t.id) {
            out.push((f.name.clone(), t.clone(), "FOREIGN KEY", f.child_columns.clone(), Some(f.clone())));
        }
    }
    out
}

fn info_table_constraints(ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let db = database(ctx);
    for (name, t, ty, _, _) in info_constraints(ctx.catalog) {
        out.extend([
            Value::Text(db.clone()), text("public"), Value::Text(name), Value::Text(db.clone()), text("public"), text(&t.name), text(ty), text("NO"),
            text("NO"), text("YES"), if ty == "FOREIGN KEY" { Value::Null } else { text("YES") },
        ]);
    }
    for t in user_tables(ctx.catalog) {
        for c in &t.checks {
            out.extend([
                Value::Text(db.clone()), text("public"), text(&c.name), Value::Text(db.clone()), text("public"), text(&t.name), text("CHECK"), text("NO"),
                text("NO"), text("YES"), Value::Null,
            ]);
        }
    }
    // PostgreSQL lists NOT NULL columns as CHECK constraints named
    // <namespace oid>_<table oid>_<attnum>_not_null.
    for t in user_tables(ctx.catalog) {
        for (c, col) in user_columns(t) {
            if !col.nullable {
                out.extend([
                    Value::Text(db.clone()), text("public"), Value::Text(format!("{NS_PUBLIC}_{}_{}_not_null", table_oid(t), c + 1)), Value::Text(db.clone()),
                    text("public"), text(&t.name), text("CHECK"), text("NO"), text("NO"), text("YES"), Value::Null,
                ]);
            }
        }
    }
}

fn info_key_columns(ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let db = database(ctx);
    for (name, t, _, cols, fk) in info_constraints(ctx.catalog) {
        for (k, &c) in cols.iter().enumerate() {
            // For a foreign key: the position of the referenced column in the
            // parent's unique constraint.
            let in_unique = fk.as_ref().and_then(|f| {
                let parent_index = ctx.catalog.index(f.parent_index)?;
                let pc = f.parent_columns.get(k)?;
                parent_index.columns.iter().position(|x| x == pc).map(|p| Value::Int4(i32::try_from(p + 1).unwrap_or(i32::MAX)))
            });
            out.extend([
                Value::Text(db.clone()), text("public"), Value::Text(name.clone()), Value::Text(db.clone()), text("public"), text(&t.name),
                text(&t.columns[c].name), Value::Int4(i32::try_from(k + 1).unwrap_or(i32::MAX)), in_unique.unwrap_or(Value::Null),
            ]);
        }
    }
}
