//! Columns of cached tables whose values PostgreSQL's sequences generate
//! (serial, identity, `DEFAULT nextval(...)`). The cache keeps how as the
//! engine column's `default_sql` ([`KeyDefault`]); the SQL layer reads it
//! back here, beside the local sequences' columns (`Column::sequence`), so
//! every question "which identity is this column" has one answer.

use std::sync::Arc;

use pgtier_cache::{KeyDefault, KeyGeneration};
use pgtier_engine::{Catalog, Column, SequenceDefault, TableSchema};

/// The PostgreSQL sequence a cached column's default draws from.
pub fn backend_key(col: &Column) -> Option<KeyDefault> {
    col.default_sql.as_deref().and_then(KeyDefault::parse)
}

/// `GENERATED ALWAYS` or `BY DEFAULT` for an identity column, local or
/// cached; None for any other column (serial ones included).
pub fn identity_kind(col: &Column) -> Option<SequenceDefault> {
    match col.sequence {
        Some((_, how @ (SequenceDefault::IdentityAlways | SequenceDefault::IdentityByDefault))) => Some(how),
        Some(_) => None,
        None => match backend_key(col)?.generation {
            KeyGeneration::IdentityAlways => Some(SequenceDefault::IdentityAlways),
            KeyGeneration::IdentityByDefault => Some(SequenceDefault::IdentityByDefault),
            KeyGeneration::Nextval => None,
        },
    }
}

/// A cached table with a column whose default draws from PostgreSQL's
/// sequence `name` (spelt as PostgreSQL reads a regclass: `s`, `public.s`,
/// `"S"`), and that sequence as the column names it.
pub fn backend_sequence(catalog: &Catalog, name: &str) -> Option<(Arc<TableSchema>, String)> {
    let wanted = KeyDefault::sequence_key(name);
    catalog.tables().find_map(|table| {
        let key = table
            .columns
            .iter()
            .filter_map(backend_key)
            .find(|key| KeyDefault::sequence_key(&key.sequence) == wanted)?;
        Some((table.clone(), key.sequence))
    })
}
