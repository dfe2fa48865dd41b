//! The catalog queries behind `import_tables`, one per kind of object, and
//! the mapping of their rows onto the definition types.

use postgres::types::FromSql;
use postgres::{GenericClient, Row};

use super::{
    CheckDef, ColumnDef, ForeignKeyAction, ForeignKeyDef, Identity, KeyDef, QualifiedName, SkipReason, SkippedIndex,
    TableDef, TypeModifier,
};
use crate::backend_error::BackendError;

const RELATION_SQL: &str = "\
SELECT c.oid, c.relkind::text, c.relispartition, has_schema_privilege(n.oid, 'USAGE')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2";

/// The base type of a domain is found by walking typbasetype (domains may
/// nest); the owned sequence of a serial or identity column by its
/// auto ('a') or internal ('i') dependency on the column.
const COLUMNS_SQL: &str = "\
SELECT a.attnum, a.attname::text, a.atttypid, format_type(a.atttypid, a.atttypmod), a.atttypmod,
       a.attnotnull, CASE WHEN a.atthasdef THEN pg_get_expr(d.adbin, d.adrelid) END,
       a.attidentity::text, a.attgenerated::text,
       (WITH RECURSIVE chain(oid, typtype, typbasetype) AS (
            SELECT t.oid, t.typtype, t.typbasetype FROM pg_type t WHERE t.oid = a.atttypid
            UNION ALL
            SELECT t.oid, t.typtype, t.typbasetype FROM pg_type t JOIN chain ON t.oid = chain.typbasetype
            WHERE chain.typtype = 'd')
        SELECT chain.oid FROM chain WHERE chain.typtype <> 'd' LIMIT 1),
       (SELECT quote_ident(sn.nspname) || '.' || quote_ident(s.relname)
        FROM pg_depend dep
        JOIN pg_class s ON s.oid = dep.objid
        JOIN pg_namespace sn ON sn.oid = s.relnamespace
        WHERE dep.classid = 'pg_class'::regclass AND dep.refclassid = 'pg_class'::regclass
          AND dep.refobjid = a.attrelid AND dep.refobjsubid = a.attnum
          AND dep.deptype IN ('a', 'i') AND s.relkind = 'S'
        ORDER BY s.oid LIMIT 1),
       has_column_privilege(a.attrelid, a.attnum, 'SELECT')
FROM pg_attribute a
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum";

/// `{NULLS_NOT_DISTINCT}` is replaced by the column or `false` before PostgreSQL 15.
const INDEXES_SQL: &str = "\
SELECT ic.relname::text, i.indisprimary, i.indnkeyatts, i.indkey::int2[],
       i.indpred IS NOT NULL, i.indexprs IS NOT NULL, i.indisvalid, i.indimmediate,
       con.conname::text, {NULLS_NOT_DISTINCT}, pg_get_indexdef(i.indexrelid)
FROM pg_index i
JOIN pg_class ic ON ic.oid = i.indexrelid
LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid
                            AND con.contype IN ('p', 'u')
WHERE i.indrelid = $1 AND i.indisunique
ORDER BY i.indisprimary DESC, ic.relname";

/// A constraint inherited from a partitioned parent shows up once per
/// partition it references (conparentid set, same conrelid): keep the parent's.
const CONSTRAINTS_SQL: &str = "\
SELECT con.conname::text, con.contype::text, con.conkey, con.confrelid,
       rn.nspname::text, rc.relname::text,
       ARRAY(SELECT fa.attname::text
             FROM unnest(con.confkey) WITH ORDINALITY AS k(attnum, ord)
             JOIN pg_attribute fa ON fa.attrelid = con.confrelid AND fa.attnum = k.attnum
             ORDER BY k.ord),
       con.confupdtype::text, con.confdeltype::text, con.confmatchtype::text,
       con.condeferrable, con.condeferred, con.convalidated, pg_get_constraintdef(con.oid)
FROM pg_constraint con
LEFT JOIN pg_class rc ON rc.oid = con.confrelid
LEFT JOIN pg_namespace rn ON rn.oid = rc.relnamespace
WHERE con.conrelid = $1 AND con.contype IN ('f', 'c')
  AND NOT EXISTS (SELECT 1 FROM pg_constraint parent
                  WHERE parent.oid = con.conparentid AND parent.conrelid = con.conrelid)
ORDER BY con.conname";

pub(super) fn server_version<C: GenericClient>(client: &mut C) -> Result<i32, BackendError> {
    const WHAT: &str = "reading server_version_num";
    let row = client
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .map_err(|error| BackendError::from_postgres(WHAT, &error))?;
    get(&row, 0, WHAT)
}

pub(super) fn import_table<C: GenericClient>(
    client: &mut C,
    name: QualifiedName,
    server_version: i32,
) -> Result<TableDef, BackendError> {
    let what = format!("catalog import of {name}");
    let (oid, is_partition) = check_relation(client, &name, &what)?;
    let columns = read_columns(client, oid, &name, &what)?;
    let (primary_key, unique_keys, skipped_unique_indexes) =
        read_indexes(client, oid, &columns, server_version, &what)?;
    let (foreign_keys, checks) = read_constraints(client, oid, &columns, &what)?;
    Ok(TableDef {
        name,
        oid,
        is_partition,
        columns,
        primary_key,
        unique_keys,
        skipped_unique_indexes,
        foreign_keys,
        checks,
        fingerprint: 0,
    })
}

