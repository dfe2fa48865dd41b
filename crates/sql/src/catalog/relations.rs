//! Which system relations exist: their schema, name, OID, kind and
//! columns, as PostgreSQL 15 declares them.

use pgtier_engine::DataType;

use super::Schema;
use crate::types::{Elem, OID};

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

    pub(super) fn type_oid(self) -> i64 {
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

pub struct RelDef {
    pub schema: Schema,
    pub name: &'static str,
    pub oid: i64,
    /// 'r' catalog table, 'v' view.
    pub kind: &'static str,
    pub columns: &'static [SysColumn],
}

/// A column of a system relation.
#[derive(Clone, Copy, Debug)]
pub struct SysColumn {
    pub name: &'static str,
    pub ty: T,
}

const fn c(name: &'static str, ty: T) -> SysColumn {
    SysColumn { name, ty }
}

use Elem as E;
use T::*;

const OIDS: T = Arr(E::Oid);
const TEXTS: T = Arr(E::Text);
const ACL: T = Arr(E::AclItem);

pub static RELATIONS: &[RelDef] = &[
    RelDef { schema: Schema::PgCatalog, name: "pg_namespace", oid: 2615, kind: "r", columns: &[c("oid", Oid), c("nspname", Name), c("nspowner", Oid), c("nspacl", ACL)] },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_class",
        oid: 1259,
        kind: "r",
        columns: &[
            c("oid", Oid), c("relname", Name), c("relnamespace", Oid), c("reltype", Oid), c("reloftype", Oid), c("relowner", Oid), c("relam", Oid),
            c("relfilenode", Oid), c("reltablespace", Oid), c("relpages", Int4), c("reltuples", Float4), c("relallvisible", Int4),
            c("reltoastrelid", Oid), c("relhasindex", Bool), c("relisshared", Bool), c("relpersistence", Char), c("relkind", Char),
            c("relnatts", Int2), c("relchecks", Int2), c("relhasrules", Bool), c("relhastriggers", Bool), c("relhassubclass", Bool),
            c("relrowsecurity", Bool), c("relforcerowsecurity", Bool), c("relispopulated", Bool), c("relreplident", Char),
            c("relispartition", Bool), c("relrewrite", Oid), c("relfrozenxid", Xid), c("relminmxid", Xid), c("relacl", ACL),
            c("reloptions", TEXTS), c("relpartbound", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_attribute",
        oid: 1249,
        kind: "r",
        columns: &[
            c("attrelid", Oid), c("attname", Name), c("atttypid", Oid), c("attstattarget", Int4), c("attlen", Int2), c("attnum", Int2),
            c("attndims", Int4), c("attcacheoff", Int4), c("atttypmod", Int4), c("attbyval", Bool), c("attalign", Char), c("attstorage", Char),
            c("attcompression", Char), c("attnotnull", Bool), c("atthasdef", Bool), c("atthasmissing", Bool), c("attidentity", Char),
            c("attgenerated", Char), c("attisdropped", Bool), c("attislocal", Bool), c("attinhcount", Int4), c("attcollation", Oid),
            c("attacl", ACL), c("attoptions", TEXTS), c("attfdwoptions", TEXTS), c("attmissingval", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_type",
        oid: 1247,
        kind: "r",
        columns: &[
            c("oid", Oid), c("typname", Name), c("typnamespace", Oid), c("typowner", Oid), c("typlen", Int2), c("typbyval", Bool), c("typtype", Char),
            c("typcategory", Char), c("typispreferred", Bool), c("typisdefined", Bool), c("typdelim", Char), c("typrelid", Oid),
            c("typsubscript", RegProc), c("typelem", Oid), c("typarray", Oid), c("typinput", RegProc), c("typoutput", RegProc),
            c("typreceive", RegProc), c("typsend", RegProc), c("typmodin", RegProc), c("typmodout", RegProc), c("typanalyze", RegProc),
            c("typalign", Char), c("typstorage", Char), c("typnotnull", Bool), c("typbasetype", Oid), c("typtypmod", Int4), c("typndims", Int4),
            c("typcollation", Oid), c("typdefaultbin", Tree), c("typdefault", Text), c("typacl", ACL),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_index",
        oid: 2610,
        kind: "r",
        columns: &[
            c("indexrelid", Oid), c("indrelid", Oid), c("indnatts", Int2), c("indnkeyatts", Int2), c("indisunique", Bool),
            c("indnullsnotdistinct", Bool), c("indisprimary", Bool), c("indisexclusion", Bool), c("indimmediate", Bool),
            c("indisclustered", Bool), c("indisvalid", Bool), c("indcheckxmin", Bool), c("indisready", Bool), c("indislive", Bool),
            c("indisreplident", Bool), c("indkey", Arr(E::Int2Vector)), c("indcollation", Arr(E::OidVector)), c("indclass", Arr(E::OidVector)),
            c("indoption", Arr(E::Int2Vector)), c("indexprs", Tree), c("indpred", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_constraint",
        oid: 2606,
        kind: "r",
        columns: &[
            c("oid", Oid), c("conname", Name), c("connamespace", Oid), c("contype", Char), c("condeferrable", Bool), c("condeferred", Bool),
            c("convalidated", Bool), c("conrelid", Oid), c("contypid", Oid), c("conindid", Oid), c("conparentid", Oid), c("confrelid", Oid),
            c("confupdtype", Char), c("confdeltype", Char), c("confmatchtype", Char), c("conislocal", Bool), c("coninhcount", Int4),
            c("connoinherit", Bool), c("conkey", Arr(E::Int2)), c("confkey", Arr(E::Int2)), c("conpfeqop", OIDS), c("conppeqop", OIDS),
            c("conffeqop", OIDS), c("confdelsetcols", Arr(E::Int2)), c("conexclop", OIDS), c("conbin", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_sequence",
        oid: 2224,
        kind: "r",
        columns: &[
            c("seqrelid", Oid), c("seqtypid", Oid), c("seqstart", Int8), c("seqincrement", Int8), c("seqmax", Int8), c("seqmin", Int8), c("seqcache", Int8),
            c("seqcycle", Bool),
        ],
    },
    // Only the dependencies psql shows: a sequence owned by a column.
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_depend",
        oid: 2608,
        kind: "r",
        columns: &[c("classid", Oid), c("objid", Oid), c("objsubid", Int4), c("refclassid", Oid), c("refobjid", Oid), c("refobjsubid", Int4), c("deptype", Char)],
    },
    RelDef { schema: Schema::PgCatalog, name: "pg_attrdef", oid: 2604, kind: "r", columns: &[c("oid", Oid), c("adrelid", Oid), c("adnum", Int2), c("adbin", Tree)] },
    RelDef { schema: Schema::PgCatalog, name: "pg_am", oid: 2601, kind: "r", columns: &[c("oid", Oid), c("amname", Name), c("amhandler", RegProc), c("amtype", Char)] },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_database",
        oid: 1262,
        kind: "r",
        columns: &[
            c("oid", Oid), c("datname", Name), c("datdba", Oid), c("encoding", Int4), c("datlocprovider", Char), c("datistemplate", Bool),
            c("datallowconn", Bool), c("datconnlimit", Int4), c("datfrozenxid", Xid), c("datminmxid", Xid), c("dattablespace", Oid),
            c("datcollate", Text), c("datctype", Text), c("daticulocale", Text), c("datcollversion", Text), c("datacl", ACL),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_roles",
        oid: 12_001,
        kind: "v",
        columns: &[
            c("rolname", Name), c("rolsuper", Bool), c("rolinherit", Bool), c("rolcreaterole", Bool), c("rolcreatedb", Bool), c("rolcanlogin", Bool),
            c("rolreplication", Bool), c("rolconnlimit", Int4), c("rolpassword", Text), c("rolvaliduntil", Text), c("rolbypassrls", Bool),
            c("rolconfig", TEXTS), c("oid", Oid),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_user",
        oid: 12_002,
        kind: "v",
        columns: &[
            c("usename", Name), c("usesysid", Oid), c("usecreatedb", Bool), c("usesuper", Bool), c("userepl", Bool), c("usebypassrls", Bool),
            c("passwd", Text), c("valuntil", Text), c("useconfig", TEXTS),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_authid",
        oid: 1260,
        kind: "r",
        columns: &[
            c("oid", Oid), c("rolname", Name), c("rolsuper", Bool), c("rolinherit", Bool), c("rolcreaterole", Bool), c("rolcreatedb", Bool),
            c("rolcanlogin", Bool), c("rolreplication", Bool), c("rolbypassrls", Bool), c("rolconnlimit", Int4), c("rolpassword", Text),
            c("rolvaliduntil", Text),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_settings",
        oid: 12_003,
        kind: "v",
        columns: &[
            c("name", Text), c("setting", Text), c("unit", Text), c("category", Text), c("short_desc", Text), c("extra_desc", Text),
            c("context", Text), c("vartype", Text), c("source", Text), c("min_val", Text), c("max_val", Text), c("enumvals", TEXTS),
            c("boot_val", Text), c("reset_val", Text), c("sourcefile", Text), c("sourceline", Int4), c("pending_restart", Bool),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_auth_members",
        oid: 1261,
        kind: "r",
        columns: &[c("oid", Oid), c("roleid", Oid), c("member", Oid), c("grantor", Oid), c("admin_option", Bool)],
    },
    RelDef { schema: Schema::PgCatalog, name: "pg_description", oid: 2609, kind: "r", columns: &[c("objoid", Oid), c("classoid", Oid), c("objsubid", Int4), c("description", Text)] },
    RelDef { schema: Schema::PgCatalog, name: "pg_shdescription", oid: 2396, kind: "r", columns: &[c("objoid", Oid), c("classoid", Oid), c("description", Text)] },
    RelDef { schema: Schema::PgCatalog, name: "pg_inherits", oid: 2611, kind: "r", columns: &[c("inhrelid", Oid), c("inhparent", Oid), c("inhseqno", Int4), c("inhdetachpending", Bool)] },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_collation",
        oid: 3456,
        kind: "r",
        columns: &[
            c("oid", Oid), c("collname", Name), c("collnamespace", Oid), c("collowner", Oid), c("collprovider", Char), c("collisdeterministic", Bool),
            c("collencoding", Int4), c("collcollate", Text), c("collctype", Text), c("colliculocale", Text), c("collversion", Text),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_proc",
        oid: 1255,
        kind: "r",
        columns: &[
            c("oid", Oid), c("proname", Name), c("pronamespace", Oid), c("proowner", Oid), c("prolang", Oid), c("procost", Float4), c("prorows", Float4),
            c("provariadic", Oid), c("prosupport", RegProc), c("prokind", Char), c("prosecdef", Bool), c("proleakproof", Bool), c("proisstrict", Bool),
            c("proretset", Bool), c("provolatile", Char), c("proparallel", Char), c("pronargs", Int2), c("pronargdefaults", Int2), c("prorettype", Oid),
            c("proargtypes", Arr(E::OidVector)), c("proallargtypes", OIDS), c("proargmodes", Arr(E::Char)), c("proargnames", TEXTS),
            c("proargdefaults", Tree), c("protrftypes", OIDS), c("prosrc", Text), c("probin", Text), c("prosqlbody", Tree), c("proconfig", TEXTS),
            c("proacl", ACL),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_policy",
        oid: 3256,
        kind: "r",
        columns: &[
            c("oid", Oid), c("polname", Name), c("polrelid", Oid), c("polcmd", Char), c("polpermissive", Bool), c("polroles", OIDS), c("polqual", Tree),
            c("polwithcheck", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_statistic_ext",
        oid: 3381,
        kind: "r",
        columns: &[
            c("oid", Oid), c("stxrelid", Oid), c("stxname", Name), c("stxnamespace", Oid), c("stxowner", Oid), c("stxstattarget", Int4),
            c("stxkeys", Arr(E::Int2Vector)), c("stxkind", Arr(E::Char)), c("stxexprs", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_publication",
        oid: 6104,
        kind: "r",
        columns: &[
            c("oid", Oid), c("pubname", Name), c("pubowner", Oid), c("puballtables", Bool), c("pubinsert", Bool), c("pubupdate", Bool),
            c("pubdelete", Bool), c("pubtruncate", Bool), c("pubviaroot", Bool),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_publication_rel",
        oid: 6106,
        kind: "r",
        columns: &[c("oid", Oid), c("prpubid", Oid), c("prrelid", Oid), c("prqual", Tree), c("prattrs", Arr(E::Int2Vector))],
    },
    RelDef { schema: Schema::PgCatalog, name: "pg_publication_namespace", oid: 6237, kind: "r", columns: &[c("oid", Oid), c("pnpubid", Oid), c("pnnspid", Oid)] },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_trigger",
        oid: 2620,
        kind: "r",
        columns: &[
            c("oid", Oid), c("tgrelid", Oid), c("tgparentid", Oid), c("tgname", Name), c("tgfoid", Oid), c("tgtype", Int2), c("tgenabled", Char),
            c("tgisinternal", Bool), c("tgconstrrelid", Oid), c("tgconstrindid", Oid), c("tgconstraint", Oid), c("tgdeferrable", Bool),
            c("tginitdeferred", Bool), c("tgnargs", Int2), c("tgattr", Arr(E::Int2Vector)), c("tgargs", Text), c("tgqual", Tree),
            c("tgoldtable", Name), c("tgnewtable", Name),
        ],
    },
    RelDef { schema: Schema::PgCatalog, name: "pg_tablespace", oid: 1213, kind: "r", columns: &[c("oid", Oid), c("spcname", Name), c("spcowner", Oid), c("spcacl", ACL), c("spcoptions", TEXTS)] },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_extension",
        oid: 3079,
        kind: "r",
        columns: &[
            c("oid", Oid), c("extname", Name), c("extowner", Oid), c("extnamespace", Oid), c("extrelocatable", Bool), c("extversion", Text),
            c("extconfig", OIDS), c("extcondition", TEXTS),
        ],
    },
    RelDef { schema: Schema::PgCatalog, name: "pg_enum", oid: 3501, kind: "r", columns: &[c("oid", Oid), c("enumtypid", Oid), c("enumsortorder", Float4), c("enumlabel", Name)] },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_range",
        oid: 3541,
        kind: "r",
        columns: &[
            c("rngtypid", Oid), c("rngsubtype", Oid), c("rngmultitypid", Oid), c("rngcollation", Oid), c("rngsubopc", Oid), c("rngcanonical", RegProc),
            c("rngsubdiff", RegProc),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_tables",
        oid: 12_004,
        kind: "v",
        columns: &[
            c("schemaname", Name), c("tablename", Name), c("tableowner", Name), c("tablespace", Name), c("hasindexes", Bool), c("hasrules", Bool),
            c("hastriggers", Bool), c("rowsecurity", Bool),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_indexes",
        oid: 12_005,
        kind: "v",
        columns: &[c("schemaname", Name), c("tablename", Name), c("indexname", Name), c("tablespace", Name), c("indexdef", Text)],
    },
    RelDef {
        schema: Schema::InformationSchema,
        name: "schemata",
        oid: 13_001,
        kind: "v",
        columns: &[
            c("catalog_name", Name), c("schema_name", Name), c("schema_owner", Name), c("default_character_set_catalog", Name),
            c("default_character_set_schema", Name), c("default_character_set_name", Name), c("sql_path", Text),
        ],
    },
    RelDef {
        schema: Schema::InformationSchema,
        name: "tables",
        oid: 13_002,
        kind: "v",
        columns: &[
            c("table_catalog", Name), c("table_schema", Name), c("table_name", Name), c("table_type", Text), c("self_referencing_column_name", Name),
            c("reference_generation", Text), c("user_defined_type_catalog", Name), c("user_defined_type_schema", Name),
            c("user_defined_type_name", Name), c("is_insertable_into", Text), c("is_typed", Text), c("commit_action", Text),
        ],
    },
    RelDef {
        schema: Schema::InformationSchema,
        name: "columns",
        oid: 13_003,
        kind: "v",
        columns: &[
            c("table_catalog", Name), c("table_schema", Name), c("table_name", Name), c("column_name", Name), c("ordinal_position", Int4),
            c("column_default", Text), c("is_nullable", Text), c("data_type", Text), c("character_maximum_length", Int4),
            c("character_octet_length", Int4), c("numeric_precision", Int4), c("numeric_precision_radix", Int4), c("numeric_scale", Int4),
            c("datetime_precision", Int4), c("interval_type", Text), c("interval_precision", Int4), c("character_set_catalog", Name),
            c("character_set_schema", Name), c("character_set_name", Name), c("collation_catalog", Name), c("collation_schema", Name),
            c("collation_name", Name), c("domain_catalog", Name), c("domain_schema", Name), c("domain_name", Name), c("udt_catalog", Name),
            c("udt_schema", Name), c("udt_name", Name), c("scope_catalog", Name), c("scope_schema", Name), c("scope_name", Name),
            c("maximum_cardinality", Int4), c("dtd_identifier", Name), c("is_self_referencing", Text), c("is_identity", Text),
            c("identity_generation", Text), c("identity_start", Text), c("identity_increment", Text), c("identity_maximum", Text),
            c("identity_minimum", Text), c("identity_cycle", Text), c("is_generated", Text), c("generation_expression", Text),
            c("is_updatable", Text),
        ],
    },
    RelDef {
        schema: Schema::InformationSchema,
        name: "table_constraints",
        oid: 13_004,
        kind: "v",
        columns: &[
            c("constraint_catalog", Name), c("constraint_schema", Name), c("constraint_name", Name), c("table_catalog", Name), c("table_schema", Name),
            c("table_name", Name), c("constraint_type", Text), c("is_deferrable", Text), c("initially_deferred", Text), c("enforced", Text),
            c("nulls_distinct", Text),
        ],
    },
    RelDef {
        schema: Schema::InformationSchema,
        name: "key_column_usage",
        oid: 13_005,
        kind: "v",
        columns: &[
            c("constraint_catalog", Name), c("constraint_schema", Name), c("constraint_name", Name), c("table_catalog", Name), c("table_schema", Name),
            c("table_name", Name), c("column_name", Name), c("ordinal_position", Int4), c("position_in_unique_constraint", Int4),
        ],
    },
];
