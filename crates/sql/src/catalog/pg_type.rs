//! pg_type: the builtin types (and their array types) by OID and by name,
//! and what the catalogs say about an engine column type.

use pgtier_engine::{DataType, Value};

use super::rows::text;
use super::{DEFAULT_COLLATION, NS_PG_CATALOG, OWNER_OID};

/// A builtin type as pg_type describes it.
#[derive(Clone, Copy, Debug)]
pub struct BuiltinType {
    pub oid: i64,
    pub name: &'static str,
    /// `typlen`: bytes, or -1 (varlena) / -2 (C string).
    pub len: i16,
    pub byval: bool,
    /// `typcategory`.
    pub category: &'static str,
    pub align: &'static str,
    pub storage: &'static str,
    /// Its array type (0: none).
    pub array_oid: i64,
    /// The element type of a vector type (0: none).
    pub elem_oid: i64,
    pub collation: i64,
}

impl BuiltinType {
    /// Fields in pg_type's column order (one line a type in [`BUILTIN_TYPES`]).
    #[allow(clippy::too_many_arguments)]
    const fn new(
        oid: i64,
        name: &'static str,
        len: i16,
        byval: bool,
        category: &'static str,
        align: &'static str,
        storage: &'static str,
        array_oid: i64,
        elem_oid: i64,
        collation: i64,
    ) -> BuiltinType {
        BuiltinType { oid, name, len, byval, category, align, storage, array_oid, elem_oid, collation }
    }
}

pub static BUILTIN_TYPES: &[BuiltinType] = &[
    BuiltinType::new(16, "bool", 1, true, "B", "c", "p", 1000, 0, 0),
    BuiltinType::new(17, "bytea", -1, false, "U", "i", "x", 1001, 0, 0),
    BuiltinType::new(18, "char", 1, true, "Z", "c", "p", 1002, 0, 0),
    BuiltinType::new(19, "name", 64, false, "S", "c", "p", 1003, 18, 950),
    BuiltinType::new(20, "int8", 8, true, "N", "d", "p", 1016, 0, 0),
    BuiltinType::new(21, "int2", 2, true, "N", "s", "p", 1005, 0, 0),
    BuiltinType::new(22, "int2vector", -1, false, "A", "i", "p", 1006, 21, 0),
    BuiltinType::new(23, "int4", 4, true, "N", "i", "p", 1007, 0, 0),
    BuiltinType::new(24, "regproc", 4, true, "N", "i", "p", 1008, 0, 0),
    BuiltinType::new(25, "text", -1, false, "S", "i", "x", 1009, 0, DEFAULT_COLLATION),
    BuiltinType::new(26, "oid", 4, true, "N", "i", "p", 1028, 0, 0),
    BuiltinType::new(28, "xid", 4, true, "U", "i", "p", 1011, 0, 0),
    BuiltinType::new(30, "oidvector", -1, false, "A", "i", "p", 1013, 26, 0),
    BuiltinType::new(114, "json", -1, false, "U", "i", "x", 199, 0, 0),
    BuiltinType::new(194, "pg_node_tree", -1, false, "Z", "i", "x", 0, 0, DEFAULT_COLLATION),
    BuiltinType::new(700, "float4", 4, true, "N", "i", "p", 1021, 0, 0),
    BuiltinType::new(701, "float8", 8, true, "N", "d", "p", 1022, 0, 0),
    BuiltinType::new(705, "unknown", -2, false, "X", "c", "p", 0, 0, 0),
    BuiltinType::new(1033, "aclitem", 12, false, "U", "i", "p", 1034, 0, 0),
    BuiltinType::new(1042, "bpchar", -1, false, "S", "i", "x", 1014, 0, DEFAULT_COLLATION),
    BuiltinType::new(1043, "varchar", -1, false, "S", "i", "x", 1015, 0, DEFAULT_COLLATION),
    BuiltinType::new(1082, "date", 4, true, "D", "i", "p", 1182, 0, 0),
    BuiltinType::new(1083, "time", 8, true, "D", "d", "p", 1183, 0, 0),
    BuiltinType::new(1114, "timestamp", 8, true, "D", "d", "p", 1115, 0, 0),
    BuiltinType::new(1184, "timestamptz", 8, true, "D", "d", "p", 1185, 0, 0),
    BuiltinType::new(1186, "interval", 16, false, "T", "d", "p", 1187, 0, 0),
    BuiltinType::new(1266, "timetz", 12, false, "D", "d", "p", 1270, 0, 0),
    BuiltinType::new(1700, "numeric", -1, false, "N", "i", "m", 1231, 0, 0),
    BuiltinType::new(2205, "regclass", 4, true, "N", "i", "p", 2210, 0, 0),
    BuiltinType::new(2206, "regtype", 4, true, "N", "i", "p", 2211, 0, 0),
    BuiltinType::new(2249, "record", -1, false, "P", "d", "x", 2287, 0, 0),
    BuiltinType::new(2278, "void", 4, true, "P", "i", "p", 0, 0, 0),
    BuiltinType::new(2950, "uuid", 16, false, "U", "c", "p", 2951, 0, 0),
    BuiltinType::new(3614, "tsvector", -1, false, "U", "i", "x", 3643, 0, 0),
    BuiltinType::new(3615, "tsquery", -1, false, "U", "i", "x", 3645, 0, 0),
    BuiltinType::new(3802, "jsonb", -1, false, "U", "i", "x", 3807, 0, 0),
    BuiltinType::new(4089, "regnamespace", 4, true, "N", "i", "p", 4090, 0, 0),
    BuiltinType::new(4096, "regrole", 4, true, "N", "i", "p", 4097, 0, 0),
];