/// The table's oid and whether it is a partition; errors for anything that
/// is not a table we may read.
fn check_relation<C: GenericClient>(
    client: &mut C,
    name: &QualifiedName,
    what: &str,
) -> Result<(u32, bool), BackendError> {
    let row = client
        .query_opt(RELATION_SQL, &[&name.schema, &name.table])
        .map_err(|error| BackendError::from_postgres(what, &error))?
        .ok_or_else(|| BackendError::TableNotFound { name: name.to_string() })?;
    let relkind: String = get(&row, 1, what)?;
    let kind = match relkind.as_str() {
        "r" => None,
        "p" => Some("a partitioned table (cache its partitions instead)"),
        "v" => Some("a view"),
        "m" => Some("a materialized view"),
        "f" => Some("a foreign table"),
        "S" => Some("a sequence"),
        "i" | "I" => Some("an index"),
        "c" => Some("a composite type"),
        "t" => Some("a TOAST table"),
        _ => Some("not an ordinary table"),
    };
    if let Some(kind) = kind {
        return Err(BackendError::NotATable { name: name.to_string(), kind });
    }
    if !get::<bool>(&row, 3, what)? {
        return Err(BackendError::PermissionDenied { object: format!("schema {}", name.schema) });
    }
    // SELECT is checked per column in read_columns: column privileges on
    // every column suffice for COPY, table-wide SELECT is not required.
    Ok((get(&row, 0, what)?, get(&row, 2, what)?))
}

fn read_columns<C: GenericClient>(
    client: &mut C,
    oid: u32,
    name: &QualifiedName,
    what: &str,
) -> Result<Vec<ColumnDef>, BackendError> {
    let rows = client.query(COLUMNS_SQL, &[&oid]).map_err(|error| BackendError::from_postgres(what, &error))?;
    let mut columns = Vec::with_capacity(rows.len());
    for row in &rows {
        let column_name: String = get(row, 1, what)?;
        if !get::<bool>(row, 11, what)? {
            return Err(BackendError::PermissionDenied { object: format!("table {name}") });
        }
        let type_oid: u32 = get(row, 2, what)?;
        let type_name: String = get(row, 3, what)?;
        let typmod: i32 = get(row, 4, what)?;
        let expression: Option<String> = get(row, 6, what)?;
        let attidentity: String = get(row, 7, what)?;
        let generated_kind: String = get(row, 8, what)?;
        let base_type_oid: Option<u32> = get(row, 9, what)?;
        let sequence: Option<String> = get(row, 10, what)?;
        let (default, generated) = if generated_kind.is_empty() { (expression, None) } else { (None, expression) };
        let identity = match (attidentity.as_str(), sequence) {
            ("a", Some(sequence)) => Some(Identity::Always { sequence }),
            ("d", Some(sequence)) => Some(Identity::ByDefault { sequence }),
            ("", Some(sequence)) if default.as_deref().is_some_and(|text| text.starts_with("nextval(")) => {
                Some(Identity::Serial { sequence })
            }
            _ => None,
        };
        let base_type_oid = base_type_oid.unwrap_or(type_oid);
        columns.push(ColumnDef {
            attnum: get(row, 0, what)?,
            name: column_name,
            type_oid,
            base_type_oid,
            modifier: decode_typmod(base_type_oid, typmod),
            type_name,
            typmod,
            not_null: get(row, 5, what)?,
            default,
            identity,
            generated,
        });
    }
    Ok(columns)
}

/// What a typmod means for the built-in types that have one.
pub(super) fn decode_typmod(type_oid: u32, typmod: i32) -> TypeModifier {
    const VARHDRSZ: i32 = 4;
    if typmod < 0 {
        return TypeModifier::None;
    }
    match type_oid {
        // numeric: ((precision << 16) | scale) + VARHDRSZ, scale an 11-bit signed field.
        1700 if typmod >= VARHDRSZ => {
            let packed = typmod - VARHDRSZ;
            TypeModifier::Numeric {
                precision: ((packed >> 16) & 0xffff) as u16,
                scale: (((packed & 0x7ff) ^ 1024) - 1024) as i16,
            }
        }
        // bpchar, varchar: length + VARHDRSZ.
        1042 | 1043 if typmod >= VARHDRSZ => TypeModifier::Length((typmod - VARHDRSZ) as u32),
        // bit, varbit: the length itself.
        1560 | 1562 => TypeModifier::Length(typmod as u32),
        // time, timestamp, timestamptz, timetz: fractional-second digits.
        1083 | 1114 | 1184 | 1266 if typmod <= 6 => TypeModifier::Precision(typmod as u8),
        _ => TypeModifier::Other(typmod),
    }
}

type Keys = (Option<KeyDef>, Vec<KeyDef>, Vec<SkippedIndex>);

