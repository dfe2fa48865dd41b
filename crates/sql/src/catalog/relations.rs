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
    Float8,
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
            T::Float8 => DataType::Float8,
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
            T::Float8 => 701,
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

impl SysColumn {
    const fn new(name: &'static str, ty: T) -> SysColumn {
        SysColumn { name, ty }
    }
}

type Col = SysColumn;

use Elem as E;
use T::*;

const OIDS: T = Arr(E::Oid);
const TEXTS: T = Arr(E::Text);
const ACL: T = Arr(E::AclItem);

pub static RELATIONS: &[RelDef] = &[
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_namespace",
        oid: 2615,
        kind: "r",
        columns: &[Col::new("oid", Oid), Col::new("nspname", Name), Col::new("nspowner", Oid), Col::new("nspacl", ACL)],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_class",
        oid: 1259,
        kind: "r",
        columns: &[
            Col::new("oid", Oid), Col::new("relname", Name), Col::new("relnamespace", Oid), Col::new("reltype", Oid), Col::new("reloftype", Oid),
            Col::new("relowner", Oid), Col::new("relam", Oid), Col::new("relfilenode", Oid), Col::new("reltablespace", Oid),
            Col::new("relpages", Int4), Col::new("reltuples", Float4), Col::new("relallvisible", Int4), Col::new("reltoastrelid", Oid),
            Col::new("relhasindex", Bool), Col::new("relisshared", Bool), Col::new("relpersistence", Char), Col::new("relkind", Char),
            Col::new("relnatts", Int2), Col::new("relchecks", Int2), Col::new("relhasrules", Bool), Col::new("relhastriggers", Bool),
            Col::new("relhassubclass", Bool), Col::new("relrowsecurity", Bool), Col::new("relforcerowsecurity", Bool),
            Col::new("relispopulated", Bool), Col::new("relreplident", Char), Col::new("relispartition", Bool), Col::new("relrewrite", Oid),
            Col::new("relfrozenxid", Xid), Col::new("relminmxid", Xid), Col::new("relacl", ACL), Col::new("reloptions", TEXTS),
            Col::new("relpartbound", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_attribute",
        oid: 1249,
        kind: "r",
        columns: &[
            Col::new("attrelid", Oid), Col::new("attname", Name), Col::new("atttypid", Oid), Col::new("attstattarget", Int4),
            Col::new("attlen", Int2), Col::new("attnum", Int2), Col::new("attndims", Int4), Col::new("attcacheoff", Int4),
            Col::new("atttypmod", Int4), Col::new("attbyval", Bool), Col::new("attalign", Char), Col::new("attstorage", Char),
            Col::new("attcompression", Char), Col::new("attnotnull", Bool), Col::new("atthasdef", Bool), Col::new("atthasmissing", Bool),
            Col::new("attidentity", Char), Col::new("attgenerated", Char), Col::new("attisdropped", Bool), Col::new("attislocal", Bool),
            Col::new("attinhcount", Int4), Col::new("attcollation", Oid), Col::new("attacl", ACL), Col::new("attoptions", TEXTS),
            Col::new("attfdwoptions", TEXTS), Col::new("attmissingval", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_type",
        oid: 1247,
        kind: "r",
        columns: &[
            Col::new("oid", Oid), Col::new("typname", Name), Col::new("typnamespace", Oid), Col::new("typowner", Oid), Col::new("typlen", Int2),
            Col::new("typbyval", Bool), Col::new("typtype", Char), Col::new("typcategory", Char), Col::new("typispreferred", Bool),
            Col::new("typisdefined", Bool), Col::new("typdelim", Char), Col::new("typrelid", Oid), Col::new("typsubscript", RegProc),
            Col::new("typelem", Oid), Col::new("typarray", Oid), Col::new("typinput", RegProc), Col::new("typoutput", RegProc),
            Col::new("typreceive", RegProc), Col::new("typsend", RegProc), Col::new("typmodin", RegProc), Col::new("typmodout", RegProc),
            Col::new("typanalyze", RegProc), Col::new("typalign", Char), Col::new("typstorage", Char), Col::new("typnotnull", Bool),
            Col::new("typbasetype", Oid), Col::new("typtypmod", Int4), Col::new("typndims", Int4), Col::new("typcollation", Oid),
            Col::new("typdefaultbin", Tree), Col::new("typdefault", Text), Col::new("typacl", ACL),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_index",
        oid: 2610,
        kind: "r",
        columns: &[
            Col::new("indexrelid", Oid), Col::new("indrelid", Oid), Col::new("indnatts", Int2), Col::new("indnkeyatts", Int2),
            Col::new("indisunique", Bool), Col::new("indnullsnotdistinct", Bool), Col::new("indisprimary", Bool), Col::new("indisexclusion", Bool),
            Col::new("indimmediate", Bool), Col::new("indisclustered", Bool), Col::new("indisvalid", Bool), Col::new("indcheckxmin", Bool),
            Col::new("indisready", Bool), Col::new("indislive", Bool), Col::new("indisreplident", Bool), Col::new("indkey", Arr(E::Int2Vector)),
            Col::new("indcollation", Arr(E::OidVector)), Col::new("indclass", Arr(E::OidVector)), Col::new("indoption", Arr(E::Int2Vector)),
            Col::new("indexprs", Tree), Col::new("indpred", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_constraint",
        oid: 2606,
        kind: "r",
        columns: &[
            Col::new("oid", Oid), Col::new("conname", Name), Col::new("connamespace", Oid), Col::new("contype", Char),
            Col::new("condeferrable", Bool), Col::new("condeferred", Bool), Col::new("convalidated", Bool), Col::new("conrelid", Oid),
            Col::new("contypid", Oid), Col::new("conindid", Oid), Col::new("conparentid", Oid), Col::new("confrelid", Oid),
            Col::new("confupdtype", Char), Col::new("confdeltype", Char), Col::new("confmatchtype", Char), Col::new("conislocal", Bool),
            Col::new("coninhcount", Int4), Col::new("connoinherit", Bool), Col::new("conkey", Arr(E::Int2)), Col::new("confkey", Arr(E::Int2)),
            Col::new("conpfeqop", OIDS), Col::new("conppeqop", OIDS), Col::new("conffeqop", OIDS), Col::new("confdelsetcols", Arr(E::Int2)),
            Col::new("conexclop", OIDS), Col::new("conbin", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_sequence",
        oid: 2224,
        kind: "r",
        columns: &[
            Col::new("seqrelid", Oid), Col::new("seqtypid", Oid), Col::new("seqstart", Int8), Col::new("seqincrement", Int8),
            Col::new("seqmax", Int8), Col::new("seqmin", Int8), Col::new("seqcache", Int8), Col::new("seqcycle", Bool),
        ],
    },
    // Only the dependencies psql shows: a sequence owned by a column.
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_depend",
        oid: 2608,
        kind: "r",
        columns: &[
            Col::new("classid", Oid), Col::new("objid", Oid), Col::new("objsubid", Int4), Col::new("refclassid", Oid), Col::new("refobjid", Oid),
            Col::new("refobjsubid", Int4), Col::new("deptype", Char),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_attrdef",
        oid: 2604,
        kind: "r",
        columns: &[Col::new("oid", Oid), Col::new("adrelid", Oid), Col::new("adnum", Int2), Col::new("adbin", Tree)],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_am",
        oid: 2601,
        kind: "r",
        columns: &[Col::new("oid", Oid), Col::new("amname", Name), Col::new("amhandler", RegProc), Col::new("amtype", Char)],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_database",
        oid: 1262,
        kind: "r",
        columns: &[
            Col::new("oid", Oid), Col::new("datname", Name), Col::new("datdba", Oid), Col::new("encoding", Int4), Col::new("datlocprovider", Char),
            Col::new("datistemplate", Bool), Col::new("datallowconn", Bool), Col::new("datconnlimit", Int4), Col::new("datfrozenxid", Xid),
            Col::new("datminmxid", Xid), Col::new("dattablespace", Oid), Col::new("datcollate", Text), Col::new("datctype", Text),
            Col::new("daticulocale", Text), Col::new("datcollversion", Text), Col::new("datacl", ACL),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_roles",
        oid: 12_001,
        kind: "v",
        columns: &[
            Col::new("rolname", Name), Col::new("rolsuper", Bool), Col::new("rolinherit", Bool), Col::new("rolcreaterole", Bool),
            Col::new("rolcreatedb", Bool), Col::new("rolcanlogin", Bool), Col::new("rolreplication", Bool), Col::new("rolconnlimit", Int4),
            Col::new("rolpassword", Text), Col::new("rolvaliduntil", Text), Col::new("rolbypassrls", Bool), Col::new("rolconfig", TEXTS),
            Col::new("oid", Oid),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_user",
        oid: 12_002,
        kind: "v",
        columns: &[
            Col::new("usename", Name), Col::new("usesysid", Oid), Col::new("usecreatedb", Bool), Col::new("usesuper", Bool),
            Col::new("userepl", Bool), Col::new("usebypassrls", Bool), Col::new("passwd", Text), Col::new("valuntil", Text),
            Col::new("useconfig", TEXTS),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_authid",
        oid: 1260,
        kind: "r",
        columns: &[
            Col::new("oid", Oid), Col::new("rolname", Name), Col::new("rolsuper", Bool), Col::new("rolinherit", Bool),
            Col::new("rolcreaterole", Bool), Col::new("rolcreatedb", Bool), Col::new("rolcanlogin", Bool), Col::new("rolreplication", Bool),
            Col::new("rolbypassrls", Bool), Col::new("rolconnlimit", Int4), Col::new("rolpassword", Text), Col::new("rolvaliduntil", Text),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_settings",
        oid: 12_003,
        kind: "v",
        columns: &[
            Col::new("name", Text), Col::new("setting", Text), Col::new("unit", Text), Col::new("category", Text), Col::new("short_desc", Text),
            Col::new("extra_desc", Text), Col::new("context", Text), Col::new("vartype", Text), Col::new("source", Text), Col::new("min_val", Text),
            Col::new("max_val", Text), Col::new("enumvals", TEXTS), Col::new("boot_val", Text), Col::new("reset_val", Text),
            Col::new("sourcefile", Text), Col::new("sourceline", Int4), Col::new("pending_restart", Bool),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_auth_members",
        oid: 1261,
        kind: "r",
        columns: &[Col::new("oid", Oid), Col::new("roleid", Oid), Col::new("member", Oid), Col::new("grantor", Oid), Col::new("admin_option", Bool)],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_description",
        oid: 2609,
        kind: "r",
        columns: &[Col::new("objoid", Oid), Col::new("classoid", Oid), Col::new("objsubid", Int4), Col::new("description", Text)],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_shdescription",
        oid: 2396,
        kind: "r",
        columns: &[Col::new("objoid", Oid), Col::new("classoid", Oid), Col::new("description", Text)],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_inherits",
        oid: 2611,
        kind: "r",
        columns: &[Col::new("inhrelid", Oid), Col::new("inhparent", Oid), Col::new("inhseqno", Int4), Col::new("inhdetachpending", Bool)],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_collation",
        oid: 3456,
        kind: "r",
        columns: &[
            Col::new("oid", Oid), Col::new("collname", Name), Col::new("collnamespace", Oid), Col::new("collowner", Oid),
            Col::new("collprovider", Char), Col::new("collisdeterministic", Bool), Col::new("collencoding", Int4), Col::new("collcollate", Text),
            Col::new("collctype", Text), Col::new("colliculocale", Text), Col::new("collversion", Text),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_proc",
        oid: 1255,
        kind: "r",
        columns: &[
            Col::new("oid", Oid), Col::new("proname", Name), Col::new("pronamespace", Oid), Col::new("proowner", Oid), Col::new("prolang", Oid),
            Col::new("procost", Float4), Col::new("prorows", Float4), Col::new("provariadic", Oid), Col::new("prosupport", RegProc),
            Col::new("prokind", Char), Col::new("prosecdef", Bool), Col::new("proleakproof", Bool), Col::new("proisstrict", Bool),
            Col::new("proretset", Bool), Col::new("provolatile", Char), Col::new("proparallel", Char), Col::new("pronargs", Int2),
            Col::new("pronargdefaults", Int2), Col::new("prorettype", Oid), Col::new("proargtypes", Arr(E::OidVector)),
            Col::new("proallargtypes", OIDS), Col::new("proargmodes", Arr(E::Char)), Col::new("proargnames", TEXTS), Col::new("proargdefaults", Tree),
            Col::new("protrftypes", OIDS), Col::new("prosrc", Text), Col::new("probin", Text), Col::new("prosqlbody", Tree),
            Col::new("proconfig", TEXTS), Col::new("proacl", ACL),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_policy",
        oid: 3256,
        kind: "r",
        columns: &[
            Col::new("oid", Oid), Col::new("polname", Name), Col::new("polrelid", Oid), Col::new("polcmd", Char), Col::new("polpermissive", Bool),
            Col::new("polroles", OIDS), Col::new("polqual", Tree), Col::new("polwithcheck", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_statistic_ext",
        oid: 3381,
        kind: "r",
        columns: &[
            Col::new("oid", Oid), Col::new("stxrelid", Oid), Col::new("stxname", Name), Col::new("stxnamespace", Oid), Col::new("stxowner", Oid),
            Col::new("stxstattarget", Int4), Col::new("stxkeys", Arr(E::Int2Vector)), Col::new("stxkind", Arr(E::Char)), Col::new("stxexprs", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_publication",
        oid: 6104,
        kind: "r",
        columns: &[
            Col::new("oid", Oid), Col::new("pubname", Name), Col::new("pubowner", Oid), Col::new("puballtables", Bool), Col::new("pubinsert", Bool),
            Col::new("pubupdate", Bool), Col::new("pubdelete", Bool), Col::new("pubtruncate", Bool), Col::new("pubviaroot", Bool),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_publication_rel",
        oid: 6106,
        kind: "r",
        columns: &[
            Col::new("oid", Oid), Col::new("prpubid", Oid), Col::new("prrelid", Oid), Col::new("prqual", Tree),
            Col::new("prattrs", Arr(E::Int2Vector)),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_publication_namespace",
        oid: 6237,
        kind: "r",
        columns: &[Col::new("oid", Oid), Col::new("pnpubid", Oid), Col::new("pnnspid", Oid)],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_rewrite",
        oid: 2618,
        kind: "r",
        columns: &[
            Col::new("oid", Oid), Col::new("rulename", Name), Col::new("ev_class", Oid), Col::new("ev_type", Char), Col::new("ev_enabled", Char),
            Col::new("is_instead", Bool), Col::new("ev_qual", Tree), Col::new("ev_action", Tree),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_trigger",
        oid: 2620,
        kind: "r",
        columns: &[
            Col::new("oid", Oid), Col::new("tgrelid", Oid), Col::new("tgparentid", Oid), Col::new("tgname", Name), Col::new("tgfoid", Oid),
            Col::new("tgtype", Int2), Col::new("tgenabled", Char), Col::new("tgisinternal", Bool), Col::new("tgconstrrelid", Oid),
            Col::new("tgconstrindid", Oid), Col::new("tgconstraint", Oid), Col::new("tgdeferrable", Bool), Col::new("tginitdeferred", Bool),
            Col::new("tgnargs", Int2), Col::new("tgattr", Arr(E::Int2Vector)), Col::new("tgargs", Text), Col::new("tgqual", Tree),
            Col::new("tgoldtable", Name), Col::new("tgnewtable", Name),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_tablespace",
        oid: 1213,
        kind: "r",
        columns: &[
            Col::new("oid", Oid), Col::new("spcname", Name), Col::new("spcowner", Oid), Col::new("spcacl", ACL), Col::new("spcoptions", TEXTS),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_extension",
        oid: 3079,
        kind: "r",
        columns: &[
            Col::new("oid", Oid), Col::new("extname", Name), Col::new("extowner", Oid), Col::new("extnamespace", Oid),
            Col::new("extrelocatable", Bool), Col::new("extversion", Text), Col::new("extconfig", OIDS), Col::new("extcondition", TEXTS),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_enum",
        oid: 3501,
        kind: "r",
        columns: &[Col::new("oid", Oid), Col::new("enumtypid", Oid), Col::new("enumsortorder", Float4), Col::new("enumlabel", Name)],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_range",
        oid: 3541,
        kind: "r",
        columns: &[
            Col::new("rngtypid", Oid), Col::new("rngsubtype", Oid), Col::new("rngmultitypid", Oid), Col::new("rngcollation", Oid),
            Col::new("rngsubopc", Oid), Col::new("rngcanonical", RegProc), Col::new("rngsubdiff", RegProc),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_tables",
        oid: 12_004,
        kind: "v",
        columns: &[
            Col::new("schemaname", Name), Col::new("tablename", Name), Col::new("tableowner", Name), Col::new("tablespace", Name),
            Col::new("hasindexes", Bool), Col::new("hasrules", Bool), Col::new("hastriggers", Bool), Col::new("rowsecurity", Bool),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_indexes",
        oid: 12_005,
        kind: "v",
        columns: &[
            Col::new("schemaname", Name), Col::new("tablename", Name), Col::new("indexname", Name), Col::new("tablespace", Name),
            Col::new("indexdef", Text),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pg_views",
        oid: 12_006,
        kind: "v",
        columns: &[Col::new("schemaname", Name), Col::new("viewname", Name), Col::new("viewowner", Name), Col::new("definition", Text)],
    },
    RelDef {
        schema: Schema::InformationSchema,
        name: "views",
        oid: 13_006,
        kind: "v",
        columns: &[
            Col::new("table_catalog", Name), Col::new("table_schema", Name), Col::new("table_name", Name), Col::new("view_definition", Text),
            Col::new("check_option", Text), Col::new("is_updatable", Text), Col::new("is_insertable_into", Text),
            Col::new("is_trigger_updatable", Text), Col::new("is_trigger_deletable", Text), Col::new("is_trigger_insertable_into", Text),
        ],
    },
    RelDef {
        schema: Schema::InformationSchema,
        name: "schemata",
        oid: 13_001,
        kind: "v",
        columns: &[
            Col::new("catalog_name", Name), Col::new("schema_name", Name), Col::new("schema_owner", Name),
            Col::new("default_character_set_catalog", Name), Col::new("default_character_set_schema", Name),
            Col::new("default_character_set_name", Name), Col::new("sql_path", Text),
        ],
    },
    RelDef {
        schema: Schema::InformationSchema,
        name: "tables",
        oid: 13_002,
        kind: "v",
        columns: &[
            Col::new("table_catalog", Name), Col::new("table_schema", Name), Col::new("table_name", Name), Col::new("table_type", Text),
            Col::new("self_referencing_column_name", Name), Col::new("reference_generation", Text), Col::new("user_defined_type_catalog", Name),
            Col::new("user_defined_type_schema", Name), Col::new("user_defined_type_name", Name), Col::new("is_insertable_into", Text),
            Col::new("is_typed", Text), Col::new("commit_action", Text),
        ],
    },
    RelDef {
        schema: Schema::InformationSchema,
        name: "columns",
        oid: 13_003,
        kind: "v",
        columns: &[
            Col::new("table_catalog", Name), Col::new("table_schema", Name), Col::new("table_name", Name), Col::new("column_name", Name),
            Col::new("ordinal_position", Int4), Col::new("column_default", Text), Col::new("is_nullable", Text), Col::new("data_type", Text),
            Col::new("character_maximum_length", Int4), Col::new("character_octet_length", Int4), Col::new("numeric_precision", Int4),
            Col::new("numeric_precision_radix", Int4), Col::new("numeric_scale", Int4), Col::new("datetime_precision", Int4),
            Col::new("interval_type", Text), Col::new("interval_precision", Int4), Col::new("character_set_catalog", Name),
            Col::new("character_set_schema", Name), Col::new("character_set_name", Name), Col::new("collation_catalog", Name),
            Col::new("collation_schema", Name), Col::new("collation_name", Name), Col::new("domain_catalog", Name), Col::new("domain_schema", Name),
            Col::new("domain_name", Name), Col::new("udt_catalog", Name), Col::new("udt_schema", Name), Col::new("udt_name", Name),
            Col::new("scope_catalog", Name), Col::new("scope_schema", Name), Col::new("scope_name", Name), Col::new("maximum_cardinality", Int4),
            Col::new("dtd_identifier", Name), Col::new("is_self_referencing", Text), Col::new("is_identity", Text),
            Col::new("identity_generation", Text), Col::new("identity_start", Text), Col::new("identity_increment", Text),
            Col::new("identity_maximum", Text), Col::new("identity_minimum", Text), Col::new("identity_cycle", Text), Col::new("is_generated", Text),
            Col::new("generation_expression", Text), Col::new("is_updatable", Text),
        ],
    },
    RelDef {
        schema: Schema::InformationSchema,
        name: "table_constraints",
        oid: 13_004,
        kind: "v",
        columns: &[
            Col::new("constraint_catalog", Name), Col::new("constraint_schema", Name), Col::new("constraint_name", Name),
            Col::new("table_catalog", Name), Col::new("table_schema", Name), Col::new("table_name", Name), Col::new("constraint_type", Text),
            Col::new("is_deferrable", Text), Col::new("initially_deferred", Text), Col::new("enforced", Text), Col::new("nulls_distinct", Text),
        ],
    },
    RelDef {
        schema: Schema::InformationSchema,
        name: "key_column_usage",
        oid: 13_005,
        kind: "v",
        columns: &[
            Col::new("constraint_catalog", Name), Col::new("constraint_schema", Name), Col::new("constraint_name", Name),
            Col::new("table_catalog", Name), Col::new("table_schema", Name), Col::new("table_name", Name), Col::new("column_name", Name),
            Col::new("ordinal_position", Int4), Col::new("position_in_unique_constraint", Int4),
        ],
    },
    // pgtier's own views of its cache groups (catalog/cache_views.rs): one
    // column per field of pgtier_cache's GroupInfo, TableInfo, GroupStats,
    // PropagationInfo.
    RelDef {
        schema: Schema::PgCatalog,
        name: "pgtier_cache_groups",
        oid: 12_101,
        kind: "v",
        columns: &[
            Col::new("name", Text), Col::new("kind", Text), Col::new("dynamic", Bool), Col::new("root_table", Text), Col::new("root_predicate", Text),
            Col::new("aging", Text), Col::new("keep", Bool), Col::new("memory_budget", Int8),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pgtier_cache_tables",
        oid: 12_102,
        kind: "v",
        columns: &[
            Col::new("group", Text), Col::new("table", Text), Col::new("source", Text), Col::new("parent", Text), Col::new("rows", Int8),
            Col::new("memory_bytes", Int8),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pgtier_cache_stats",
        oid: 12_103,
        kind: "v",
        columns: &[
            Col::new("group", Text), Col::new("instances", Int8), Col::new("rows", Int8), Col::new("memory_bytes", Int8),
            Col::new("loaded_instances", Int8), Col::new("unloaded_instances", Int8), Col::new("refreshed_instances", Int8),
            Col::new("evicted_instances", Int8), Col::new("dynamic_loads", Int8), Col::new("dynamic_absent", Int8),
            Col::new("miss_latency_avg_us", Float8), Col::new("miss_latency_max_us", Int8),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pgtier_cache_propagation",
        oid: 12_104,
        kind: "v",
        columns: &[
            Col::new("connected", Bool), Col::new("applied_txns", Int8), Col::new("applied_statements", Int8), Col::new("batches", Int8),
            Col::new("errors", Int8), Col::new("retries", Int8), Col::new("backlog_bytes", Int8), Col::new("lag_ms", Float8),
            Col::new("lag_p50_ms", Float8), Col::new("lag_p99_ms", Float8), Col::new("lanes", Int8), Col::new("last_error", Text),
            Col::new("state", Text), Col::new("node", Text), Col::new("incarnation", Text), Col::new("held_groups", Text),
            Col::new("stalls", Int8), Col::new("marked_instances", Int8),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pgtier_cache_lanes",
        oid: 12_107,
        kind: "v",
        columns: &[
            Col::new("lane", Text), Col::new("state", Text), Col::new("queued_txns", Int8), Col::new("queued_bytes", Int8),
            Col::new("applied_txns", Int8), Col::new("waiting_ms", Float8), Col::new("backend_pid", Int4), Col::new("last_error", Text),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pgtier_cache_swt",
        oid: 12_105,
        kind: "v",
        columns: &[
            Col::new("commits", Int8), Col::new("refused", Int8), Col::new("in_doubt_resolved", Int8), Col::new("repairs", Int8),
            Col::new("backend_p50_ms", Float8), Col::new("backend_p99_ms", Float8), Col::new("last_error", Text),
            Col::new("drifted_groups", Text),
        ],
    },
    RelDef {
        schema: Schema::PgCatalog,
        name: "pgtier_cache_autorefresh",
        oid: 12_106,
        kind: "v",
        columns: &[
            Col::new("group", Text), Col::new("slot", Text), Col::new("state", Text), Col::new("connected", Bool),
            Col::new("applied_txns", Int8), Col::new("applied_changes", Int8), Col::new("skipped_changes", Int8),
            Col::new("own_txns_skipped", Int8), Col::new("lag_bytes", Int8), Col::new("lag_ms", Float8),
            Col::new("lag_p50_ms", Float8), Col::new("lag_p99_ms", Float8), Col::new("retained_wal_bytes", Int8),
            Col::new("resnapshots", Int8), Col::new("errors", Int8), Col::new("last_error", Text),
        ],
    },
];
