//! A stable 64-bit hash of a table definition (FNV-1a over an explicit,
//! length-prefixed encoding), so the value can be stored and compared across
//! runs and Rust versions. Changing the encoding changes every fingerprint:
//! bump `ENCODING_VERSION` when doing so.

use super::{ForeignKeyAction, Identity, KeyDef, TableDef, TypeModifier};

const ENCODING_VERSION: u8 = 1;
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

struct Fnv(u64);

impl Fnv {
    fn bytes(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(FNV_PRIME);
        }
    }

    fn u64(&mut self, value: u64) {
        self.bytes(&value.to_le_bytes());
    }

    fn str(&mut self, text: &str) {
        self.u64(text.len() as u64);
        self.bytes(text.as_bytes());
    }

    fn option(&mut self, text: Option<&str>) {
        match text {
            Some(text) => {
                self.bytes(&[1]);
                self.str(text);
            }
            None => self.bytes(&[0]),
        }
    }

    fn list(&mut self, items: &[String]) {
        self.u64(items.len() as u64);
        items.iter().for_each(|item| self.str(item));
    }

    fn key(&mut self, key: &KeyDef) {
        self.str(&key.name);
        self.list(&key.columns);
        self.bytes(&[u8::from(key.is_constraint), u8::from(key.deferrable), u8::from(key.nulls_not_distinct)]);
    }
}

pub(super) fn of(table: &TableDef) -> u64 {
    let mut hash = Fnv(FNV_OFFSET);
    hash.bytes(&[ENCODING_VERSION]);
    hash.str(&table.name.schema);
    hash.str(&table.name.table);
    hash.u64(table.columns.len() as u64);
    for column in &table.columns {
        hash.str(&column.name);
        hash.u64(u64::from(column.type_oid));
        hash.u64(u64::from(column.base_type_oid));
        hash.u64(column.typmod as u32 as u64);
        hash.bytes(&[u8::from(column.not_null)]);
        hash.option(column.default.as_deref());
        hash.option(column.generated.as_deref());
        let (kind, sequence) = match &column.identity {
            None => (0, None),
            Some(Identity::Always { sequence }) => (1, Some(sequence.as_str())),
            Some(Identity::ByDefault { sequence }) => (2, Some(sequence.as_str())),
            Some(Identity::Serial { sequence }) => (3, Some(sequence.as_str())),
        };
        hash.bytes(&[kind]);
        hash.option(sequence);
        // The typmod already determines the modifier; hashing it is only a guard.
        if let TypeModifier::Numeric { precision, scale } = column.modifier {
            hash.u64(u64::from(precision) << 16 | u64::from(scale as u16));
        }
    }
    match &table.primary_key {
        Some(key) => {
            hash.bytes(&[1]);
            hash.key(key);
        }
        None => hash.bytes(&[0]),
    }
    hash.u64(table.unique_keys.len() as u64);
    table.unique_keys.iter().for_each(|key| hash.key(key));
    hash.u64(table.foreign_keys.len() as u64);
    for foreign_key in &table.foreign_keys {
        hash.str(&foreign_key.name);
        hash.list(&foreign_key.columns);
        hash.str(&foreign_key.referenced_table.schema);
        hash.str(&foreign_key.referenced_table.table);
        hash.list(&foreign_key.referenced_columns);
        hash.bytes(&[action_code(foreign_key.on_delete), action_code(foreign_key.on_update)]);
        hash.str(&foreign_key.definition);
    }
    hash.u64(table.checks.len() as u64);
    for check in &table.checks {
        hash.str(&check.name);
        hash.str(&check.definition);
    }
    hash.0
}

fn action_code(action: ForeignKeyAction) -> u8 {
    match action {
        ForeignKeyAction::NoAction => b'a',
        ForeignKeyAction::Restrict => b'r',
        ForeignKeyAction::Cascade => b'c',
        ForeignKeyAction::SetNull => b'n',
        ForeignKeyAction::SetDefault => b'd',
    }
}
