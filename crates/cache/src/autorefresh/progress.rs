//! Where each READONLY group's autorefresh stands, durable in the cache:
//! the engine table `pgtier_autorefresh` (group, slot, lsn, state).
//!
//! The row is written in the same engine transaction as the changes of the
//! PostgreSQL transaction that ended at `lsn`, so after any crash a
//! transaction the stream sends again is recognised and skipped (exactly
//! once), whatever PostgreSQL's slot had been told.
//!
//! States: `loading` (the slot exists, its snapshot is being loaded: after
//! a crash the group loads again from a new slot), `streaming` (the cache
//! holds PostgreSQL's state as of `lsn`), `dropping` (the group is gone but
//! its slot could not be dropped yet: retried at every open, so a slot never
//! pins PostgreSQL's WAL for a group that no longer exists).

use pgtier_engine::{ColumnDef, DataType, Database, EngineError, Origin, TableDef, Transaction, Value};

use crate::error::CacheError;

pub const PROGRESS_TABLE: &str = "pgtier_autorefresh";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Loading,
    Streaming,
    Dropping,
}

impl State {
    fn as_str(self) -> &'static str {
        match self {
            State::Loading => "loading",
            State::Streaming => "streaming",
            State::Dropping => "dropping",
        }
    }

    fn parse(text: &str) -> Option<State> {
        Some(match text {
            "loading" => State::Loading,
            "streaming" => State::Streaming,
            "dropping" => State::Dropping,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Progress {
    pub group: String,
    pub slot: String,
    /// End of the last PostgreSQL transaction applied (or the slot's consistent point).
    pub lsn: u64,
    pub state: State,
}

fn ensure_table(db: &Database) -> Result<(), CacheError> {
    if db.catalog().table_by_name(PROGRESS_TABLE).is_some() {
        return Ok(());
    }
    let mut txn = db.begin()?;
    let def = TableDef::new(
        PROGRESS_TABLE,
        vec![
            ColumnDef::new("group_name", DataType::Text),
            ColumnDef::new("slot", DataType::Text).not_null(),
            ColumnDef::new("lsn", DataType::Int8).not_null(),
            ColumnDef::new("state", DataType::Text).not_null(),
        ],
        &["group_name"],
    );
    match txn.create_table(&def) {
        Ok(_) => Ok(txn.commit().map(|_| ())?),
        Err(EngineError::DuplicateTable { .. }) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// Every group's progress row.
pub(crate) fn read_all(db: &Database) -> Result<Vec<Progress>, CacheError> {
    let mut txn = db.begin_with_origin(db.default_commit_mode(), Origin::Autorefresh)?;
    let Some(table) = txn.catalog().table_by_name(PROGRESS_TABLE).map(|t| t.id) else { return Ok(Vec::new()) };
    let mut rows = Vec::new();
    txn.scan_table(table, |row| {
        if let (Value::Text(group), Value::Text(slot), Value::Int8(lsn), Value::Text(state)) = (
            row.get(0).to_owned_value(),
            row.get(1).to_owned_value(),
            row.get(2).to_owned_value(),
            row.get(3).to_owned_value(),
        ) && let Some(state) = State::parse(&state)
        {
            rows.push(Progress { group, slot, lsn: lsn as u64, state });
        }
        Ok(true)
    })?;
    txn.rollback();
    Ok(rows)
}

pub(crate) fn read(db: &Database, group: &str) -> Result<Option<Progress>, CacheError> {
    Ok(read_all(db)?.into_iter().find(|p| p.group == group))
}

/// Sets the row of `progress.group` in `txn` (the caller commits it with its changes).
pub(crate) fn record(txn: &mut Transaction, progress: &Progress) -> Result<(), CacheError> {
    let table = txn
        .catalog()
        .table_by_name(PROGRESS_TABLE)
        .map(|t| t.id)
        .ok_or_else(|| CacheError::Engine(EngineError::UndefinedTable { name: PROGRESS_TABLE.into() }))?;
    let key = [Value::Text(progress.group.clone())];
    let values = [
        Value::Text(progress.slot.clone()),
        Value::Int8(progress.lsn as i64),
        Value::Text(progress.state.as_str().into()),
    ];
    let changes: Vec<(usize, Value)> = values.iter().cloned().enumerate().map(|(i, v)| (i + 1, v)).collect();
    if !txn.update(table, &key, &changes)? {
        let mut row = vec![key[0].clone()];
        row.extend(values);
        txn.insert(table, &row)?;
    }
    Ok(())
}

/// Sets the row of `progress.group` in a transaction of its own, durable on return.
pub(crate) fn store(db: &Database, progress: &Progress) -> Result<(), CacheError> {
    ensure_table(db)?;
    let mut txn = db.begin_with_origin(pgtier_engine::CommitMode::Sync, Origin::Autorefresh)?;
    record(&mut txn, progress)?;
    txn.commit()?;
    Ok(())
}

/// Removes the row of `group` (its slot is dropped).
pub(crate) fn remove(db: &Database, group: &str) -> Result<(), CacheError> {
    let mut txn = db.begin_with_origin(pgtier_engine::CommitMode::Sync, Origin::Autorefresh)?;
    let Some(table) = txn.catalog().table_by_name(PROGRESS_TABLE).map(|t| t.id) else { return Ok(()) };
    txn.delete(table, &[Value::Text(group.to_owned())])?;
    txn.commit()?;
    Ok(())
}