/// A builtin type, or the array type of one.
#[derive(Clone, Copy, Debug)]
pub struct TypeMatch {
    /// The builtin type (the element type when `is_array`).
    pub base: &'static BuiltinType,
    pub is_array: bool,
}

/// Builtin types plus their array types.
pub fn type_by_oid(oid: i64) -> Option<TypeMatch> {
    for base in BUILTIN_TYPES {
        if base.oid == oid {
            return Some(TypeMatch { base, is_array: false });
        }
        if base.array_oid == oid {
            return Some(TypeMatch { base, is_array: true });
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
        "time with time zone" => "timetz",
        "decimal" => "numeric",
        "\"char\"" => "char",
        other => other,
    };
    if let Some(elem) = canonical.strip_suffix("[]") {
        let e = type_by_name(elem)?;
        return BUILTIN_TYPES.iter().find(|r| r.oid == e).map(|r| r.array_oid).filter(|a| *a != 0);
    }
    for row in BUILTIN_TYPES {
        if row.name == canonical {
            return Some(row.oid);
        }
        if row.array_oid != 0 && canonical.strip_prefix('_') == Some(row.name) {
            return Some(row.array_oid);
        }
    }
    None
}

/// PostgreSQL's name of an I/O function of a type (`int4in`, `date_out`).
fn io_func(name: &str, which: &str) -> String {
    let underscored = [
        "json",
        "date",
        "time",
        "timetz",
        "timestamp",
        "timestamptz",
        "interval",
        "numeric",
        "uuid",
        "jsonb",
        "record",
        "void",
    ];
    if underscored.contains(&name) { format!("{name}_{which}") } else { format!("{name}{which}") }
}

/// The rows of pg_type.
pub(super) fn type_rows(out: &mut Vec<Value>) {
    for row in BUILTIN_TYPES {
        let BuiltinType {
            oid,
            name,
            len,
            byval,
            category: cat,
            align,
            storage,
            array_oid: array,
            elem_oid: elem,
            collation: coll,
        } = *row;
        let ptype = matches!(cat, "P" | "X");
        let typmodin = match name {
            "varchar" => "varchartypmodin",
            "bpchar" => "bpchartypmodin",
            "numeric" => "numerictypmodin",
            "timestamp" => "timestamptypmodin",
            "timestamptz" => "timestamptztypmodin",
            "time" => "timetypmodin",
            "timetz" => "timetztypmodin",
            "interval" => "intervaltypmodin",
            _ => "-",
        };
        let typmodout = if typmodin == "-" { "-".to_owned() } else { typmodin.replace("in", "out") };
        let preferred = matches!(name, "bool" | "text" | "oid" | "float8" | "timestamptz" | "interval");
        push_type(
            out,
            oid,
            name,
            len,
            byval,
            if ptype { "p" } else { "b" },
            cat,
            preferred,
            elem,
            array,
            &io_func(name, "in"),
            &io_func(name, "out"),
            &io_func(name, "recv"),
            &io_func(name, "send"),
            typmodin,
            &typmodout,
            align,
            storage,
            coll,
            if elem != 0 { "raw_array_subscript_handler" } else { "-" },
        );
        if array != 0 {
            let arr_name = format!("_{name}");
            let arr_align = if align == "d" { "d" } else { "i" };
            push_type(
                out,
                array,
                &arr_name,
                -1,
                false,
                "b",
                "A",
                false,
                oid,
                0,
                "array_in",
                "array_out",
                "array_recv",
                "array_send",
                typmodin,
                &typmodout,
                arr_align,
                "x",
                coll,
                "array_subscript_handler",
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn push_type(
    out: &mut Vec<Value>,
    oid: i64,
    name: &str,
    len: i16,
    byval: bool,
    typtype: &str,
    cat: &str,
    preferred: bool,
    elem: i64,
    array: i64,
    input: &str,
    output: &str,
    recv: &str,
    send: &str,
    modin: &str,
    modout: &str,
    align: &str,
    storage: &str,
    coll: i64,
    subscript: &str,
) {
    out.extend([
        Value::Int8(oid),
        text(name),
        Value::Int8(NS_PG_CATALOG),
        Value::Int8(OWNER_OID),
        Value::Int2(len),
        Value::Bool(byval),
        text(typtype),
        text(cat),
        Value::Bool(preferred),
        Value::Bool(true),
        text(","),
        Value::Int8(0),
        text(subscript),
        Value::Int8(elem),
        Value::Int8(array),
        text(input),
        text(output),
        text(recv),
        text(send),
        text(modin),
        text(modout),
        text("-"),
        text(align),
        text(storage),
        Value::Bool(false),
        Value::Int8(0),
        Value::Int4(-1),
        Value::Int4(0),
        Value::Int8(coll),
        Value::Null,
        Value::Null,
        Value::Null,
    ]);
}

/// What pg_type and pg_attribute say about a column of some type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnTypeInfo {
    pub type_oid: i64,
    /// `atttypmod` (-1: none).
    pub typmod: i32,
    /// `typlen`.
    pub len: i16,
    pub byval: bool,
    pub align: &'static str,
    pub storage: &'static str,
    pub collation: i64,
}

const fn info(
    type_oid: i64,
    typmod: i32,
    len: i16,
    byval: bool,
    align: &'static str,
    storage: &'static str,
    collation: i64,
) -> ColumnTypeInfo {
    ColumnTypeInfo { type_oid, typmod, len, byval, align, storage, collation }
}

/// pg_type facts about an engine column type.
pub fn column_type_info(ty: DataType) -> ColumnTypeInfo {
    let text_mod = |n: u32| i32::try_from(n).map_or(-1, |n| n.saturating_add(4));
    match ty {
        DataType::Bool => info(16, -1, 1, true, "c", "p", 0),
        DataType::Int2 => info(21, -1, 2, true, "s", "p", 0),
        DataType::Int4 => info(23, -1, 4, true, "i", "p", 0),
        DataType::Int8 => info(20, -1, 8, true, "d", "p", 0),
        DataType::Numeric { precision: 0, .. } => info(1700, -1, -1, false, "i", "m", 0),
        DataType::Numeric { precision, scale } => {
            info(1700, ((i32::from(precision) << 16) | (i32::from(scale) & 0x7ff)) + 4, -1, false, "i", "m", 0)
        }
        DataType::Float4 => info(700, -1, 4, true, "i", "p", 0),
        DataType::Float8 => info(701, -1, 8, true, "d", "p", 0),
        DataType::Text => info(25, -1, -1, false, "i", "x", DEFAULT_COLLATION),
        DataType::Varchar(n) => info(1043, text_mod(n), -1, false, "i", "x", DEFAULT_COLLATION),
        DataType::Char(n) => info(1042, text_mod(n), -1, false, "i", "x", DEFAULT_COLLATION),
        DataType::Bytea => info(17, -1, -1, false, "i", "x", 0),
        DataType::Date => info(1082, -1, 4, true, "i", "p", 0),
        DataType::Timestamp(p) => info(1114, p.map_or(-1, i32::from), 8, true, "d", "p", 0),
        DataType::TimestampTz(p) => info(1184, p.map_or(-1, i32::from), 8, true, "d", "p", 0),
        DataType::Time(p) => info(1083, p.map_or(-1, i32::from), 8, true, "d", "p", 0),
        DataType::TimeTz(p) => info(1266, p.map_or(-1, i32::from), 12, false, "d", "p", 0),
        DataType::Uuid => info(2950, -1, 16, false, "c", "p", 0),
        DataType::Json => info(114, -1, -1, false, "i", "x", 0),
        DataType::Jsonb => info(3802, -1, -1, false, "i", "x", 0),
        DataType::Interval => info(1186, -1, 16, false, "d", "p", 0),
        // atttypmod of an array column is its element's (varchar(10)[]: 14).
        DataType::Array(e) => {
            let elem = column_type_info(e.get());
            let oid = type_by_oid(elem.type_oid).map_or(0, |m| m.base.array_oid);
            info(oid, elem.typmod, -1, false, if elem.align == "d" { "d" } else { "i" }, "x", elem.collation)
        }
    }
}