fn read_indexes<C: GenericClient>(
    client: &mut C,
    oid: u32,
    columns: &[ColumnDef],
    server_version: i32,
    what: &str,
) -> Result<Keys, BackendError> {
    let nulls_not_distinct = if server_version >= 150_000 { "i.indnullsnotdistinct" } else { "false" };
    let sql = INDEXES_SQL.replace("{NULLS_NOT_DISTINCT}", nulls_not_distinct);
    let rows = client.query(sql.as_str(), &[&oid]).map_err(|error| BackendError::from_postgres(what, &error))?;
    let (mut primary_key, mut unique_keys, mut skipped) = (None, Vec::new(), Vec::new());
    for row in &rows {
        let index_name: String = get(row, 0, what)?;
        let is_primary: bool = get(row, 1, what)?;
        let key_count: i16 = get(row, 2, what)?;
        let attnums: Vec<i16> = get(row, 3, what)?;
        let reason = if get::<bool>(row, 4, what)? {
            Some(SkipReason::Partial)
        } else if get::<bool>(row, 5, what)? {
            Some(SkipReason::Expression)
        } else if !get::<bool>(row, 6, what)? {
            Some(SkipReason::Invalid)
        } else {
            None
        };
        if let Some(reason) = reason {
            skipped.push(SkippedIndex { name: index_name, reason, definition: get(row, 10, what)? });
            continue;
        }
        let key_attnums = attnums.get(..usize::try_from(key_count).unwrap_or(0)).unwrap_or(&attnums);
        let constraint: Option<String> = get(row, 8, what)?;
        let key = KeyDef {
            columns: column_names(columns, key_attnums, what)?,
            is_constraint: constraint.is_some(),
            name: constraint.unwrap_or(index_name),
            deferrable: !get::<bool>(row, 7, what)?,
            nulls_not_distinct: get(row, 9, what)?,
        };
        if is_primary {
            primary_key = Some(key);
        } else {
            unique_keys.push(key);
        }
    }
    Ok((primary_key, unique_keys, skipped))
}

fn read_constraints<C: GenericClient>(
    client: &mut C,
    oid: u32,
    columns: &[ColumnDef],
    what: &str,
) -> Result<(Vec<ForeignKeyDef>, Vec<CheckDef>), BackendError> {
    let rows = client.query(CONSTRAINTS_SQL, &[&oid]).map_err(|error| BackendError::from_postgres(what, &error))?;
    let (mut foreign_keys, mut checks) = (Vec::new(), Vec::new());
    for row in &rows {
        let name: String = get(row, 0, what)?;
        let kind: String = get(row, 1, what)?;
        let validated: bool = get(row, 12, what)?;
        let definition: String = get(row, 13, what)?;
        if kind == "c" {
            checks.push(CheckDef { name, definition, validated });
            continue;
        }
        let attnums: Vec<i16> = get(row, 2, what)?;
        let schema: Option<String> = get(row, 4, what)?;
        let table: Option<String> = get(row, 5, what)?;
        let (Some(schema), Some(table)) = (schema, table) else {
            return Err(unexpected(what, format!("foreign key {name} references no table")));
        };
        let match_type: String = get(row, 9, what)?;
        foreign_keys.push(ForeignKeyDef {
            columns: column_names(columns, &attnums, what)?,
            referenced_table: QualifiedName::new(schema, table),
            referenced_oid: get(row, 3, what)?,
            referenced_columns: get(row, 6, what)?,
            on_update: action(&get::<String>(row, 7, what)?, what)?,
            on_delete: action(&get::<String>(row, 8, what)?, what)?,
            match_full: match_type == "f",
            deferrable: get(row, 10, what)?,
            initially_deferred: get(row, 11, what)?,
            validated,
            definition,
            name,
        });
    }
    Ok((foreign_keys, checks))
}

fn action(code: &str, what: &str) -> Result<ForeignKeyAction, BackendError> {
    Ok(match code {
        "a" => ForeignKeyAction::NoAction,
        "r" => ForeignKeyAction::Restrict,
        "c" => ForeignKeyAction::Cascade,
        "n" => ForeignKeyAction::SetNull,
        "d" => ForeignKeyAction::SetDefault,
        _ => return Err(unexpected(what, format!("unknown foreign key action {code:?}"))),
    })
}

fn column_names(columns: &[ColumnDef], attnums: &[i16], what: &str) -> Result<Vec<String>, BackendError> {
    attnums
        .iter()
        .map(|attnum| {
            columns
                .iter()
                .find(|column| column.attnum == *attnum)
                .map(|column| column.name.clone())
                .ok_or_else(|| unexpected(what, format!("key column {attnum} is not a column of the table")))
        })
        .collect()
}

fn get<'a, T: FromSql<'a>>(row: &'a Row, index: usize, what: &str) -> Result<T, BackendError> {
    row.try_get(index).map_err(|error| unexpected(what, error.to_string()))
}

fn unexpected(what: &str, reason: String) -> BackendError {
    BackendError::UnexpectedResult { what: what.to_owned(), reason }
}
